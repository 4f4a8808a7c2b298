import { describe, expect, it } from 'vitest';
import {
  cancel,
  DELIVERY_TRANSITIONS,
  holdForPacing,
  holdForThread,
  INTERRUPTED_ERROR,
  interruptedAttempt,
  isRefused,
  recordDelivered,
  recordFailed,
  recordInterrupted,
  recordRetry,
  release,
  requeue,
  roundBudgetAfter,
  sendAttempt,
  startSending,
  supersede,
  TransitionRefused,
  type DeliveryTransition,
  type Transitioned,
} from '../../src/domain/execution/delivery-state.js';
import { DomainError } from '../../src/domain/common/errors.js';
import {
  ATTEMPT_OUTCOMES,
  DELIVERY_STATUSES,
  newDelivery,
  type Attempt,
  type Delivery,
  type DeliveryStatus,
} from '../../src/domain/execution/execution.js';

/**
 * Every edge of the delivery state machine: each legal transition from each status gives exactly
 * the record written out here (by hand, not from the implementation's tables), and every other
 * (status × transition) is refused without touching the delivery.
 */

const T0 = '2026-11-22T09:00:00.000Z';
const SENT_AT = '2026-11-22T09:59:58.000Z';
const NOW = new Date('2026-11-22T10:00:00.000Z');
const NOW_ISO = NOW.toISOString();
const LATER = new Date('2026-11-22T10:00:30.000Z');
const LATER_ISO = LATER.toISOString();
const OLD_NOT_BEFORE = '2026-11-22T09:30:00.000Z';

const attempt = (outcome: Attempt['outcome'], at = T0): Attempt => ({
  at,
  outcome,
  http_status:
    outcome === 'delivered'
      ? 200
      : outcome === 'retryable_failure'
        ? 503
        : outcome === 'permanent_failure'
          ? 400
          : null,
  provider_code: null,
  latency_ms: outcome === 'interrupted' || outcome === 'cancelled' ? null : 12,
  retry_after_ms: null,
  error: outcome === 'delivered' ? null : `${outcome} error`,
});

const DELIVERED = attempt('delivered', SENT_AT);
const RETRYABLE = attempt('retryable_failure', SENT_AT);
const PERMANENT = attempt('permanent_failure', SENT_AT);

/**
 * A delivery in `status`, deliberately "dirty" — a wait, a pacing slot, an earlier attempt, a
 * later round — so a transition that forgets to set or clear a field is caught.
 */
function fixture(status: DeliveryStatus): Delivery {
  const d = newDelivery({
    id: 'dlv_01',
    executionId: 'exe_01',
    incidentId: 'inc_01',
    connectionId: 'con_01',
    connectionType: 'webhook',
    templateId: 'tpl_01',
    templateVersion: 3,
    content: { subject: 's', body: 'b' },
  });
  const terminal = status === 'delivered' || status === 'failed' || status === 'cancelled';
  return {
    ...d,
    status,
    attempts: [attempt('retryable_failure'), attempt('retryable_failure'), attempt('interrupted')],
    possible_duplicate: false,
    delivered_at: status === 'delivered' ? T0 : null,
    finished_at: terminal ? T0 : null,
    sending_since: status === 'sending' ? SENT_AT : null,
    round: 1,
    round_start: 1,
    not_before: status === 'sending' ? null : OLD_NOT_BEFORE,
    paced: status !== 'sending',
    rev: 7,
  };
}

interface Edge {
  /** Where this transition is legal, written out independently of the implementation. */
  legalFrom: DeliveryStatus[];
  /** Adjusts the fixture for the legal case (e.g. no pacing slot held yet). */
  prepare?: (d: Delivery) => Delivery;
  run: (d: Delivery) => Transitioned;
  /** The exact next record. */
  expected: (d: Delivery) => Delivery;
}

const EDGES: Record<DeliveryTransition, Edge> = {
  holdForPacing: {
    legalFrom: ['queued', 'retrying'],
    prepare: (d) => ({ ...d, paced: false, not_before: null }),
    run: (d) => holdForPacing(d, LATER),
    expected: (d) => ({ ...d, not_before: LATER_ISO, paced: true, rev: 8 }),
  },
  holdForThread: {
    legalFrom: ['queued', 'retrying'],
    run: (d) => holdForThread(d, 'dlv_00', NOW),
    expected: (d) => ({ ...d, thread_wait: { delivery_id: 'dlv_00', since: NOW_ISO }, rev: 8 }),
  },
  startSending: {
    legalFrom: ['queued', 'retrying'],
    run: (d) => startSending(d, NOW),
    expected: (d) => ({ ...d, status: 'sending', sending_since: NOW_ISO, not_before: null, paced: false, rev: 8 }),
  },
  recordInterrupted: {
    legalFrom: ['sending'],
    run: (d) => recordInterrupted(d, NOW),
    expected: (d) => ({
      ...d,
      status: 'retrying',
      sending_since: null,
      possible_duplicate: true,
      attempts: [
        ...d.attempts,
        {
          at: NOW_ISO,
          outcome: 'interrupted',
          http_status: null,
          provider_code: null,
          latency_ms: null,
          retry_after_ms: null,
          error: 'the attempt was cut off (worker stopped); it may have been delivered',
        },
      ],
      rev: 8,
    }),
  },
  recordDelivered: {
    legalFrom: ['sending'],
    run: (d) => recordDelivered(d, DELIVERED, NOW),
    expected: (d) => ({
      ...d,
      status: 'delivered',
      attempts: [...d.attempts, DELIVERED],
      sending_since: null,
      delivered_at: NOW_ISO,
      finished_at: NOW_ISO,
      rev: 8,
    }),
  },
  recordRetry: {
    legalFrom: ['sending'],
    prepare: (d) => ({ ...d, paced: true }),
    run: (d) => recordRetry(d, RETRYABLE, { notBefore: LATER, ambiguous: false }),
    expected: (d) => ({
      ...d,
      status: 'retrying',
      attempts: [...d.attempts, RETRYABLE],
      sending_since: null,
      not_before: LATER_ISO,
      paced: false,
      possible_duplicate: false,
      rev: 8,
    }),
  },
  recordFailed: {
    legalFrom: ['sending'],
    run: (d) => recordFailed(d, PERMANENT, NOW),
    expected: (d) => ({
      ...d,
      status: 'failed',
      attempts: [...d.attempts, PERMANENT],
      sending_since: null,
      finished_at: NOW_ISO,
      possible_duplicate: false,
      rev: 8,
    }),
  },
  cancel: {
    legalFrom: ['pending_approval', 'queued', 'retrying', 'sending'],
    run: (d) => cancel(d, 'connection deleted', NOW),
    expected: (d) => ({
      ...d,
      status: 'cancelled',
      finished_at: NOW_ISO,
      sending_since: null,
      not_before: null,
      paced: false,
      attempts: [
        ...d.attempts,
        {
          at: NOW_ISO,
          outcome: 'cancelled',
          http_status: null,
          provider_code: null,
          latency_ms: null,
          retry_after_ms: null,
          error: 'connection deleted',
        },
      ],
      rev: 8,
    }),
  },
  requeue: {
    legalFrom: ['failed'],
    run: (d) => requeue(d),
    expected: (d) => ({
      ...d,
      status: 'queued',
      finished_at: null,
      round: 2,
      round_start: 3,
      not_before: null,
      paced: false,
      rev: 8,
    }),
  },
  release: {
    legalFrom: ['pending_approval'],
    run: (d) => release(d, { sequence: 4, previousDeliveryId: 'dlv_00' }),
    expected: (d) => ({ ...d, status: 'queued', sequence: 4, previous_delivery_id: 'dlv_00', rev: 8 }),
  },
};

const clone = (d: Delivery): Delivery => structuredClone(d);

describe('the delivery state machine', () => {
  it('covers every transition the module exports', () => {
    expect(Object.keys(EDGES).sort()).toEqual([...DELIVERY_TRANSITIONS].sort());
  });

  const legal = DELIVERY_TRANSITIONS.flatMap((t) => EDGES[t].legalFrom.map((s) => [t, s] as const));
  const illegal = DELIVERY_TRANSITIONS.flatMap((t) =>
    DELIVERY_STATUSES.filter((s) => !EDGES[t].legalFrom.includes(s)).map((s) => [t, s] as const),
  );

  it('has the edges of docs/explanation/delivery-semantics.md and no others', () => {
    // 2 + 2 + 2 + 1 + 1 + 1 + 1 + 4 + 1 + 1 legal edges; the other 70 − 16 pairs are refused.
    expect(legal).toHaveLength(16);
    expect(illegal).toHaveLength(DELIVERY_TRANSITIONS.length * DELIVERY_STATUSES.length - 16);
  });

  it.each(legal)('%s from %s gives exactly the next record, leaving the input untouched', (t, status) => {
    const edge = EDGES[t];
    const d = (edge.prepare ?? ((x) => x))(fixture(status));
    const before = clone(d);
    const next = edge.run(d);
    expect(isRefused(next)).toBe(false);
    expect(next).toEqual(edge.expected(before));
    expect(d).toEqual(before);
  });

  it.each(illegal)('%s from %s is refused (invalid_transition), leaving the input untouched', (t, status) => {
    const edge = EDGES[t];
    const d = (edge.prepare ?? ((x) => x))(fixture(status));
    const before = clone(d);
    const r = edge.run(d);
    expect(r).toBeInstanceOf(TransitionRefused);
    expect(r).toBeInstanceOf(DomainError);
    const refused = r as TransitionRefused;
    expect(refused.code).toBe('invalid_transition');
    expect(refused.transition).toBe(t);
    expect(refused.from).toBe(status);
    expect(refused.meta).toEqual({ transition: t, from: status });
    expect(refused.message).toContain(`${t} refused`);
    expect(d).toEqual(before);
  });
});

describe('rules beyond the status', () => {
  it('holdForThread: a delivery waits for its first message once; startSending ends the wait on the receipt', () => {
    for (const status of ['queued', 'retrying'] as const) {
      const waiting = { ...fixture(status), thread_wait: { delivery_id: 'dlv_00', since: T0 } };
      const again = holdForThread(waiting, 'dlv_00', NOW);
      expect(again).toBeInstanceOf(TransitionRefused);
      expect((again as TransitionRefused).message).toMatch(/first message already/);
      const waited = { delivery_id: 'dlv_00', ms: 4_800, outcome: 'delivered' as const };
      const sending = startSending(waiting, NOW, waited) as Delivery;
      expect(sending.thread_wait).toBeUndefined();
      expect(sending.waited_for).toEqual(waited);
      expect(holdForThread({ ...fixture(status), waited_for: waited }, 'dlv_00', NOW)).toBeInstanceOf(
        TransitionRefused,
      );
    }
  });

  it('holdForPacing: a delivery reserves its pacing slot once', () => {
    for (const status of ['queued', 'retrying'] as const) {
      const r = holdForPacing({ ...fixture(status), paced: true }, LATER);
      expect(r).toBeInstanceOf(TransitionRefused);
      expect((r as TransitionRefused).message).toMatch(/pacing slot already/);
    }
  });

  const recorders = {
    recordDelivered: { ok: ['delivered'], run: (d: Delivery, a: Attempt) => recordDelivered(d, a, NOW) },
    recordRetry: {
      ok: ['retryable_failure'],
      run: (d: Delivery, a: Attempt) => recordRetry(d, a, { notBefore: LATER, ambiguous: false }),
    },
    recordFailed: {
      ok: ['retryable_failure', 'permanent_failure', 'interrupted'],
      run: (d: Delivery, a: Attempt) => recordFailed(d, a, NOW),
    },
  } as const;
  const cases = Object.entries(recorders).flatMap(([name, r]) =>
    ATTEMPT_OUTCOMES.map((o) => [name, o, (r.ok as readonly string[]).includes(o)] as const),
  );

  it.each(cases)('%s with a %s attempt: accepted = %s', (name, outcome, ok) => {
    const r = recorders[name as keyof typeof recorders].run(fixture('sending'), attempt(outcome, SENT_AT));
    if (ok) {
      expect(isRefused(r)).toBe(false);
    } else {
      expect(r).toBeInstanceOf(TransitionRefused);
      expect((r as TransitionRefused).message).toContain(`the attempt is ${outcome}`);
    }
  });

  it('recordRetry: an ambiguous failure flags possible_duplicate, and a set flag stays', () => {
    const s = fixture('sending');
    expect((recordRetry(s, RETRYABLE, { notBefore: LATER, ambiguous: true }) as Delivery).possible_duplicate).toBe(
      true,
    );
    expect(
      (recordRetry({ ...s, possible_duplicate: true }, RETRYABLE, { notBefore: LATER, ambiguous: false }) as Delivery)
        .possible_duplicate,
    ).toBe(true);
  });

  it('recordFailed: an interrupted last attempt flags possible_duplicate; a set flag stays; other failures leave it', () => {
    const s = fixture('sending');
    const cut = interruptedAttempt(NOW);
    expect(recordFailed(s, cut, NOW)).toEqual({
      ...s,
      status: 'failed',
      attempts: [...s.attempts, cut],
      sending_since: null,
      finished_at: NOW_ISO,
      possible_duplicate: true,
      rev: 8,
    });
    expect((recordFailed(s, RETRYABLE, NOW) as Delivery).possible_duplicate).toBe(false);
    expect((recordFailed({ ...s, possible_duplicate: true }, PERMANENT, NOW) as Delivery).possible_duplicate).toBe(
      true,
    );
  });

  it('recordInterrupted keeps a flag already set and any wait the record carries', () => {
    const s = { ...fixture('sending'), possible_duplicate: true };
    const next = recordInterrupted(s, NOW) as Delivery;
    expect(next.possible_duplicate).toBe(true);
    expect(next.not_before).toBeNull();
    expect(next.paced).toBe(false);
  });

  it('requeue keeps possible_duplicate and every earlier attempt', () => {
    const f = { ...fixture('failed'), possible_duplicate: true };
    const next = requeue(f) as Delivery;
    expect(next.possible_duplicate).toBe(true);
    expect(next.attempts).toEqual(f.attempts);
  });
});

describe('attempt records and the round budget', () => {
  it('interruptedAttempt: at now, no transport facts, the cut-off error', () => {
    expect(interruptedAttempt(NOW)).toEqual({
      at: NOW_ISO,
      outcome: 'interrupted',
      http_status: null,
      provider_code: null,
      latency_ms: null,
      retry_after_ms: null,
      error: INTERRUPTED_ERROR,
    });
  });

  it('sendAttempt maps each send outcome, starting at sending_since, latency rounded', () => {
    const s = fixture('sending');
    expect(sendAttempt(s, { outcome: 'delivered', httpStatus: 200, providerCode: 'ok', latencyMs: 12.6 }, NOW)).toEqual(
      {
        at: SENT_AT,
        outcome: 'delivered',
        http_status: 200,
        provider_code: 'ok',
        latency_ms: 13,
        retry_after_ms: null,
        error: null,
      },
    );
    expect(
      sendAttempt(
        s,
        {
          outcome: 'retryable',
          httpStatus: 429,
          providerCode: null,
          latencyMs: null,
          retryAfterMs: 5000,
          error: 'HTTP 429',
        },
        NOW,
      ),
    ).toEqual({
      at: SENT_AT,
      outcome: 'retryable_failure',
      http_status: 429,
      provider_code: null,
      latency_ms: null,
      retry_after_ms: 5000,
      error: 'HTTP 429',
    });
    const permanent = {
      outcome: 'permanent',
      httpStatus: 404,
      providerCode: 'gone',
      latencyMs: 3.2,
      error: 'HTTP 404',
      retryAfterMs: 9,
    } as const;
    expect(sendAttempt(s, permanent, NOW)).toEqual({
      at: SENT_AT,
      outcome: 'permanent_failure',
      http_status: 404,
      provider_code: 'gone',
      latency_ms: 3,
      retry_after_ms: null,
      error: 'HTTP 404',
    });
    // No start on record: the attempt is dated now.
    expect(
      sendAttempt(
        { ...s, sending_since: null },
        { outcome: 'delivered', httpStatus: 200, providerCode: null, latencyMs: 1 },
        NOW,
      ).at,
    ).toBe(NOW_ISO);
  });

  it('roundBudgetAfter counts the attempts of the current round, the new one included, and the time since its first', () => {
    const s = fixture('sending'); // 3 attempts, round_start 1: two in this round so far, the first at T0
    expect(roundBudgetAfter(s, RETRYABLE, NOW)).toEqual({ attemptsMade: 3, elapsedMs: NOW.getTime() - Date.parse(T0) });
    // A fresh round (redeliver): the new attempt is its first.
    const fresh = { ...s, round_start: 3 };
    expect(roundBudgetAfter(fresh, RETRYABLE, NOW)).toEqual({
      attemptsMade: 1,
      elapsedMs: NOW.getTime() - Date.parse(SENT_AT),
    });
    // Never negative (an attempt dated after now).
    expect(roundBudgetAfter(fresh, attempt('retryable_failure', LATER_ISO), NOW)).toEqual({
      attemptsMade: 1,
      elapsedMs: 0,
    });
  });

  it('supersede puts the computed record on top of the latest revision', () => {
    const next = recordDelivered(fixture('sending'), DELIVERED, NOW) as Delivery;
    const latest = cancel(fixture('queued'), 'connection deleted', NOW) as Delivery;
    expect(supersede(next, { ...latest, rev: 11 })).toEqual({ ...next, rev: 12 });
  });
});
