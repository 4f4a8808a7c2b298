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
});
