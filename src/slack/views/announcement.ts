import type { DeliveryStatus } from '../../domain/execution/execution.js';
import { isWritable, type Incident } from '../../domain/incident/incident.js';
import type {
  AnnouncementReceiptLine,
  AnnouncementReceipts,
  NextUpdateDue,
  ReminderContent,
} from '../../ports/index.js';
import { ACTIONS, encodeContext } from './action-ids.js';
import { button, context, divider, escapedText, section, SLACK_LIMITS, type KnownBlock } from './block-kit.js';
import { incidentActions, incidentBlocks, incidentFallbackText } from './incident.js';

/** One delivery of the last execute, as the announcement shows it (the router builds them). */
export type ReceiptLine = AnnouncementReceiptLine;

export type Receipts = AnnouncementReceipts;

const RECEIPT: Record<DeliveryStatus, string> = {
  pending_approval: ':raised_hand: waiting for approval',
  queued: ':hourglass_flowing_sand: queued',
  sending: ':outbox_tray: sending',
  delivered: ':white_check_mark: delivered',
  retrying: ':repeat: retrying',
  failed: ':x: failed',
  cancelled: ':no_entry_sign: cancelled',
};

/** At most this many receipt lines; past it, or past the section's 3,000 characters, the rest is counted. */
const MAX_RECEIPT_LINES = 25;
const RECEIPTS_TEXT_MAX = SLACK_LIMITS.sectionText - 200;

/** What a delivered correction or retraction did to the message. */
const DONE: Record<'edit' | 'delete', string> = { edit: 'edited in place', delete: 'deleted' };

/**
 * A link in mrkdwn, `<url|label>`, or null for a URL that cannot be one safely. Slack reads `&`,
 * `<` and `>` as markup (so `&` becomes `&amp;`, Slack's own rule), and a `|`, `<`, `>` or space
 * in the URL would end it early and let the rest be read as markup: such a URL is not linked.
 */
export function mrkdwnLink(url: string, label: string): string | null {
  if (!/^https?:\/\/[^\s<>|]+$/.test(url) || url.length > 500) return null;
  return `<${url.replace(/&/g, '&amp;')}|${label}>`;
}

export function receiptLine(r: ReceiptLine): string {
  let line = `${RECEIPT[r.status]} — *${escapedText(r.connectionName, 160)}* (${r.connectionType})`;
  if (r.status === 'delivered' && (r.action === 'edit' || r.action === 'delete')) line += ` · ${DONE[r.action]}`;
  if (r.status === 'retrying') line += ` · attempt ${r.attempts}`;
  // A cancelled one says why: its connection went, or its approval was rejected or expired.
  if ((r.status === 'retrying' || r.status === 'failed' || r.status === 'cancelled') && r.error)
    line += ` · ${escapedText(r.error, 200)}`;
  const link = r.status === 'delivered' && r.permalink ? mrkdwnLink(r.permalink, 'view') : null;
  if (link !== null) line += ` · ${link}`;
  return line;
}

/** What the receipts are of: an execute's deliveries, or a correction's or retraction's. */
function receiptsTitle(receipts: Receipts): string {
  const of = receipts.targetExecutionId ? ` of \`${receipts.targetExecutionId}\`` : '';
  if (receipts.kind === 'correction') return `*Correction receipts*${of}`;
  if (receipts.kind === 'retraction') return `*Retraction receipts*${of}`;
  return '*Delivery receipts*';
}

export function receiptBlocks(receipts: Receipts): KnownBlock[] {
  const head = `${receiptsTitle(receipts)} · \`${receipts.executionId}\` · ${receipts.status.replace('_', ' ')}`;
  // Whole lines only: a line cut at Slack's limit would hide the "…and N more" that says so.
  const shown: string[] = [];
  let length = head.length;
  for (const line of receipts.lines.map(receiptLine)) {
    if (shown.length === MAX_RECEIPT_LINES || length + 1 + line.length > RECEIPTS_TEXT_MAX) break;
    shown.push(line);
    length += 1 + line.length;
  }
  const rest = receipts.lines.length - shown.length;
  if (rest > 0) shown.push(`…and ${rest} more`);
  const counts = countBy(receipts.lines.map((l) => l.status));
  const summary = Object.entries(counts)
    .map(([s, n]) => `${n} ${s}`)
    .join(', ');
  return [
    section(`${head}\n${shown.join('\n') || '_No deliveries._'}`, 'receipts'),
    context(summary === '' ? 'No deliveries.' : summary),
  ];
}

/** The block id of the Correct / Retract buttons under the receipts. */
export const RECEIPT_ACTIONS_BLOCK = 'receipt_actions';

/**
 * Correct / Retract for the execute the receipts name (the one shown once a message of it is
 * delivered, or the one a shown correction corrects), while the incident can change
 * (ExecutionService refuses the rest anyway). Each button carries the incident and the execution,
 * as the modal's context.
 */
export function receiptActions(incident: Incident, receipts: Receipts): KnownBlock[] {
  const executionId = receipts.correctableExecutionId ?? null;
  if (executionId === null || !isWritable(incident)) return [];
  const value = encodeContext({ incident_id: incident.id, execution_id: executionId });
  return [
    {
      type: 'actions',
      block_id: RECEIPT_ACTIONS_BLOCK,
      elements: [
        button('Correct', ACTIONS.executionCorrect, value),
        button('Retract', ACTIONS.executionRetract, value, 'danger'),
      ],
    },
  ];
}

/** "Next update due 14:30 UTC", and "— overdue 5 min" once it has passed. */
export function nextUpdateLine(next: NextUpdateDue): string {
  return next.overdue === null
    ? `:alarm_clock: Next update due ${next.due}`
    : `:alarm_clock: Next update due ${next.due} — overdue ${next.overdue}`;
}

/** How a reminder names who should post: a Slack user by mention, an API key by its name. */
function executorName(executor: ReminderContent['executor']): string | null {
  if (executor === null) return null;
  if (executor.type === 'slack_user')
    return /^[UW][A-Z0-9]+$/.test(executor.id) ? `<@${executor.id}>` : escapedText(executor.name, 80);
  if (executor.type === 'api_key') return escapedText(executor.name, 80);
  return null;
}

/** The overdue reminder, posted in the announcement's thread. */
export function reminderMessage(r: ReminderContent): { text: string } {
  const who = executorName(r.executor);
  const ask = who === null ? 'Please post an update.' : `${who}, please post an update.`;
  return {
    text: `:alarm_clock: The next update on *${escapedText(r.incident.title, 300)}* was due at ${r.due} (overdue ${r.overdue}). ${ask}`,
  };
}

/**
 * The announcement of an incident: its facts, the last execute's receipts, and the buttons. Kept
 * current with chat.update, so it is always rebuilt whole from the stored state.
 */
export function announcementMessage(
  incident: Incident,
  receipts: Receipts | null,
  nextUpdate: NextUpdateDue | null = null,
): { text: string; blocks: KnownBlock[] } {
  const blocks: KnownBlock[] = [section(`:rotating_light: *Incident declared*`), ...incidentBlocks(incident)];
  if (nextUpdate) blocks.push(context(nextUpdateLine(nextUpdate)));
  if (receipts) blocks.push(divider(), ...receiptBlocks(receipts), ...receiptActions(incident, receipts));
  blocks.push(...incidentActions(incident, 'incident_actions'));
  return { text: incidentFallbackText(incident), blocks };
}

function countBy(values: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}
