import type { Logger } from 'pino';
import { startSweepLoop } from './sweep-loop.js';

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
  const sweep = {
    runDue: async () => {
      const s = await dispatcher.step();
      return s.ingested + s.fannedOut + s.attempted;
    },
  };
  return startSweepLoop(
    sweep,
    idleMs,
    log,
    { failed: 'event dispatch failed', level: 'debug' },
    {
      nextWaitMs: (n) => (n > 0 ? 0 : idleMs),
    },
  );
}
