import type { Logger } from 'pino';

/** What happened to an incident, for those who follow incidents (the Slack announcement). */
export type IncidentChangeKind = 'created' | 'updated' | 'closed';

/**
 * What one part of Herald tells the others, declared once. The services take plain callbacks;
 * the composition root points them here before anything that listens exists, and the listeners
 * (the Slack announcer, the delivery engine, metrics) subscribe when they are built. This replaces
 * variables assigned late, one per hook.
 */
export class Topic<A extends unknown[]> {
  private readonly listeners: ((...args: A) => unknown)[] = [];

  /**
   * `failures: 'log'` (notifications: an announcement that fails must not fail a write) or
   * `'throw'` (a step of the emitter's own work: cancelling a deleted connection's deliveries).
   */
  constructor(
    private readonly name: string,
    private readonly log: Logger,
    private readonly failures: 'log' | 'throw' = 'log',
  ) {}

  on(listener: (...args: A) => unknown): void {
    this.listeners.push(listener);
  }

  /** Calls every listener (synchronously, in order) and waits for those that return a promise. */
  async emit(...args: A): Promise<void> {
    await Promise.all(
      this.listeners.map(async (l) => {
        try {
          await l(...args);
        } catch (err) {
          if (this.failures === 'throw') throw err;
          this.log.warn({ err: err instanceof Error ? err.message : String(err) }, `${this.name} listener failed`);
        }
      }),
    );
  }
}
