/**
 * The stretches in which this process' event loop could not run: a 10 ms interval whose tick came
 * more than STARVED_AFTER_MS late. Ordinary timer jitter stays under that and is not counted.
 *
 * For tests that bound how long something waited, with Herald in the same process, on a machine
 * that may be saturated: time in which this process was not run at all (or its loop was held by
 * CPU work) is not time spent waiting on what the test is about — Redis, a silent DNS server — so
 * such a bound leaves it out, while waits on timers and sockets, during which the loop is free,
 * still count in full. Times are performance.now(); `Date.now()` figures convert with
 * `performance.timeOrigin`.
 */
export class Starvation {
  private static readonly TICK_MS = 10;
  private static readonly STARVED_AFTER_MS = 20;
  private readonly stretches: { from: number; to: number }[] = [];
  private last = performance.now();
  private readonly timer = setInterval(() => {
    const now = performance.now();
    const due = this.last + Starvation.TICK_MS;
    if (now - due > Starvation.STARVED_AFTER_MS) this.stretches.push({ from: due, to: now });
    this.last = now;
  }, Starvation.TICK_MS);

  /** How long the loop could not run between `start` and `end` (performance.now() times). */
  within(start: number, end: number): number {
    let ms = 0;
    for (const s of this.stretches) ms += Math.max(0, Math.min(end, s.to) - Math.max(start, s.from));
    return ms;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
