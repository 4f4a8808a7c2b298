import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHerald, type TestHerald } from '../support/herald.js';
import { testRedisUrl } from '../support/redis.js';
import { redisProxy } from '../support/redis-proxy.js';
import { REQUEST_ANSWER_BOUND_MS, REQUEST_REDIS_BUDGET_MS } from '../../src/http/middleware/deadline.js';
import { REDIS_STALL_MS } from '../../src/domain/common/unavailable.js';

/**
 * The other side of the request deadline (redis-stall-deadline.test.ts): a Redis that answers,
 * however slowly, is not a stalled one. Every reply here reaches Herald REPLY_DELAY_MS late (a
 * proxy between them), so a request that makes several Redis calls in a row takes longer than
 * the deadline's budget; Redis keeps answering, so the request must finish normally instead of
 * being cut off with a 503. (A large execute, or any request on a machine whose CPUs are busy, is
 * in the same position.)
 */
const REPLY_DELAY_MS = 100;

/** A proxy to `target` that holds every chunk from the server for `delayMs`, in order. */
const delayingProxy = (target: URL, delayMs: number) =>
  redisProxy(target, (client) => ({
    data(chunk) {
      setTimeout(() => {
        if (!client.destroyed) client.write(chunk);
      }, delayMs);
    },
    closeDelayMs: delayMs,
  }));

let proxy: Awaited<ReturnType<typeof delayingProxy>>;
let h: TestHerald;

beforeAll(async () => {
  proxy = await delayingProxy(new URL(testRedisUrl()), REPLY_DELAY_MS);
  h = await startHerald(
    { HERALD_RATE_LIMIT: '100000', HERALD_EXECUTE_RATE_LIMIT: '100000' },
    { redisUrl: proxy.url, worker: false },
  );
}, 120_000);

afterAll(async () => {
  await h?.close().catch(() => undefined);
  await proxy?.close();
});

describe('a slow Redis that answers is not a stalled one', () => {
  it('the premise: the delay is well under a stall, and enough calls in a row outlast the budget', () => {
    // Room for a loaded machine's lateness in reading each reply, under what counts as a stall.
    expect(REPLY_DELAY_MS * 3).toBeLessThanOrEqual(REDIS_STALL_MS);
    expect(REQUEST_REDIS_BUDGET_MS).toBeLessThan(REQUEST_ANSWER_BOUND_MS);
  });

  it('a create and an execute, each many slow round trips long, answer 201 and 202', async () => {
    const conn = await h.api('POST', '/v1/connections', {
      body: { name: 'sink', type: 'webhook', config: { url: 'http://127.0.0.1:9/hook' } },
    });
    expect(conn.status).toBe(201);
    const executes: number[] = [];
    for (let i = 0; i < 3; i++) {
      const inc = await h.api('POST', '/v1/incidents', { body: { title: `slow ${i}`, severity: 'major' } });
      expect(inc.status, JSON.stringify(inc.body)).toBe(201);
      const started = Date.now();
      const ex = await h.api('POST', `/v1/incidents/${inc.body.id}/execute`, { body: {} });
      executes.push(Date.now() - started);
      expect(ex.status, JSON.stringify(ex.body)).toBe(202);
      const read = await h.api('GET', `/v1/incidents/${inc.body.id}/executions/${ex.body.id}`);
      expect(read.status).toBe(200);
    }
    // Each execute took longer than the deadline's budget: had the deadline cut requests off by
    // time alone, it would have been answered 503.
    expect(Math.min(...executes)).toBeGreaterThan(REQUEST_REDIS_BUDGET_MS);
  });
});
