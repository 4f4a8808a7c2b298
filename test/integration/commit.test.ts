import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { Change } from '../../src/store/commit.js';
import { connectTestRedis, dropPrefix, uniquePrefix } from '../support/redis.js';

let redis: Redis;
const prefix = uniquePrefix('commit');
const k = (s: string) => `{${prefix}}:${s}`;

beforeAll(() => {
  redis = connectTestRedis();
});
afterAll(async () => {
  await dropPrefix(redis, prefix);
  await redis.quit();
});

describe('Change (atomic compare-and-set)', () => {
  it('writes everything when all checks hold, nothing when one fails', async () => {
    expect(
      await new Change(redis).expect(k('a'), null).write('SET', k('a'), '1').write('SADD', k('s'), 'x').commit(),
    ).toBe(true);
    expect(await redis.get(k('a'))).toBe('1');
    const failed = await new Change(redis)
      .expect(k('a'), '2')
      .write('SET', k('a'), '3')
      .write('SADD', k('s'), 'y')
      .commit();
    expect(failed).toBe(false);
    expect(await redis.get(k('a'))).toBe('1');
    expect(await redis.smembers(k('s'))).toEqual(['x']);
    expect(await new Change(redis).expectEmptySet(k('s')).write('DEL', k('a')).commit()).toBe(false);
    expect(await new Change(redis).expectHashField(k('h'), 'n', null).write('HSET', k('h'), 'n', 'v').commit()).toBe(
      true,
    );
    expect(await new Change(redis).expectHashField(k('h'), 'n', null).write('HSET', k('h'), 'n', 'w').commit()).toBe(
      false,
    );
  });

  it('lets exactly one of many concurrent compare-and-sets win', async () => {
    await redis.set(k('counter'), '0');
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        new Change(redis)
          .expect(k('counter'), '0')
          .write('SET', k('counter'), String(i + 1))
          .commit(),
      ),
    );
    expect(results.filter(Boolean)).toHaveLength(1);
  });

  it('checks and writes a run of keys as one entry each, repeated keys included', async () => {
    const keys = [k('r1'), k('r2'), k('r3')];
    await redis.set(k('r1'), 'a', 'PX', 60_000);
    await redis.set(k('r2'), 'b', 'PX', 60_000);
    // One of the run is missing: the check fails and nothing is written, not even to the others.
    const missing = new Change(redis)
      .expectEachExists(keys)
      .writeEach('PERSIST', keys, () => [])
      .write('SET', k('after'), '1');
    expect(await missing.commit()).toBe(false);
    expect(await redis.pttl(k('r1'))).toBeGreaterThan(0);
    expect(await redis.exists(k('after'))).toBe(0);

    await redis.set(k('r3'), 'c', 'PX', 60_000);
    const sets = [k('rs1'), k('rs2'), k('rs1')];
    expect(
      await new Change(redis)
        .expect(k('guard'), null)
        .expectEachExists(keys)
        .writeEach('PERSIST', keys, () => [])
        .writeEach('SADD', sets, (i) => [`m${i}`])
        .write('SET', k('after'), '1')
        .commit(),
    ).toBe(true);
    expect(await Promise.all(keys.map((key) => redis.pttl(key)))).toEqual([-1, -1, -1]);
    expect((await redis.smembers(k('rs1'))).sort()).toEqual(['m0', 'm2']);
    expect(await redis.smembers(k('rs2'))).toEqual(['m1']);
    expect(await redis.get(k('after'))).toBe('1');
    expect(() => new Change(redis).writeEach('SADD', sets, (i) => (i === 0 ? ['x'] : ['x', 'y']))).toThrow(
      /same number of arguments/,
    );
  });

  it('checks a run longer than one EXISTS takes: a key missing in a later slice fails it, repeats count', async () => {
    const keys = Array.from({ length: 2500 }, (_, i) => k(`long${i}`));
    await Promise.all(keys.map((key) => redis.set(key, '1')));
    const missingLate = [...keys.slice(0, 2100), k('long-missing'), ...keys.slice(2100)];
    expect(await new Change(redis).expectEachExists(missingLate).write('SET', k('late'), '1').commit()).toBe(false);
    expect(await redis.exists(k('late'))).toBe(0);
    // The same key twice, in two slices: it exists, so both count.
    const repeated = [...keys, keys[0]!];
    expect(await new Change(redis).expectEachExists(repeated).write('SET', k('late'), '1').commit()).toBe(true);
    expect(await redis.get(k('late'))).toBe('1');
  });
});
