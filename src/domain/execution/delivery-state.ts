import { iso } from '../common/clock.js';
import { DomainError } from '../common/errors.js';
import type { Attempt, Delivery, DeliveryStatus } from './execution.js';
import type { WaitedFor } from './conversation.js';

/**
 * The delivery state machine (docs/explanation/delivery-semantics.md), as pure transitions: each takes the
 * delivery as read, checks that the move is legal from its status, and returns the next record
 * (status, attempts, receipt fields, timestamps, `rev` + 1) or a TransitionRefused. No I/O and no
 * clock: time is a parameter. Deciding *whether* to retry (the budget, the backoff) is
 * delivery-policy's; the service decides, these record the decision.
 *
 *   queued ─┬─ holdForPacing ─▶ queued (a pacing slot is reserved: not_before, paced)
 *           ├─ holdForThread ─▶ queued (it waits for its conversation's first message: thread_wait)
 *           ├─ startSending ──▶ sending
 *           └─ cancel ────────▶ cancelled
 *   retrying  as queued (holdForPacing, holdForThread ▶ retrying, startSending, cancel)
 *   sending ─┬─ recordDelivered ──▶ delivered
 *            ├─ recordRetry ──────▶ retrying   (a retryable failure, with its not_before)
 *            ├─ recordInterrupted ▶ retrying   (found cut off: its worker died mid-send)
 *            ├─ recordFailed ─────▶ failed     (permanent, or out of budget)
 *            └─ cancel ───────────▶ cancelled  (a cut-off send whose connection is gone)
 *   failed ── requeue (redeliver) ▶ queued     (a new round with a fresh budget)
 *   pending_approval ─┬─ release ─▶ queued     (its audience approved: its place in the conversation)
 *                     └─ cancel ──▶ cancelled  (rejected, expired, withdrawn, or its connection went)
 *   delivered, cancelled: terminal, nothing leaves them.
 */

export const DELIVERY_TRANSITIONS = [
  'holdForPacing',
  'holdForThread',
  'startSending',
  'recordInterrupted',
  'recordDelivered',
  'recordRetry',
  'recordFailed',
  'cancel',
  'requeue',
  'release',
] as const;
export type DeliveryTransition = (typeof DELIVERY_TRANSITIONS)[number];

/** The statuses each transition may leave from; any other is refused. */
const LEGAL_FROM: Record<DeliveryTransition, readonly DeliveryStatus[]> = {
  holdForPacing: ['queued', 'retrying'],
  holdForThread: ['queued', 'retrying'],
  startSending: ['queued', 'retrying'],
  recordInterrupted: ['sending'],
  recordDelivered: ['sending'],
  recordRetry: ['sending'],
  recordFailed: ['sending'],
  cancel: ['pending_approval', 'queued', 'retrying', 'sending'],
  requeue: ['failed'],
  release: ['pending_approval'],
};

/** A transition that is not legal from the delivery as it is: nothing changes. */
export class TransitionRefused extends DomainError {
  readonly transition: DeliveryTransition;
  readonly from: DeliveryStatus;

  constructor(transition: DeliveryTransition, d: Pick<Delivery, 'id' | 'status'>, why: string) {
    super('invalid_transition', `Delivery ${d.id} (${d.status}): ${transition} refused: ${why}.`, [], {
      transition,
      from: d.status,
    });
    this.name = 'TransitionRefused';
    this.transition = transition;
    this.from = d.status;
  }
}

export type Transitioned = Delivery | TransitionRefused;

export const isRefused = (t: Transitioned): t is TransitionRefused => t instanceof TransitionRefused;

function statusRefusal(transition: DeliveryTransition, d: Delivery): TransitionRefused | null {
  return LEGAL_FROM[transition].includes(d.status)
    ? null
    : new TransitionRefused(transition, d, `not from ${d.status}`);
}

/** The error text of an attempt found cut off. */
export const INTERRUPTED_ERROR = 'the attempt was cut off (worker stopped); it may have been delivered';

function attemptRecord(at: string, outcome: Attempt['outcome'], error: string | null): Attempt {
  return { at, outcome, http_status: null, provider_code: null, latency_ms: null, retry_after_ms: null, error };
}

/** The attempt recorded for a send found cut off (its worker died): it may have been received. */
export const interruptedAttempt = (now: Date): Attempt => attemptRecord(iso(now), 'interrupted', INTERRUPTED_ERROR);

/** What one send reported (the shape of the senders' SendResult). */
export type SendReport =
  | { outcome: 'delivered'; httpStatus: number | null; providerCode: string | null; latencyMs: number }
  | {
      outcome: 'retryable';
      httpStatus: number | null;
      providerCode: string | null;
      latencyMs: number | null;
      retryAfterMs: number | null;
      error: string;
    }
  | {
      outcome: 'permanent';
      httpStatus: number | null;
      providerCode: string | null;
      latencyMs: number | null;
      error: string;
    };

/**
 * The receipt of one send: it started when the delivery was marked sending (`sending_since`), or
 * now when that is unknown. Latency is whole milliseconds; Retry-After only on a retryable failure.
 */
export function sendAttempt(sending: Delivery, r: SendReport, now: Date): Attempt {
  return {
    at: sending.sending_since ?? iso(now),
    outcome:
      r.outcome === 'delivered' ? 'delivered' : r.outcome === 'retryable' ? 'retryable_failure' : 'permanent_failure',
    http_status: r.httpStatus,
    provider_code: r.providerCode,
    latency_ms: r.latencyMs === null ? null : Math.round(r.latencyMs),
    retry_after_ms: r.outcome === 'retryable' ? r.retryAfterMs : null,
    error: r.outcome === 'delivered' ? null : r.error,
  };
}

/**
 * The retry budget spent once `attempt` is recorded: attempts of the current round (a redeliver
 * starts a new one) and the time since the round's first attempt started — the inputs of
 * delivery-policy's decideRetry.
 */
export function roundBudgetAfter(
  d: Delivery,
  attempt: Attempt,
  now: Date,
): { attemptsMade: number; elapsedMs: number } {
  const attempts = [...d.attempts, attempt];
  const first = attempts[d.round_start];
  return {
    attemptsMade: attempts.length - d.round_start,
    elapsedMs: first ? Math.max(0, now.getTime() - Date.parse(first.at)) : 0,
  };
}

/**
 * queued|retrying → same status: a pacing slot is reserved for `notBefore`. Pacing is no attempt
 * and nothing a reader sees changes. A delivery reserves its slot once: refused when it holds one.
 */
export function holdForPacing(d: Delivery, notBefore: Date): Transitioned {
  const refused = statusRefusal('holdForPacing', d);
  if (refused) return refused;
  if (d.paced) return new TransitionRefused('holdForPacing', d, 'it holds a pacing slot already');
  return { ...d, not_before: iso(notBefore), paced: true, rev: d.rev + 1 };
}

/**
 * queued|retrying → same status: it continues a conversation whose first message (`firstId`) is
 * still being sent, and waits for it from `now`. The start is kept on the record, so the wait's
 * bound holds across worker restarts; nothing a reader sees changes. A delivery waits once:
 * refused when it waits already or has waited before.
 */
export function holdForThread(d: Delivery, firstId: string, now: Date): Transitioned {
  const refused = statusRefusal('holdForThread', d);
  if (refused) return refused;
  if (d.thread_wait || d.waited_for)
    return new TransitionRefused('holdForThread', d, 'it waits, or has waited, for the first message already');
  return { ...d, thread_wait: { delivery_id: firstId, since: iso(now) }, rev: d.rev + 1 };
}

/**
 * queued|retrying → sending: an attempt starts now; its wait (not_before, pacing slot, the first
 * message) is spent. `waited` is how a wait for the first message ended, for the receipt.
 */
export function startSending(d: Delivery, now: Date, waited: WaitedFor | null = null): Transitioned {
  const refused = statusRefusal('startSending', d);
  if (refused) return refused;
  const { thread_wait: _spent, ...rest } = d;
  return {
    ...rest,
    status: 'sending',
    sending_since: iso(now),
    not_before: null,
    paced: false,
    ...(waited ? { waited_for: waited } : {}),
    rev: d.rev + 1,
  };
}

/**
 * sending → retrying: the last attempt started and never finished (its worker died). It is
 * recorded as `interrupted`, an attempt of the budget, and flags `possible_duplicate`; our own
 * crash is no reason to back off, so no not_before is set. (When the budget is spent, the
 * interrupted attempt goes to recordFailed instead.)
 */
export function recordInterrupted(d: Delivery, now: Date): Transitioned {
  const refused = statusRefusal('recordInterrupted', d);
  if (refused) return refused;
  return {
    ...d,
    status: 'retrying',
    sending_since: null,
    possible_duplicate: true,
    attempts: [...d.attempts, interruptedAttempt(now)],
    rev: d.rev + 1,
  };
}

/** The attempt, appended, with the in-flight marker cleared. */
const withAttempt = (d: Delivery, attempt: Attempt): Delivery => ({
  ...d,
  attempts: [...d.attempts, attempt],
  sending_since: null,
  rev: d.rev + 1,
});

/** sending → delivered: the receipt is recorded; delivered_at and finished_at are now. */
export function recordDelivered(d: Delivery, attempt: Attempt, now: Date): Transitioned {
  const refused = statusRefusal('recordDelivered', d);
  if (refused) return refused;
  if (attempt.outcome !== 'delivered')
    return new TransitionRefused('recordDelivered', d, `the attempt is ${attempt.outcome}`);
  const at = iso(now);
  return { ...withAttempt(d, attempt), status: 'delivered', delivered_at: at, finished_at: at };
}

/**
 * sending → retrying: a retryable failure, to be tried again not before `notBefore` (backoff or
 * Retry-After; a fresh pacing slot will be reserved). An ambiguous failure (the platform may have
 * received it) flags `possible_duplicate`; the flag, once set, stays.
 */
export function recordRetry(
  d: Delivery,
  attempt: Attempt,
  retry: { notBefore: Date; ambiguous: boolean },
): Transitioned {
  const refused = statusRefusal('recordRetry', d);
  if (refused) return refused;
  if (attempt.outcome !== 'retryable_failure')
    return new TransitionRefused('recordRetry', d, `the attempt is ${attempt.outcome}`);
  return {
    ...withAttempt(d, attempt),
    status: 'retrying',
    not_before: iso(retry.notBefore),
    paced: false,
    possible_duplicate: d.possible_duplicate || retry.ambiguous,
  };
}

const FAILED_ATTEMPTS: ReadonlySet<Attempt['outcome']> = new Set([
  'retryable_failure',
  'permanent_failure',
  'interrupted',
]);

/**
 * sending → failed: a permanent failure, or a retryable or interrupted one with the budget spent.
 * finished_at is now; an interrupted last attempt flags `possible_duplicate`.
 */
export function recordFailed(d: Delivery, attempt: Attempt, now: Date): Transitioned {
  const refused = statusRefusal('recordFailed', d);
  if (refused) return refused;
  if (!FAILED_ATTEMPTS.has(attempt.outcome))
    return new TransitionRefused('recordFailed', d, `the attempt is ${attempt.outcome}`);
  const next: Delivery = { ...withAttempt(d, attempt), status: 'failed', finished_at: iso(now) };
  return attempt.outcome === 'interrupted' ? { ...next, possible_duplicate: true } : next;
}

/**
 * queued|retrying|sending → cancelled (its connection was deleted or disabled). The reason is
 * recorded as a `cancelled` attempt; any wait or in-flight marker is dropped. Whether one being
 * sent right now may be cancelled is the caller's call (only a cut-off one is).
 */
export function cancel(d: Delivery, reason: string, now: Date): Transitioned {
  const refused = statusRefusal('cancel', d);
  if (refused) return refused;
  const at = iso(now);
  return {
    ...d,
    status: 'cancelled',
    finished_at: at,
    sending_since: null,
    not_before: null,
    paced: false,
    attempts: [...d.attempts, attemptRecord(at, 'cancelled', reason)],
    rev: d.rev + 1,
  };
}

/**
 * failed → queued (redeliver): a new round (a fresh job id) with a fresh budget counted from its
 * first new attempt. Earlier attempts stay on record, and `possible_duplicate` stays if set.
 */
export function requeue(d: Delivery): Transitioned {
  const refused = statusRefusal('requeue', d);
  if (refused) return refused;
  return {
    ...d,
    status: 'queued',
    finished_at: null,
    round: d.round + 1,
    round_start: d.attempts.length,
    not_before: null,
    paced: false,
    rev: d.rev + 1,
  };
}

/**
 * pending_approval → queued: its audience was approved. It takes its place in the conversation
 * now (not at execute), so a held message never sits in a thread that others reply under.
 */
export function release(d: Delivery, place: { sequence: number; previousDeliveryId: string | null }): Transitioned {
  const refused = statusRefusal('release', d);
  if (refused) return refused;
  return {
    ...d,
    status: 'queued',
    sequence: place.sequence,
    previous_delivery_id: place.previousDeliveryId,
    rev: d.rev + 1,
  };
}

/**
 * A recorded send wins over whatever raced its write (a cancel): the record computed from the
 * `sending` state, written over the latest revision.
 */
export const supersede = (next: Delivery, latest: Pick<Delivery, 'rev'>): Delivery => ({
  ...next,
  rev: latest.rev + 1,
});
