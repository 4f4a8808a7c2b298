import type { Logger } from 'pino';
import { isRedisUnavailable } from '../store/redis.js';

/** A sweep the worker role runs periodically: it answers how many items it handled. */
export interface DueSweep {
  runDue(): Promise<number>;
}

/** What the loop logs: a run that handled something (nothing when absent), and a run that failed. */
export interface SweepMessages {
  done?: string;
  failed: string;
  /** The level of `done` (a run that handled something). */
  level: 'info' | 'debug';
}

export interface SweepLoopOptions {
  /** The wait after a run that handled `n` items (default: `everyMs` whatever it handled). */
  nextWaitMs?: (n: number) => number;
}

/**
 * Runs `sweep` every `everyMs` in the worker role, one run at a time (a slow run is never
 * overlapped by the next); a failed run waits `everyMs`. Stopping waits for the run in progress.
 * Used for the update cadence's reminders (services/reminders.ts), the approvals' expiry and
 * notices (services/approvals.ts) and the event dispatcher (delivery/event-dispatcher.ts).
 */
export function startSweepLoop(
  sweep: DueSweep,
  everyMs: number,
  log: Logger,
  messages: SweepMessages,
  opts: SweepLoopOptions = {},
): { close(): Promise<void> } {
  let running: Promise<void> = Promise.resolve();
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const tick = () => {
    const run = sweep.runDue().then(
      (n) => {
        if (n > 0 && messages.done !== undefined) log[messages.level]({ count: n }, messages.done);
        return opts.nextWaitMs?.(n) ?? everyMs;
      },
      (err: unknown) => {
        // Redis being away is logged once by its connection; this runs every second.
        if (!isRedisUnavailable(err)) log.warn({ err: (err as Error).message }, messages.failed);
        return everyMs;
      },
    );
    running = run.then(() => undefined);
    void run.then((wait) => {
      if (!stopped) timer = setTimeout(tick, wait).unref();
    });
  };
  tick();
  return {
    async close() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
