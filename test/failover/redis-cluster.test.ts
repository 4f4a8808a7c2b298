/**
 * Herald's Redis access on a real 3-master Redis Cluster (one replica each): connecting through a
 * node that does not own Herald's slot, the start-up facts, multi-key scripts and MULTI under the
 * hash tag, the rate limiter, and the BullMQ delivery queue carrying on across a failover.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openCore, createHerald } from '../../src/composition/app.js';
import { loadConfig } from '../../src/config.js';
import { BullDeliveryQueue, startDeliveryWorker } from '../../src/delivery/queue.js';
import { createKeys } from '../../src/store/keys.js';
import { connectRedis, redisTargetFromConfig, type RedisClient } from '../../src/store/redis-connect.js';
import { readRedisFacts } from '../../src/store/redis.js';
import {
  expectStorySurvivesFailover,
  manualFailover,
  startCluster,
  type TestCluster,
} from '../support/redis-cluster.js';
import { uniquePrefix } from '../support/redis.js';
import { waitFor } from '../support/wait.js';
import { runFailoverCase, type SwitchKind, type Topology } from './support.js';

const log = pino({ level: 'silent' });
let cluster: TestCluster;

/** CLUSTER FAILOVER on the replica of `master`; resolves once the two have swapped roles. */
async function failOver(master: number, replica: number): Promise<void> {
  await manualFailover(
    replica,
    async () => (await cluster.roleOf(replica)) === 'master' && (await cluster.roleOf(master)) === 'slave',
  );
}
/** Waits for `p` at most `ms`; cleanup that hangs must not hide a test's own failure. */
async function settleWithin(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p.catch(() => undefined), new Promise((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
}
const opened: RedisClient[] = [];
const open = (c: RedisClient) => (opened.push(c), c);

beforeAll(async () => {
  cluster = await startCluster();
}, 90_000);

afterAll(async () => {
  for (const c of opened) c.disconnect();
  await cluster?.stop();
}, 30_000);

/** A seed node that owns neither the key's slot as master nor replicates it. */
async function strangerTo(key: string): Promise<number> {
  const { master, replica } = await cluster.ownerOf(key);
  const other = cluster.nodes.find((n) => n.port !== master && n.port !== replica);
  if (!other) throw new Error('no unrelated node');
  return other.port;
}

describe('Redis Cluster', () => {
  it('connects through a node that does not own the slot, and reads the facts of every master', async () => {
    const keys = createKeys(uniquePrefix('cl'));
    const seed = await strangerTo(keys.tag);
    const redis = open(
      connectRedis(
        { kind: 'cluster', nodes: [{ host: '127.0.0.1', port: seed }] },
        { use: 'request', name: 'herald-test' },
      ),
    );
    await redis.set(keys.meta('x'), 'v');
    expect(await redis.get(keys.meta('x'))).toBe('v');
    expect(await readRedisFacts(redis)).toEqual({ maxmemoryPolicy: 'noeviction', persistence: 'aof' });
  }, 60_000);

  it('runs multi-key Lua, MULTI and the rate limiter under the hash tag in one slot', async () => {
    const keys = createKeys(uniquePrefix('cl'));
    const redis = open(
      connectRedis(
        { kind: 'cluster', nodes: [{ host: '127.0.0.1', port: cluster.nodes[0]!.port }] },
        { use: 'request', name: 'herald-test' },
      ),
    );
    const a = keys.incident('a');
    const b = keys.incidents();
    const r = await redis.eval(
      "redis.call('SET', KEYS[1], ARGV[1]); redis.call('SADD', KEYS[2], ARGV[1]); return redis.call('SCARD', KEYS[2])",
      2,
      a,
      b,
      'one',
    );
    expect(r).toBe(1);
    const res = await redis.multi().set(keys.incident('c'), '1').sadd(b, 'two').scard(b).exec();
    expect(res?.map(([err]) => err)).toEqual([null, null, null]);
    expect(res?.[2]?.[1]).toBe(2);

    const limiter = new RateLimiterRedis({
      storeClient: redis,
      keyPrefix: keys.rateLimitPrefix('default'),
      points: 2,
      duration: 60,
    });
    await limiter.consume('k');
    await limiter.consume('k');
    await expect(limiter.consume('k')).rejects.toMatchObject({ remainingPoints: 0 });
  }, 60_000);

  it('delivers every queued job across a CLUSTER FAILOVER of the slot master, without a restart', async () => {
    const keys = createKeys(uniquePrefix('cl'));
    const seed = [{ host: '127.0.0.1', port: cluster.nodes[0]!.port }];
    const queueConn = open(connectRedis({ kind: 'cluster', nodes: seed }, { use: 'worker', name: 'herald-queue' }));
    const workerConn = open(connectRedis({ kind: 'cluster', nodes: seed }, { use: 'worker', name: 'herald-worker' }));
    const queue = new BullDeliveryQueue(queueConn, keys.bullPrefix, () => undefined);
    const seen = new Map<string, number>();
    const N = 200;
    const worker = startDeliveryWorker({
      connection: workerConn,
      prefix: keys.bullPrefix,
      concurrency: 8,
      lockDurationMs: 5000,
      now: Date.now,
      log,
      claimDispatch: () => Promise.reject(new Error('this test queues no dispatch jobs')),
      handOff: () => Promise.resolve(),
      async process(id) {
        // A slow-ish sink, so the failover lands in the middle of the fan-out.
        await new Promise((r) => setTimeout(r, 20));
        seen.set(id, (seen.get(id) ?? 0) + 1);
        return { kind: 'done', status: 'delivered' };
      },
    });
    try {
      const ids = Array.from({ length: N }, (_, i) => `dlv_${String(i).padStart(26, '0')}`);
      await queue.enqueue(ids.map((deliveryId) => ({ deliveryId, jobId: `${deliveryId}-0`, delayMs: 0 })));
      await waitFor(() => seen.size >= 20, { timeoutMs: 30_000, what: 'fan-out to start' });

      const { master, replica } = await cluster.ownerOf(keys.tag);
      expect(replica).not.toBeNull();
      await failOver(master, replica!);
      expect(seen.size, 'the failover should land mid fan-out').toBeLessThan(N);
      await waitFor(() => seen.size === N, {
        timeoutMs: 45_000,
        intervalMs: 100,
        what: `all ${N} jobs after failover (saw ${seen.size})`,
      });
      expect(ids.every((id) => seen.has(id))).toBe(true);
    } finally {
      // Bounded like the worker role's own drain (src/delivery/worker.ts): a worker stuck on a
      // connection to the demoted master must fail this test with the message above, not hang it
      // until vitest's time-out hides what was seen.
      await settleWithin(worker.close(), 5_000);
      if (worker.isRunning()) await settleWithin(worker.close(true), 5_000);
      await settleWithin(queue.close(), 5_000);
    }
  }, 120_000);

  it('runs the whole story on the cluster and keeps every delivery through a failover mid fan-out', async () => {
    await expectStorySurvivesFailover(
      { kind: 'cluster', nodes: [{ host: '127.0.0.1', port: cluster.nodes[0]!.port }] },
      async (h) => {
        const { master, replica } = await cluster.ownerOf(createKeys(h.prefix).tag);
        await failOver(master, replica!);
      },
      // Herald was not restarted: it still serves reads on the new primary.
      async (h, incidentId) => expect((await h.api('GET', `/v1/incidents/${incidentId}`)).status).toBe(200),
    );
  }, 150_000);

  it('starts and runs the CLI core from REDIS_CLUSTER_NODES naming only a node that does not own the slot', async () => {
    const prefix = uniquePrefix('cl');
    const seed = await strangerTo(createKeys(prefix).tag);
    const dataDir = mkdtempSync(join(tmpdir(), 'herald-cl-'));
    const config = loadConfig({
      REDIS_CLUSTER_NODES: `127.0.0.1:${seed}`,
      HERALD_KEY_PREFIX: prefix,
      HERALD_DATA_DIR: dataDir,
      LOG_LEVEL: 'silent',
    });
    try {
      // Start-up (its CONFIG GET checks included) and a write through the API services.
      const herald = await createHerald({ config, redisUrl: redisTargetFromConfig(config), log, worker: false });
      let id: string;
      try {
        id = (
          await herald.services.apiKeys.create(
            { name: 'ops', scopes: ['*'] },
            { type: 'system', id: 'test', name: 'test' },
          )
        ).key.id;
      } finally {
        await herald.close();
      }
      // The CLI's core, as `herald keys …` opens it, reads what the server wrote.
      const core = await openCore({ config, log });
      try {
        expect((await core.services.apiKeys.get(id)).name).toBe('ops');
      } finally {
        await core.close();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});

/**
 * The failover matrix on a Cluster (./support.ts, runFailoverCase): the master of Herald's slot
 * switched by CLUSTER FAILOVER on its replica, or killed (SIGKILL; a replica takes over), with one
 * replica per master (the cluster above, whole again first) and with two (a cluster of nine).
 */
describe('Redis Cluster failover: nothing acknowledged is lost, normal answers within 5 s', () => {
  let twoReplicas: TestCluster | undefined;
  const figures: Record<string, number> = {};
  beforeAll(async () => {
    twoReplicas = await startCluster(2);
  }, 120_000);
  afterAll(async () => {
    await twoReplicas?.stop();
    console.info(`Cluster: ms from the promotion to normal reads / acknowledged writes: ${JSON.stringify(figures)}`);
  }, 30_000);

  const topology = (c: TestCluster, replicas: 1 | 2): Topology => ({
    target: { kind: 'cluster', nodes: c.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })) },
    replicas,
    settled: () => c.settled(),
    switchPrimary: (kind, prefix) => c.switchPrimary(kind, createKeys(prefix).tag),
  });

  for (const replicas of [1, 2] as const) {
    for (const kind of ['commanded', 'killed'] as SwitchKind[]) {
      it(`${replicas} replica(s) per master, master ${kind}`, async () => {
        const c = replicas === 1 ? cluster : twoReplicas!;
        const r = await runFailoverCase(topology(c, replicas), kind);
        figures[`${replicas} replica(s), ${kind}: reads`] = r.readsMs;
        figures[`${replicas} replica(s), ${kind}: writes`] = r.recoveredMs;
        console.info(`Cluster, ${replicas} replica(s), ${kind}: ${JSON.stringify(r)}`);
      }, 180_000);
    }
  }
});
