import type { Actor } from '../../domain/common/actor.js';
import { ACTIONS, CALLBACKS, encodeContext } from './action-ids.js';
import {
  button,
  context,
  divider,
  escapedText,
  input,
  modal,
  plain,
  section,
  SLACK_LIMITS,
  textInput,
  truncate,
  type KnownBlock,
  type ModalView,
} from './block-kit.js';

/**
 * What approvers read in Slack: the direct message asking them (with the exact words each channel
 * would receive and Approve / Reject buttons), the same message once decided (buttons gone), the
 * line in the announcement's thread, and the Reject modal. Pure: the notifier (slack/approvals.ts)
 * gives the facts, these only present them. The input types are the fields read, so any record
 * with them (the service's ApprovalNotice) fits.
 */

export type ApprovalState = 'pending' | 'approved' | 'rejected' | 'expired';

export interface ApprovalFacts {
  state: ApprovalState;
  requested_by: Actor;
  requested_at: string;
  expires_at: string;
  decided_by: Actor | null;
  decided_at: string | null;
  reason: string | null;
}

/** One held delivery as the approver sees it: where it goes and its rendered words. */
export interface HeldMessage {
  connectionName: string;
  connectionType: string;
  templateName: string | null;
  subject: string;
  body: string;
}

export interface ApprovalMessageInput {
  incident: { id: string; title: string };
  execution: { id: string; kind?: 'announcement' | 'correction' | 'retraction' | undefined };
  audience: { key: string; name: string; visibility: string };
  approval: ApprovalFacts;
  messages: HeldMessage[];
}

/** Where a plain_text section holds Slack's 3,000 characters, leaving room for nothing else. */
const MESSAGE_TEXT_MAX = SLACK_LIMITS.sectionText;

/**
 * A DM holds 50 blocks: the head (up to 5), the buttons (1) and a "more" line (1) leave room for
 * 21 messages at two blocks each; the rest are counted.
 */
export const MAX_SHOWN_MESSAGES = 21;

/** What the buttons carry: the incident, the execution and the audience the decision is for. */
export function approvalButtonValue(incidentId: string, executionId: string, audience: string): string {
  return encodeContext({ incident_id: incidentId, execution_id: executionId, audience });
}

/** A time in mrkdwn: Slack shows it in the reader's own time zone; `fallback` (UTC) elsewhere. */
export function slackTime(iso: string): string {
  const ms = Date.parse(iso);
  if (!Number.isFinite(ms)) return escapedText(iso, 40);
  const d = new Date(ms);
  const utc = `${d.toISOString().slice(0, 10)} ${d.toISOString().slice(11, 16)} UTC`;
  return `<!date^${Math.floor(ms / 1000)}^{date_short_pretty} {time}|${utc}>`;
}

/** A person in mrkdwn: a Slack user by mention, an API key by its name, Herald itself by name. */
export function actorName(a: Actor): string {
  if (a.type === 'slack_user' && /^[UW][A-Z0-9]{2,20}$/.test(a.id)) return `<@${a.id}>`;
  if (a.type === 'api_key') return `API key ${escapedText(a.name, 80)}`;
  return escapedText(a.name, 80);
}

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** `*Customers* (external)`. */
function audienceLabel(a: ApprovalMessageInput['audience']): string {
  return `*${escapedText(a.name, 200)}* (${a.visibility === 'external' ? 'external' : 'internal'})`;
}

function whatIsSent(p: ApprovalMessageInput): string {
  if (p.execution.kind === 'correction') return 'a correction';
  if (p.execution.kind === 'retraction') return 'a retraction';
  return 'an update';
}

/** The words of one held message, verbatim (plain text: nothing in it is read as markup). */
function messageBlocks(m: HeldMessage): KnownBlock[] {
  const via = m.templateName ? ` · template ${escapedText(m.templateName, 160)}` : ' · built-in message';
  const text = m.subject ? `${m.subject}\n\n${m.body}` : m.body;
  const head = `*${escapedText(m.connectionName, 160)}* (${m.connectionType})${via}`;
  if (text.trim() === '') return [context(`${head} · renders empty`), context('(nothing to send)')];
  const shown = truncate(text, MESSAGE_TEXT_MAX);
  const cut = shown !== text;
  return [
    context(
      cut
        ? `${head} · cut to fit Slack: the whole ${text.length.toLocaleString('en-US')} characters are what is sent`
        : head,
    ),
    { type: 'section', text: plain(shown, MESSAGE_TEXT_MAX) },
  ];
}

/** The decision as one line: who, when, why. */
export function decisionLine(p: ApprovalMessageInput): string {
  const a = p.approval;
  const by = a.decided_by ? actorName(a.decided_by) : 'someone';
  const when = a.decided_at ? ` at ${slackTime(a.decided_at)}` : '';
  const why = a.reason && a.reason.trim() !== '' ? ` — “${escapedText(a.reason, 500)}”` : '';
  switch (a.state) {
    case 'approved':
      return `:white_check_mark: *Approved* by ${by}${when}${why} — sending.`;
    case 'rejected':
      return `:no_entry_sign: *Rejected* by ${by}${when}${why} — nothing was sent.`;
    case 'expired':
      return `:hourglass: *Expired* at ${slackTime(a.decided_at ?? a.expires_at)} without a decision — nothing was sent.`;
    case 'pending':
      return `:raised_hand: *Waiting for approval* · expires ${slackTime(a.expires_at)}`;
  }
}

/**
 * The approver's direct message. Pending: the request with Approve / Reject. Decided: the same
 * facts with the decision in place of the buttons (chat.update of the same message).
 */
export function approvalMessage(p: ApprovalMessageInput): { text: string; blocks: KnownBlock[] } {
  const a = p.approval;
  const n = p.messages.length;
  const pending = a.state === 'pending';
  const blocks: KnownBlock[] = [
    section(
      `${pending ? ':raised_hand: *Approval needed*' : decisionLine(p)}\n` +
        `Send ${whatIsSent(p)} to ${audienceLabel(p.audience)} · ${plural(n, 'channel message', 'channel messages')}`,
    ),
    section(`*${escapedText(p.incident.title, 1000)}* · \`${p.incident.id}\` · execution \`${p.execution.id}\``),
    context(
      `Asked by ${actorName(a.requested_by)} at ${slackTime(a.requested_at)}` +
        (pending ? ` · expires ${slackTime(a.expires_at)}` : ''),
    ),
    divider(),
  ];
  const shown = p.messages.slice(0, MAX_SHOWN_MESSAGES);
  for (const m of shown) blocks.push(...messageBlocks(m));
  if (n > shown.length) blocks.push(context(`…and ${n - shown.length} more messages, sent with these.`));
  if (n === 0) blocks.push(context('No messages are held for this audience any more.'));
  if (pending) {
    const value = approvalButtonValue(p.incident.id, p.execution.id, p.audience.key);
    blocks.push({
      type: 'actions',
      block_id: APPROVAL_ACTIONS_BLOCK,
      elements: [
        button('Approve', ACTIONS.approvalApprove, value, 'primary'),
        button('Reject', ACTIONS.approvalReject, value, 'danger'),
      ],
    });
  }
  return { text: notificationText(p), blocks: blocks.slice(0, SLACK_LIMITS.blocksPerMessage) };
}

/** The block id of the Approve / Reject buttons in the DM. */
export const APPROVAL_ACTIONS_BLOCK = 'approval_actions';

/** The message's top-level text (notifications, screen readers): escaped, since Slack reads mentions in it. */
function notificationText(p: ApprovalMessageInput): string {
  const title = escapedText(p.incident.title, 500);
  const audience = escapedText(p.audience.name, 200);
  switch (p.approval.state) {
    case 'pending':
      return `Approval needed: ${audience} — ${title} (${p.incident.id})`;
    case 'approved':
      return `Approved: ${audience} — ${title} (${p.incident.id})`;
    case 'rejected':
      return `Rejected: ${audience} — ${title} (${p.incident.id})`;
    case 'expired':
      return `Expired: ${audience} — ${title} (${p.incident.id})`;
  }
}

/** The line in the announcement's thread for each state of the approval. */
export function approvalThreadLine(
  p: Pick<ApprovalMessageInput, 'audience' | 'approval' | 'messages'> & { approvers: readonly string[] },
): string {
  const a = p.approval;
  const audience = `*${escapedText(p.audience.name, 200)}*`;
  const channels = plural(p.messages.length, 'message', 'messages');
  const why = a.reason && a.reason.trim() !== '' ? ` Reason: “${escapedText(a.reason, 500)}”` : '';
  const by = a.decided_by ? actorName(a.decided_by) : 'someone';
  switch (a.state) {
    case 'pending': {
      const who = p.approvers.filter((u) => /^[UW][A-Z0-9]{2,20}$/.test(u)).map((u) => `<@${u}>`);
      const approvers = who.length > 0 ? ` Approvers: ${who.slice(0, 20).join(', ')}.` : '';
      return `:raised_hand: Waiting for approval to send to ${audience} (${channels}) — asked by ${actorName(a.requested_by)}. Expires ${slackTime(a.expires_at)}.${approvers}`;
    }
    case 'approved':
      return `:white_check_mark: Approved by ${by} — sending to ${audience} (${channels}).${why}`;
    case 'rejected':
      return `:no_entry_sign: Rejected by ${by} — nothing was sent to ${audience}.${why}`;
    case 'expired':
      return `:hourglass: Expired — nothing was sent to ${audience}: nobody approved by ${slackTime(a.expires_at)}.`;
  }
}

/** The block id of the Reject modal's reason input. */
export const REJECT_REASON_FIELD = 'reason';

/** Reject asks for an optional reason; the button's context (incident, execution, audience) rides along. */
export function rejectModal(p: { incidentId: string; executionId: string; audience: string }): ModalView {
  return modal({
    callbackId: CALLBACKS.approvalReject,
    title: 'Reject sending',
    submit: 'Reject',
    privateMetadata: encodeContext({ incident_id: p.incidentId, execution_id: p.executionId, audience: p.audience }),
    blocks: [
      section(
        `Nothing will be sent to the audience \`${escapedText(p.audience, 100)}\`. The requester and the other approvers see who rejected it and why.`,
      ),
      input(REJECT_REASON_FIELD, 'Reason (optional)', textInput({ multiline: true, maxLength: 500 }), {
        optional: true,
      }),
    ],
  });
}
