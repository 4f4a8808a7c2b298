import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHerald, type TestHerald } from '../support/herald.js';
import { testRedisUrl } from '../support/redis.js';
import { redisProxy } from '../support/redis-proxy.js';
import { REQUEST_ANSWER_BOUND_MS } from '../../src/http/middleware/deadline.js';
import { REDIS_STALL_MS } from '../../src/domain/common/unavailable.js';

/**
 * A Redis that is sending a large reply is answering, not stalled. Here a proxy passes every
 * reply of more than SLICE bytes on in slices, one every SLICE_GAP_MS, so reading an execution
 * whose deliveries hold ~450 kB takes seconds of steady sending, as a reply of megabytes does on
 * a busy machine. The request must be answered 200; judging Redis by whole replies alone took it
 * for stalled after REDIS_STALL_MS and answered 503.
 */
const SLICE = 8 * 1024;
const SLICE_GAP_MS = 40;
const CONNECTIONS = 30;
const BODY = 'Status of the payment service: degraded. '.repeat(360); // ~15 kB

/** A proxy to `target` that trickles large server chunks in slices, in order. */
const tricklingProxy = (target: URL) =>
  redisProxy(target, (client) => {
    const pending: Buffer[] = [];
    let timer: NodeJS.Timeout | undefined;
    const pump = (): void => {
      timer = undefined;
      const next = pending.shift();
      if (next === undefined || client.destroyed) return;
      client.write(next);
      if (pending.length > 0) timer = setTimeout(pump, SLICE_GAP_MS);
    };
    return {
      data(chunk) {
        for (let at = 0; at < chunk.length; at += SLICE) pending.push(chunk.subarray(at, at + SLICE));
        if (timer === undefined) pump();
      },
      closed: () => clearTimeout(timer),
    };
  });

let proxy: Awaited<ReturnType<typeof tricklingProxy>>;
let h: TestHerald;

beforeAll(async () => {
  proxy = await tricklingProxy(new URL(testRedisUrl()));
  h = await startHerald(
    { HERALD_RATE_LIMIT: '100000', HERALD_EXECUTE_RATE_LIMIT: '100000' },
    { redisUrl: proxy.url, worker: false },
  );
}, 120_000);

afterAll(async () => {
  await h?.close().catch(() => undefined);
  await proxy?.close();
});

describe('a large reply streaming in is Redis answering', () => {
  it('reads an execution of ~450 kB through a trickling Redis with 200, however long it streams', async () => {
    for (let i = 0; i < CONNECTIONS; i++) {
      const c = await h.api('POST', '/v1/connections', {
        body: { name: `sink ${i}`, type: 'webhook', config: { url: 'http://127.0.0.1:9/hook' } },
      });
      expect(c.status, c.text).toBe(201);
    }
    const tpl = await h.api('POST', '/v1/templates', { body: { name: 'long', body: BODY } });
    expect(tpl.status, tpl.text).toBe(201);
    const inc = await h.api('POST', '/v1/incidents', {
      body: { title: 'large reply', severity: 'major', template_ids: [tpl.body.id] },
    });
    expect(inc.status, inc.text).toBe(201);
    const ex = await h.api('POST', `/v1/incidents/${inc.body.id}/execute`, { body: {} });
    expect(ex.status, ex.text).toBe(202);
    expect(ex.body.deliveries).toHaveLength(CONNECTIONS);

    const started = Date.now();
    const read = await h.api('GET', `/v1/incidents/${inc.body.id}/executions/${ex.body.id}`);
    const took = Date.now() - started;
    expect(read.status, read.text.slice(0, 300)).toBe(200);
    expect(read.body.deliveries).toHaveLength(CONNECTIONS);
    // The premise: the reply streamed for longer than a stall and than the answer bound, so a
    // deadline judging by whole replies would have cut it off.
    expect(took).toBeGreaterThan(Math.max(REDIS_STALL_MS, REQUEST_ANSWER_BOUND_MS));
  }, 120_000);
});
