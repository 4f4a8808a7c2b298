import { channelOf, type ChannelType } from '../channels/index.js';
import type { MessageFormat } from '../channels/channel.js';
import { DomainError, type FieldError } from '../domain/common/errors.js';
import { formatOf } from '../domain/connection/connection.js';
import type { RenderedContent } from '../domain/execution/execution.js';
import {
  defaultMessageSource,
  publicMessageSource,
  renderMessage,
  type MessageSource,
} from '../domain/template/render.js';
import { sourceForChannel, type Template } from '../domain/template/template.js';
import type { TemplateVariable } from '../domain/template/variables.js';
import { mapYielding } from '../domain/common/map-yielding.js';

/**
 * What an execute will send, before anything is stored: which connections it targets, every
 * (connection × template that targets it) pair, the variables those templates declare, and the
 * rendering of each pair.
 */

/** What execute needs to know of a connection (no secrets). */
export interface ExecuteConnection {
  id: string;
  type: ChannelType;
  enabled: boolean;
  config: Record<string, unknown>;
  /** Shown by `prepare` (a connection record has one); the id stands in without it. */
  name?: string;
  /** The connection's secrets by name (values are not looked at: only whether one is set). */
  secrets?: Record<string, unknown>;
}

export interface PlannedDelivery {
  connection_id: string;
  connection_type: ChannelType;
  template_id: string | null;
  template_version: number | null;
  subject: string;
  body: string;
}

export interface Pair {
  connection: ExecuteConnection;
  template: Template | null;
}

/**
 * The connections an execute targets: every enabled one, or the listed ones (each must exist and
 * be enabled). The public status page is never part of "every": what customers read is published
 * only where someone named it (here, or through an audience).
 */
export function targetConnections(all: ExecuteConnection[], ids: string[] | undefined): ExecuteConnection[] {
  if (ids === undefined) {
    const enabled = all.filter((c) => c.enabled && !channelOf(c.type).publishesPublicly);
    if (enabled.length === 0) throw new DomainError('no_connections', 'There is no enabled connection to deliver to.');
    return enabled;
  }
  const byId = new Map(all.map((c) => [c.id, c]));
  const errors: FieldError[] = [];
  const picked: ExecuteConnection[] = [];
  const seen = new Set<string>();
  // Errors point at the caller's own index (`connection_ids.3`); a repeated id counts once.
  ids.forEach((id, i) => {
    if (seen.has(id)) return;
    seen.add(id);
    const c = byId.get(id);
    if (!c)
      errors.push({
        field: `connection_ids.${i}`,
        code: 'unknown_connection',
        message: `Connection ${id} does not exist.`,
      });
    else if (!c.enabled)
      errors.push({
        field: `connection_ids.${i}`,
        code: 'connection_disabled',
        message: `Connection ${id} is disabled.`,
      });
    else picked.push(c);
  });
  if (errors.some((e) => e.code === 'unknown_connection'))
    throw new DomainError('unknown_connection', 'Some connection_ids do not exist.', errors);
  if (errors.length > 0) throw new DomainError('no_connections', 'Some listed connections are disabled.', errors);
  return picked;
}

/** Every (connection × template that targets it) pair, and the templates that are used. */
export function pairsFor(connections: ExecuteConnection[], templates: Template[]): { pairs: Pair[]; used: Template[] } {
  const pairs: Pair[] = [];
  if (templates.length === 0) {
    for (const c of connections) pairs.push({ connection: c, template: null });
  } else {
    for (const t of templates) {
      for (const c of connections)
        if (t.connection_ids.length === 0 || t.connection_ids.includes(c.id))
          pairs.push({ connection: c, template: t });
    }
  }
  if (pairs.length === 0) {
    throw new DomainError('no_connections', "No enabled connection is targeted by this incident's templates.");
  }
  return { pairs, used: templates.filter((t) => pairs.some((p) => p.template === t)) };
}

/**
 * One declaration per name across templates (in order): required if any template requires it,
 * the first default and the first non-empty description found.
 */
export function mergeDeclaredVariables(lists: readonly (readonly TemplateVariable[])[]): TemplateVariable[] {
  const byName = new Map<string, TemplateVariable>();
  for (const list of lists) {
    for (const v of list) {
      const seen = byName.get(v.name);
      if (!seen) byName.set(v.name, { ...v });
      else
        byName.set(v.name, {
          name: v.name,
          description: seen.description || v.description,
          required: seen.required || v.required,
          default: seen.default ?? v.default,
        });
    }
  }
  return [...byName.values()];
}

export function mergeDeclared(templates: Template[]): TemplateVariable[] {
  return mergeDeclaredVariables(templates.map((t) => t.variables));
}

type RenderContext = Parameters<typeof renderMessage>[1];

/**
 * Renders every pair, yielding to the event loop every ~10 ms: a fan-out of thousands of long
 * messages takes seconds of CPU, and in a process that also serves Slack and /v1 that must not
 * hold every other request (Slack wants its acks within 3 s) until it is done.
 */
export async function renderYielding(
  pairs: Pair[],
  ctx: RenderContext,
): Promise<(Pair & { content: RenderedContent })[]> {
  // One execute renders the same (template, channel, format) for many connections: 200 webhooks
  // are one rendering, not 200. A format is the same when its escaping is the same function (a
  // format built from its connection's config, like Telegram's parse mode, is a new closure each
  // time and simply renders again); the context is the execute's own, so it is part of no key.
  const rendered = new Map<string, Map<MessageFormat['escape'], RenderedContent>>();
  return mapYielding(pairs, (p) => {
    const format = formatOf(p.connection);
    const key = `${p.template?.id ?? ''}@${p.template?.version ?? ''}|${p.connection.type}|${format.html ? 'html' : 'text'}`;
    let byEscape = rendered.get(key);
    if (!byEscape) rendered.set(key, (byEscape = new Map<MessageFormat['escape'], RenderedContent>()));
    let content = byEscape.get(format.escape);
    if (!content) {
      const source = p.template ? sourceForChannel(p.template, p.connection.type) : builtInSource(p.connection.type);
      content = renderMessage(source, ctx, format);
      byEscape.set(format.escape, content);
    }
    return { ...p, content };
  });
}

export function planned(p: Pair & { content: RenderedContent }): PlannedDelivery {
  return {
    connection_id: p.connection.id,
    connection_type: p.connection.type,
    template_id: p.template?.id ?? null,
    template_version: p.template?.version ?? null,
    subject: p.content.subject,
    body: p.content.body,
  };
}

/** The built-in message for a connection of this type: nothing internal where the public reads it. */
export function builtInSource(type: ChannelType): MessageSource {
  return channelOf(type).publishesPublicly ? publicMessageSource() : defaultMessageSource();
}
