import { describe, expect, it } from 'vitest';
import { LOST_RACE, retryOnConflict } from '../../src/services/retry.js';

describe('retryOnConflict', () => {
  it('re-runs a lost race until it wins, pausing a jittered, growing, capped time', async () => {
    const pauses: number[] = [];
    let last = Date.now();
    let n = 0;
    const r = await retryOnConflict(
      () => {
        const now = Date.now();
        if (n > 0) pauses.push(now - last);
        last = now;
        n++;
        return Promise.resolve(n < 6 ? LOST_RACE : 'won');
      },
      () => new Error('exhausted'),
      { baseDelayMs: 10, maxDelayMs: 40, random: () => 0.99 },
    );
    expect(r).toBe('won');
    expect(n).toBe(6);
    // Caps 10, 20, 40, 40, 40 (times 0.99, floored); timers may fire a little late, never early.
    [9, 19, 39, 39, 39].forEach((min, i) => expect(pauses[i]).toBeGreaterThanOrEqual(min - 1));
  });

  it("gives up after the bounded number of attempts with the caller's error", async () => {
    let n = 0;
    await expect(
      retryOnConflict(
        () => {
          n++;
          return Promise.resolve(LOST_RACE);
        },
        () => new Error('kept changing'),
        { attempts: 5, baseDelayMs: 1, maxDelayMs: 1 },
      ),
    ).rejects.toThrow('kept changing');
    expect(n).toBe(5);
  });

  it("passes other errors straight through (a stale If-Match is the client's answer)", async () => {
    let n = 0;
    await expect(
      retryOnConflict(
        () => {
          n++;
          return Promise.reject(new Error('precondition'));
        },
        () => new Error('exhausted'),
      ),
    ).rejects.toThrow('precondition');
    expect(n).toBe(1);
  });
});
