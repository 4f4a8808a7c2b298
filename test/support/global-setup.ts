import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

/**
 * Finds the Redis every integration test shares (each test file takes its own key prefix):
 * HERALD_TEST_REDIS_URL, else 127.0.0.1:6379, else a private redis-server started here.
 */
let child: ChildProcess | undefined;
let dir: string | undefined;

async function reachable(url: string): Promise<boolean> {
  const r = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 1000,
  });
  r.on('error', () => undefined);
  try {
    await r.connect();
    await r.ping();
    return true;
  } catch {
    return false;
  } finally {
    r.disconnect();
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      s.close(() => (addr && typeof addr === 'object' ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

export default async function setup(): Promise<() => Promise<void>> {
  const wanted = process.env.HERALD_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
  if (await reachable(wanted)) {
    process.env.HERALD_TEST_REDIS_URL = wanted;
  } else {
    const port = await freePort();
    dir = mkdtempSync(join(tmpdir(), 'herald-test-redis-'));
    child = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
      { stdio: 'ignore' },
    );
    const url = `redis://127.0.0.1:${port}`;
    const deadline = Date.now() + 10_000;
    while (!(await reachable(url))) {
      if (Date.now() > deadline) throw new Error('could not start redis-server for the tests');
      await new Promise((r) => setTimeout(r, 50));
    }
    process.env.HERALD_TEST_REDIS_URL = url;
  }
  return async () => {
    child?.kill('SIGKILL');
    if (dir) rmSync(dir, { recursive: true, force: true });
  };
}
