/**
 * `npm run bench`: measures on this machine, against a real Redis (HERALD_BENCH_REDIS_URL or
 * 127.0.0.1:6379, under a throw-away key prefix) and a local HTTP sink on loopback:
 *  1. fan-out: one execute to 200 webhook connections, from the 202 to the last delivery;
 *  2. API: incident creates and reads, sequential latency percentiles;
 *  3. CLI start-up: `node dist/cli/main.js keys list` against `node -e ''`, medians of 7.
 * Nothing leaves the machine; every loop is bounded.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { createHerald } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/log.js';

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 200);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const API_REQUESTS = Number(process.env.BENCH_API_REQUESTS ?? 500);
const redisUrl = process.env.HERALD_BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

async function main(): Promise<void> {
  const received: number[] = [];
  const sink = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on('end', () => {
      received.push(performance.now());
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
  const sinkUrl = `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;

  const prefix = `bench-${randomBytes(4).toString('hex')}`;
  const dataDir = mkdtempSync(join(tmpdir(), 'herald-bench-'));
  const config = loadConfig({
    HERALD_KEY_PREFIX: prefix,
    HERALD_DATA_DIR: dataDir,
    HERALD_SECRET_KEY: randomBytes(32).toString('base64'),
    HERALD_OUTBOUND_ALLOW: '127.0.0.1/32',
    HERALD_RATE_LIMIT: '1000000',
    HERALD_EXECUTE_RATE_LIMIT: '1000000',
    LOG_LEVEL: 'silent',
  });
  const herald = await createHerald({ config, redisUrl, log: createLogger('silent') });
  const server = herald.app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  const { token } = await herald.services.apiKeys.create({ name: 'bench', scopes: ['*'] }, { type: 'system', id: 'bench', name: 'bench' });
  const call = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(`${base}${path}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = (await r.json()) as Record<string, unknown>;
    if (r.status >= 400) throw new Error(`${method} ${path} → ${r.status} ${JSON.stringify(json)}`);
    return json;
  };

  try {
    for (let i = 0; i < CONNECTIONS; i++) await call('POST', '/connections', { name: `sink ${i}`, type: 'webhook', config: { url: `${sinkUrl}/h/${i}` } });

    console.log(`fan-out: 1 execute → ${CONNECTIONS} webhook connections (local sink), worker concurrency ${config.HERALD_WORKER_CONCURRENCY}`);
    const fanout: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const incident = await call('POST', '/incidents', { title: `bench ${run}`, severity: 'major' });
      received.length = 0;
      const t0 = performance.now();
      const exe = await call('POST', `/incidents/${String(incident.id)}/execute`, {});
      const accepted = performance.now();
      const deadline = Date.now() + 120_000;
      let status = '';
      while (Date.now() < deadline) {
        const e = await call('GET', `/incidents/${String(incident.id)}/executions/${String(exe.id)}`);
        status = String(e.status);
        if (status !== 'queued' && status !== 'in_progress') break;
        await new Promise((r) => setTimeout(r, 20));
      }
      const last = Math.max(...received);
      fanout.push(last - accepted);
      console.log(`  run ${run + 1}: execute answered 202 in ${(accepted - t0).toFixed(0)} ms; last delivery ${(last - accepted).toFixed(0)} ms after the 202; status ${status}; sink got ${received.length}`);
    }
    fanout.sort((a, b) => a - b);
    console.log(`  median 202 → last delivery: ${percentile(fanout, 50).toFixed(0)} ms`);

    const lat: number[] = [];
    for (let i = 0; i < API_REQUESTS; i++) {
      const t = performance.now();
      const inc = await call('POST', '/incidents', { title: `api ${i}`, severity: 'low' });
      await call('GET', `/incidents/${String(inc.id)}`);
      lat.push(performance.now() - t);
    }
    lat.sort((a, b) => a - b);
    console.log(`API: ${API_REQUESTS} × (POST /incidents + GET /incidents/{id}), sequential: p50 ${percentile(lat, 50).toFixed(1)} ms, p95 ${percentile(lat, 95).toFixed(1)} ms, p99 ${percentile(lat, 99).toFixed(1)} ms`);
    console.log(`memory: rss ${(process.memoryUsage().rss / 2 ** 20).toFixed(0)} MiB`);
    benchCli({ REDIS_URL: redisUrl, HERALD_KEY_PREFIX: prefix, HERALD_SECRET_KEY: config.HERALD_SECRET_KEY ?? '', HERALD_DATA_DIR: dataDir });
  } finally {
    server.close();
    sink.close();
    // Remove everything this run wrote.
    let cursor = '0';
    do {
      const [next, keys] = await herald.redis.scan(cursor, 'MATCH', `{${prefix}}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await herald.redis.del(...keys);
    } while (cursor !== '0');
    await herald.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);

/** The CLI's start-up: the compiled `keys list` (built by `npm run build`) against bare node. */
function benchCli(env: Record<string, string>): void {
  const time = (args: string[]): number => {
    const t0 = performance.now();
    execFileSync(process.execPath, args, { env: { PATH: process.env.PATH, ...env }, stdio: 'ignore' });
    return performance.now() - t0;
  };
  const median = (args: string[]) => percentile(Array.from({ length: 7 }, () => time(args)).sort((a, b) => a - b), 50);
  const bare = median(['-e', '']);
  const cli = median([join(import.meta.dirname, '..', 'dist', 'cli', 'main.js'), 'keys', 'list']);
  console.log(`CLI: keys list ${cli.toFixed(0)} ms (target ≤ 300), node -e '' ${bare.toFixed(0)} ms, ratio ${(cli / bare).toFixed(1)}×`);
}
