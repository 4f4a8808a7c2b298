/**
 * What one Redis shard carries: deliveries/s through one worker (webhook sink on loopback) and
 * incidents per GB (INFO memory used_memory delta). Black box, like bench/run.ts: builds, runs its
 * own redis-server (AOF on) on a free port, `node dist/main.js` (role all, default worker
 * concurrency) and the sink in their own processes, and talks to Herald over HTTP only.
 *   npx tsx bench/shard.ts [incidents=2000] [deliveries=2000]
 * docs/operations.md ("What one Redis primary carries") quotes its output (one JSON line).
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import {
  epochMs,
  fetchWithin,
  freePort,
  onExit,
  ROOT,
  startChild,
  startTsChild,
  stopAll,
  waitFor,
  untilReady,
} from './lib.js';

const nIncidents = Number(process.argv[2] ?? 2000);
const nDeliveries = Number(process.argv[3] ?? 2000);
const CONNECTIONS = 100;
const dir = mkdtempSync(join(tmpdir(), 'herald-shard-'));
onExit(() => rmSync(dir, { recursive: true, force: true }));
const baseEnv: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'production' };

async function main(): Promise<void> {
  const build = spawnSync('npm', ['run', '--silent', 'build'], {
    cwd: ROOT,
    stdio: ['ignore', 'inherit', 'inherit'],
    timeout: 300_000,
  });
  if (build.status !== 0) throw new Error('npm run build failed');
  const admin = new Redis({
    host: '127.0.0.1',
    port: await freePort(),
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    retryStrategy: () => 50,
  });
  try {
    const port = admin.options.port ?? 0;
    const redis = startChild(
      'redis-server',
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        dir,
        '--save',
        '',
        '--appendonly',
        'yes',
        '--maxmemory-policy',
        'noeviction',
      ],
      baseEnv,
    );
    // Refused until redis-server listens; the ping loop waits for that.
    admin.on('error', () => undefined);
    await waitFor(
      'redis-server',
      async () => {
        if (redis.exit) throw new Error(`redis-server exited: ${redis.stderrTail()}`);
        return (await admin.ping()) === 'PONG';
      },
      { timeoutMs: 15_000 },
    );
    const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await admin.info('memory'))?.[1] ?? NaN);

    const httpPort = await freePort();
    const env = {
      ...baseEnv,
      REDIS_URL: `redis://127.0.0.1:${port}`,
      HERALD_DATA_DIR: dir,
      HERALD_KEY_PREFIX: 'bench',
      HERALD_SECRET_KEY: randomBytes(32).toString('base64'),
      LOG_LEVEL: 'silent',
      HERALD_OUTBOUND_ALLOW: '127.0.0.1/32',
      HERALD_RATE_LIMIT: '1000000',
      HERALD_EXECUTE_RATE_LIMIT: '1000000',
      HOST: '127.0.0.1',
      PORT: String(httpPort),
    };
    const created = spawnSync(
      process.execPath,
      [join(ROOT, 'dist', 'cli', 'main.js'), 'keys', 'create', '--name', 'bench', '--scopes', '*', '--json'],
      { cwd: ROOT, env, timeout: 30_000 },
    );
    if (created.status !== 0) throw new Error(`keys create: ${created.stderr.toString()}`);
    const token = (JSON.parse(created.stdout.toString()) as { token: string }).token;
    const herald = startChild('herald', process.execPath, [join(ROOT, 'dist', 'main.js')], env);
    const base = `http://127.0.0.1:${httpPort}`;
    await untilReady('herald', herald, base);
    const api = async (method: string, path: string, body?: unknown) => {
      const r = await fetchWithin(base + path, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
        timeoutMs: 15_000,
      });
      if (r.status >= 300) throw new Error(`${method} ${path} → ${r.status} ${await r.text()}`);
      return (await r.json()) as { id: string };
    };

    // Incidents per GB.
    const description = 'x'.repeat(500);
    const m0 = await usedMemory();
    for (let i = 0; i < nIncidents; i++)
      await api('POST', '/v1/incidents', { title: `Incident ${i}`, severity: 'major', description });
    const perIncident = ((await usedMemory()) - m0) / nIncidents;

    // Deliveries per second: one execute fans out to CONNECTIONS webhooks, repeated until nDeliveries.
    const sink = startTsChild('sink', 'sink.ts', [], baseEnv);
    const sinkUrl = `http://127.0.0.1:${(await sink.json<{ listening: number }>('listening', 20_000)).listening}`;
    for (let i = 0; i < CONNECTIONS; i++)
      await api('POST', '/v1/connections', { name: `s${i}`, type: 'webhook', config: { url: `${sinkUrl}/h/${i}` } });
    const inc = await api('POST', '/v1/incidents', { title: 'Fan-out', severity: 'major' });
    const t0 = epochMs();
    const rounds = Math.ceil(nDeliveries / CONNECTIONS);
    for (let i = 0; i < rounds; i++)
      await api('POST', `/v1/incidents/${inc.id}/execute`, { variables: { round: String(i) } });
    const stats = await waitFor(
      'the sink to receive every delivery',
      async () => {
        const s = (await (await fetchWithin(`${sinkUrl}/__stats`, { timeoutMs: 5000 })).json()) as {
          count: number;
          last: number;
        };
        return s.count >= rounds * CONNECTIONS ? s : undefined;
      },
      { timeoutMs: 600_000, intervalMs: 50 },
    );
    const secs = (stats.last - t0) / 1000;

    console.log(
      JSON.stringify({
        incidents: nIncidents,
        bytes_per_incident: Math.round(perIncident),
        incidents_per_gb: Math.round(2 ** 30 / perIncident),
        deliveries: rounds * CONNECTIONS,
        seconds: +secs.toFixed(3),
        deliveries_per_s: Math.round((rounds * CONNECTIONS) / secs),
        worker_concurrency: 50,
      }),
    );
    await herald.stop('SIGTERM', 20_000);
  } finally {
    await stopAll(10_000);
    admin.disconnect();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
