/**
 * A private Sentinel-managed Redis for failover tests: one primary, one or two replicas and three
 * sentinels (quorum 2), each a redis-server on a free loopback port under a temporary directory,
 * killed by stop() (and on exit). Nothing here touches the shared Redis on 6379.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RedisTarget } from '../../src/store/redis-connect.js';
import { cli, freePort, persistentServerArgs, startServer, waitPing, type TestNode } from './redis-cluster.js';
import { waitFor } from './wait.js';

export interface SentinelGroup {
  name: string;
  sentinels: TestNode[];
  /** What Herald is given: the sentinels and the primary's name. */
  target: RedisTarget;
  /** The port the sentinels call primary now. */
  primaryPort(): Promise<number>;
  /** Waits until the group has a primary and `replicas` replicas in sync that every sentinel knows. */
  settled(): Promise<void>;
  /**
   * Switches the primary: `commanded` by SENTINEL FAILOVER, `killed` by SIGKILL of the primary
   * (the sentinels notice after down-after-milliseconds and elect). Resolves with the time
   * (Date.now()) at which the new primary was seen promoted (ROLE master on it); a killed primary
   * is started again right after, as a replica of the new one, as an operator would.
   */
  switchPrimary(kind: 'commanded' | 'killed'): Promise<{ from: number; to: number; promotedAt: number }>;
  stop(): Promise<void>;
}

/** Sentinel settings of the group: a failover in a few seconds. */
const DOWN_AFTER_MS = 1500;

export async function startSentinelGroup(replicaCount: 1 | 2, name = 'herald'): Promise<SentinelGroup> {
  const dir = mkdtempSync(join(tmpdir(), 'herald-sentinel-'));
  const servers = new Map<number, TestNode>();
  const sentinels: TestNode[] = [];
  const serverArgs = (port: number, extra: string[]) => persistentServerArgs(port, dir, extra);
  const startNode = (port: number, extra: string[]): TestNode => {
    const node = { port, process: startServer(serverArgs(port, extra)) };
    servers.set(port, node);
    return node;
  };
  const all = () => [...servers.values(), ...sentinels];
  const stop = async () => {
    for (const n of all()) n.process.kill('SIGKILL');
    await waitFor(() => all().every((n) => n.process.exitCode !== null || n.process.signalCode !== null), {
      timeoutMs: 10_000,
      what: 'sentinel group to exit',
    }).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  const primaryPort = async () => {
    for (const s of sentinels) {
      const out = await cli(s.port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name).catch(() => '');
      const port = Number(out.trim().split('\n')[1]);
      if (port > 0) return port;
    }
    throw new Error('no sentinel names a primary');
  };
  const role = async (port: number) => (await cli(port, 'ROLE').catch(() => '')).trim().split('\n')[0];
  const settled = async () => {
    await waitFor(
      async () => {
        const primary = await primaryPort();
        if ((await role(primary)) !== 'master') return false;
        const info = await cli(primary, 'INFO', 'replication');
        const online = info.split('\n').filter((l) => /^slave\d+:.*state=online/.test(l)).length;
        if (online < replicaCount) return false;
        for (const s of sentinels) {
          const f = (await cli(s.port, 'SENTINEL', 'MASTER', name)).trim().split('\n');
          const v = (k: string) => f[f.indexOf(k) + 1];
          if (Number(v('port')) !== primary || Number(v('num-other-sentinels')) < 2) return false;
          if (!/^master$/.test(v('flags') ?? '')) return false;
          const replicas = (await cli(s.port, 'SENTINEL', 'REPLICAS', name)).trim().split('\n');
          const healthy = replicas.filter((l, i) => replicas[i - 1] === 'flags' && l === 'slave').length;
          if (healthy < replicaCount) return false;
        }
        return true;
      },
      { timeoutMs: 60_000, intervalMs: 200, what: `sentinel group "${name}" settled` },
    );
  };
  try {
    const master = startNode(await freePort(false), []);
    await waitPing(master.port);
    for (let i = 0; i < replicaCount; i++) {
      const r = startNode(await freePort(false), ['--replicaof', '127.0.0.1', String(master.port)]);
      await waitPing(r.port);
    }
    for (let i = 0; i < 3; i++) {
      const port = await freePort(false);
      const conf = join(dir, `sentinel-${port}.conf`);
      // Sentinel rewrites its config file, so each gets its own.
      writeFileSync(
        conf,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `sentinel monitor ${name} 127.0.0.1 ${master.port} 2`,
          `sentinel down-after-milliseconds ${name} ${DOWN_AFTER_MS}`,
          `sentinel failover-timeout ${name} 6000`,
          `sentinel parallel-syncs ${name} 1`,
          '',
        ].join('\n'),
      );
      sentinels.push({ port, process: startServer([conf, '--sentinel']) });
    }
    for (const s of sentinels) await waitPing(s.port);
    await settled();
  } catch (e) {
    await stop();
    throw e;
  }
  return {
    name,
    sentinels,
    target: { kind: 'sentinel', sentinels: sentinels.map((s) => ({ host: '127.0.0.1', port: s.port })), name },
    primaryPort,
    settled,
    async switchPrimary(kind) {
      const from = await primaryPort();
      if (kind === 'commanded') {
        await cli(sentinels[0]!.port, 'SENTINEL', 'FAILOVER', name);
      } else {
        servers.get(from)!.process.kill('SIGKILL');
      }
      let to = from;
      await waitFor(
        async () => {
          to = await primaryPort();
          return to !== from && (await role(to)) === 'master';
        },
        { timeoutMs: 60_000, intervalMs: 50, what: `sentinel ${kind} failover` },
      );
      const promotedAt = Date.now();
      if (kind === 'killed') {
        const dead = servers.get(from)!;
        await waitFor(() => dead.process.exitCode !== null || dead.process.signalCode !== null, {
          timeoutMs: 10_000,
          what: 'killed primary to exit',
        });
        // Back as a replica of the new primary (the sentinels would convert it anyway).
        startNode(from, ['--replicaof', '127.0.0.1', String(to)]);
      }
      return { from, to, promotedAt };
    },
    stop,
  };
}
