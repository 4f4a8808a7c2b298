import { OPEN_STATUSES, SEVERITIES, type Incident } from '../../domain/incident/incident.js';
import { LIMITS } from '../../domain/common/limits.js';
import { graphemePrefix } from '../../domain/common/text-cut.js';
import { CALLBACKS, encodeContext, type ModalContext } from './action-ids.js';
import {
  context,
  escapedText,
  fitsInput,
  input,
  INPUT_ACTION,
  modal,
  option,
  section,
  SLACK_LIMITS,
  textInput,
  type KnownBlock,
  type ModalView,
  type PlainTextOption,
} from './block-kit.js';
import { incidentLine, severityLabel, statusLabel } from './incident.js';

/**
 * The incident modals: create, update, resolve, close. Block ids are the fields of the same
 * requests /v1 takes (`title`, `severity`, `template_ids`, …), so a DomainError's errors[].field
 * lands on its input unchanged (slack/errors.ts).
 */

export interface TemplateChoice {
  id: string;
  name: string;
}

/** The templates a modal can offer: the newest (a static select holds 100) and whether more exist. */
export interface TemplateChoices {
  newest: TemplateChoice[];
  /** More templates exist than a static select can list: the input searches them instead. */
  more: boolean;
}

/** The block and action that ask Herald for template options as the user types (block_suggestion). */
export const TEMPLATE_FIELD = 'template_ids';

const severityOptions = (): PlainTextOption[] => SEVERITIES.map((s) => option(severityLabel(s), s));

/**
 * The templates multi-select. Up to 100 templates it is a static list; past Slack's 100 options
 * it becomes a search (multi_external_select, answered by slack/listeners/template-options.ts) so every
 * template stays reachable. The attached templates are always selected in it, whatever their
 * age: a modal that left one out would detach it on submit.
 */
function templatesInput(choices: TemplateChoices, attached: TemplateChoice[]): KnownBlock {
  if (choices.newest.length === 0 && attached.length === 0 && !choices.more) {
    return context(
      'No templates yet: an execute sends the built-in message (title, severity, status, impact, description).',
    );
  }
  const initial = attached.map((t) => option(t.name, t.id));
  const common = {
    action_id: INPUT_ACTION,
    placeholder: {
      type: 'plain_text' as const,
      text: choices.more ? 'Type to search templates' : 'Messages to send on execute',
    },
    max_selected_items: LIMITS.templateIds,
    ...(initial.length > 0 ? { initial_options: initial } : {}),
  };
  const hint = 'Attached templates are rendered and sent to their connections when you execute.';
  if (choices.more) {
    return input(
      TEMPLATE_FIELD,
      'Templates',
      { type: 'multi_external_select', min_query_length: 0, ...common },
      { optional: true, hint: `${hint} Type part of a name to find one.` },
    );
  }
  const attachedIds = new Set(attached.map((t) => t.id));
  const options = [
    ...initial,
    ...choices.newest.filter((t) => !attachedIds.has(t.id)).map((t) => option(t.name, t.id)),
  ].slice(0, SLACK_LIMITS.staticOptions);
  return input(
    TEMPLATE_FIELD,
    'Templates',
    { type: 'multi_static_select', options, ...common },
    { optional: true, hint },
  );
}

/** A long-text input, or a note when the stored text is longer than Slack lets an input hold. */
function longTextInput(field: 'description' | 'impact', label: string, current: string, hint?: string): KnownBlock {
  if (!fitsInput(current)) {
    return context(
      `${label} is longer than a Slack input can hold (${current.length.toLocaleString('en-US')} characters) and stays as it is; edit it over the API.`,
    );
  }
  return input(field, label, textInput({ initial: current, multiline: true, maxLength: SLACK_LIMITS.plainTextInput }), {
    optional: true,
    ...(hint ? { hint } : {}),
  });
}

export function createIncidentModal(p: {
  title?: string;
  templates: TemplateChoice[] | TemplateChoices;
  ctx: ModalContext;
}): ModalView {
  // A title typed after `/incident new` is not stored yet: one too long for the input is
  // shortened (whole characters) in plain view of the user, who can still change it.
  const typed = p.title ?? null;
  const title = typed === null ? null : graphemePrefix(typed, LIMITS.title);
  const cut = typed !== null && title !== typed;
  return modal({
    callbackId: CALLBACKS.create,
    title: 'Declare an incident',
    submit: 'Declare',
    privateMetadata: encodeContext(p.ctx),
    blocks: [
      input(
        'title',
        'Title',
        textInput({ initial: title, maxLength: LIMITS.title, placeholder: 'Checkout fails for EU customers' }),
        cut ? { hint: `Shortened to ${LIMITS.title} characters, the most a title holds.` } : {},
      ),
      input('severity', 'Severity', {
        type: 'static_select',
        action_id: INPUT_ACTION,
        placeholder: { type: 'plain_text', text: 'How bad is it?' },
        options: severityOptions(),
      }),
      longTextInput('impact', 'Impact', '', 'Who is affected and how.'),
      longTextInput('description', 'Description', '', 'What is known so far.'),
      templatesInput(asChoices(p.templates), []),
    ],
  });
}

const statusOptions = (): PlainTextOption[] =>
  [...OPEN_STATUSES, 'resolved' as const].map((s) => option(statusLabel(s), s));

/**
 * `attached` names the incident's templates (they may be older than the newest listed); without
 * it they are looked up among `templates`.
 */
export function updateIncidentModal(p: {
  incident: Incident;
  templates: TemplateChoice[] | TemplateChoices;
  attached?: TemplateChoice[];
}): ModalView {
  const i = p.incident;
  const choices = asChoices(p.templates);
  const attached = p.attached ?? i.template_ids.flatMap((id) => choices.newest.filter((t) => t.id === id));
  const statuses = statusOptions();
  return modal({
    callbackId: CALLBACKS.update,
    title: 'Update incident',
    submit: 'Update',
    privateMetadata: encodeContext({ incident_id: i.id }),
    blocks: [
      section(incidentLine(i)),
      input('status', 'Status', {
        type: 'static_select',
        action_id: INPUT_ACTION,
        options: statuses,
        ...initialOption(statuses, i.status),
      }),
      input('title', 'Title', textInput({ initial: i.title, maxLength: LIMITS.title })),
      input('severity', 'Severity', {
        type: 'static_select',
        action_id: INPUT_ACTION,
        options: severityOptions(),
        ...initialOption(severityOptions(), i.severity),
      }),
      longTextInput('impact', 'Impact', i.impact),
      longTextInput('description', 'Description', i.description),
      templatesInput(choices, attached),
    ],
  });
}

function asChoices(t: TemplateChoice[] | TemplateChoices): TemplateChoices {
  return Array.isArray(t) ? { newest: t, more: false } : t;
}

function initialOption(options: PlainTextOption[], value: string): { initial_option?: PlainTextOption } {
  const found = options.find((o) => o.value === value);
  return found ? { initial_option: found } : {};
}

/**
 * The resolution summary input. A stored summary longer than a Slack input holds is not
 * prefilled (a cut copy submitted unchanged would replace it): the input starts empty and
 * optional, and says the current summary stays unless something is typed (slack/listeners/submissions.ts).
 */
function summaryInput(incident: Incident, required: boolean, hint?: string): KnownBlock {
  const current = incident.resolution_summary;
  if (current !== null && !fitsInput(current)) {
    const keep = `The current summary is ${current.length.toLocaleString('en-US')} characters, longer than a Slack input holds; it stays unless you type a replacement here.`;
    return input('resolution_summary', 'Resolution summary', textInput({ multiline: true }), {
      optional: true,
      hint: keep,
    });
  }
  return input(
    'resolution_summary',
    'Resolution summary',
    textInput({ initial: current, multiline: true, placeholder: 'What was wrong and what fixed it.' }),
    {
      optional: !required,
      ...(hint ? { hint } : {}),
    },
  );
}

export function resolveIncidentModal(incident: Incident): ModalView {
  return modal({
    callbackId: CALLBACKS.resolve,
    title: 'Resolve incident',
    submit: 'Resolve',
    privateMetadata: encodeContext({ incident_id: incident.id }),
    blocks: [
      section(incidentLine(incident)),
      summaryInput(
        incident,
        true,
        'Shown on the announcement and available to templates as {{incident.resolution_summary}}.',
      ),
    ],
  });
}

export function closeIncidentModal(incident: Incident): ModalView {
  return modal({
    callbackId: CALLBACKS.close,
    title: 'Close incident',
    submit: 'Close incident',
    close: 'Keep open',
    privateMetadata: encodeContext({ incident_id: incident.id }),
    blocks: [
      section(
        `:warning: Close *${escapedText(incident.title, 1000)}* (\`${incident.id}\`)?\nA closed incident can no longer be updated or executed.`,
      ),
      summaryInput(incident, false),
    ],
  });
}
