import { Job, type Worker } from 'bullmq';
import type { RedisClient as Redis } from '../../src/store/redis-connect.js';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { BullDeliveryQueue, startDeliveryWorker } from '../../src/delivery/queue.js';
import { createLogger } from '../../src/log.js';
import type { DeliveryHint, ProcessOutcome } from '../../src/ports/index.js';
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

function worker(process: (id: string, hint: DeliveryHint | undefined) => Promise<ProcessOutcome>): Worker {
  const connection = createRedis(testRedisUrl(), { worker: true });
  const w = startDeliveryWorker({ connection, prefix: keys.bullPrefix, concurrency: 2, lockDurationMs: 5_000, process, now: Date.now, log: createLogger('silent') });
  workers.push({ worker: w, connection });
  return w;
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
    const hint = { incidentId: 'inc_01J0000000000000000000HNT1', connectionId: 'con_01J0000000000000000000HNT1', follows: true };
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
});
