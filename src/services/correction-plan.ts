import type { ChannelType } from '../channels/index.js';
import { conversationOf, formatOf } from '../domain/connection/connection.js';
import type { MessageAction, MessageKind, MessageRef } from '../domain/execution/conversation.js';
import type { Delivery, RenderedContent } from '../domain/execution/execution.js';
import { renderMessage, type MessageSource, type RenderContext } from '../domain/template/render.js';
import { sourceForChannel, type Template } from '../domain/template/template.js';
import { builtInSource } from './execution-plan.js';

/**
 * What a correction or retraction does to each delivered message of the execution it acts on
 * (docs/explanation/living-updates.md): edit it in place (a correction) or delete it (a retraction) where the
 * platform can and said which message it posted; elsewhere post a short note in the incident's
 * conversation ("Correction: …", "Retracted: …"). Pure: the service reads, this decides.
 */

/** A connection as corrections see it: secrets only as names (whether one is set). */
export interface CorrectionConnection {
  id: string;
  type: ChannelType;
  enabled: boolean;
  config: Record<string, unknown>;
  secrets?: Record<string, unknown>;
}

export interface PlannedCorrection {
  original: Delivery;
  connection: CorrectionConnection;
  action: MessageAction;
  target: MessageRef | null;
  content: RenderedContent;
}

/**
 * The texts Herald adds around a template's own. `{{execution.note}}` is the correction's note or
 * the retraction's reason, escaped for the channel like any value.
 */
function correctionSource(
  kind: Exclude<MessageKind, 'announcement'>,
  action: MessageAction,
  source: MessageSource,
): MessageSource {
  if (kind === 'retraction') return { subject: `Retracted: ${source.subject}`, body: 'Retracted: {{execution.note}}' };
  if (action === 'edit')
    return {
      subject: source.subject,
      body: `${source.body}{{#execution.note}}\n\n(Corrected: {{execution.note}}){{/execution.note}}`,
    };
  return {
    subject: `Correction: ${source.subject}`,
    body: `Correction{{#execution.note}}: {{execution.note}}{{/execution.note}}\n\n${source.body}`,
  };
}

/**
 * One planned delivery per delivered message whose connection still exists and is enabled.
 * `templateOf` finds the template version the message was rendered from (null: the built-in
 * message, or a version that no longer exists, which falls back to the built-in message).
 */
export function planCorrections(
  kind: Exclude<MessageKind, 'announcement'>,
  delivered: Delivery[],
  connections: Map<string, CorrectionConnection>,
  templateOf: (d: Delivery) => Template | null,
  ctx: RenderContext,
): PlannedCorrection[] {
  const out: PlannedCorrection[] = [];
  for (const original of delivered) {
    const connection = connections.get(original.connection_id);
    if (!connection || !connection.enabled) continue;
    const can = conversationOf(connection);
    const target = original.message ?? null;
    const inPlace = target !== null && (kind === 'correction' ? can.edit : can.delete);
    const action: MessageAction = inPlace ? (kind === 'correction' ? 'edit' : 'delete') : 'post';
    const template = templateOf(original);
    const source = template ? sourceForChannel(template, connection.type) : builtInSource(connection.type);
    const content = renderMessage(correctionSource(kind, action, source), ctx, formatOf(connection));
    out.push({ original, connection, action, target: inPlace ? target : null, content });
  }
  return out;
}
