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

/** An audience the execute may go to, for the picker. */
export interface AudienceChoice {
  key: string;
  name: string;
  visibility: string;
  approval_required: boolean;
}

/** One picked audience's part of the preview: what its connections would receive, or why nothing. */
export interface AudiencePreview extends AudienceChoice {
  /** How many deliveries this audience gets (`previews` may hold only the first few). */
  total: number;
  previews: PreviewItem[];
  skipped: { reason: string; message: string } | null;
}

/** The block id of the audience picker: the execute request's `audiences` (errors like `audiences.1` land on it). */
export const AUDIENCES_FIELD = 'audiences';

/** Slack's checkboxes hold 10 options; past that the picker is a multi-select (100). */
const MAX_CHECKBOXES = 10;

/** What the picker says of an audience: its visibility, and whether sending to it waits for approval. */
function audienceOptionText(a: AudienceChoice): { label: string; detail: string } {
  const visibility = a.visibility === 'external' ? 'external' : 'internal';
  return {
    label: a.name,
    detail: a.approval_required ? `${visibility} · needs approval first` : `${visibility} · sent at once`,
  };
}

/**
 * The audiences to send to: checkboxes (default: the internal ones), each saying whether it needs
 * approval. Picking dispatches an action (slack/listeners/actions.ts) that re-renders the preview
 * for the new pick; the value also comes with the submission.
 */
export function audiencePicker(choices: AudienceChoice[], selected: readonly string[]): KnownBlock {
  const many = choices.length > MAX_CHECKBOXES;
  const options = choices.slice(0, SLACK_LIMITS.staticOptions).map((a) => {
    const { label, detail } = audienceOptionText(a);
    // A multi-select option has no description: the detail joins the label, cut to 75.
    return many
      ? option(`${label} (${detail})`, a.key)
      : { ...option(label, a.key), description: plain(detail, SLACK_LIMITS.optionText) };
  });
  const initial = options.filter((o) => selected.includes(o.value ?? ''));
  const element = many
    ? {
        type: 'multi_static_select' as const,
        action_id: ACTIONS.executeAudiences,
        options,
        placeholder: plain('Pick audiences', 150),
        ...(initial.length > 0 ? { initial_options: initial } : {}),
      }
    : {
        type: 'checkboxes' as const,
        action_id: ACTIONS.executeAudiences,
        options,
        ...(initial.length > 0 ? { initial_options: initial } : {}),
      };
  return {
    ...input(AUDIENCES_FIELD, 'Audiences', element, {
      hint: 'Who hears this update. Each audience gets its own words; external ones may wait for an approver.',
    }),
    dispatch_action: true,
  };
}

/** Two blocks per preview: the connection and template, then the words as they will be sent. */
function previewBlocks(item: PreviewItem): KnownBlock[] {
  // Names are user-supplied (set over the API): escaped like every other value in mrkdwn.
  const via = item.templateName ? ` · template ${escapedText(item.templateName, 160)}` : ' · built-in message';
  const text = item.subject ? `${item.subject}\n\n${item.body}` : item.body;
  // Slack refuses an empty text object (the whole modal would not open): say what it means.
  const shownText =
    text.trim() === ''
      ? '(renders empty: this delivery would fail, as there is nothing to send)'
      : truncate(text, PREVIEW_BODY_MAX);
  return [
    context(`*${escapedText(item.connectionName, 160)}* (${item.connectionType})${via}`),
    { type: 'section', text: plain(shownText) },
  ];
}

/** `*Customers* (external) · needs approval first · 3 deliveries`. */
function audienceHeading(a: AudiencePreview): string {
  const visibility = a.visibility === 'external' ? 'external' : 'internal';
  const when = a.approval_required ? ':raised_hand: waits for approval' : 'sent at once';
  const what =
    a.skipped !== null
      ? `nothing to send: ${escapedText(a.skipped.message, 300)}`
      : `${a.total} ${a.total === 1 ? 'delivery' : 'deliveries'}`;
  return `*${escapedText(a.name, 160)}* (${visibility}) · ${when} · ${what}`;
}

/**
 * `total` is how many deliveries the execute makes (`previews` may hold only the first few).
 * With `audiences` (only when audiences exist), the modal has the picker and the preview is per
 * picked audience (`audiencePreviews`); `audienceProblem` explains a pick that sends nothing.
 */
export function executeModal(p: {
  incident: Incident;
  variables: DeclaredVariable[];
  previews: PreviewItem[];
  total?: number;
  previewNote?: string;
  audiences?: { choices: AudienceChoice[]; selected: string[]; previews: AudiencePreview[]; problem?: string | null };
}): ModalView {
  const blocks: KnownBlock[] = [section(incidentLine(p.incident))];
  const picking = p.audiences !== undefined && p.audiences.choices.length > 0;
  if (picking) blocks.push(audiencePicker(p.audiences!.choices, p.audiences!.selected));
  if (p.variables.length === 0) blocks.push(context('The attached templates declare no variables.'));
  for (const v of p.variables.slice(0, LIMITS.variables)) blocks.push(variableInput(v));
  blocks.push(nextUpdateInput());
  blocks.push(divider(), header('Preview'));
  blocks.push(context(p.previewNote ?? 'Rendered with the defaults; ‹name› stands for a value you type above.'));
  if (picking) {
    blocks.push(...audiencePreviewBlocks(p.audiences!, blocks.length));
  } else {
    // Two blocks per preview, and a view holds 100 blocks: the budget decides how many fit.
    const budget = Math.floor((SLACK_LIMITS.blocksPerView - blocks.length - 1) / 2);
    const shown = p.previews.slice(0, Math.max(0, Math.min(MAX_PREVIEWS, budget)));
    for (const item of shown) blocks.push(...previewBlocks(item));
    const rest = Math.max(p.total ?? 0, p.previews.length) - shown.length;
    if (rest > 0) blocks.push(context(`…and ${rest} more deliveries.`));
    if (p.previews.length === 0 && rest === 0) blocks.push(context('Nothing to preview.'));
  }
  return modal({
    callbackId: CALLBACKS.execute,
    title: 'Execute incident',
    submit: 'Send',
    privateMetadata: encodeContext({ incident_id: p.incident.id }),
    blocks,
  });
}

/**
 * The preview per picked audience: a heading each (visibility, approval, count or why nothing),
 * then its first messages, MAX_PREVIEWS in all across audiences so the view stays within Slack's
 * 100 blocks; the rest is counted per audience.
 */
function audiencePreviewBlocks(
  a: NonNullable<Parameters<typeof executeModal>[0]['audiences']>,
  used: number,
): KnownBlock[] {
  const out: KnownBlock[] = [];
  if (a.selected.length === 0) return [context('Pick at least one audience above to see what it would receive.')];
  if (a.problem) out.push(section(`:warning: ${escapedText(a.problem, 1500)}`));
  // Per audience: its heading and a possible "…and N more" (2), plus two per preview.
  let budget = SLACK_LIMITS.blocksPerView - used - out.length - 2 * a.previews.length;
  let previews = MAX_PREVIEWS;
  for (const part of a.previews) {
    out.push(context(audienceHeading(part)));
    const room = Math.max(0, Math.min(previews, Math.floor(budget / 2)));
    const shown = part.previews.slice(0, room);
    for (const item of shown) out.push(...previewBlocks(item));
    previews -= shown.length;
    budget -= 2 * shown.length;
    const rest = Math.max(part.total, part.previews.length) - shown.length;
    if (part.skipped === null && rest > 0) out.push(context(`…and ${rest} more for ${escapedText(part.name, 160)}.`));
  }
  return out;
}
