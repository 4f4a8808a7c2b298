/**
 * `npx tsx bench/wait-replicas.ts [--quick]`: what HERALD_REDIS_WAIT_REPLICAS costs
 * (docs/operations/failover.md). The write row of `npm run bench` (POST /v1/incidents, 64
 * connections), against a PRIVATE primary with one replica (both redis-server on random ports,
 * no persistence, noeviction), with Herald built and run as it ships (`node dist/main.js`):
 * once with HERALD_REDIS_WAIT_REPLICAS=0 and once with 1, alternating which goes first from round
 * to round; each figure is the median of the rounds. Prints write req/s and p99 for both.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, median, ROOT, startChild, startTsChild, stopAll, waitFor, type Child, untilReady } from './lib.js';
import type { LoadResult, LoadSpec } from './load.js';

const QUICK = process.argv.includes('--quick');
const ROUNDS = QUICK ? 1 : 3;
const LOAD_SEC = QUICK ? 3 : 10;
const WARMUP_SEC = QUICK ? 1 : 2;
const CONNECTIONS = 64;

const dir = mkdtempSync(join(os.tmpdir(), 'herald-bench-wait-'));
const baseEnv: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME };
const secretKey = randomBytes(32).toString('base64');

function redisServer(name: string, port: number, extra: string[]): Child {
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
  args.push('--maxmemory-policy', 'noeviction', '--dir', dir, '--dbfilename', `${port}.rdb`, ...extra);
  return startChild(name, 'redis-server', args, baseEnv);
}

async function main(): Promise<void> {
  const primaryPort = await freePort();
  const replicaPort = await freePort();
  redisServer('primary', primaryPort, []);
  redisServer('replica', replicaPort, ['--replicaof', '127.0.0.1', String(primaryPort)]);
  const admin = new Redis({ host: '127.0.0.1', port: primaryPort, lazyConnect: true, retryStrategy: () => 50 });
  admin.on('error', () => undefined);
  try {
    await waitFor(
      'the replica in sync',
      async () => /slave0:.*state=online/.test(await admin.info('replication').catch(() => '')),
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    const env = (extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv => ({
      ...baseEnv,
      REDIS_URL: `redis://127.0.0.1:${primaryPort}`,
      HERALD_KEY_PREFIX: 'bench',
      HERALD_SECRET_KEY: secretKey,
      HERALD_DATA_DIR: join(dir, 'data'),
      HOST: '127.0.0.1',
      HERALD_ROLE: 'api',
      HERALD_RATE_LIMIT: '1000000000',
      HERALD_EXECUTE_RATE_LIMIT: '1000000000',
      LOG_LEVEL: 'silent',
      ...extra,
    });
    const created = spawnSync(
      process.execPath,
      [join(ROOT, 'dist', 'cli', 'main.js'), 'keys', 'create', '--name', 'bench', '--scopes', '*', '--json'],
      { cwd: ROOT, env: env({}), timeout: 30_000 },
    );
    if (created.status !== 0) throw new Error(`keys create → ${created.status}: ${created.stderr.toString()}`);
    const token = String((JSON.parse(created.stdout.toString()) as { token: string }).token);
    const loader = startTsChild('load generator', 'load.ts', [], baseEnv, { stdin: true });
    await loader.json('ready', 30_000);

    const samples: Record<'off' | 'on', LoadResult[]> = { off: [], on: [] };
    let id = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const order: ('off' | 'on')[] = round % 2 === 0 ? ['off', 'on'] : ['on', 'off'];
      for (const side of order) {
        const port = await freePort();
        const base = `http://127.0.0.1:${port}`;
        const herald = startChild(
          `herald (WAIT ${side})`,
          process.execPath,
          [join(ROOT, 'dist', 'main.js')],
          env({ PORT: String(port), HERALD_REDIS_WAIT_REPLICAS: side === 'on' ? '1' : '0' }),
        );
        try {
          await untilReady(`herald (WAIT ${side})`, herald, base, { intervalMs: 20 });
          const spec: LoadSpec = {
            id: ++id,
            url: `${base}/v1/incidents`,
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: JSON.stringify({ title: 'Checkout errors in EU', severity: 'major' }),
            connections: CONNECTIONS,
            durationSec: LOAD_SEC,
            warmupSec: WARMUP_SEC,
          };
          loader.proc.stdin?.write(`${JSON.stringify(spec)}\n`);
          const answer = await loader.line(
            `load run ${spec.id}`,
            (l) =>
              l.startsWith(`{"id":${spec.id},`) ? (JSON.parse(l) as { load?: LoadResult; error?: string }) : undefined,
            (WARMUP_SEC + LOAD_SEC) * 1000 + 30_000,
          );
          if (answer.load === undefined) throw new Error(`load generator: ${answer.error ?? 'no result'}`);
          const bad = answer.load.non2xx + answer.load.errors;
          if (bad > 0) process.stderr.write(`WAIT ${side}: ${bad} of ${answer.load.total} not 2xx\n`);
          samples[side].push(answer.load);
        } finally {
          await herald.stop('SIGTERM', 10_000);
        }
      }
    }
    const row = (side: 'off' | 'on') =>
      `| write, WAIT ${side === 'on' ? '1 replica' : 'off      '} | ${median(samples[side].map((s) => s.rps)).toFixed(0)} req/s | p99 ${median(samples[side].map((s) => s.p99)).toFixed(2)} ms |`;
    process.stdout.write(`${row('off')}\n${row('on')}\n`);
  } finally {
    admin.disconnect();
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
