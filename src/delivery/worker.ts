import type { Logger } from 'pino';
import type { DeliveryHint, DispatchBatch, DispatchClaim, ProcessOutcome, QueuedJob } from '../ports/index.js';
import type { RedisClient } from '../store/redis-connect.js';
import { isRedisUnavailable } from '../store/redis.js';
import { startDeliveryWorker } from './queue.js';

/**
 * The worker role's running parts: the BullMQ worker that processes deliveries (a job each, or
 * an execute's in dispatch jobs), the outbox sweep that re-queues what was committed but never
 * queued, and the drain on shutdown.
 */

/** What the worker runs (the delivery service). */
export interface DeliveryProcessor {
  process(deliveryId: string, hint?: DeliveryHint): Promise<ProcessOutcome>;
  /** A dispatch job's first step: which of its deliveries are this worker's to send. */
  claimDispatch(batch: DispatchBatch): Promise<DispatchClaim>;
  /** Puts deliveries on the queue, a job each. */
  handOff(jobs: QueuedJob[]): Promise<void>;
  /** Re-queues deliveries committed more than `olderThanMs` ago that have no job; their count. */
  sweepOutbox(olderThanMs: number): Promise<number>;
}

export interface DeliveryRuntimeOptions {
  /** A connection of its own, without a command time-out (the worker blocks on it). */
  connection: RedisClient;
  prefix: string;
  concurrency: number;
  lockDurationMs: number;
  /** HERALD_OUTBOX_SWEEP_MS: how often the sweep runs, and how old a delivery must be to be swept. */
  sweepMs: number;
  /** HERALD_SHUTDOWN_MS: the whole shutdown budget; running jobs get it less 2 s (at least 1 s). */
  shutdownMs: number;
  deliveries: DeliveryProcessor;
  now: () => number;
  log: Logger;
}

export interface DeliveryRuntime {
  /** Stops taking jobs, waits for the running ones (up to the drain deadline). */
  close(): Promise<void>;
}

export function startDeliveryRuntime(o: DeliveryRuntimeOptions): DeliveryRuntime {
  const { log } = o;
  const worker = startDeliveryWorker({
    connection: o.connection,
    prefix: o.prefix,
    concurrency: o.concurrency,
    lockDurationMs: o.lockDurationMs,
    process: (id, hint) => o.deliveries.process(id, hint),
    claimDispatch: (batch) => o.deliveries.claimDispatch(batch),
    handOff: (jobs) => o.deliveries.handOff(jobs),
    now: o.now,
    log,
  });
  const runSweep = () => {
    o.deliveries.sweepOutbox(o.sweepMs).then(
      (n) => {
        if (n > 0) log.warn({ count: n }, 'outbox: re-queued deliveries that were committed but not queued');
      },
      // Redis being away is logged once by its connection; this runs every sweep period.
      (err: unknown) => {
        if (!isRedisUnavailable(err)) log.warn({ err: (err as Error).message }, 'outbox sweep failed');
      },
    );
  };
  runSweep();
  const sweep = setInterval(runSweep, o.sweepMs);
  sweep.unref();
  return {
    async close() {
      clearInterval(sweep);
      // close() waits for running jobs; past the drain deadline they are abandoned to the
      // stalled-job check (another worker, or the restarted one, completes them).
      const drainMs = Math.max(1000, o.shutdownMs - 2000);
      await Promise.race([worker.close(), new Promise((r) => setTimeout(r, drainMs).unref())]);
      if (worker.isRunning()) await worker.close(true).catch(() => undefined);
    },
  };
}
