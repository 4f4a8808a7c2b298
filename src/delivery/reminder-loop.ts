import type { Logger } from 'pino';
import { isRedisUnavailable } from '../store/redis.js';

/** What the loop runs (services/reminders.ts). */
export interface DueReminders {
  runDue(): Promise<number>;
}

/**
 * Runs the update cadence's due reminders every `everyMs` in the worker role, one run at a time
 * (a slow run is never overlapped by the next). Stopping waits for the run in progress.
 */
export function startReminderLoop(reminders: DueReminders, everyMs: number, log: Logger): { close(): Promise<void> } {
  let running: Promise<void> = Promise.resolve();
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const tick = () => {
    running = reminders.runDue().then(
      (n) => {
        if (n > 0) log.info({ count: n }, 'update cadence: reminded about overdue updates');
      },
      (err: unknown) => {
        // Redis being away is logged once by its connection; this runs every second.
        if (!isRedisUnavailable(err)) log.warn({ err: (err as Error).message }, 'update reminders failed');
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
