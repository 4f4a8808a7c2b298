import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import { REDIS_STALL_MS, setRedisStallProbe, whenStalledAfter } from '../../src/domain/common/unavailable.js';
import { waitFor } from '../support/wait.js';

/**
 * whenStalledAfter (src/domain/common/unavailable.ts), which bounds every request's and every
 * command's wait on Redis. Redis' silence is played by the probe this test installs: `silence` is
 * what the probe reports, and `pings` counts the pings the waits ask for.
 */
let silence = 0;
let pings = 0;
setRedisStallProbe(
  () => silence,
  () => {
    pings++;
  },
);
afterEach(() => {
  silence = 0;
  pings = 0;
});

const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

/**
 * Node counts a timer from the event loop's clock, read when the loop last woke, not from the
 * moment setTimeout is called: a timer set late in a busy turn of the loop fires up to that turn's
 * length early by performance.now(). Each timed test starts on a fresh turn (after setImmediate),
 * and allows this much.
 */
const LOOP_CLOCK_MS = 5;
const freshTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Resolves once a wait opened now (with Redis stalled) has been called back: later waits have been looked at. */
async function laterWaitCalled(): Promise<void> {
  let done = false;
  whenStalledAfter(100, () => {
    done = true;
  });
  await waitFor(() => done, { what: 'a later wait', timeoutMs: 5_000 });
}

describe('whenStalledAfter', () => {
  it('calls back once its time has passed with Redis stalled, not before, and only once', async () => {
    silence = REDIS_STALL_MS;
    await freshTurn();
    const started = performance.now();
    const calls: number[] = [];
    whenStalledAfter(200, () => calls.push(performance.now() - started));
    await waitFor(() => calls.length > 0, { what: 'the stall call', timeoutMs: 5_000 });
    expect(calls[0]).toBeGreaterThanOrEqual(200 - LOOP_CLOCK_MS);
    // Later, still once.
    await laterWaitCalled();
    expect(calls).toHaveLength(1);
  });

  it('while Redis answers, pings and looks again; calls back once Redis falls silent', async () => {
    let called = false;
    const cancel = whenStalledAfter(50, () => {
      called = true;
    });
    await waitFor(() => pings >= 2, { what: 'two pings while Redis answers', timeoutMs: 5_000 });
    expect(called).toBe(false);
    silence = REDIS_STALL_MS;
    await waitFor(() => called, { what: 'the call once stalled', timeoutMs: 5_000 });
    cancel();
  });

  it('pings ahead of a long wait, so that a ping has been waiting by the time it is due', async () => {
    const cancel = whenStalledAfter(REDIS_STALL_MS + 200, () => undefined);
    const started = performance.now();
    await waitFor(() => pings > 0, { what: 'the ping ahead', timeoutMs: 5_000 });
    expect(performance.now() - started).toBeLessThan(REDIS_STALL_MS + 200);
    cancel();
  });

  it('never calls back once cancelled, among many waits, and leaves no timer behind', async () => {
    const before = timers();
    silence = REDIS_STALL_MS;
    let calls = 0;
    const cancels = Array.from({ length: 100 }, () =>
      whenStalledAfter(100, () => {
        calls++;
      }),
    );
    for (const [i, cancel] of cancels.entries()) if (i % 2 === 0) cancel();
    await waitFor(() => calls === 50, { what: 'the 50 waits left', timeoutMs: 5_000 });
    await laterWaitCalled();
    expect(calls).toBe(50);
    for (const cancel of cancels) cancel();
    // No timer is left behind to keep a process (the CLI, a test) alive.
    await waitFor(() => timers() <= before, { what: 'no timer left', timeoutMs: 5_000 });
  });

  it('keeps one timer per wait, and a long wait still calls back at its time, not before', async () => {
    const before = timers();
    // Every request opens two long waits: each holds one timer (the ping's, then the look's).
    const cancels = Array.from({ length: 10 }, () => whenStalledAfter(REDIS_STALL_MS + 300, () => undefined));
    expect(timers() - before).toBe(10);
    for (const cancel of cancels) cancel();
    expect(timers()).toBe(before);

    silence = REDIS_STALL_MS;
    await freshTurn();
    const started = performance.now();
    let calledAfter = -1;
    whenStalledAfter(REDIS_STALL_MS + 100, () => {
      calledAfter = performance.now() - started;
    });
    await waitFor(() => calledAfter >= 0, { what: "the long wait's call", timeoutMs: 10_000 });
    expect(pings).toBe(1);
    expect(calledAfter).toBeGreaterThanOrEqual(REDIS_STALL_MS + 100 - LOOP_CLOCK_MS);
  });
});
