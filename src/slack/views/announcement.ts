import type { DeliveryStatus } from '../../domain/execution/execution.js';
import type { Incident } from '../../domain/incident/incident.js';
import type { AnnouncementReceiptLine, AnnouncementReceipts } from '../../ports/index.js';
import { context, divider, escapedText, section, SLACK_LIMITS, type KnownBlock } from './block-kit.js';
import { incidentActions, incidentBlocks, incidentFallbackText } from './incident.js';

/** One delivery of the last execute, as the announcement shows it (the router builds them). */
export type ReceiptLine = AnnouncementReceiptLine;

export type Receipts = AnnouncementReceipts;

const RECEIPT: Record<DeliveryStatus, string> = {
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

export function receiptLine(r: ReceiptLine): string {
  let line = `${RECEIPT[r.status]} — *${escapedText(r.connectionName, 160)}* (${r.connectionType})`;
  if (r.status === 'retrying') line += ` · attempt ${r.attempts}`;
  if ((r.status === 'retrying' || r.status === 'failed') && r.error) line += ` · ${escapedText(r.error, 200)}`;
  return line;
}

export function receiptBlocks(receipts: Receipts): KnownBlock[] {
  const head = `*Delivery receipts* · \`${receipts.executionId}\` · ${receipts.status.replace('_', ' ')}`;
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
  return [section(`${head}\n${shown.join('\n') || '_No deliveries._'}`, 'receipts'), context(summary === '' ? 'No deliveries.' : summary)];
}

/**
 * The announcement of an incident: its facts, the last execute's receipts, and the buttons. Kept
 * current with chat.update, so it is always rebuilt whole from the stored state.
 */
export function announcementMessage(incident: Incident, receipts: Receipts | null): { text: string; blocks: KnownBlock[] } {
  const blocks: KnownBlock[] = [
    section(`:rotating_light: *Incident declared*`),
    ...incidentBlocks(incident),
  ];
  if (receipts) blocks.push(divider(), ...receiptBlocks(receipts));
  blocks.push(...incidentActions(incident, 'incident_actions'));
  return { text: incidentFallbackText(incident), blocks };
}

function countBy(values: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}
