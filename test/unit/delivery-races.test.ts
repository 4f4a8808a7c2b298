import { describe, expect, it } from 'vitest';
import { InMemoryConversationRepo, sendPacerOver } from '../service/fakes.js';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import { newDelivery, type Attempt, type Delivery } from '../../src/domain/execution/execution.js';
import type {
  ChannelSenders,
  DeliveryTarget,
  ExecutionRepo,
  OutboundMessage,
  SendResult,
} from '../../src/ports/index.js';
import type { Incident } from '../../src/domain/incident/incident.js';
import { DeliveryService } from '../../src/services/deliveries.js';
import { DELIVERY_WRITE_ATTEMPTS } from '../../src/services/retry.js';
import { targetOf } from '../support/delivery-targets.js';

/**
 * The delivery service's compare-and-set loops, against an in-memory store that can be told to
 * lose races: a job that keeps losing looks again later; a recorded send wins over a racing
 * cancel; a cancel leaves a delivery being sent (and a finished one) alone and gives up after
 * DELIVERY_WRITE_ATTEMPTS lost races.
 */

const NOW = Date.parse('2026-11-22T10:00:00.000Z');
const delivered: SendResult = { outcome: 'delivered', httpStatus: 200, providerCode: null, latencyMs: 1 };

class MemoryRepo {
  readonly rows = new Map<string, Delivery>();
  writes = 0;
  /** Writes to refuse (a concurrent writer got there first) before any is let through. */
  lose = 0;
  /** Run after a write is refused (e.g. the racing writer's change). */
  onLose: (() => void) | null = null;

  getDelivery(id: string): Promise<Delivery | null> {
    return Promise.resolve(structuredClone(this.rows.get(id) ?? null));
  }
  updateDelivery(prev: Delivery, next: Delivery): Promise<boolean> {
    this.writes++;
    if (this.lose > 0) {
      this.lose--;
      this.onLose?.();
      return Promise.resolve(false);
    }
    const cur = this.rows.get(prev.id);
    if (!cur || cur.rev !== prev.rev) return Promise.resolve(false);
    this.rows.set(next.id, structuredClone(next));
    return Promise.resolve(true);
  }
  activeForConnection(connectionId: string): Promise<string[]> {
    return Promise.resolve([...this.rows.values()].filter((d) => d.connection_id === connectionId).map((d) => d.id));
  }
}

function rig(getIncident: (id: string) => Promise<Incident | null> = () => Promise.resolve(null)) {
  const ids = createIdGenerator(() => NOW);
  const target = targetOf('webhook', {
    url: 'https://hooks.example.com/in',
    secret: 'whsec_dGVzdHRlc3R0ZXN0dGVzdA==',
  }) as DeliveryTarget;
  const repo = new MemoryRepo();
  const sends: OutboundMessage[] = [];
  const attempts: Attempt[] = [];
  const removed: string[] = [];
  let onSend: () => void = () => undefined;
  const add = (over: Partial<Delivery> = {}): Delivery => {
    const d = {
      ...newDelivery({
        id: ids.next('delivery'),
        executionId: 'exe_1',
        incidentId: 'inc_1',
        connectionId: target.id,
        connectionType: 'webhook',
        templateId: null,
        templateVersion: null,
        content: { subject: 's', body: 'b' },
      }),
      ...over,
    };
    repo.rows.set(d.id, d);
    return d;
  };
  const service = new DeliveryService({
    repo: repo as unknown as ExecutionRepo,
    targets: {
      get: () => Promise.resolve(target),
      disable: () => Promise.resolve(),
      recordOutcome: () => Promise.resolve(),
    },
    senders: {
      webhook: {
        send: (_t: DeliveryTarget, m: OutboundMessage) => {
          sends.push(m);
          onSend();
          return Promise.resolve(delivered);
        },
      },
    } as unknown as ChannelSenders,
    pacer: sendPacerOver(
      { reserve: () => Promise.resolve(0), take: () => Promise.resolve(0), reset: () => Promise.resolve() },
      repo,
    ),
    queue: { enqueue: () => Promise.resolve(), remove: (jobIds) => (removed.push(...jobIds), Promise.resolve()) },
    clock: { now: () => new Date(NOW) },
    ids,
    random: () => 1,
    getIncident,
    conversations: new InMemoryConversationRepo(),
    publicUrl: null,
    onAttempt: (_d, a) => attempts.push(a),
  });
  return {
    service,
    repo,
    sends,
    attempts,
    removed,
    add,
    target,
    set onSend(fn: () => void) {
      onSend = fn;
    },
  };
}

describe('the delivery service under racing writes', () => {
  it('a job that keeps losing its first write looks again later, having sent nothing', async () => {
    const r = rig();
    const d = r.add();
    r.repo.lose = Infinity;
    expect(await r.service.process(d.id)).toEqual({ kind: 'delay', ms: 1000, reason: 'retry' });
    expect(r.repo.writes).toBe(DELIVERY_WRITE_ATTEMPTS);
    expect(r.sends).toHaveLength(0);
  });

  it('a job that loses a few times goes on once it wins', async () => {
    const r = rig();
    const d = r.add();
    r.repo.lose = DELIVERY_WRITE_ATTEMPTS - 1;
    expect(await r.service.process(d.id)).toEqual({ kind: 'done', status: 'delivered' });
    expect(r.sends).toHaveLength(1);
  });

  it("a send's record wins over a cancel that raced it", async () => {
    const r = rig();
    const d = r.add();
    // While the message is out, its connection is deleted and the delivery cancelled.
    r.onSend = () => {
      const cur = r.repo.rows.get(d.id)!;
      r.repo.rows.set(d.id, {
        ...cur,
        status: 'cancelled',
        sending_since: null,
        finished_at: new Date(NOW).toISOString(),
        rev: cur.rev + 1,
      });
    };
    expect(await r.service.process(d.id)).toEqual({ kind: 'done', status: 'delivered' });
    const stored = r.repo.rows.get(d.id)!;
    expect(stored.status).toBe('delivered');
    expect(stored.attempts.map((a) => a.outcome)).toEqual(['delivered']);
    // queued (1) → sending (2) → cancelled by the racer (3) → the send's record on top (4).
    expect(stored.rev).toBe(4);
    expect(r.attempts.map((a) => a.outcome)).toEqual(['delivered']);
  });

  it('a send whose record keeps losing is still reported, and its outcome stands', async () => {
    const r = rig();
    const d = r.add();
    r.onSend = () => {
      r.repo.lose = Infinity;
    };
    expect(await r.service.process(d.id)).toEqual({ kind: 'done', status: 'delivered' });
    // One write marking it sending, then the bounded attempts at recording the send.
    expect(r.repo.writes).toBe(1 + DELIVERY_WRITE_ATTEMPTS);
    expect(r.attempts.map((a) => a.outcome)).toEqual(['delivered']);
  });

  it("cancelling a connection's deliveries skips one being sent and finished ones, and gives up on one that keeps changing", async () => {
    const r = rig();
    const queued = r.add();
    const retrying = r.add({ status: 'retrying', attempts: [], not_before: new Date(NOW + 5000).toISOString() });
    const sending = r.add({ status: 'sending', sending_since: new Date(NOW).toISOString() });
    const done = r.add({
      status: 'delivered',
      delivered_at: new Date(NOW).toISOString(),
      finished_at: new Date(NOW).toISOString(),
    });
    expect(await r.service.cancelForConnection(r.target.id, 'connection deleted')).toBe(2);
    expect(r.repo.rows.get(queued.id)!.status).toBe('cancelled');
    expect(r.repo.rows.get(retrying.id)!.status).toBe('cancelled');
    expect(r.repo.rows.get(sending.id)!.status).toBe('sending');
    expect(r.repo.rows.get(done.id)!.status).toBe('delivered');
    expect(r.removed).toEqual([queued.id, retrying.id]);
    expect(r.repo.writes).toBe(2);

    const r2 = rig();
    const busy = r2.add();
    r2.repo.lose = Infinity;
    expect(await r2.service.cancelForConnection(r2.target.id, 'connection deleted')).toBe(0);
    expect(r2.repo.writes).toBe(DELIVERY_WRITE_ATTEMPTS);
    expect(r2.repo.rows.get(busy.id)!.status).toBe('queued');
    expect(r2.removed).toEqual([]);
  });

  it('deliveries of one incident that start together share one read of it; a later one reads it anew', async () => {
    const asked: string[] = [];
    const r = rig((id) => {
      asked.push(id);
      return Promise.resolve(null);
    });
    const together = [r.add(), r.add(), r.add()];
    const outcomes = await Promise.all(together.map((d) => r.service.process(d.id)));
    expect(outcomes.map((o) => o.kind)).toEqual(['done', 'done', 'done']);
    expect(asked).toEqual(['inc_1']);
    expect(await r.service.process(r.add().id)).toEqual({ kind: 'done', status: 'delivered' });
    expect(asked).toEqual(['inc_1', 'inc_1']);
    // A failed read is shared by those that asked together, and not kept for the next one.
    let fail = true;
    const r2 = rig(() => (fail ? Promise.reject(new Error('Redis away')) : Promise.resolve(null)));
    const failing = await Promise.allSettled([r2.add(), r2.add()].map((d) => r2.service.process(d.id)));
    expect(failing.map((f) => f.status)).toEqual(['rejected', 'rejected']);
    expect(r2.sends).toHaveLength(0);
    fail = false;
    expect(await r2.service.process(r2.add().id)).toEqual({ kind: 'done', status: 'delivered' });
  });
});
