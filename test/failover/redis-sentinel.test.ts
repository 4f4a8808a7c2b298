/**
 * Herald over Sentinel-managed Redis (three sentinels, quorum 2), with ONE and with TWO replicas:
 * start-up facts, then a failover in the middle of a fan-out, commanded (SENTINEL FAILOVER) and by
 * killing the primary (SIGKILL; the sentinels elect), with no restart of Herald. Each case's
 * promises are in ./support.ts (runFailoverCase). A group is shared by the cases of its replica
 * count: each case waits for it to be whole again and uses a Herald of its own (its own prefix).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectRedis } from '../../src/store/redis-connect.js';
import { readRedisFacts, whenReady } from '../../src/store/redis.js';
import { startSentinelGroup, type SentinelGroup } from '../support/redis-sentinel.js';
import { waitFor } from '../support/wait.js';
import { runFailoverCase, type SwitchKind, type Topology } from './support.js';

const groups = new Map<1 | 2, SentinelGroup>();
const figures: Record<string, number> = {};

beforeAll(async () => {
  for (const replicas of [1, 2] as const) groups.set(replicas, await startSentinelGroup(replicas, `herald${replicas}`));
}, 120_000);

afterAll(async () => {
  for (const g of groups.values()) await g.stop();
  console.info(
    `Sentinel: ms from the new primary's promotion to normal reads / acknowledged writes: ${JSON.stringify(figures)}`,
  );
}, 30_000);

const topology = (g: SentinelGroup, replicas: 1 | 2): Topology => ({
  target: g.target,
  replicas,
  settled: () => g.settled(),
  switchPrimary: (kind) => g.switchPrimary(kind),
});

describe('Redis Sentinel', () => {
  it('finds the primary through the sentinels and reads its facts', async () => {
    const redis = connectRedis(groups.get(1)!.target, { use: 'request', name: 'herald-test' });
    try {
      expect(await readRedisFacts(redis)).toEqual({ maxmemoryPolicy: 'noeviction', persistence: 'aof' });
      expect(await redis.call('ROLE')).toEqual(expect.arrayContaining(['master']));
    } finally {
      redis.disconnect();
    }
  }, 60_000);

  it('connects again when ioredis gives a connection up while it asks the sentinels', async () => {
    const redis = connectRedis(groups.get(1)!.target, { use: 'worker', name: 'herald-test' });
    try {
      await whenReady(redis, 30_000);
      // What the failover detector of an earlier connection does when a sentinel announces
      // +switch-master while the client reconnects: its connector is disconnected while it asks
      // the sentinels for the primary, and ioredis ends the client.
      const connector = (redis as unknown as { connector: { disconnect(): void } }).connector;
      let ended = false;
      redis.once('connecting', () => connector.disconnect());
      redis.once('end', () => (ended = true));
      redis.disconnect(true);
      await waitFor(() => ended, { timeoutMs: 30_000, what: 'ioredis to end the client' });
      await waitFor(async () => (await redis.ping()) === 'PONG', {
        timeoutMs: 30_000,
        intervalMs: 100,
        what: 'the client to connect again',
      });
    } finally {
      redis.disconnect();
    }
  }, 60_000);

  for (const replicas of [1, 2] as const) {
    for (const kind of ['commanded', 'killed'] as SwitchKind[]) {
      it(`${replicas} replica(s), primary ${kind}: nothing acknowledged is lost, normal answers within 5 s`, async () => {
        const r = await runFailoverCase(topology(groups.get(replicas)!, replicas), kind);
        figures[`${replicas} replica(s), ${kind}: reads`] = r.readsMs;
        figures[`${replicas} replica(s), ${kind}: writes`] = r.recoveredMs;
        console.info(`Sentinel, ${replicas} replica(s), ${kind}: ${JSON.stringify(r)}`);
      }, 180_000);
    }
  }
});
