import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDeadline, REDIS_STALL_MS, withDeadline } from '../../src/domain/common/unavailable.js';
import { connectRedis } from '../../src/store/redis-connect.js';
import type { RedisClient } from '../../src/store/redis-client.js';
import { testRedisUrl } from '../support/redis.js';
import { holdingRedisProxy } from '../support/redis-proxy.js';

/**
 * A paused machine (a VM its host stops for a moment, a frozen container) stops Redis and Herald
 * together. On waking, Herald's overdue deadline timer runs before Redis has had a moment to
 * answer: the silence it sees is the pause, not Redis. Here the process blocks (as if paused)
 * while a proxy holds Redis' replies, and the proxy lets them go a moment after the process
 * wakes. A request's deadline must not pass for that; a Redis that stays silent once the process
 * runs again must still be recognised as stalled.
 */
const DEADLINE_MS = 400;
const PAUSE_MS = 1_200;

let proxy: Awaited<ReturnType<typeof holdingRedisProxy>>;
let redis: RedisClient;

beforeAll(async () => {
  proxy = await holdingRedisProxy(new URL(testRedisUrl()));
  redis = connectRedis({ kind: 'standalone', url: proxy.url }, { use: 'request', name: 'herald-test-pause' });
});

afterAll(async () => {
  redis?.disconnect();
  await proxy?.close();
});

/** Blocks this process for `ms`: nothing of it runs meanwhile, as on a paused machine. */
const freeze = (ms: number): void => {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
};

/** A command sent under a fresh request deadline, with Redis' replies held from now on. */
function commandUnderDeadline(): { outcome: Promise<string>; end: () => void } {
  proxy.hold();
  const d = openDeadline(DEADLINE_MS);
  const reply = withDeadline(d, () => redis.ping());
  const outcome = reply.then(
    (r) => `answered ${r}`,
    (err: unknown) => (err instanceof Error ? err.name : String(err)),
  );
  return { outcome, end: () => d.end() };
}

describe('a request deadline across a pause of the whole machine', () => {
  it('does not pass when Redis answers a moment after the process wakes', async () => {
    expect(await redis.ping()).toBe('PONG');
    const { outcome, end } = commandUnderDeadline();
    freeze(PAUSE_MS);
    // The process is running again; Redis, in this story, a moment later.
    setTimeout(() => proxy.release(), 50);
    try {
      expect(await outcome).toBe('answered PONG');
    } finally {
      end();
    }
  });

  it('still passes when Redis stays silent once the process runs again', async () => {
    expect(await redis.ping()).toBe('PONG');
    const { outcome, end } = commandUnderDeadline();
    freeze(PAUSE_MS);
    const woke = Date.now();
    try {
      expect(await outcome).toBe('RequestDeadlineError');
      // Silence is counted from the moment the process ran again, not from the command.
      expect(Date.now() - woke).toBeGreaterThanOrEqual(REDIS_STALL_MS - 100);
    } finally {
      end();
      proxy.release();
    }
  });
});
