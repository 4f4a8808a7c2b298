import type { Logger } from 'pino';
import { isRedisUnavailable } from '../store/redis.js';

/** A sweep the worker role runs periodically: it answers how many items it handled. */
export interface DueSweep {
  runDue(): Promise<number>;
}

/** What the loop logs: a run that handled something, and a run that failed. */
export interface SweepMessages {
  done: string;
  failed: string;
  /** The level of `done` (a run that handled something). */
  level: 'info' | 'debug';
}

/**
 * Runs `sweep` every `everyMs` in the worker role, one run at a time (a slow run is never
 * overlapped by the next). Stopping waits for the run in progress. Used for the update cadence's
 * reminders (services/reminders.ts) and the approvals' expiry and notices (services/approvals.ts).
 */
export function startSweepLoop(
  sweep: DueSweep,
  everyMs: number,
  log: Logger,
  messages: SweepMessages,
): { close(): Promise<void> } {
  let running: Promise<void> = Promise.resolve();
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const tick = () => {
    running = sweep.runDue().then(
      (n) => {
        if (n > 0) log[messages.level]({ count: n }, messages.done);
      },
      (err: unknown) => {
        // Redis being away is logged once by its connection; this runs every second.
        if (!isRedisUnavailable(err)) log.warn({ err: (err as Error).message }, messages.failed);
      },
    );
    void running.then(() => {
      if (!stopped) timer = setTimeout(tick, everyMs).unref();
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
