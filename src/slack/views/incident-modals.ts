import { escapeSlack } from '../../domain/escape.js';
import { OPEN_STATUSES, SEVERITIES, type Incident } from '../../domain/incident.js';
import { LIMITS } from '../../domain/limits.js';
import { CALLBACKS, encodeContext, type ModalContext } from './action-ids.js';
import { context, input, INPUT_ACTION, modal, option, section, SLACK_LIMITS, textInput, truncate, type KnownBlock, type ModalView, type PlainTextOption } from './block-kit.js';
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

const severityOptions = (): PlainTextOption[] => SEVERITIES.map((s) => option(severityLabel(s), s));

function templatesInput(templates: TemplateChoice[], selected: string[]): KnownBlock {
  if (templates.length === 0) {
    return context('No templates yet: an execute sends the built-in message (title, severity, status, impact, description).');
  }
  const options = templates.slice(0, SLACK_LIMITS.staticOptions).map((t) => option(t.name, t.id));
  const initial = options.filter((o) => selected.includes(o.value ?? ''));
  return input(
    'template_ids',
    'Templates',
    {
      type: 'multi_static_select',
      action_id: INPUT_ACTION,
      placeholder: { type: 'plain_text', text: 'Messages to send on execute' },
      options,
      max_selected_items: LIMITS.templateIds,
      ...(initial.length > 0 ? { initial_options: initial } : {}),
    },
    { optional: true, hint: 'Attached templates are rendered and sent to their connections when you execute.' },
  );
}

/** A long-text input, or a note when the stored text is longer than Slack lets an input hold. */
function longTextInput(field: 'description' | 'impact', label: string, current: string, hint?: string): KnownBlock {
  if (current.length > SLACK_LIMITS.plainTextInput) {
    return context(`${label} is longer than a Slack input can hold (${current.length} characters); edit it over the API.`);
  }
  return input(field, label, textInput({ initial: current, multiline: true, maxLength: SLACK_LIMITS.plainTextInput }), { optional: true, ...(hint ? { hint } : {}) });
}

export function createIncidentModal(p: { title?: string; templates: TemplateChoice[]; ctx: ModalContext }): ModalView {
  return modal({
    callbackId: CALLBACKS.create,
    title: 'Declare an incident',
    submit: 'Declare',
    privateMetadata: encodeContext(p.ctx),
    blocks: [
      input('title', 'Title', textInput({ initial: p.title ?? null, maxLength: LIMITS.title, placeholder: 'Checkout fails for EU customers' })),
      input('severity', 'Severity', { type: 'static_select', action_id: INPUT_ACTION, placeholder: { type: 'plain_text', text: 'How bad is it?' }, options: severityOptions() }),
      longTextInput('impact', 'Impact', '', 'Who is affected and how.'),
      longTextInput('description', 'Description', '', 'What is known so far.'),
      templatesInput(p.templates, []),
    ],
  });
}

const statusOptions = (): PlainTextOption[] => [...OPEN_STATUSES, 'resolved' as const].map((s) => option(statusLabel(s), s));

export function updateIncidentModal(p: { incident: Incident; templates: TemplateChoice[] }): ModalView {
  const i = p.incident;
  const statuses = statusOptions();
  return modal({
    callbackId: CALLBACKS.update,
    title: 'Update incident',
    submit: 'Update',
    privateMetadata: encodeContext({ incident_id: i.id }),
    blocks: [
      section(incidentLine(i)),
      input('status', 'Status', { type: 'static_select', action_id: INPUT_ACTION, options: statuses, ...initialOption(statuses, i.status) }),
      input('title', 'Title', textInput({ initial: i.title, maxLength: LIMITS.title })),
      input('severity', 'Severity', { type: 'static_select', action_id: INPUT_ACTION, options: severityOptions(), ...initialOption(severityOptions(), i.severity) }),
      longTextInput('impact', 'Impact', i.impact),
      longTextInput('description', 'Description', i.description),
      templatesInput(p.templates, i.template_ids),
    ],
  });
}

function initialOption(options: PlainTextOption[], value: string): { initial_option?: PlainTextOption } {
  const found = options.find((o) => o.value === value);
  return found ? { initial_option: found } : {};
}

export function resolveIncidentModal(incident: Incident): ModalView {
  return modal({
    callbackId: CALLBACKS.resolve,
    title: 'Resolve incident',
    submit: 'Resolve',
    privateMetadata: encodeContext({ incident_id: incident.id }),
    blocks: [
      section(incidentLine(incident)),
      input(
        'resolution_summary',
        'Resolution summary',
        textInput({ initial: incident.resolution_summary, multiline: true, placeholder: 'What was wrong and what fixed it.' }),
        { hint: 'Shown on the announcement and available to templates as {{incident.resolution_summary}}.' },
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
      section(`:warning: Close *${escapeSlack(truncate(incident.title, 200))}* (\`${incident.id}\`)?\nA closed incident can no longer be updated or executed.`),
      input('resolution_summary', 'Resolution summary', textInput({ initial: incident.resolution_summary, multiline: true }), { optional: true }),
    ],
  });
}
