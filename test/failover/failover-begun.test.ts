/**
 * The "failover begun" signal (src/store/failover-watch.ts) stops acknowledgements on the old
 * primary. A primary with one replica in sync, Herald's durable writes over it with WAIT, and the
 * sentinels' event channel played by a plain redis-server the test publishes on (a real sentinel
 * accepts no PUBLISH): once a sentinel says a failover of the primary has begun, a durable write
 * that its replica would have confirmed is refused (503) before it is made, until the failover is
 * given up; after a switch, the old primary acknowledges nothing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isRedisUnavailable } from '../../src/domain/common/unavailable.js';
import { awaitReplicas, durableWriter, requireReplicas } from '../../src/store/durability.js';
import { SentinelFailoverWatch } from '../../src/store/failover-watch.js';
import { connectRedis, type RedisClient } from '../../src/store/redis-connect.js';
import { cli, freePort, persistentServerArgs, startServer, waitPing, type TestNode } from '../support/redis-cluster.js';
import { waitFor } from '../support/wait.js';

const NAME = 'herald-begun';
let dir: string;
const nodes: TestNode[] = [];
let primary: number;
let replica: number;
let events: number;
let client: RedisClient;
let writer: RedisClient;
let watch: SentinelFailoverWatch;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'herald-begun-'));
  primary = await freePort(false);
  nodes.push({ port: primary, process: startServer(persistentServerArgs(primary, dir)) });
  await waitPing(primary);
  replica = await freePort(false);
  const replicaOf = ['--replicaof', '127.0.0.1', String(primary)];
  nodes.push({ port: replica, process: startServer(persistentServerArgs(replica, dir, replicaOf)) });
  events = await freePort(false);
  nodes.push({ port: events, process: startServer(persistentServerArgs(events, dir)) });
  await waitPing(replica);
  await waitPing(events);
  await waitFor(async () => /slave0:.*state=online/.test(await cli(primary, 'INFO', 'replication')), {
    timeoutMs: 30_000,
    intervalMs: 100,
    what: 'replica in sync',
  });
  const target = { kind: 'standalone', url: `redis://127.0.0.1:${primary}` } as const;
  client = connectRedis(target, { use: 'request', name: 'herald-test' });
  writer = connectRedis(target, { use: 'request', name: 'herald-test-durable' });
  watch = new SentinelFailoverWatch({ sentinels: [{ host: '127.0.0.1', port: events }], name: NAME });
  requireReplicas(client, { replicas: 1, timeoutMs: 2000 }, writer, watch);
  // The watch listens before the test speaks.
  await waitFor(async () => Number((await cli(events, 'PUBSUB', 'NUMPAT')).trim()) >= 1, {
    timeoutMs: 30_000,
    intervalMs: 50,
    what: 'the watch to subscribe',
  });
}, 60_000);

afterAll(async () => {
  watch?.close();
  client?.disconnect();
  writer?.disconnect();
  for (const n of nodes) n.process.kill('SIGKILL');
  await waitFor(() => nodes.every((n) => n.process.exitCode !== null || n.process.signalCode !== null), {
    timeoutMs: 10_000,
    what: 'servers to exit',
  }).catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
});

/** A durable write as the stores make one (commit.ts): on the durable writer, then WAIT. */
async function durableSet(key: string): Promise<'acknowledged' | Error> {
  try {
    await durableWriter(client).set(key, 'v');
    await awaitReplicas(client, key);
    return 'acknowledged';
  } catch (e) {
    return e as Error;
  }
}

const publish = (channel: string, message: string) => cli(events, 'PUBLISH', channel, message);
const exists = async (key: string) => Number((await cli(primary, 'EXISTS', key)).trim()) === 1;

describe('a Sentinel failover that has begun', () => {
  it('stops durable acknowledgements on the old primary until it is given up', async () => {
    expect(await durableSet('before')).toBe('acknowledged');

    await publish('+try-failover', `master ${NAME} 127.0.0.1 ${primary}`);
    let n = 0;
    const refused = await waitFor(
      async () => {
        const r = await durableSet(`during-${n++}`);
        return r === 'acknowledged' ? undefined : r;
      },
      { timeoutMs: 10_000, intervalMs: 20, what: 'durable writes to be refused' },
    );
    // A 503, and the write was never made: the replica that would have confirmed it is still in
    // sync, so only the signal stopped it.
    expect(isRedisUnavailable(refused), String(refused)).toBe(true);
    expect(refused.message).toMatch(/failover/);
    expect(await exists(`during-${n - 1}`)).toBe(false);
    for (let i = 0; i < 5; i++) expect(await durableSet(`still-${i}`)).toBeInstanceOf(Error);
    expect(await cli(primary, 'INFO', 'replication')).toMatch(/slave0:.*state=online/);

    // Another master's failover ending changes nothing; this one's being given up does.
    await publish('-failover-abort-no-good-slave', `master other 127.0.0.1 ${primary}`);
    await publish('-failover-abort-no-good-slave', `master ${NAME} 127.0.0.1 ${primary}`);
    await waitFor(async () => (await durableSet(`after-${n++}`)) === 'acknowledged', {
      timeoutMs: 10_000,
      intervalMs: 20,
      what: 'durable writes acknowledged again',
    });
  }, 60_000);

  it('acknowledges nothing on the old primary once the sentinels have switched away from it', async () => {
    expect(await durableSet('before-switch')).toBe('acknowledged');
    await publish('+switch-master', `${NAME} 127.0.0.1 ${primary} 127.0.0.1 ${replica}`);
    const refused = await waitFor(
      async () => {
        const r = await durableSet('after-switch');
        return r === 'acknowledged' ? undefined : r;
      },
      { timeoutMs: 10_000, intervalMs: 20, what: 'durable writes on the old primary to be refused' },
    );
    expect(refused.message).toMatch(/not on the primary the sentinels named/);
  }, 60_000);
});
