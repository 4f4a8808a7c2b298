import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connectRedis } from '../../src/store/redis-connect.js';
import { REQUEST_COMMAND_STALL_MS } from '../../src/store/deadline.js';
import type { RedisClient } from '../../src/store/redis-client.js';
import { testRedisUrl } from '../support/redis.js';
import { holdingRedisProxy } from '../support/redis-proxy.js';

/**
 * Outside a request (a worker's delivery, Socket Mode, the work after an answer) a request
 * connection's command fails once Redis has sent nothing for REQUEST_COMMAND_STALL_MS since it was
 * sent, and only then: each command by its own age, not by when some other one was sent.
 */

/** How late a failure may come on a slow, busy machine. */
const SLACK_MS = 1_500;

let proxy: Awaited<ReturnType<typeof holdingRedisProxy>>;
let redis: RedisClient;

beforeAll(async () => {
  proxy = await holdingRedisProxy(new URL(testRedisUrl()));
  redis = connectRedis({ kind: 'standalone', url: proxy.url }, { use: 'request', name: 'herald-test-outside' });
  expect(await redis.ping()).toBe('PONG');
});

afterEach(() => proxy.release());

afterAll(async () => {
  redis?.disconnect();
  await proxy?.close();
});

/** Sends a PING and settles with what came of it and when, in ms from the send. */
function timedPing(): Promise<{ outcome: string; afterMs: number }> {
  const sent = performance.now();
  return redis.ping().then(
    (reply) => ({ outcome: `answered ${reply}`, afterMs: performance.now() - sent }),
    (err: unknown) => ({ outcome: err instanceof Error ? err.name : String(err), afterMs: performance.now() - sent }),
  );
}

const until = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('a command outside a request on a silent Redis', () => {
  it('fails with RequestDeadlineError once Redis has been silent for its bound, not before', async () => {
    proxy.hold();
    const { outcome, afterMs } = await timedPing();
    expect(outcome).toBe('RequestDeadlineError');
    expect(afterMs).toBeGreaterThanOrEqual(REQUEST_COMMAND_STALL_MS);
    expect(afterMs).toBeLessThan(REQUEST_COMMAND_STALL_MS + SLACK_MS);
  });

  it('gives each command its own bound: a later one fails later', async () => {
    proxy.hold();
    const first = timedPing();
    // The second is sent well into the first's wait (the wait itself is not the test's timing).
    await until(REQUEST_COMMAND_STALL_MS / 2);
    const second = timedPing();
    expect((await first).outcome).toBe('RequestDeadlineError');
    // Had the stall that failed the first failed every waiting command, the second would have
    // failed after about half its bound.
    const b = await second;
    expect(b.outcome).toBe('RequestDeadlineError');
    expect(b.afterMs).toBeGreaterThanOrEqual(REQUEST_COMMAND_STALL_MS);
  });

  it("gets its reply when Redis answers after a stall's silence but within its bound", async () => {
    proxy.hold();
    const reply = timedPing();
    // Longer than REDIS_STALL_MS (Redis counts as stalled by then), well short of the bound.
    await until(REQUEST_COMMAND_STALL_MS - 500);
    proxy.release();
    const { outcome } = await reply;
    expect(outcome).toBe('answered PONG');
  });
});
