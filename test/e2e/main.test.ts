import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CHILD_DEADLINE_MS,
  childEnv,
  freePort,
  runEntry,
  spawnEntry,
  spawnNpmStart,
  startPrivateRedis,
  stopChild,
  type Child,
} from '../support/child.js';
import { waitFor } from '../support/wait.js';

/**
 * `npm start` as a process: the embedded Redis under HERALD_DATA_DIR, the CLI sharing it, SIGTERM,
 * a restart on the same data, and the refusals to start.
 */
let dataDir: string;
let port: number;
let running: Child | undefined;
beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'herald-main-'));
  port = await freePort();
});
afterAll(async () => {
  await stopChild(running);
  // A failed test may leave the embedded server behind: stop it by the pid it wrote.
  const pid = redisPid();
  if (pid !== null && alive(pid)) process.kill(pid, 'SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

const env = (extra: Record<string, string | undefined> = {}) =>
  childEnv({ HERALD_DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', ...extra });
const url = (path: string) => `http://127.0.0.1:${port}${path}`;

function redisPid(): number | null {
  const f = join(dataDir, 'redis', 'redis.pid');
  return existsSync(f) ? Number(readFileSync(f, 'utf8').trim()) : null;
}
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function startMain(how: 'node' | 'npm' = 'node'): Promise<Child> {
  const child = how === 'npm' ? spawnNpmStart(env()) : spawnEntry('main', [], env());
  running = child;
  await waitFor(
    async () => {
      if (child.proc.exitCode !== null) throw new Error(`exited early: ${child.stderr()}${child.stdout()}`);
      // The start-up line comes just after listen(): wait for it, not only for an answer.
      return child.stdout().includes('Herald listening') && (await fetch(url('/healthz')).catch(() => null))?.ok;
    },
    { timeoutMs: CHILD_DEADLINE_MS, intervalMs: 100, what: 'Herald to answer /healthz' },
  );
  return child;
}

async function sigterm(child: Child): Promise<{ code: number | null; ms: number }> {
  const t0 = Date.now();
  child.proc.kill('SIGTERM');
  const code = await child.exited;
  return { code, ms: Date.now() - t0 };
}

describe('npm start on the embedded Redis', () => {
  let token: string;
  let incidentId: string;
  let serverPid: number;

  it('starts its own redis-server under the data directory and logs one start-up line', async () => {
    const child = await startMain();
    const start = child
      .stdout()
      .split('\n')
      .filter((l) => l.includes('Herald listening'))
      .map((l) => JSON.parse(l));
    expect(start).toHaveLength(1);
    expect(start[0]).toMatchObject({ port, role: 'all', persistence: 'aof', slack: 'Slack not configured: API only' });
    expect(start[0].redis).toMatch(/^embedded \(started, .*redis\.sock\)$/);
    expect(existsSync(join(dataDir, 'redis', 'redis.sock'))).toBe(true);
    serverPid = redisPid()!;
    expect(alive(serverPid)).toBe(true);
    const ready = await fetch(url('/readyz'));
    expect(await ready.json()).toEqual({ status: 'ready', redis: 'ok', persistence: 'aof' });
  });

  it('lets the CLI use the same server (reused, not a second one, and left running)', async () => {
    const r = await runEntry('cli', ['keys', 'create', '--name', 'ops', '--scopes', '*', '--json'], env());
    expect(r.code).toBe(0);
    token = JSON.parse(r.stdout).token;
    expect(redisPid()).toBe(serverPid);
    expect(alive(serverPid)).toBe(true);

    const res = await fetch(url('/v1/incidents'), {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ title: 'Payments down', severity: 'critical' }),
    });
    expect(res.status).toBe(201);
    incidentId = ((await res.json()) as { id: string }).id;
  });

  it('on SIGTERM stops accepting, finishes the request in flight, exits 0 within 10 s and stops its Redis', async () => {
    const child = running!;
    // A request whose headers the server has (it answered 100-continue) but whose body is not sent yet.
    const body = JSON.stringify({ title: 'In flight at shutdown', severity: 'minor' });
    const req = request(url('/v1/incidents'), {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${token}`,
        'Content-Type': 'application/json',
        'Content-Length': Buffer.byteLength(body),
        Expect: '100-continue',
      },
    });
    const answered = new Promise<number | undefined>((resolve, reject) => {
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode));
      });
      req.on('error', reject);
    });
    await new Promise<void>((resolve, reject) => {
      req.on('continue', () => resolve());
      req.on('error', reject);
      req.flushHeaders();
    });

    const t0 = Date.now();
    child.proc.kill('SIGTERM');
    await waitFor(() => child.stdout().includes('shutting down'), { what: 'the shutdown to begin' });
    await expect(fetch(url('/healthz'))).rejects.toThrow();
    req.end(body);
    expect(await answered).toBe(201);

    const code = await child.exited;
    const ms = Date.now() - t0;
    expect(code).toBe(0);
    expect(ms).toBeLessThan(10_000);
    await waitFor(() => !alive(serverPid), { timeoutMs: 5000, what: 'the embedded redis-server to stop' });
    expect(existsSync(join(dataDir, 'redis', 'redis.sock'))).toBe(false);
  });

  it('keeps the data across a restart on the same data directory (AOF)', async () => {
    const child = await startMain();
    const res = await fetch(url(`/v1/incidents/${incidentId}`), { headers: { Authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ id: incidentId, title: 'Payments down' });
    const { code } = await sigterm(child);
    expect(code).toBe(0);
  });

  it('lets the CLI start the Redis for one command when Herald is not running, and stop it after', async () => {
    const r = await runEntry('cli', ['keys', 'list', '--json'], env());
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).map((k: { name: string }) => k.name)).toEqual(['ops']);
    expect(existsSync(join(dataDir, 'redis', 'redis.sock'))).toBe(false);
    const pid = redisPid();
    expect(pid === null || !alive(pid)).toBe(true);
  });

  it('after a kill -9 the Redis survives; the next start reuses it, loses nothing, and stops it on exit', async () => {
    const first = await startMain();
    const pid = redisPid()!;
    first.proc.kill('SIGKILL');
    await first.exited;
    expect(alive(pid)).toBe(true);

    const next = await startMain();
    expect(next.stdout()).toMatch(/"redis":"embedded \(reused, /);
    const res = await fetch(url(`/v1/incidents/${incidentId}`), { headers: { Authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    const { code } = await sigterm(next);
    expect(code).toBe(0);
    await waitFor(() => !alive(pid), { timeoutMs: 5000, what: 'the orphaned redis-server to be stopped' });
  });

  it.each(['SIGTERM', 'SIGINT'] as const)(
    '%s to the `npm start` process itself stops Herald and its Redis within the drain budget',
    async (signal) => {
      const npm = await startMain('npm');
      const pid = redisPid()!;
      expect(alive(pid)).toBe(true);
      const t0 = Date.now();
      npm.proc.kill(signal);
      await npm.exited;
      // npm has exited; what matters is that nothing it started is left: not Herald (the port is
      // free, /healthz refuses) and not its redis-server.
      await waitFor(
        async () =>
          (await fetch(url('/healthz')).then(
            () => false,
            () => true,
          )) && !alive(pid),
        {
          timeoutMs: 15_000,
          what: 'Herald and its redis-server to stop',
        },
      );
      expect(Date.now() - t0).toBeLessThan(12_000);
      expect(npm.stdout()).toContain('shutting down');
      expect(existsSync(join(dataDir, 'redis', 'redis.sock'))).toBe(false);
    },
  );

  it('serves concurrent CLI commands from one server and leaves none behind', async () => {
    const cli = (...args: string[]) => runEntry('cli', args, env());
    const results = await Promise.all([
      cli('keys', 'create', '--name', 'a', '--scopes', '*', '--json'),
      cli('keys', 'create', '--name', 'b', '--scopes', '*', '--json'),
      cli('keys', 'list'),
    ]);
    for (const r of results) expect(r.code, r.stderr).toBe(0);
    const list = await cli('keys', 'list', '--json');
    expect(
      JSON.parse(list.stdout)
        .map((k: { name: string }) => k.name)
        .sort(),
    ).toEqual(['a', 'b', 'ops']);
    // What the commands logged says which of them decided to leave the server running, and why.
    const logged = [...results, list].map((r, i) => `command ${i + 1}: ${r.stderr.trim() || '(nothing)'}`).join('\n');
    await waitFor(() => !existsSync(join(dataDir, 'redis', 'redis.sock')), {
      timeoutMs: 5000,
      what: `the last command to stop the server; the commands' stderr:\n${logged}`,
    });
    const pid = redisPid();
    expect(pid === null || !alive(pid)).toBe(true);
  });
});

describe('npm start refuses to start, saying why', () => {
  it('names a bad variable (never its value) and exits 1', async () => {
    const r = await runEntry('main', [], env({ PORT: 'abc' }));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('PORT');
    expect(r.stderr).not.toContain('abc');
  });

  it('without redis-server on PATH and without REDIS_URL, names both remedies', async () => {
    const emptyBin = mkdtempSync(join(tmpdir(), 'herald-nobin-'));
    try {
      const r = await runEntry('main', [], env({ PATH: emptyBin, HERALD_DATA_DIR: join(emptyBin, 'data') }));
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('apt-get install redis-server');
      expect(r.stderr).toContain('REDIS_URL=redis://');
    } finally {
      rmSync(emptyBin, { recursive: true, force: true });
    }
  });

  it('refuses a Redis whose maxmemory-policy evicts, naming noeviction', async () => {
    const redis = await startPrivateRedis(['--maxmemory-policy', 'allkeys-lru']);
    try {
      const r = await runEntry('main', [], env({ REDIS_URL: redis.url }));
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('noeviction');
      expect(r.stderr).toContain('allkeys-lru');
    } finally {
      redis.kill();
    }
  });

  it('says when the port is taken, and does not leave its Redis behind', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const dir = mkdtempSync(join(tmpdir(), 'herald-busy-'));
    try {
      const r = await runEntry(
        'main',
        [],
        env({ HERALD_DATA_DIR: dir, PORT: String((taken.address() as AddressInfo).port) }),
      );
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/127\.0\.0\.1:\d+ is already in use; set PORT/);
      expect(existsSync(join(dir, 'redis', 'redis.sock'))).toBe(false);
    } finally {
      taken.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a data directory whose socket path would be too long for a unix socket', async () => {
    const r = await runEntry('main', [], env({ HERALD_DATA_DIR: join(dataDir, 'x'.repeat(120)) }));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/unix sockets allow at most 107.*shorter path/s);
  });
});
