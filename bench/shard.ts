/**
 * What one Redis shard carries: deliveries/s through one worker (webhook sink on loopback) and
 * incidents per GB (INFO memory used_memory delta). Runs its own redis-server on a free port.
 *   npx tsx bench/shard.ts [incidents=2000] [deliveries=2000]
 * docs/scaling.md quotes its output.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { createHerald } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/log.js';
import { startHttpSink } from '../test/support/peers/http-sink.js';
import { waitFor } from '../test/support/wait.js';

const nIncidents = Number(process.argv[2] ?? 2000);
const nDeliveries = Number(process.argv[3] ?? 2000);
const dir = mkdtempSync(join(tmpdir(), 'herald-shard-'));
const port = 20_000 + Math.floor(Math.random() * 30_000);
const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'yes', '--maxmemory-policy', 'noeviction'], { stdio: 'ignore' });
process.on('exit', () => server.kill('SIGKILL'));
const admin = new Redis({ port, host: '127.0.0.1' });
// Refused until redis-server listens; the ping loop below waits for that.
admin.on('error', () => undefined);
await waitFor(async () => (await admin.ping()) === 'PONG', { timeoutMs: 20_000 });
const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await admin.info('memory'))![1]);

const config = loadConfig({ HERALD_DATA_DIR: dir, HERALD_KEY_PREFIX: 'bench', HERALD_SECRET_KEY: randomBytes(32).toString('base64'), LOG_LEVEL: 'silent',
  HERALD_OUTBOUND_ALLOW: '127.0.0.1/32', HERALD_RATE_LIMIT: '1000000', HERALD_EXECUTE_RATE_LIMIT: '1000000' });
const herald = await createHerald({ config, redisUrl: `redis://127.0.0.1:${port}`, log: createLogger('silent') });
const http = await new Promise<Server>((r) => { const s = herald.app.listen(0, '127.0.0.1', () => r(s)); });
const base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
const token = (await herald.services.apiKeys.create({ name: 'bench', scopes: ['*'] }, { type: 'system', id: 'bench', name: 'bench' })).token;
const api = async (method: string, path: string, body?: unknown) => {
  const r = await fetch(base + path, { method, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return (await r.json()) as { id: string; status: string; deliveries: unknown[] };
};

// Incidents per GB.
const description = 'x'.repeat(500);
const m0 = await usedMemory();
for (let i = 0; i < nIncidents; i++) await api('POST', '/v1/incidents', { title: `Incident ${i}`, severity: 'major', description });
const m1 = await usedMemory();
const perIncident = (m1 - m0) / nIncidents;

// Deliveries per second: one execute fans out to `conns` webhooks, repeated until nDeliveries.
const sink = await startHttpSink({});
const conns = 100;
for (let i = 0; i < conns; i++) await api('POST', '/v1/connections', { name: `s${i}`, type: 'webhook', config: { url: `${sink.url}/h/${i}` } });
const inc = await api('POST', '/v1/incidents', { title: 'Fan-out', severity: 'major' });
const t0 = Date.now();
const rounds = Math.ceil(nDeliveries / conns);
for (let i = 0; i < rounds; i++) await api('POST', `/v1/incidents/${inc.id}/execute`, { variables: { round: String(i) } });
await waitFor(() => sink.requests.length >= rounds * conns, { timeoutMs: 600_000, intervalMs: 50 });
const secs = (Date.now() - t0) / 1000;

console.log(JSON.stringify({
  incidents: nIncidents, bytes_per_incident: Math.round(perIncident), incidents_per_gb: Math.round(2 ** 30 / perIncident),
  deliveries: rounds * conns, seconds: secs, deliveries_per_s: Math.round((rounds * conns) / secs), worker_concurrency: config.HERALD_WORKER_CONCURRENCY,
}));
http.closeAllConnections();
http.close();
await sink.close();
await herald.close();
admin.disconnect();
server.kill('SIGKILL');
rmSync(dir, { recursive: true, force: true });
