import { describe, expect, it } from 'vitest';
import { RedisRateLimiter } from '../../src/store/rate-limit.js';
import { useTestRedis } from '../support/redis.js';

/** The per-key limits on real Redis: leases of the budget, never more than the limit in all. */

const db = useTestRedis('ratelimit');
let n = 0;
const subject = () => `key_${++n}`;

/** What Redis has counted for a key in the current window. */
async function counted(policy: string, key: string): Promise<number> {
  return Number(await db.redis.get(`${db.keys.rateLimitPrefix(policy)}:${key}`));
}

describe('RedisRateLimiter', () => {
  it('a busy key takes growing leases: far fewer Redis consumes than requests, and Redis is told ahead, not behind', async () => {
    // Counts every command the limiter sends through the client.
    let calls = 0;
    const counting = new Proxy(db.redis, {
      get(target, prop, receiver) {
        const v = Reflect.get(target, prop, receiver) as unknown;
        if (
          typeof v !== 'function' ||
          typeof prop !== 'string' ||
          ['on', 'once', 'off', 'removeListener', 'emit', 'defineCommand'].includes(prop)
        )
          return v;
        return (...args: unknown[]) => {
          calls++;
          return (v as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const limiter = new RedisRateLimiter(counting, db.keys, { default: 6000, execute: 60 });
    const key = subject();
    const decisions = [];
    for (let i = 0; i < 300; i++) decisions.push(await limiter.consume('default', key));
    expect(decisions.every((d) => d.allowed)).toBe(true);
    // Leases of 1, 2, 4, … 64, then 100: about a dozen consumes for 300 requests, not 300.
    expect(calls).toBeGreaterThan(0);
    expect(calls).toBeLessThan(30);
    // The cap is 6000 / 50 = 100 points a lease; Redis has counted what was leased (≥ what was used).
    const inRedis = await counted('default', key);
    expect(inRedis).toBeGreaterThanOrEqual(300);
    expect(inRedis).toBeLessThan(300 + 100);
    // "remaining" counts down as requests are made, whether or not Redis was asked.
    expect(decisions[299]!.remaining).toBe(6000 - 300);
  });

  it('decides at once, without a promise, while the process holds a lease for the key', async () => {
    const limiter = new RedisRateLimiter(db.redis, db.keys, { default: 6000, execute: 60 });
    const key = subject();
    // No lease yet: Redis is asked.
    const first = limiter.consume('default', key);
    expect(first).toBeInstanceOf(Promise);
    expect((await first).allowed).toBe(true);
    // Leases grow while the key is busy; once one holds points, decisions come synchronously.
    let immediate = 0;
    for (let i = 0; i < 50; i++) {
      const d = limiter.consume('default', key);
      if (d instanceof Promise) await d;
      else {
        immediate++;
        expect(d.allowed).toBe(true);
      }
    }
    expect(immediate).toBeGreaterThan(40);
  });

  it('two instances never grant more than the limit together, and the last points go out one by one', async () => {
    const limit = 500;
    const a = new RedisRateLimiter(db.redis, db.keys, { default: limit, execute: 60 });
    const b = new RedisRateLimiter(db.redis, db.keys, { default: limit, execute: 60 });
    const key = subject();
    let granted = 0;
    let refusedA = 0;
    for (let i = 0; i < 400; i++) {
      const [x, y] = await Promise.all([a.consume('default', key), b.consume('default', key)]);
      granted += (x.allowed ? 1 : 0) + (y.allowed ? 1 : 0);
      if (!x.allowed) refusedA++;
    }
    expect(granted).toBeLessThanOrEqual(limit);
    // Leases are at most 10 points here (500 / 50) and shrink near the end: little is held back.
    expect(granted).toBeGreaterThanOrEqual(limit - 2 * 10);
    expect(refusedA).toBeGreaterThan(0);
    // A refused request gives its points back: Redis never counts past the limit.
    expect(await counted('default', key)).toBeLessThanOrEqual(limit);
  });

  it('concurrent requests of one key share a lease instead of each taking one', async () => {
    const limit = 100_000;
    const limiter = new RedisRateLimiter(db.redis, db.keys, { default: limit, execute: 60 });
    const key = subject();
    for (let round = 0; round < 10; round++) {
      const burst = await Promise.all(Array.from({ length: 50 }, async () => limiter.consume('default', key)));
      expect(burst.every((d) => d.allowed)).toBe(true);
    }
    // 500 requests: Redis has counted at most one lease (100 points) more than was used.
    const inRedis = await counted('default', key);
    expect(inRedis).toBeGreaterThanOrEqual(500);
    expect(inRedis).toBeLessThanOrEqual(500 + 100);
  });

  it('a spent budget is refused in the process until the window ends, without asking Redis each time', async () => {
    const limiter = new RedisRateLimiter(db.redis, db.keys, { default: 100, execute: 60 });
    const key = subject();
    const all = await Promise.all(Array.from({ length: 150 }, async () => limiter.consume('default', key)));
    expect(all.filter((d) => d.allowed)).toHaveLength(100);
    expect(all.filter((d) => !d.allowed).every((d) => d.resetSeconds > 0)).toBe(true);
    expect(await counted('default', key)).toBe(100);
  });

  it('when Redis fails, every request waiting for the lease fails with it at once', async () => {
    let fail = false;
    const flaky = new Proxy(db.redis, {
      get(target, prop, receiver) {
        const v = Reflect.get(target, prop, receiver) as unknown;
        if (
          typeof v !== 'function' ||
          typeof prop !== 'string' ||
          ['on', 'once', 'off', 'removeListener', 'emit', 'defineCommand'].includes(prop)
        )
          return v;
        return (...args: unknown[]) => {
          if (fail) return new Promise((_, reject) => setTimeout(() => reject(new Error('Command timed out')), 200));
          return (v as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const limiter = new RedisRateLimiter(flaky, db.keys, { default: 100_000, execute: 60 });
    const key = subject();
    await limiter.consume('default', key);
    fail = true;
    const started = Date.now();
    const outcomes = await Promise.allSettled(Array.from({ length: 20 }, async () => limiter.consume('default', key)));
    // A few may still be served from the lease taken before; every other fails within one time-out, not twenty.
    expect(outcomes.filter((o) => o.status === 'rejected').length).toBeGreaterThan(0);
    expect(Date.now() - started).toBeLessThan(2 * 200 + 300);
  });

  it('a small limit is exact: no leases at all (execute’s 60, or 3)', async () => {
    const limiter = new RedisRateLimiter(db.redis, db.keys, { default: 3, execute: 60 });
    const key = subject();
    const r = [];
    for (let i = 0; i < 5; i++) r.push(await limiter.consume('default', key));
    expect(r.map((d) => d.allowed)).toEqual([true, true, true, false, false]);
    expect(r.map((d) => d.remaining)).toEqual([2, 1, 0, 0, 0]);
    expect(r[3]!.resetSeconds).toBeGreaterThan(0);
    expect(await counted('default', key)).toBe(3);
    for (let i = 0; i < 60; i++) await limiter.consume('execute', key);
    expect((await limiter.consume('execute', key)).allowed).toBe(false);
    expect(await counted('execute', key)).toBe(60);
  });

  it('a lease ends with its window: the next window starts from Redis again', async () => {
    let now = Date.now();
    const limiter = new RedisRateLimiter(db.redis, db.keys, { default: 5000, execute: 60 }, () => now);
    const key = subject();
    for (let i = 0; i < 50; i++) await limiter.consume('default', key);
    const before = await counted('default', key);
    // Past the window as this process sees it: the leftover lease is not used.
    now += 61_000;
    await db.redis.del(`${db.keys.rateLimitPrefix('default')}:${key}`);
    const d = await limiter.consume('default', key);
    expect(d.allowed).toBe(true);
    expect(before).toBeGreaterThanOrEqual(50);
    expect(await counted('default', key)).toBeGreaterThanOrEqual(1);
  });
});
