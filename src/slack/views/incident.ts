import { isWritable, type Incident, type IncidentStatus, type Severity } from '../../domain/incident/incident.js';
import { ACTIONS } from './action-ids.js';
import { button, context, escapedText, section, type KnownBlock } from './block-kit.js';

/**
 * How an incident reads in Slack: one line for lists, a block set for announcements and `show`.
 * Every user-supplied value goes through escapeSlack: a title can never ping `@channel` or
 * smuggle a link.
 */

const SEVERITY_EMOJI: Record<Severity, string> = {
  critical: ':red_circle:',
  major: ':large_orange_circle:',
  minor: ':large_yellow_circle:',
  low: ':white_circle:',
};

const STATUS_LABEL: Record<IncidentStatus, string> = {
  investigating: ':mag: Investigating',
  identified: ':dart: Identified',
  monitoring: ':eyes: Monitoring',
  resolved: ':white_check_mark: Resolved',
  closed: ':lock: Closed',
};

export const severityLabel = (s: Severity): string => `${SEVERITY_EMOJI[s]} ${s.charAt(0).toUpperCase()}${s.slice(1)}`;
export const statusLabel = (s: IncidentStatus): string => STATUS_LABEL[s];

/** Long free text is cut (as shown, after escaping) so a section stays within Slack's 3,000 characters. */
const FIELD_TEXT_MAX = 1200;

/** `*title*` · severity · status · `id`, for lists. */
export function incidentLine(i: Incident): string {
  return `${SEVERITY_EMOJI[i.severity]} *${escapedText(i.title, 300)}* · ${statusLabel(i.status)} · \`${i.id}\``;
}

/**
 * The message's top-level `text`: what notifications and screen readers show. Slack parses it as
 * mrkdwn *and resolves mentions in it*, so the title is escaped here too — a title of
 * `<!channel>` must not page a whole channel through the notification text.
 */
export function incidentFallbackText(i: Incident): string {
  return `[${i.severity.toUpperCase()}] ${escapedText(i.title, 1000)} — ${i.status} (${i.id})`;
}

/** The facts of an incident as sections: title, severity, status, impact, description, resolution. */
export function incidentBlocks(i: Incident): KnownBlock[] {
  const blocks: KnownBlock[] = [
    section(`${SEVERITY_EMOJI[i.severity]} *${escapedText(i.title, 1000)}*`),
    {
      type: 'section',
      fields: [
        { type: 'mrkdwn', text: `*Severity*\n${severityLabel(i.severity)}` },
        { type: 'mrkdwn', text: `*Status*\n${statusLabel(i.status)}` },
        { type: 'mrkdwn', text: `*Incident*\n\`${i.id}\`` },
        { type: 'mrkdwn', text: `*Declared by*\n${escapedText(i.created_by.name, 500)}` },
      ],
    },
  ];
  const text = (label: string, value: string | null) => {
    if (value === null || value.trim() === '') return;
    blocks.push(section(`*${label}*\n${escapedText(value, FIELD_TEXT_MAX)}`));
  };
  text('Impact', i.impact);
  text('Description', i.description);
  text('Resolution', i.resolution_summary);
  return blocks;
}

/** The Execute / Update / Resolve / Close buttons that fit the incident's state (none once closed). */
export function incidentActions(i: Incident, blockId?: string): KnownBlock[] {
  if (!isWritable(i)) return [context(`:lock: Closed ${i.closed_at ?? ''}`.trim())];
  const buttons = [
    button('Execute', ACTIONS.incidentExecute, i.id, 'primary'),
    button('Update', ACTIONS.incidentUpdate, i.id),
  ];
  if (i.status !== 'resolved') buttons.push(button('Resolve', ACTIONS.incidentResolve, i.id));
  buttons.push(button('Close', ACTIONS.incidentClose, i.id, 'danger'));
  return [{ type: 'actions', elements: buttons, ...(blockId ? { block_id: blockId } : {}) }];
}
