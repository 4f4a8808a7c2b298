import { afterAll, describe, expect, it } from 'vitest';
import { BullDeliveryQueue } from '../../src/delivery/queue.js';
import type { DeliveryQueue, DispatchBatch, QueuedJob } from '../../src/ports/index.js';
import { FakeQueue } from '../service/fakes.js';
import { contractRedis, ids, type Make } from './support.js';

/**
 * The delivery queue's contract, as the services hand work to it: what a job carries, that a job
 * id is queued once, that a waiting job can be taken back. Nothing here runs a worker or waits
 * for a delay to pass (test/integration/delivery-queue.test.ts does): `read` answers what is on
 * the queue under an id, as the worker would be handed it.
 */
type Queue = DeliveryQueue & { dispatch(batches: DispatchBatch[]): Promise<void> };
type Read = { name: 'deliver'; job: QueuedJob } | { name: 'dispatch'; batch: DispatchBatch } | null;
interface Harness {
  queue: Queue;
  read(jobId: string): Promise<Read>;
  /** How many jobs wait on the queue (now or delayed). */
  size(): Promise<number>;
}

const db = contractRedis('c-queue');
const opened: BullDeliveryQueue[] = [];
// Registered after contractRedis' hooks, so it runs first: the queues close before the keys go.
afterAll(async () => {
  for (const q of opened) await q.close();
});

function redisHarness(): Harness {
  const queue = new BullDeliveryQueue(db.redis(), db.keys().bullPrefix, () => undefined);
  opened.push(queue);
  return {
    queue,
    size: () => queue.queue.count(),
    async read(jobId) {
      const job = await queue.queue.getJob(jobId);
      if (!job) return null;
      if (job.name === 'dispatch')
        return { name: 'dispatch', batch: { jobId, ...(job.data as Omit<DispatchBatch, 'jobId'>) } };
      const { deliveryId, ...hint } = job.data as { deliveryId: string } & Partial<QueuedJob['hint']>;
      const delay = job.opts.delay ?? 0;
      return {
        name: 'deliver',
        job: {
          deliveryId,
          jobId,
          ...(delay > 0 ? { delayMs: delay } : {}),
          ...(Object.keys(hint).length > 0 ? { hint: hint as QueuedJob['hint'] } : {}),
        },
      };
    },
  };
}

function fakeHarness(): Harness {
  const queue = new FakeQueue();
  return {
    queue,
    size: () => Promise.resolve(queue.jobs.length + queue.batches.length),
    read(jobId) {
      const job = queue.jobs.find((j) => j.jobId === jobId);
      const batch = queue.batches.find((b) => b.jobId === jobId);
      return Promise.resolve(job ? { name: 'deliver', job } : batch ? { name: 'dispatch', batch } : null);
    },
  };
}

function deliverJob(over: Partial<QueuedJob> = {}): QueuedJob {
  const deliveryId = ids.next('delivery');
  return { deliveryId, jobId: deliveryId, ...over };
}

function contract(make: Make<Harness>) {
  it('carries a delivery job as queued: its delivery, its hint, its delay', async () => {
    const h = make();
    const plainJob = deliverJob();
    const hinted = deliverJob({
      hint: { incidentId: ids.next('incident'), connectionId: ids.next('connection'), follows: true },
    });
    const delayed = deliverJob({ delayMs: 60_000 });
    const round = deliverJob();
    const redelivered = { ...round, jobId: `${round.deliveryId}-r1` };
    await h.queue.enqueue([plainJob, hinted, delayed, redelivered]);
    for (const j of [plainJob, hinted, delayed, redelivered])
      expect(await h.read(j.jobId)).toEqual({ name: 'deliver', job: j });
    expect(await h.read(round.deliveryId)).toBeNull();
  });

  it('queues a job id once: adding it again keeps the first', async () => {
    const h = make();
    const first = deliverJob({ delayMs: 60_000 });
    await h.queue.enqueue([first]);
    await h.queue.enqueue([{ ...first, delayMs: 120_000 }]);
    await h.queue.enqueue([]);
    expect(await h.read(first.jobId)).toEqual({ name: 'deliver', job: first });
    expect(await h.size()).toBe(1);
  });

  it('carries a dispatch batch as queued', async () => {
    const h = make();
    const d1 = ids.next('delivery');
    const batch: DispatchBatch = {
      jobId: `dsp-${d1}`,
      incidentId: ids.next('incident'),
      claim: 1_795_000_000_000,
      deliveries: [
        { deliveryId: d1, connectionId: ids.next('connection'), follows: false },
        { deliveryId: ids.next('delivery'), connectionId: ids.next('connection'), follows: true },
      ],
    };
    await h.queue.dispatch([batch]);
    await h.queue.dispatch([]);
    // A sweep that queues the same batch again adds nothing.
    await h.queue.dispatch([batch]);
    expect(await h.read(batch.jobId)).toEqual({ name: 'dispatch', batch });
    expect(await h.size()).toBe(1);
  });

  it('takes a waiting job back on remove, and ignores an id it does not hold', async () => {
    const h = make();
    const [gone, kept] = [deliverJob({ delayMs: 60_000 }), deliverJob({ delayMs: 60_000 })];
    await h.queue.enqueue([gone, kept]);
    await h.queue.remove([gone.jobId, ids.next('delivery')]);
    expect(await h.read(gone.jobId)).toBeNull();
    expect(await h.read(kept.jobId)).toEqual({ name: 'deliver', job: kept });
    expect(await h.size()).toBe(1);
    // Its id is free again: the next round may queue it anew.
    await h.queue.enqueue([gone]);
    expect(await h.read(gone.jobId)).toEqual({ name: 'deliver', job: gone });
  });
}

describe.each<[string, Make<Harness>]>([
  ['in-memory', fakeHarness],
  ['redis', redisHarness],
])('DeliveryQueue contract: %s', (_name, make) => contract(make));
