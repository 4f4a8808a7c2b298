import { describe, expect, it } from 'vitest';
import { openDeadline, withDeadline } from '../../src/domain/common/unavailable.js';
import { connectRedis } from '../../src/store/redis-connect.js';
import { luaScript, runScript } from '../../src/store/scripts.js';
import { testRedisUrl, useTestRedis } from '../support/redis.js';

/**
 * Request connections auto-pipeline: commands issued in one tick share a Pipeline that copied the
 * client's commands when it began. A script must still run when it is first used in the middle
 * of such a batch (ioredis would otherwise throw "pipeline[name] is not a function").
 */
const t = useTestRedis('scripts', () =>
  connectRedis({ kind: 'standalone', url: testRedisUrl() }, { use: 'request', name: 'herald-test-scripts' }),
);
const { prefix } = t;
const k = (s: string) => `{${prefix}}:${s}`;
const INCR = luaScript('test_incr', "return redis.call('INCRBY', KEYS[1], ARGV[1])");

describe('Lua scripts on an auto-pipelining connection', () => {
  it('runs a script declared before the client connected, many in one batch', async () => {
    const results = await Promise.all(Array.from({ length: 20 }, () => runScript(t.redis, INCR, [k('a')], [1])));
    expect(results.map(Number).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
  });

  it('runs a script declared after the client connected, first used in the middle of a batch', async () => {
    const late = luaScript(`test_late_${prefix}`, "return redis.call('INCRBY', KEYS[1], ARGV[1])");
    const batch = [
      t.redis.get(k('b')),
      runScript(t.redis, late, [k('b')], [5]),
      t.redis.get(k('b')),
      runScript(t.redis, late, [k('b')], [5]),
    ];
    const [before, first, between, second] = await Promise.all(batch);
    expect([before, Number(first), between, Number(second)]).toEqual([null, 5, '5', 10]);
    expect(Number(await runScript(t.redis, late, [k('b')], [1]))).toBe(11);
  });

  it('passes hundreds of thousands of arguments, as an execute to 10,000 connections does', async () => {
    const count = luaScript('test_count', 'return #ARGV');
    const args = Array.from({ length: 300_000 }, (_, i) => (i % 2 === 0 ? `delivery-${i}` : i));
    // Under a request's deadline too: its wrapper is one more function the arguments pass through.
    const d = openDeadline(10_000);
    try {
      expect(await withDeadline(d, () => runScript(t.redis, count, [k('c')], args))).toBe(300_000);
    } finally {
      d.end();
    }
  });
});
