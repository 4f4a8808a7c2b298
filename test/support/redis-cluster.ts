/**
 * Private Redis Clusters for tests (Sentinel groups: redis-sentinel.ts): their own redis-server processes on free
 * loopback ports under a temporary directory, killed by stop() and, as a last resort, on exit.
 * Nothing here touches the shared Redis on 6379.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { expect } from 'vitest';
import type { RedisTarget } from '../../src/store/redis-connect.js';
import { startHerald, type TestHerald } from './herald.js';
import { startWebhookReceiver } from './peers/webhook-receiver.js';
import { waitFor } from './wait.js';

const run = promisify(execFile);
const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const p of live) p.kill('SIGKILL');
});

async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** A port that is free, and (for cluster nodes) whose bus port, port + 10000, is free too. */
export async function freePort(withBus: boolean): Promise<number> {
  for (;;) {
    const p = 20_000 + Math.floor(Math.random() * 35_000);
    if ((await portFree(p)) && (!withBus || (await portFree(p + 10_000)))) return p;
  }
}

export function startServer(args: string[]): ChildProcess {
  const child = spawn('redis-server', args, { stdio: 'ignore' });
  live.add(child);
  child.once('exit', () => live.delete(child));
  return child;
}

export async function cli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { timeout: 20_000 });
  return stdout;
}

export async function waitPing(port: number): Promise<void> {
  await waitFor(async () => (await cli(port, 'PING')).trim() === 'PONG', {
    timeoutMs: 30_000,
    intervalMs: 100,
    what: `redis on ${port}`,
  });
}

export interface TestNode {
  port: number;
  process: ChildProcess;
}

export interface TestCluster {
  nodes: TestNode[];
  /** Node whose `CLUSTER NODES` line says master / slave right now. */
  roleOf(port: number): Promise<'master' | 'slave'>;
  /** The port of the master serving `key`'s slot, and of one of its replicas. */
  ownerOf(key: string): Promise<{ master: number; replica: number | null }>;
  /** Waits until every node is up, the cluster is ok and every master has all its replicas in sync. */
  settled(): Promise<void>;
  /**
   * Switches the master serving `key`: `commanded` by CLUSTER FAILOVER on one of its replicas,
   * `killed` by SIGKILL of the master (a replica takes over once the others mark it failed).
   * Resolves with when the replica was seen promoted; a killed master is started again right
   * after, and rejoins as a replica of the new one (its nodes.conf says so).
   */
  switchPrimary(kind: 'commanded' | 'killed', key: string): Promise<{ promotedAt: number }>;
  stop(): Promise<void>;
}

/**
 * CLUSTER FAILOVER on `replica`, until `done` says it took effect. Redis aborts a manual failover
 * it cannot finish within 5 s (CLUSTER_MF_TIMEOUT: the replica did not reach the paused master's
 * offset, or won no election in time) and says so only in its log; the command is then given
 * again, as an operator would, until `timeoutMs`.
 */
export async function manualFailover(replica: number, done: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; ; attempt++) {
    // Again only if it has not taken effect meanwhile (a master refuses the command).
    if (attempt === 0) await cli(replica, 'CLUSTER', 'FAILOVER');
    else if (!(await done().catch(() => false))) await cli(replica, 'CLUSTER', 'FAILOVER').catch(() => '');
    const tryUntil = Math.min(deadline, Date.now() + MANUAL_FAILOVER_RETRY_MS);
    try {
      await waitFor(async () => done().catch(() => false), {
        timeoutMs: Math.max(0, tryUntil - Date.now()),
        intervalMs: 50,
        what: 'CLUSTER FAILOVER',
      });
      return;
    } catch (e) {
      if (Date.now() >= deadline) throw e;
    }
  }
}
/** Past Redis' 5 s manual failover limit, with room for the election that ends one. */
const MANUAL_FAILOVER_RETRY_MS = 8_000;

/**
 * A private redis-server's arguments as a failover test wants them: on 127.0.0.1, files of its
 * own under `dir`, AOF on (a restarted node keeps what it acknowledged), nothing evicted.
 */
export function persistentServerArgs(port: number, dir: string, extra: string[] = []): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    ...extra,
    '--dir',
    dir,
    '--dbfilename',
    `dump-${port}.rdb`,
    '--appendfilename',
    `aof-${port}.aof`,
    '--appenddirname',
    `aof-${port}`,
    '--save',
    '',
    '--appendonly',
    'yes',
    '--maxmemory-policy',
    'noeviction',
  ];
}

/** Three masters with `replicas` replicas each; resolves once every node reports cluster_state:ok. */
export async function startCluster(replicas: 1 | 2 = 1): Promise<TestCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'herald-cluster-'));
  const nodes: TestNode[] = [];
  const args = (port: number) =>
    persistentServerArgs(port, dir, [
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      join(dir, `nodes-${port}.conf`),
      '--cluster-node-timeout',
      '2000',
    ]);
  for (let i = 0; i < 3 * (1 + replicas); i++) {
    const port = await freePort(true);
    nodes.push({ port, process: startServer(args(port)) });
  }
  const stop = async () => {
    for (const n of nodes) n.process.kill('SIGKILL');
    await waitFor(() => nodes.every((n) => n.process.exitCode !== null || n.process.signalCode !== null), {
      timeoutMs: 10_000,
      what: 'cluster nodes to exit',
    }).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (const n of nodes) await waitPing(n.port);
    await run(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...nodes.map((n) => `127.0.0.1:${n.port}`),
        '--cluster-replicas',
        String(replicas),
        '--cluster-yes',
      ],
      { timeout: 60_000 },
    );
    for (const n of nodes) {
      await waitFor(async () => (await cli(n.port, 'CLUSTER', 'INFO')).includes('cluster_state:ok'), {
        timeoutMs: 45_000,
        intervalMs: 200,
        what: `cluster_state:ok on ${n.port}`,
      });
    }
    // Replica assignments spread by gossip after cluster_state:ok: wait until every node knows
    // all three replicas, and every replica has synced, so a failover has somewhere to go.
    for (const n of nodes) {
      await waitFor(
        async () => {
          const lines = (await cli(n.port, 'CLUSTER', 'NODES'))
            .trim()
            .split('\n')
            .map((l) => l.split(' '));
          return lines.filter((f) => f[2]?.includes('slave') && f[3] !== '-').length === 3 * replicas;
        },
        { timeoutMs: 45_000, intervalMs: 200, what: `replicas known to ${n.port}` },
      );
      const info = await cli(n.port, 'INFO', 'replication');
      if (info.includes('role:slave')) {
        await waitFor(async () => (await cli(n.port, 'INFO', 'replication')).includes('master_link_status:up'), {
          timeoutMs: 45_000,
          intervalMs: 200,
          what: `replica ${n.port} in sync`,
        });
      }
    }
  } catch (e) {
    await stop();
    throw e;
  }
  const table = async (port: number) =>
    (await cli(port, 'CLUSTER', 'NODES'))
      .trim()
      .split('\n')
      .map((l) => l.split(' '));
  const roleOf = async (port: number): Promise<'master' | 'slave'> => {
    const me = (await table(port)).find((f) => f[2]?.includes('myself'));
    return me?.[2]?.includes('master') ? 'master' : 'slave';
  };
  const ownerOf = async (key: string) => {
    // Asked of a node that is running: the first one may be the master a test killed.
    const alive = nodes.find((n) => n.process.exitCode === null && n.process.signalCode === null) ?? nodes[0]!;
    const slot = Number((await cli(alive.port, 'CLUSTER', 'KEYSLOT', key)).trim());
    const rows = await table(alive.port);
    const master = rows.find(
      (f) =>
        f[2]?.includes('master') &&
        !f[2].includes('fail') &&
        f.slice(8).some((r) => {
          const [a, b] = r.split('-').map(Number);
          return a !== undefined && slot >= a && slot <= (b ?? a);
        }),
    );
    if (!master) throw new Error(`no master for slot ${slot}`);
    const replica = rows.find((f) => f[3] === master[0] && !f[2]?.includes('fail'));
    const portOf = (f: string[]) => Number(f[1]?.split('@')[0]?.split(':')[1]);
    return { master: portOf(master), replica: replica ? portOf(replica) : null };
  };
  const settled = async () => {
    await waitFor(
      async () => {
        for (const n of nodes) {
          if (!(await cli(n.port, 'CLUSTER', 'INFO').catch(() => '')).includes('cluster_state:ok')) return false;
          const rows = await table(n.port);
          if (rows.some((f) => f[2]?.includes('fail'))) return false;
          if (rows.filter((f) => f[2]?.includes('slave') && f[3] !== '-').length !== 3 * replicas) return false;
          const info = await cli(n.port, 'INFO', 'replication');
          if (info.includes('role:slave') && !info.includes('master_link_status:up')) return false;
        }
        return true;
      },
      { timeoutMs: 90_000, intervalMs: 250, what: 'cluster settled' },
    );
  };
  return {
    nodes,
    settled,
    async switchPrimary(kind, key) {
      const { master, replica } = await ownerOf(key);
      if (replica === null) throw new Error('the master has no replica');
      if (kind === 'commanded') {
        await manualFailover(replica, async () => (await roleOf(replica)) === 'master');
      } else {
        const dead = nodes.find((n) => n.port === master)!;
        dead.process.kill('SIGKILL');
        // Any of its replicas may win the election.
        await waitFor(
          async () => {
            const now = (await ownerOf(key).catch(() => null))?.master;
            return now !== undefined && now !== master && (await roleOf(now)) === 'master';
          },
          { timeoutMs: 60_000, intervalMs: 50, what: 'a replica to take over the killed master' },
        );
      }
      const promotedAt = Date.now();
      if (kind === 'killed') {
        const dead = nodes.find((n) => n.port === master)!;
        await waitFor(() => dead.process.exitCode !== null || dead.process.signalCode !== null, {
          timeoutMs: 10_000,
          what: 'killed master to exit',
        });
        dead.process = startServer(args(master));
      }
      return { promotedAt };
    },
    roleOf,
    ownerOf,
    stop,
  };
}

/** A plain connection to one node, for a test's own checks. */
export const nodeClient = (port: number): Redis =>
  new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 3, lazyConnect: false, commandTimeout: 10_000 });

/**
 * After a failover mid fan-out: waits for the execution to finish, then checks that it delivered
 * and that every delivery reached the receiver — a repeat only where Herald flagged it
 * `possible_duplicate`. Returns the finished execution.
 */
export async function expectFanOutSurvived(
  h: Pick<TestHerald, 'api'>,
  executionPath: string,
  received: readonly { path: string }[],
  n: number,
): Promise<{ deliveries: { status: string; possible_duplicate: boolean }[] }> {
  const done = await waitFor(
    async () => {
      const e = await h.api('GET', executionPath);
      return e.status === 200 && !['queued', 'in_progress'].includes(e.body.status)
        ? (e.body as { status: string; deliveries: { status: string; possible_duplicate: boolean }[] })
        : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 250, what: 'execution to finish after the failover' },
  );
  expect(done.status).toBe('delivered');
  const paths = new Map<string, number>();
  for (const r of received) paths.set(r.path, (paths.get(r.path) ?? 0) + 1);
  expect(paths.size).toBe(n);
  const repeated = [...paths].filter(([, count]) => count > 1).length;
  expect(done.deliveries.filter((d) => d.possible_duplicate).length).toBeGreaterThanOrEqual(repeated);
  return done;
}

/**
 * The whole story through a failover mid fan-out, with no restart of Herald: Herald on `redis`
 * executes an incident to `n` webhook connections at a slow receiver; once the fan-out has
 * started, `failOver` runs (resolving once the new primary serves); the failover must land in the
 * middle of the fan-out and every delivery must survive it (expectFanOutSurvived). `afterwards`
 * then checks that the same Herald still serves, before it is closed.
 */
export async function expectStorySurvivesFailover(
  redis: RedisTarget,
  failOver: (h: TestHerald) => Promise<void>,
  afterwards: (h: TestHerald, incidentId: string) => Promise<void>,
  n = 120,
): Promise<void> {
  const rx = await startWebhookReceiver({ acceptUnverified: true });
  // A slow sink: the fan-out is still running when the failover starts.
  rx.script(...Array.from({ length: n + 10 }, () => ({ delayMs: 250 })));
  let h: TestHerald | null = null;
  try {
    h = await startHerald(
      { HERALD_RATE_LIMIT: '100000', HERALD_EXECUTE_RATE_LIMIT: '100000', HERALD_WORKER_CONCURRENCY: '8' },
      { redisUrl: redis },
    );
    const api = h.api.bind(h);
    for (let i = 0; i < n; i++) {
      const c = await api('POST', '/v1/connections', {
        body: { name: `sink-${i}`, type: 'webhook', config: { url: `${rx.url}/hook/${i}` } },
      });
      expect(c.status).toBe(201);
    }
    const { body: inc } = await api('POST', '/v1/incidents', { body: { title: 'Checkout down', severity: 'major' } });
    const exe = await api('POST', `/v1/incidents/${inc.id}/execute`, { body: {} });
    expect(exe.status).toBe(202);
    expect(exe.body.deliveries).toHaveLength(n);
    await waitFor(() => rx.requests.length >= 10, { timeoutMs: 30_000, what: 'fan-out to start' });

    await failOver(h);
    // The failover really landed in the middle of the fan-out.
    expect(new Set(rx.requests.map((r) => r.path)).size).toBeLessThan(n);
    const done = await expectFanOutSurvived(h, `/v1/incidents/${inc.id}/executions/${exe.body.id}`, rx.requests, n);
    expect(done.deliveries.every((d) => d.status === 'delivered')).toBe(true);
    await afterwards(h, inc.id as string);
  } finally {
    await h?.close();
    await rx.close();
  }
}
