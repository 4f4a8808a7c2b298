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

describe('RedisPacer (GCRA token bucket)', () => {
  it('lets a burst through, then asks to wait about one interval', async () => {
    const rule = { perSecond: 2.5, burst: 5 };
    const waits = [];
    for (let i = 0; i < 6; i++) waits.push(await pacer.take('con_burst', rule));
    expect(waits.slice(0, 5)).toEqual([0, 0, 0, 0, 0]);
    expect(waits[5]).toBeGreaterThan(300);
    expect(waits[5]).toBeLessThanOrEqual(400);
  });

  it('holds a 1/s connection to one message per second and keeps connections apart', async () => {
    const rule = { perSecond: 1, burst: 1 };
    expect(await pacer.take('con_a', rule)).toBe(0);
    const wait = await pacer.take('con_a', rule);
    expect(wait).toBeGreaterThan(900);
    expect(await pacer.take('con_b', rule)).toBe(0);
  });

  it('never grants more than the rate to concurrent takers', async () => {
    const rule = { perSecond: 1, burst: 1 };
    const results = await Promise.all(Array.from({ length: 10 }, () => pacer.take('con_race', rule)));
    expect(results.filter((w) => w === 0)).toHaveLength(1);
  });
});
