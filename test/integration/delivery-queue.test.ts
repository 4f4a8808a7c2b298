import { Job, type Worker } from 'bullmq';
import type { RedisClient as Redis } from '../../src/store/redis-connect.js';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { BullDeliveryQueue, startDeliveryWorker, type WorkerOptions } from '../../src/delivery/queue.js';
import { createLogger } from '../../src/log.js';
import type { DeliveryHint, DispatchBatch, ProcessOutcome, QueuedJob } from '../../src/ports/index.js';
import { createKeys } from '../../src/store/keys.js';
import { createRedis, whenReady } from '../../src/store/redis.js';
import { dropPrefix, testRedisUrl, uniquePrefix } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/**
 * The BullMQ adapter on real Redis: a job is only "which delivery"; the delivery record decides
 * the rest. What must hold here is that no queue-level mishap ends a job while its delivery is
 * unfinished.
 */
const prefix = uniquePrefix('queue');
const keys = createKeys(prefix);
let redis: Redis;
let queueRedis: Redis;
let queue: BullDeliveryQueue;
const workers: { worker: Worker; connection: Redis }[] = [];

beforeAll(async () => {
  redis = createRedis(testRedisUrl());
  // A request connection queues nothing before it is ready.
  await whenReady(redis, 10_000);
  queueRedis = createRedis(testRedisUrl(), { worker: true });
  queue = new BullDeliveryQueue(queueRedis, keys.bullPrefix, () => undefined);
});
afterEach(async () => {
  vi.restoreAllMocks();
  // One worker per test: a worker left running would take the next test's jobs.
  for (let w = workers.pop(); w; w = workers.pop()) {
    await w.worker.close();
    await w.connection.quit();
  }
});
afterAll(async () => {
  await queue.close();
  await queueRedis.quit();
  await dropPrefix(redis, prefix);
  await redis.quit();
});

/** What a worker does with a dispatch job's claim and hand-offs; by default, every delivery is its own and hand-offs go on the queue. */
interface DispatchParts {
  claimDispatch?: WorkerOptions['claimDispatch'];
  handOff?: WorkerOptions['handOff'];
  concurrency?: number;
}

function worker(
  process: (id: string, hint: DeliveryHint | undefined) => Promise<ProcessOutcome>,
  parts: DispatchParts = {},
): Worker {
  const connection = createRedis(testRedisUrl(), { worker: true });
  const w = startDeliveryWorker({
    connection,
    prefix: keys.bullPrefix,
    concurrency: parts.concurrency ?? 2,
    lockDurationMs: 5_000,
    process,
    claimDispatch: parts.claimDispatch ?? ((b) => Promise.resolve({ mine: b.deliveries.map(jobOf(b)), theirs: [] })),
    handOff: parts.handOff ?? ((jobs) => queue.enqueue(jobs)),
    now: Date.now,
    log: createLogger('silent'),
  });
  workers.push({ worker: w, connection });
  return w;
}

/** A dispatch item as the job a delivery gets of its own (its id is its job id). */
const jobOf =
  (b: DispatchBatch) =>
  (x: DispatchBatch['deliveries'][number]): QueuedJob => ({
    deliveryId: x.deliveryId,
    jobId: x.deliveryId,
    hint: { incidentId: b.incidentId, connectionId: x.connectionId, follows: x.follows },
  });

/** A dispatch batch of `n` deliveries (ids end in `tag` and a number). */
function batchOf(tag: string, n: number): DispatchBatch {
  const deliveries = Array.from({ length: n }, (_, i) => ({
    deliveryId: `dlv_01J0000000000000000000${tag}${String(i).padStart(2, '0')}`,
    connectionId: `con_01J0000000000000000000${tag}${String(i).padStart(2, '0')}`,
    follows: false,
  }));
  return {
    jobId: `dsp-${deliveries[0]!.deliveryId}`,
    incidentId: 'inc_01J0000000000000000000DSP1',
    claim: 1,
    deliveries,
  };
}

/**
 * A worker whose sends all wait for one gate (`release`), recording the deliveries it started and
 * those it handed on (hand-offs are recorded, not queued).
 */
function gatedWorker(concurrency: number) {
  const started: string[] = [];
  const handedOn: string[] = [];
  let release = (): void => undefined;
  const gate = new Promise<void>((r) => (release = r));
  const w = worker(
    async (deliveryId) => {
      started.push(deliveryId);
      await gate;
      return { kind: 'done', status: 'delivered' };
    },
    { concurrency, handOff: (jobs) => Promise.resolve(void handedOn.push(...jobs.map((j) => j.deliveryId))) },
  );
  return { w, started, handedOn, release: () => release() };
}

describe('the delivery queue', () => {
  it('a job whose move to delayed fails (a Redis hiccup) comes back instead of ending failed', async () => {
    const id = 'dlv_01J0000000000000000000QUE1';
    vi.spyOn(Job.prototype, 'moveToDelayed').mockRejectedValueOnce(new Error('Connection is closed.'));
    const seen: string[] = [];
    worker(async (deliveryId) => {
      seen.push(deliveryId);
      return seen.length === 1 ? { kind: 'delay', ms: 50, reason: 'retry' } : { kind: 'done', status: 'delivered' };
    });
    await queue.enqueue([{ deliveryId: id, jobId: id }]);
    await waitFor(() => seen.length >= 2, { timeoutMs: 15_000, what: 'the job to run again' });
    expect(seen).toEqual([id, id]);
  });

  it("a job carries its delivery's hint to the worker; a job without one (an older version's) runs without", async () => {
    const withHint = 'dlv_01J0000000000000000000HNT1';
    const without = 'dlv_01J0000000000000000000HNT2';
    const hint = {
      incidentId: 'inc_01J0000000000000000000HNT1',
      connectionId: 'con_01J0000000000000000000HNT1',
      follows: true,
    };
    const seen = new Map<string, DeliveryHint | undefined>();
    worker((deliveryId, h) => {
      seen.set(deliveryId, h);
      return Promise.resolve({ kind: 'done', status: 'delivered' });
    });
    await queue.enqueue([{ deliveryId: withHint, jobId: withHint, hint }]);
    await queue.queue.add('deliver', { deliveryId: without }, { jobId: without });
    await waitFor(() => seen.size === 2, { timeoutMs: 15_000, what: 'both jobs ran' });
    expect(seen.get(withHint)).toEqual(hint);
    expect(seen.get(without)).toBeUndefined();
  });

  it('a delay moves the job to delayed and runs it again after the wait; queueing twice is a no-op', async () => {
    const id = 'dlv_01J0000000000000000000QUE2';
    const runs: number[] = [];
    worker(async (deliveryId) => {
      if (deliveryId !== id) return { kind: 'done', status: 'delivered' };
      runs.push(Date.now());
      return runs.length === 1 ? { kind: 'delay', ms: 400, reason: 'pacing' } : { kind: 'done', status: 'delivered' };
    });
    await queue.enqueue([{ deliveryId: id, jobId: id }]);
    await queue.enqueue([{ deliveryId: id, jobId: id }]);
    await waitFor(() => runs.length >= 2, { timeoutMs: 10_000, what: 'the delayed run' });
    expect(runs[1]! - runs[0]!).toBeGreaterThanOrEqual(400);
    expect(runs).toHaveLength(2);
  });

  it('a dispatch job sends what it took itself, hands on what it did not, and a delivery that must wait gets a delayed job of its own', async () => {
    const batch = batchOf('DA', 4);
    const [a, b, c, d] = batch.deliveries.map(jobOf(batch));
    const runs = new Map<string, number>();
    const hints = new Map<string, DeliveryHint | undefined>();
    worker(
      (deliveryId, hint) => {
        runs.set(deliveryId, (runs.get(deliveryId) ?? 0) + 1);
        hints.set(deliveryId, hint);
        // `c` must wait once (a retry's backoff): the second run is its own job's.
        return Promise.resolve(
          deliveryId === c!.deliveryId && runs.get(deliveryId) === 1
            ? { kind: 'delay', ms: 300, reason: 'retry' }
            : { kind: 'done', status: 'delivered' },
        );
      },
      { claimDispatch: () => Promise.resolve({ mine: [a!, b!, c!], theirs: [d!] }) },
    );
    await queue.dispatch([batch]);
    await waitFor(() => runs.size === 4 && runs.get(c!.deliveryId) === 2, {
      timeoutMs: 15_000,
      what: 'every delivery to be sent',
    });
    expect(Object.fromEntries(runs)).toEqual({
      [a!.deliveryId]: 1,
      [b!.deliveryId]: 1,
      [c!.deliveryId]: 2,
      [d!.deliveryId]: 1,
    });
    expect(hints.get(a!.deliveryId)).toEqual(a!.hint);
    // The hand-off and the delayed one ran as jobs of their own, under their delivery ids.
    await waitFor(async () => (await queue.queue.getJobCounts('active', 'waiting', 'delayed')).active === 0, {
      timeoutMs: 10_000,
      what: 'the queue to drain',
    });
    expect(await queue.queue.getJob(batch.jobId)).toBeUndefined();
  });

  it('the worker sends at most its concurrency at once, whether its jobs are dispatch jobs or a delivery each', async () => {
    const batches = [batchOf('DB', 6), batchOf('DC', 6)];
    let running = 0;
    let most = 0;
    let done = 0;
    worker(
      async () => {
        running++;
        most = Math.max(most, running);
        await new Promise((r) => setTimeout(r, 30));
        running--;
        done++;
        return { kind: 'done', status: 'delivered' };
      },
      { concurrency: 3 },
    );
    const singles = batchOf('DF', 4);
    await queue.dispatch(batches);
    await queue.enqueue(singles.deliveries.map(jobOf(singles)));
    await waitFor(() => done === 16, { timeoutMs: 15_000, what: 'all sixteen sends' });
    expect(most).toBe(3);
  });

  it('a hand-off that fails fails the job after its sends settle, and the job runs again', async () => {
    const batch = batchOf('DD', 2);
    const [a, b] = batch.deliveries.map(jobOf(batch));
    let claims = 0;
    const sent: string[] = [];
    worker(
      (deliveryId) => {
        sent.push(deliveryId);
        // `a` must wait once; its hand-off fails, and the job's second run hands it on again.
        const first = sent.filter((x) => x === deliveryId).length === 1;
        return Promise.resolve(
          deliveryId === a!.deliveryId && first
            ? { kind: 'delay', ms: 50, reason: 'pacing' }
            : { kind: 'done', status: 'delivered' },
        );
      },
      {
        // The first run takes both; the second (the retry) takes nothing and hands `a` on.
        claimDispatch: () =>
          Promise.resolve(++claims === 1 ? { mine: [a!, b!], theirs: [] } : { mine: [], theirs: [a!] }),
        handOff: vi
          .fn<WorkerOptions['handOff']>()
          .mockRejectedValueOnce(new Error('Connection is closed.'))
          .mockImplementation((jobs) => queue.enqueue(jobs)),
      },
    );
    await queue.dispatch([batch]);
    await waitFor(() => claims === 2 && sent.filter((x) => x === a!.deliveryId).length === 2, {
      timeoutMs: 20_000,
      what: 'the job to run again and hand a on',
    });
    expect(sent.filter((x) => x === b!.deliveryId)).toHaveLength(1);
  });

  it('a worker that is closing hands on what a dispatch job has not started', async () => {
    const batch = batchOf('DE', 5);
    const { w, started, handedOn, release } = gatedWorker(2);
    await queue.dispatch([batch]);
    await waitFor(() => started.length === 2, { timeoutMs: 15_000, what: 'the first two sends to start' });
    const closed = w.close();
    release();
    await closed;
    expect(started).toEqual(batch.deliveries.slice(0, 2).map((x) => x.deliveryId));
    expect(handedOn).toEqual(batch.deliveries.slice(2).map((x) => x.deliveryId));
  });

  it('a dispatch job whose lock was lost (its process stalled) starts no more sends and hands nothing on: its next run does', async () => {
    const batch = batchOf('DG', 4);
    const { w, started, handedOn, release } = gatedWorker(1);
    await queue.dispatch([batch]);
    await waitFor(() => started.length === 1, { timeoutMs: 15_000, what: 'the first send to start' });
    // What BullMQ's lock manager tells when it could not extend the job's lock.
    w.emit('lockRenewalFailed', [batch.jobId]);
    release();
    await waitFor(async () => (await queue.queue.getJob(batch.jobId)) === undefined, {
      timeoutMs: 15_000,
      what: 'the job to end',
    });
    expect(started).toEqual([batch.deliveries[0]!.deliveryId]);
    expect(handedOn).toEqual([]);
  });
});
