import type { Incident } from '../../domain/incident/incident.js';
import { LIMITS } from '../../domain/common/limits.js';
import { ACTIONS, CALLBACKS, encodeContext } from './action-ids.js';
import {
  context,
  divider,
  escapedText,
  fitsInput,
  header,
  input,
  modal,
  mrkdwn,
  option,
  plain,
  section,
  SLACK_LIMITS,
  textInput,
  truncate,
  type KnownBlock,
  type ModalView,
} from './block-kit.js';
import { incidentLine } from './incident.js';

/**
 * A variable declared by one or more of the incident's templates, merged by ExecutionService.prepare
 * (the view only presents it).
 */
export interface DeclaredVariable {
  name: string;
  description: string;
  required: boolean;
  default: string | null;
}

/** What one connection would receive, from ExecutionService.prepare. */
export interface PreviewItem {
  connectionName: string;
  connectionType: string;
  templateName: string | null;
  subject: string;
  body: string;
}

/** The block id of a variable's input: the same dotted path as `errors[].field` of a 422. */
export const variableField = (name: string): string => `variables.${name}`;

/** What the preview shows where the user has yet to type a value. */
export const previewPlaceholder = (name: string): string => `‹${name}›`;

const PREVIEW_BODY_MAX = 1500;
/** Deliveries rendered into the preview: the rest are only counted. */
export const MAX_PREVIEWS = 10;

/**
 * A variable's input. A default longer than the input holds is not prefilled (a cut copy would be
 * sent instead of the default); left empty, the service uses the whole default.
 */
function variableInput(v: DeclaredVariable): KnownBlock {
  const max = Math.min(LIMITS.variableValue, SLACK_LIMITS.plainTextInput);
  if (v.default !== null && !fitsInput(v.default, max)) {
    const note = `The default is ${v.default.length.toLocaleString('en-US')} characters, longer than a Slack input holds; leave this empty to send it unchanged.`;
    return input(variableField(v.name), v.name, textInput({ multiline: true, maxLength: max }), {
      optional: true,
      hint: v.description ? `${v.description} · ${note}` : note,
    });
  }
  return input(variableField(v.name), v.name, textInput({ initial: v.default, multiline: false, maxLength: max }), {
    optional: !v.required,
    ...(v.description ? { hint: v.description } : {}),
  });
}

/** The block id of the "Next update in" select: the execute request's `next_update_in`. */
export const NEXT_UPDATE_FIELD = 'next_update_in';

/** The option that promises no next update (the request then leaves `next_update_in` out). */
export const NO_NEXT_UPDATE = 'none';

const NEXT_UPDATE_CHOICES: [string, string][] = [
  ['No next update promised', NO_NEXT_UPDATE],
  ['15 minutes', '15m'],
  ['30 minutes', '30m'],
  ['1 hour', '1h'],
  ['2 hours', '2h'],
  ['4 hours', '4h'],
];

/**
 * When the next update is due: shown on the announcement, and Herald reminds once it passes. A
 * select beside a line of text rather than an input block: optional, always valid, and the modal's
 * input blocks stay the execute's variables alone. Its value still arrives with the submission
 * (view.state.values holds every stateful element); a pick is acked by slack/listeners/actions.ts.
 */
export function nextUpdateInput(): KnownBlock {
  const options = NEXT_UPDATE_CHOICES.map(([label, value]) => option(label, value));
  return {
    type: 'section',
    block_id: NEXT_UPDATE_FIELD,
    text: mrkdwn(
      '*Next update in*\nShown on the announcement; if no update follows in time, Herald reminds in its thread.',
    ),
    accessory: { type: 'static_select', action_id: ACTIONS.nextUpdateIn, options, initial_option: options[0]! },
  };
}

/** `total` is how many deliveries the execute makes (`previews` may hold only the first few). */
export function executeModal(p: {
  incident: Incident;
  variables: DeclaredVariable[];
  previews: PreviewItem[];
  total?: number;
  previewNote?: string;
}): ModalView {
  const blocks: KnownBlock[] = [section(incidentLine(p.incident))];
  if (p.variables.length === 0) blocks.push(context('The attached templates declare no variables.'));
  for (const v of p.variables.slice(0, LIMITS.variables)) blocks.push(variableInput(v));
  blocks.push(nextUpdateInput());
  blocks.push(divider(), header('Preview'));
  blocks.push(context(p.previewNote ?? 'Rendered with the defaults; ‹name› stands for a value you type above.'));
  // Two blocks per preview, and a view holds 100 blocks: the budget decides how many fit.
  const budget = Math.floor((SLACK_LIMITS.blocksPerView - blocks.length - 1) / 2);
  const shown = p.previews.slice(0, Math.max(0, Math.min(MAX_PREVIEWS, budget)));
  for (const item of shown) {
    // Names are user-supplied (set over the API): escaped like every other value in mrkdwn.
    const via = item.templateName ? ` · template ${escapedText(item.templateName, 160)}` : ' · built-in message';
    blocks.push(context(`*${escapedText(item.connectionName, 160)}* (${item.connectionType})${via}`));
    const text = item.subject ? `${item.subject}\n\n${item.body}` : item.body;
    // Slack refuses an empty text object (the whole modal would not open): say what it means.
    const shownText =
      text.trim() === ''
        ? '(renders empty: this delivery would fail, as there is nothing to send)'
        : truncate(text, PREVIEW_BODY_MAX);
    blocks.push({ type: 'section', text: plain(shownText) });
  }
  const rest = Math.max(p.total ?? 0, p.previews.length) - shown.length;
  if (rest > 0) blocks.push(context(`…and ${rest} more deliveries.`));
  if (p.previews.length === 0 && rest === 0) blocks.push(context('Nothing to preview.'));
  return modal({
    callbackId: CALLBACKS.execute,
    title: 'Execute incident',
    submit: 'Send',
    privateMetadata: encodeContext({ incident_id: p.incident.id }),
    blocks,
  });
}
