import { DelayedError, Queue, UnrecoverableError, Worker, type Job } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import { z } from 'zod';
import type {
  DeliveryHint,
  DeliveryQueue,
  DispatchBatch,
  DispatchClaim,
  ProcessOutcome,
  QueuedJob,
} from '../ports/index.js';
import { isRedisUnavailable, redisErrorLogger } from '../store/redis.js';

export const QUEUE_NAME = 'deliveries';

/** A job's payload, validated when the worker picks it up (typed jobs: a malformed payload fails loudly, never half-runs). */
const JobData = z.strictObject({
  deliveryId: z.string().regex(/^dlv_[0-9A-Z]{26}$/),
  // Optional: jobs queued by an older version carry only the delivery id.
  incidentId: z
    .string()
    .regex(/^inc_[0-9A-Z]{26}$/)
    .optional(),
  connectionId: z
    .string()
    .regex(/^con_[0-9A-Z]{26}$/)
    .optional(),
  follows: z.boolean().optional(),
});

/** A dispatch job's payload (DispatchBatch without its job id). */
const DispatchData = z.strictObject({
  incidentId: z.string().regex(/^inc_[0-9A-Z]{26}$/),
  claim: z.number().int().nonnegative(),
  deliveries: z
    .array(
      z.strictObject({
        deliveryId: z.string().regex(/^dlv_[0-9A-Z]{26}$/),
        connectionId: z.string().regex(/^con_[0-9A-Z]{26}$/),
        follows: z.boolean(),
      }),
    )
    .min(1),
});

/** The job names: one delivery, or an execute's batch (DispatchBatch). */
const DELIVER = 'deliver';
const DISPATCH = 'dispatch';

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
    this.queue = new Queue(QUEUE_NAME, {
      connection,
      prefix,
      defaultJobOptions: { ...JOB_SAFETY_RETRIES, removeOnComplete: true, removeOnFail: 1000 },
    });
    // Without a listener BullMQ prints every connection error's stack to the console.
    this.queue.on('error', onError);
  }

  async enqueue(jobs: QueuedJob[]): Promise<void> {
    if (jobs.length === 0) return;
    // Job ids are stable (delivery id + round), so adding one that already exists is a no-op.
    await this.queue.addBulk(
      jobs.map((j) => ({
        name: DELIVER,
        data: { deliveryId: j.deliveryId, ...j.hint },
        opts: { jobId: j.jobId, delay: j.delayMs },
      })),
    );
  }

  async dispatch(batches: DispatchBatch[]): Promise<void> {
    if (batches.length === 0) return;
    await this.queue.addBulk(batches.map(({ jobId, ...data }) => ({ name: DISPATCH, data, opts: { jobId } })));
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
  /** A dispatch job's first step (DeliveryService.claimDispatch). */
  claimDispatch(batch: DispatchBatch): Promise<DispatchClaim>;
  /** Puts deliveries on the queue, a job each (a dispatch job's hand-offs). */
  handOff(jobs: QueuedJob[]): Promise<void>;
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
  const processOne = async (deliveryId: string, hint: DeliveryHint | undefined): Promise<ProcessOutcome> => {
    try {
      return await o.process(deliveryId, hint);
    } catch (err) {
      // Redis hiccup or a bug: never let the queue fail a delivery; look at it again shortly.
      o.log.error({ delivery_id: deliveryId, err: (err as Error).message }, 'delivery processing error; retrying');
      return { kind: 'delay', ms: 2000, reason: 'retry' };
    }
  };
  // At most `concurrency` sends at once, however many of the running jobs are dispatch jobs.
  const slots = semaphore(o.concurrency);
  // Declared before the Worker exists; a dispatch job asks only once the worker has started.
  const closing = (): boolean => worker.closing !== undefined;
  // Dispatch jobs whose lock could not be renewed (this process stalled past the lock): the
  // stalled-job check gives the job to another run, which hands on whatever is not final, so
  // this one starts no more sends of it.
  const lost = new Set<string>();
  const worker: Worker = new Worker(
    QUEUE_NAME,
    async (job: Job, token?: string) => {
      if (job.name === DISPATCH) {
        const batch = DispatchData.safeParse(job.data);
        if (!batch.success) throw new UnrecoverableError('malformed dispatch job');
        const jobId = job.id ?? '';
        try {
          return await runDispatch(
            { jobId, ...batch.data },
            { o, processOne, slots, closing, lost: () => lost.has(jobId) },
          );
        } finally {
          lost.delete(jobId);
        }
      }
      const data = JobData.safeParse(job.data);
      // A malformed job can never succeed: fail it for good (it names no delivery to lose).
      if (!data.success) throw new UnrecoverableError('malformed delivery job');
      const { deliveryId, incidentId, connectionId, follows } = data.data;
      const hint =
        incidentId !== undefined && connectionId !== undefined
          ? { incidentId, connectionId, follows: follows ?? false }
          : undefined;
      const outcome = await slots.use(() => processOne(deliveryId, hint));
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
  worker.on('lockRenewalFailed', (jobIds) => {
    for (const id of jobIds) lost.add(id);
  });
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

interface DispatchRun {
  o: WorkerOptions;
  processOne(deliveryId: string, hint: DeliveryHint | undefined): Promise<ProcessOutcome>;
  slots: Semaphore;
  /** True once the worker is closing: what has not started yet is handed on instead. */
  closing(): boolean;
  /** True once this job's lock was lost: what has not started yet is left to the job's next run. */
  lost(): boolean;
}

/**
 * One dispatch job (docs/explanation/delivery-semantics.md): takes its deliveries from the outbox, hands on
 * those it could not take, and sends the rest itself, as many at once as the worker's concurrency
 * allows across all its dispatch jobs. A delivery that must wait (a retry, a pacing slot) is handed
 * on with its delay, and so is each one not started when the worker begins to close; once the
 * job's lock is lost, nothing more is started (the job's next run hands the rest on). Every send
 * is settled before the job ends: should a hand-off fail (Redis), the job fails after them and
 * BullMQ runs it again, which takes nothing and hands every delivery not yet final on.
 */
async function runDispatch(batch: DispatchBatch, run: DispatchRun): Promise<string> {
  const { mine, theirs } = await run.o.claimDispatch(batch);
  const failures: Error[] = [];
  let handedOn = 0;
  const handOff = async (jobs: QueuedJob[]): Promise<void> => {
    if (jobs.length === 0) return;
    handedOn += jobs.length;
    await run.o.handOff(jobs).catch((err: unknown) => {
      failures.push(err instanceof Error ? err : new Error('handing deliveries on failed'));
    });
  };
  await handOff(theirs);
  await Promise.all(
    mine.map((job) =>
      run.slots.use(async () => {
        if (run.lost()) return;
        if (run.closing()) return handOff([job]);
        const outcome = await run.processOne(job.deliveryId, job.hint);
        if (outcome.kind === 'delay') await handOff([{ ...job, delayMs: outcome.ms }]);
      }),
    ),
  );
  const [failure] = failures;
  if (failure) throw failure;
  // The job's return value (BullMQ keeps it only until the job is removed on completion).
  return `took ${mine.length}, handed on ${handedOn}`;
}

interface Semaphore {
  /** Runs `fn` once one of the slots is free; the slot is freed when it settles. */
  use<T>(fn: () => Promise<T>): Promise<T>;
}

function semaphore(size: number): Semaphore {
  let free = size;
  const waiting: (() => void)[] = [];
  return {
    async use(fn) {
      if (free > 0) free--;
      else await new Promise<void>((resolve) => waiting.push(resolve));
      try {
        return await fn();
      } finally {
        // Handing the slot straight to the next waiter keeps `free` exact.
        const next = waiting.shift();
        if (next) next();
        else free++;
      }
    },
  };
}
