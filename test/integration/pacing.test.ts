import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeys } from '../../src/store/keys.js';
import { RedisPacer } from '../../src/store/pacing.js';
import { connectTestRedis, dropPrefix, uniquePrefix } from '../support/redis.js';

let redis: Redis;
const prefix = uniquePrefix('pace');
let pacer: RedisPacer;

beforeAll(() => {
  redis = connectTestRedis();
  pacer = new RedisPacer(redis, createKeys(prefix));
});
afterAll(async () => {
  await dropPrefix(redis, prefix);
  await redis.quit();
});

describe('RedisPacer (GCRA token bucket with reservations)', () => {
  it('lets a burst through, then reserves the next slots one interval apart', async () => {
    const rule = { perSecond: 2.5, burst: 5 };
    const waits: number[] = [];
    const startedAt: number[] = [];
    for (let i = 0; i < 7; i++) {
      startedAt.push(performance.now());
      waits.push(await pacer.reserve('con_burst', rule));
    }
    // Five slots back to back, then one every 400 ms counted from the first: a call Redis runs
    // e ms after the first waits 400 − e (slot 6) or 800 − e (slot 7). The elapsed times are
    // measured, not assumed small, so a busy machine that spaces the calls out does not fail the
    // rule. Redis ran call n after it was sent (startedAt[n − 1]) and before the next was
    // (startedAt[n]), which bounds e from both sides.
    expect(waits.slice(0, 5)).toEqual([0, 0, 0, 0, 0]);
    const endedAt = performance.now();
    const at = (n: number) => startedAt[n - 1]!;
    const slack = 25; // Redis' clock against ours, and rounding up to whole ms
    expect(waits[5]).toBeLessThanOrEqual(400 - Math.max(0, at(6) - at(2)) + slack);
    expect(waits[5]).toBeGreaterThanOrEqual(400 - (at(7) - at(1)) - slack);
    expect(waits[6]).toBeLessThanOrEqual(800 - Math.max(0, at(7) - at(2)) + slack);
    expect(waits[6]).toBeGreaterThanOrEqual(800 - (endedAt - at(1)) - slack);
  });

  it('holds a 1/s connection to one message per second and keeps connections apart', async () => {
    const rule = { perSecond: 1, burst: 1 };
    expect(await pacer.reserve('con_a', rule)).toBe(0);
    const wait = await pacer.reserve('con_a', rule);
    expect(wait).toBeGreaterThan(900);
    expect(await pacer.reserve('con_b', rule)).toBe(0);
  });

  it('gives concurrent takers distinct slots in order: a backlog asks once each, no herd', async () => {
    const rule = { perSecond: 1, burst: 1 };
    const waits = (await Promise.all(Array.from({ length: 10 }, () => pacer.reserve('con_race', rule)))).sort((a, b) => a - b);
    expect(waits[0]).toBe(0);
    // Slot n is n seconds out (give or take Redis' clock between the calls).
    waits.forEach((w, n) => expect(Math.abs(w - n * 1000)).toBeLessThan(100));
  });

  it('forgets reserved slots on reset (their deliveries were cancelled)', async () => {
    const rule = { perSecond: 1 / 60, burst: 1 };
    expect(await pacer.reserve('con_reset', rule)).toBe(0);
    expect(await pacer.reserve('con_reset', rule)).toBeGreaterThan(59_000);
    expect(await pacer.take('con_reset', rule)).toBe(0);
    await pacer.reset('con_reset');
    expect(await pacer.reserve('con_reset', rule)).toBe(0);
    expect(await pacer.take('con_reset', rule)).toBe(0);
  });

  it('the send bucket grants a token only when one is free now, and takes nothing otherwise', async () => {
    const rule = { perSecond: 1, burst: 1 };
    expect(await pacer.take('con_send', rule)).toBe(0);
    const waits = await Promise.all(Array.from({ length: 5 }, () => pacer.take('con_send', rule)));
    // Nobody got a token, and asking did not push the next free token further out.
    for (const w of waits) {
      expect(w).toBeGreaterThan(900);
      expect(w).toBeLessThanOrEqual(1000);
    }
  });

  it('paceSend is reserve then take in one step: it reserves a slot once, and takes a token only when its slot is now', async () => {
    const rule = { perSecond: 1, burst: 1 };
    // A fresh connection: its slot is now, and so is a send token.
    expect(await pacer.paceSend('con_both', rule, true)).toEqual({ step: 'send' });
    // The next one reserves the following slot, a second out, and takes no token.
    const second = await pacer.paceSend('con_both', rule, true);
    expect(second.step).toBe('reserved');
    expect(second.step === 'send' ? 0 : second.waitMs).toBeGreaterThan(900);
    // Holding that slot already (reserveFirst false), it only asks for a token: none is free yet.
    const token = await pacer.paceSend('con_both', rule, false);
    expect(token.step).toBe('take');
    expect(token.step === 'send' ? 0 : token.waitMs).toBeGreaterThan(900);
    // The same keys as reserve and take: the schedule is a slot further out for the next caller.
    expect(await pacer.reserve('con_both', rule)).toBeGreaterThan(1900);
  });
});

