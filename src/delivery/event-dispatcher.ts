import type { Logger } from 'pino';
import { isRedisUnavailable } from '../store/redis.js';

/** What the loop runs (services/events.ts, EventDispatcher). */
export interface EventDispatchStep {
  step(): Promise<{ ingested: number; fannedOut: number; attempted: number }>;
}

/**
 * Runs the event dispatcher in the worker role, one step at a time: again at once while a step
 * found work (a backlog drains at full speed), else after `idleMs`. Stopping waits for the step
 * in progress; a step cut off by a crash is safe to run again (docs/events.md, "Delivery").
 */
export function startEventDispatcher(
  dispatcher: EventDispatchStep,
  idleMs: number,
  log: Logger,
): { close(): Promise<void> } {
  let running: Promise<void> = Promise.resolve();
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const tick = () => {
    running = dispatcher
      .step()
      .then(
        (s) => (s.ingested + s.fannedOut + s.attempted > 0 ? 0 : idleMs),
        (err: unknown) => {
          // Redis being away is logged once by its connection; this runs several times a second.
          if (!isRedisUnavailable(err)) log.warn({ err: (err as Error).message }, 'event dispatch failed');
          return idleMs;
        },
      )
      .then((wait) => {
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
