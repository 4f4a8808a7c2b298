/**
 * Herald over a Sentinel-managed primary (one primary, two replicas, three sentinels, quorum 2):
 * start-up facts, the whole story to a webhook sink, and a SENTINEL FAILOVER in the middle of a
 * fan-out, with no restart of Herald.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectRedis, type RedisTarget } from '../../src/store/redis-connect.js';
import { readRedisFacts } from '../../src/store/redis.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { startWebhookReceiver } from '../support/peers/webhook-receiver.js';
import { expectFanOutSurvived, nodeClient, startSentinelGroup, type TestSentinelGroup } from '../support/redis-cluster.js';
import { waitFor } from '../support/wait.js';

let group: TestSentinelGroup;
let target: RedisTarget;

beforeAll(async () => {
  group = await startSentinelGroup('herald');
  target = { kind: 'sentinel', sentinels: group.sentinels.map((s) => ({ host: '127.0.0.1', port: s.port })), name: group.name };
}, 90_000);

afterAll(async () => {
  await group?.stop();
}, 30_000);

describe('Redis Sentinel', () => {
  it('finds the primary through the sentinels and reads its facts', async () => {
    const redis = connectRedis(target, { use: 'request', name: 'herald-test' });
    try {
      expect(await readRedisFacts(redis)).toEqual({ maxmemoryPolicy: 'noeviction', persistence: 'aof' });
      expect(await redis.call('ROLE')).toEqual(expect.arrayContaining(['master']));
    } finally {
      redis.disconnect();
    }
  }, 60_000);

  it('runs the whole story and keeps every delivery through a SENTINEL FAILOVER mid fan-out', async () => {
    const N = 120;
    const rx = await startWebhookReceiver({ acceptUnverified: true });
    // A slow sink: the fan-out is still running when the failover starts.
    rx.script(...Array.from({ length: N + 10 }, () => ({ delayMs: 250 })));
    let h: TestHerald | null = null;
    try {
      h = await startHerald({ HERALD_RATE_LIMIT: '100000', HERALD_EXECUTE_RATE_LIMIT: '100000', HERALD_WORKER_CONCURRENCY: '8' }, { redisUrl: target });
      const api = h.api.bind(h);
      for (let i = 0; i < N; i++) {
        const c = await api('POST', '/v1/connections', { body: { name: `sink-${i}`, type: 'webhook', config: { url: `${rx.url}/hook/${i}` } } });
        expect(c.status).toBe(201);
      }
      const { body: inc } = await api('POST', '/v1/incidents', { body: { title: 'Checkout down', severity: 'major' } });
      const exe = await api('POST', `/v1/incidents/${inc.id}/execute`, { body: {} });
      expect(exe.status).toBe(202);
      await waitFor(() => rx.requests.length >= 10, { timeoutMs: 30_000, what: 'fan-out to start' });

      const before = await group.primaryPort();
      const s = nodeClient(group.sentinels[0]!.port);
      try {
        await s.call('SENTINEL', 'FAILOVER', group.name);
      } finally {
        s.disconnect();
      }
      await waitFor(async () => (await group.primaryPort()) !== before, { timeoutMs: 30_000, intervalMs: 200, what: 'sentinel failover' });
      expect(new Set(rx.requests.map((r) => r.path)).size).toBeLessThan(N);

      await expectFanOutSurvived(h, `/v1/incidents/${inc.id}/executions/${exe.body.id}`, rx.requests, N);
      // No restart: Herald writes on the new primary.
      expect((await api('POST', '/v1/incidents', { body: { title: 'After failover', severity: 'minor' } })).status).toBe(201);
    } finally {
      await h?.close();
      await rx.close();
    }
  }, 150_000);
});
