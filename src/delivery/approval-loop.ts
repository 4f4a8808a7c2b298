import type { Logger } from 'pino';
import { isRedisUnavailable } from '../store/redis.js';

/** What the loop runs (services/approvals.ts). */
export interface DueApprovals {
  runDue(): Promise<number>;
}

/**
 * Runs the approvals' sweep every `everyMs` in the worker role: approvals past their expiry are
 * expired (their held deliveries cancelled), and approvers not yet told of a state are told. One
 * run at a time; stopping waits for the run in progress.
 */
export function startApprovalLoop(approvals: DueApprovals, everyMs: number, log: Logger): { close(): Promise<void> } {
  let running: Promise<void> = Promise.resolve();
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const tick = () => {
    running = approvals.runDue().then(
      (n) => {
        if (n > 0) log.debug({ count: n }, 'approvals: expired or notified');
      },
      (err: unknown) => {
        // Redis being away is logged once by its connection; this runs every second.
        if (!isRedisUnavailable(err)) log.warn({ err: (err as Error).message }, 'approval sweep failed');
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
