import type { ChainableCommander } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { connectRedis } from '../../src/store/redis-connect.js';
import { testRedisUrl, useTestRedis } from '../support/redis.js';

/**
 * A settled pipeline lets go of its commands, replies and promise (src/store/pipeline-release.ts):
 * otherwise a promoted one keeps later batches alive through young-generation collections, which
 * cost the API its p99 on Node 24. And nothing a caller sees changes.
 */
const t = useTestRedis('pipeline-release', () =>
  connectRedis({ kind: 'standalone', url: testRedisUrl() }, { use: 'request', name: 'herald-test-pipeline-release' }),
);
const { prefix } = t;
const k = (s: string) => `{${prefix}}:${s}`;

interface Internals {
  _queue: unknown[];
  _result: unknown[];
  promise: Promise<unknown> | null;
}

/** Records every pipeline the client makes (auto-pipelining's included) while `run` runs. */
async function pipelinesDuring<T>(run: () => Promise<T>): Promise<{ value: T; made: ChainableCommander[] }> {
  const made: ChainableCommander[] = [];
  const create = t.redis.pipeline.bind(t.redis);
  t.redis.pipeline = (commands?: unknown[][]) => {
    const p = create(commands);
    made.push(p);
    return p;
  };
  try {
    return { value: await run(), made };
  } finally {
    t.redis.pipeline = create;
  }
}

describe('settled pipelines', () => {
  it('an auto-pipelined batch answers every command, then its pipeline holds none of them', async () => {
    await t.redis.mset(k('a'), 'A', k('b'), 'B');
    const { value, made } = await pipelinesDuring(() =>
      Promise.all(Array.from({ length: 64 }, (_, i) => t.redis.mget(k(i % 2 ? 'a' : 'b'), k('none')))),
    );
    expect(value).toHaveLength(64);
    value.forEach((v, i) => expect(v).toEqual([i % 2 ? 'A' : 'B', null]));
    // The batch went out as (at least) one auto-pipeline, and each has let go once settled.
    expect(made.length).toBeGreaterThan(0);
    // Its release runs in a reaction queued behind the callers' own: one turn later at most.
    await new Promise((r) => setImmediate(r));
    for (const p of made) {
      const internals = p as unknown as Internals;
      expect(internals._queue).toEqual([]);
      expect(internals._result).toEqual([]);
      expect(internals.promise).toBeNull();
      expect(p.length).toBe(0);
    }
  });

  it('an explicit pipeline still resolves with every reply and error, in order', async () => {
    const p = t.redis.pipeline().set(k('c'), '1').incr(k('c')).hset(k('c'), 'f', 'v').get(k('c'));
    const results = await p.exec();
    expect(results?.map(([err]) => err?.message.slice(0, 9) ?? null)).toEqual([null, null, 'WRONGTYPE', null]);
    expect(results?.map(([, v]) => v)).toEqual(['OK', 2, undefined, '2']);
    await new Promise((r) => setImmediate(r));
    expect((p as unknown as Internals)._queue).toEqual([]);
  });

  it('a MULTI still returns its results, and a failed exec still reaches its caller', async () => {
    expect(await t.redis.multi().set(k('d'), 'x').get(k('d')).exec()).toEqual([
      [null, 'OK'],
      [null, 'x'],
    ]);
    // A command Redis refuses inside MULTI aborts the transaction: exec rejects, as ever.
    await expect(t.redis.multi().set(k('e'), '1').call('set', k('e')).exec()).rejects.toThrow(/EXECABORT/);
    expect(await t.redis.exists(k('e'))).toBe(0);
  });
});
