/**
 * Herald over a Sentinel-managed primary (one primary, two replicas, three sentinels, quorum 2):
 * start-up facts, the whole story to a webhook sink, and a SENTINEL FAILOVER in the middle of a
 * fan-out, with no restart of Herald.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectRedis, type RedisTarget } from '../../src/store/redis-connect.js';
import { readRedisFacts } from '../../src/store/redis.js';
import {
  expectStorySurvivesFailover,
  nodeClient,
  startSentinelGroup,
  type TestSentinelGroup,
} from '../support/redis-cluster.js';
import { waitFor } from '../support/wait.js';

let group: TestSentinelGroup;
let target: RedisTarget;

beforeAll(async () => {
  group = await startSentinelGroup('herald');
  target = {
    kind: 'sentinel',
    sentinels: group.sentinels.map((s) => ({ host: '127.0.0.1', port: s.port })),
    name: group.name,
  };
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
    await expectStorySurvivesFailover(
      target,
      async () => {
        const before = await group.primaryPort();
        const s = nodeClient(group.sentinels[0]!.port);
        try {
          await s.call('SENTINEL', 'FAILOVER', group.name);
        } finally {
          s.disconnect();
        }
        await waitFor(async () => (await group.primaryPort()) !== before, {
          timeoutMs: 30_000,
          intervalMs: 200,
          what: 'sentinel failover',
        });
      },
      // No restart: Herald writes on the new primary.
      async (h) =>
        expect(
          (await h.api('POST', '/v1/incidents', { body: { title: 'After failover', severity: 'minor' } })).status,
        ).toBe(201),
    );
  }, 150_000);
});
