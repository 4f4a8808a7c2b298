import { DelayedError, Queue, UnrecoverableError, Worker, type Job } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { DeliveryHint, DeliveryQueue, ProcessOutcome, QueuedJob } from '../ports/index.js';
import { isRedisUnavailable, redisErrorLogger } from '../store/redis.js';

export const QUEUE_NAME = 'deliveries';

/** A job's payload, validated when the worker picks it up (STYLE §6: typed jobs). */
const JobData = z.strictObject({
  deliveryId: z.string().regex(/^dlv_[0-9A-Z]{26}$/),
  // Optional: jobs queued by an older version carry only the delivery id.
  incidentId: z.string().regex(/^inc_[0-9A-Z]{26}$/).optional(),
  connectionId: z.string().regex(/^con_[0-9A-Z]{26}$/).optional(),
  follows: z.boolean().optional(),
});

/**
 * BullMQ's own retries: never the delivery policy (that lives in the delivery record, and a retry
 * or a pacing wait moves the job to delayed), only a safety net for the job itself — when Redis
 * fails the very move to delayed, the job must come back rather than end in the failed set with
 * its delivery stuck half-way. The delivery record decides what the re-run does.
 */
export const JOB_SAFETY_RETRIES = { attempts: 1000, backoff: { type: 'fixed', delay: 2000 } } as const;

/**
 * BullMQ carries only "which delivery, when": everything else (attempts, status, content) lives
 * in the delivery record, so retry policy is ours and a job can run twice harmlessly.
 */
export class BullDeliveryQueue implements DeliveryQueue {
  readonly queue: Queue;

  constructor(connection: Redis | Cluster, prefix: string, onError: (err: Error) => void) {
    this.queue = new Queue(QUEUE_NAME, { connection, prefix, defaultJobOptions: { ...JOB_SAFETY_RETRIES, removeOnComplete: true, removeOnFail: 1000 } });
    // Without a listener BullMQ prints every connection error's stack to the console.
    this.queue.on('error', onError);
  }

  async enqueue(jobs: QueuedJob[]): Promise<void> {
    if (jobs.length === 0) return;
    // Job ids are stable (delivery id + round), so adding one that already exists is a no-op.
    await this.queue.addBulk(jobs.map((j) => ({ name: 'deliver', data: { deliveryId: j.deliveryId, ...j.hint }, opts: { jobId: j.jobId, delay: j.delayMs } })));
  }

  async remove(jobIds: string[]): Promise<void> {
    for (const id of jobIds) {
      // A locked (running) job cannot be removed; the worker re-reads the delivery anyway.
      await this.queue.remove(id).catch(() => 0);
    }
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}

export interface WorkerOptions {
  /** A Redis or a Cluster; on a Cluster `prefix` must be a hash tag (keys.bullPrefix is). */
  connection: Redis | Cluster;
  prefix: string;
  concurrency: number;
  /** How long a job stays claimed without a heartbeat: a killed worker's jobs return after this. */
  lockDurationMs: number;
  process(deliveryId: string, hint: DeliveryHint | undefined): Promise<ProcessOutcome>;
  log: Logger;
  /** The injected wall clock in ms (when a delayed job is due). */
  now: () => number;
}

/**
 * The delivery worker. A job whose worker dies (SIGKILL) keeps its lock until `lockDurationMs`
 * passes, then the stalled-job check puts it back to wait for any worker; `maxStalledCount` is
 * high because a stalled delivery must be retried, never failed by the queue.
 */
export function startDeliveryWorker(o: WorkerOptions): Worker {
  const worker = new Worker(
    QUEUE_NAME,
    async (job: Job, token?: string) => {
      const data = JobData.safeParse(job.data);
      // A malformed job can never succeed: fail it for good (it names no delivery to lose).
      if (!data.success) throw new UnrecoverableError('malformed delivery job');
      const { deliveryId, incidentId, connectionId, follows } = data.data;
      const hint = incidentId !== undefined && connectionId !== undefined ? { incidentId, connectionId, follows: follows ?? false } : undefined;
      let outcome: ProcessOutcome;
      try {
        outcome = await o.process(deliveryId, hint);
      } catch (err) {
        // Redis hiccup or a bug: never let the queue fail a delivery; look at it again shortly.
        o.log.error({ delivery_id: deliveryId, err: (err as Error).message }, 'delivery processing error; retrying');
        outcome = { kind: 'delay', ms: 2000, reason: 'retry' };
      }
      if (outcome.kind === 'delay') {
        // Should this move fail (Redis), the error fails the attempt and BullMQ's safety retry
        // (JOB_SAFETY_RETRIES) brings the job back; the delivery's `not_before` keeps its timing.
        await job.moveToDelayed(o.now() + outcome.ms, token);
        throw new DelayedError();
      }
      return outcome.status;
    },
    {
      connection: o.connection,
      prefix: o.prefix,
      concurrency: o.concurrency,
      lockDuration: o.lockDurationMs,
      stalledInterval: Math.max(500, Math.floor(o.lockDurationMs / 2)),
      maxStalledCount: 1000,
      autorun: true,
    },
  );
  worker.on('failed', (job, err) => {
    o.log.error({ job_id: job?.id, err: err.message }, 'delivery job attempt failed unexpectedly; BullMQ retries it');
  });
  // Redis trouble is logged once per outage (it repeats on every reconnect attempt); anything else each time.
  const redisTrouble = redisErrorLogger(o.log, 'herald-worker (BullMQ)');
  o.connection.on('ready', redisTrouble.ready);
  worker.on('error', (err) => {
    if (isRedisUnavailable(err)) redisTrouble.error(err);
    else o.log.error({ err: err.message }, 'delivery worker error');
  });
  return worker;
}
