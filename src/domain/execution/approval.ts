import { z } from 'zod';
import { ActorSchema, type Actor } from '../common/actor.js';
import { iso } from '../common/clock.js';
import { DomainError, type FieldError } from '../common/errors.js';

/**
 * Approvals (docs/explanation/approval.md): the part of an execution that goes to an audience
 * whose approval is required waits, held, until one of its approvers approves it (then it is
 * queued), rejects it, or it expires (then it is cancelled). One record per execution holds the
 * approval of each of its held audiences; it is the only thing that changes after the execute, so
 * it is stored apart from the immutable execution and merged into it when presented.
 *
 *   pending ─┬─ approve ─▶ approved   (its held deliveries are queued, in the same commit)
 *            ├─ reject ──▶ rejected   (its held deliveries are cancelled; also a retraction's withdrawal)
 *            └─ expire ──▶ expired    (past expires_at: cancelled, nothing is sent)
 *   approved, rejected, expired: final.
 */

export const APPROVAL_STATES = ['pending', 'approved', 'rejected', 'expired'] as const;
export type ApprovalState = (typeof APPROVAL_STATES)[number];

export const ApprovalViewSchema = z
  .object({
    state: z.enum(APPROVAL_STATES),
    requested_by: ActorSchema,
    requested_at: z.string(),
    expires_at: z.string(),
    decided_by: ActorSchema.nullable().meta({
      description: 'Who approved or rejected it; null while pending or when it expired.',
    }),
    decided_at: z.string().nullable(),
    reason: z.string().nullable().meta({ description: 'The reason given with the decision (a retraction says so).' }),
  })
  .meta({ id: 'ApprovalView' });
export type ApprovalView = z.infer<typeof ApprovalViewSchema>;

export const SKIP_REASONS = ['no_templates', 'no_connections'] as const;

export const ExecutionAudienceSchema = z
  .object({
    key: z.string(),
    name: z.string(),
    visibility: z.enum(['internal', 'external']),
    delivery_ids: z.array(z.string()).meta({ description: 'The deliveries made for this audience.' }),
    skipped: z
      .object({ reason: z.enum(SKIP_REASONS), message: z.string() })
      .nullable()
      .meta({ description: 'Why this audience got nothing from this execute (null when it got something).' }),
    approval: ApprovalViewSchema.nullable().meta({ description: 'Null when its approval is not required.' }),
  })
  .meta({ id: 'ExecutionAudience' });
export type ExecutionAudience = z.infer<typeof ExecutionAudienceSchema>;

export const DecideRequestSchema = z
  .strictObject({
    reason: z.string().trim().max(500).optional(),
    audiences: z
      .array(z.string().min(1).max(63))
      .min(1)
      .max(20)
      .optional()
      .meta({ description: 'The audiences to decide (keys); default: every pending one the caller may decide.' }),
  })
  .meta({ id: 'ApprovalDecision' });
export type DecideRequest = z.infer<typeof DecideRequestSchema>;

/** One held audience's approval as stored: the view plus who may decide and what it holds. */
export interface ApprovalRecord extends ApprovalView {
  audience_id: string;
  audience_key: string;
  /** The audience's approvers and four-eyes rule as they were at execute (a later edit does not move them). */
  approvers: { slack_user_ids: string[]; api_key_scopes?: string[] };
  four_eyes: boolean;
  /** The held deliveries. */
  delivery_ids: string[];
  /** The last state the approvers were told of (ApprovalNotifier); null before the first notice. */
  notified_state: ApprovalState | null;
}

/** Every approval of one execution: one record, compared and replaced as a whole. */
export interface ExecutionApprovals {
  execution_id: string;
  incident_id: string;
  audiences: ApprovalRecord[];
  rev: number;
}

/** Who may decide an audience's approval and what it holds: what a pending approval is asked for. */
export type ApprovalAsk = Pick<
  ApprovalRecord,
  'audience_id' | 'audience_key' | 'approvers' | 'four_eyes' | 'delivery_ids'
>;

/** The approval `ask` waiting for a decision: asked by `actor` at `now`, open for `ttlMs`. */
export function pendingApproval(ask: ApprovalAsk, actor: Actor, now: Date, ttlMs: number): ApprovalRecord {
  return {
    ...ask,
    state: 'pending',
    requested_by: actor,
    requested_at: iso(now),
    expires_at: iso(new Date(now.getTime() + ttlMs)),
    decided_by: null,
    decided_at: null,
    reason: null,
    notified_state: null,
  };
}

/** The execution's approvals record (rev 1) of `records`; null when nothing is held. */
export function newExecutionApprovals(
  execution: { id: string; incident_id: string },
  records: ApprovalRecord[],
): ExecutionApprovals | null {
  return records.length === 0
    ? null
    : { execution_id: execution.id, incident_id: execution.incident_id, audiences: records, rev: 1 };
}

export const viewOf = (r: ApprovalRecord): ApprovalView => ({
  state: r.state,
  requested_by: r.requested_by,
  requested_at: r.requested_at,
  expires_at: r.expires_at,
  decided_by: r.decided_by,
  decided_at: r.decided_at,
  reason: r.reason,
});

export type Decision = 'approve' | 'reject';

const sameActor = (a: Actor, b: Actor): boolean => a.type === b.type && a.id === b.id;

/** Whether `actor` is one of the record's approvers (an API key: by its scopes, see the audience rules). */
export function isApprover(r: Pick<ApprovalRecord, 'approvers'>, actor: Actor, keyScopes: readonly string[]): boolean {
  if (actor.type === 'slack_user') return r.approvers.slack_user_ids.includes(actor.id);
  if (actor.type === 'api_key') {
    const listed = r.approvers.api_key_scopes ?? [];
    const holds = (s: string) => keyScopes.includes('*') || keyScopes.includes(s);
    return listed.length > 0 && holds('approvals:write') && listed.some(holds);
  }
  return false;
}

/** Pending, and not past its expiry at `now` (one past it is as good as expired: the sweep records it). */
export const isOpen = (r: ApprovalRecord, now: Date): boolean =>
  r.state === 'pending' && Date.parse(r.expires_at) > now.getTime();

function describe(r: ApprovalRecord): string {
  if (r.state === 'pending') return `The approval for ${r.audience_key} has expired.`;
  if (r.state === 'expired') return `The approval for ${r.audience_key} expired at ${r.expires_at}.`;
  const who = r.decided_by ? `${r.decided_by.name}` : 'someone';
  return `The approval for ${r.audience_key} was already ${r.state} by ${who} at ${r.decided_at ?? ''}.`;
}

export interface DecideOutcome {
  next: ExecutionApprovals;
  /** The records decided now (their new state). */
  decided: ApprovalRecord[];
}

/**
 * Decides the execution's approvals for `actor` (pure). `audiences` named: each must be one of
 * them (422 unknown_audience), pending (409 not_pending, saying how it was decided), and the
 * actor must be its approver (403 not_an_approver) and not its requester under four-eyes (403
 * four_eyes). Not named: every open one the actor may decide; none open is 409 not_pending, none
 * the actor may decide is the reason why (four_eyes when that is all that stops them).
 */
export function decide(
  approvals: ExecutionApprovals,
  input: { decision: Decision; reason?: string | undefined; audiences?: string[] | undefined },
  actor: Actor,
  keyScopes: readonly string[],
  now: Date,
): DecideOutcome {
  const byKey = new Map(approvals.audiences.map((r) => [r.audience_key, r]));
  let targets: ApprovalRecord[];
  if (input.audiences !== undefined) {
    const unknown: FieldError[] = [];
    input.audiences.forEach((k, i) => {
      if (!byKey.has(k))
        unknown.push({
          field: `audiences.${i}`,
          code: 'unknown_audience',
          message: `This execution has no approval for audience ${k}.`,
        });
    });
    if (unknown.length > 0)
      throw new DomainError('unknown_audience', 'Some audiences have no approval on this execution.', unknown);
    targets = [...new Set(input.audiences)].map((k) => byKey.get(k)!);
    const closed = targets.find((r) => !isOpen(r, now));
    if (closed) throw notPending(closed);
    const stranger = targets.find((r) => !isApprover(r, actor, keyScopes));
    if (stranger) throw notAnApprover(stranger);
    const own = targets.find((r) => r.four_eyes && sameActor(r.requested_by, actor));
    if (own) throw fourEyes(own);
  } else {
    const open = approvals.audiences.filter((r) => isOpen(r, now));
    if (open.length === 0) {
      const first = approvals.audiences[0];
      throw first ? notPending(first) : new DomainError('not_pending', 'This execution has no approval to decide.');
    }
    const mine = open.filter((r) => isApprover(r, actor, keyScopes));
    if (mine.length === 0) throw notAnApprover(open[0]!);
    targets = mine.filter((r) => !(r.four_eyes && sameActor(r.requested_by, actor)));
    if (targets.length === 0) throw fourEyes(mine[0]!);
  }
  const at = iso(now);
  const state: ApprovalState = input.decision === 'approve' ? 'approved' : 'rejected';
  const chosen = new Set(targets.map((r) => r.audience_key));
  const audiences = approvals.audiences.map((r) =>
    chosen.has(r.audience_key) ? { ...r, state, decided_by: actor, decided_at: at, reason: input.reason ?? null } : r,
  );
  return {
    next: { ...approvals, audiences, rev: approvals.rev + 1 },
    decided: audiences.filter((r) => chosen.has(r.audience_key)),
  };
}

/** Records every pending approval past its expiry as expired; null when none is. */
export function expire(approvals: ExecutionApprovals, now: Date): DecideOutcome | null {
  const due = approvals.audiences.filter((r) => r.state === 'pending' && Date.parse(r.expires_at) <= now.getTime());
  if (due.length === 0) return null;
  const keys = new Set(due.map((r) => r.audience_key));
  const audiences = approvals.audiences.map((r) =>
    keys.has(r.audience_key) ? { ...r, state: 'expired' as const } : r,
  );
  return {
    next: { ...approvals, audiences, rev: approvals.rev + 1 },
    decided: audiences.filter((r) => keys.has(r.audience_key)),
  };
}

/** Withdraws every pending approval (a retraction of the execution): rejected, by whom and why. */
export function withdraw(approvals: ExecutionApprovals, actor: Actor, reason: string, now: Date): DecideOutcome | null {
  const open = approvals.audiences.filter((r) => r.state === 'pending');
  if (open.length === 0) return null;
  const keys = new Set(open.map((r) => r.audience_key));
  const at = iso(now);
  const audiences = approvals.audiences.map((r) =>
    keys.has(r.audience_key) ? { ...r, state: 'rejected' as const, decided_by: actor, decided_at: at, reason } : r,
  );
  return {
    next: { ...approvals, audiences, rev: approvals.rev + 1 },
    decided: audiences.filter((r) => keys.has(r.audience_key)),
  };
}

/** When the next pending approval expires (ms), or null when none is pending. */
export function nextExpiry(approvals: ExecutionApprovals): number | null {
  const times = approvals.audiences.filter((r) => r.state === 'pending').map((r) => Date.parse(r.expires_at));
  return times.length === 0 ? null : Math.min(...times);
}

/** The approvals whose approvers were not told of their current state yet. */
export const unnotified = (approvals: ExecutionApprovals): ApprovalRecord[] =>
  approvals.audiences.filter((r) => r.notified_state !== r.state);

function notPending(r: ApprovalRecord): DomainError {
  return new DomainError('not_pending', describe(r), [], {
    audience: r.audience_key,
    state: r.state === 'pending' ? 'expired' : r.state,
  });
}

function notAnApprover(r: ApprovalRecord): DomainError {
  return new DomainError(
    'not_an_approver',
    `You are not an approver of ${r.audience_key}: only its named approvers may decide its approval.`,
    [],
    { audience: r.audience_key },
  );
}

function fourEyes(r: ApprovalRecord): DomainError {
  return new DomainError(
    'four_eyes',
    `You asked for this send to ${r.audience_key}; with four-eyes on, another approver must decide it.`,
    [],
    { audience: r.audience_key },
  );
}
