import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { RUN_ENV, runRoot } from './run.js';

/**
 * Finds the Redis every integration test shares (each test file takes its own key prefix, all
 * under this run's root, see run.ts): HERALD_TEST_REDIS_URL, else 127.0.0.1:6379, else a private
 * redis-server started here.
 *
 * On a shared Redis (one this setup did not start), the teardown fails the run when any key under
 * the run's root is left: every test must delete what it wrote, or a developer's Redis fills up
 * with test keys run after run. Only the run's own root is looked at: others' keys on the same
 * Redis (another run, another developer) are none of its business.
 *
 * Every project that needs Redis lists this file, and vitest runs one setup per project in the
 * same process: the first one does the work, the last teardown checks and stops, with the state
 * kept on globalThis (each project loads this module afresh).
 */
interface RunState {
  users: number;
  url: string;
  /** The redis-server started here; undefined when the Redis is shared. */
  child?: ChildProcess;
  dir?: string;
  /** Keys already under the root when the run began (normally none: the run id is new). */
  before: Set<string>;
}
const STATE = Symbol.for('herald.test.global-setup');
type WithState = typeof globalThis & { [STATE]?: RunState };

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

/** Every key of this run: all test prefixes sit inside one hash tag that starts with the root. */
async function runKeys(redis: Redis): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `{${runRoot()}.*`, 'COUNT', 1000);
    cursor = next;
    found.push(...keys);
  } while (cursor !== '0');
  return found;
}

async function startPrivate(): Promise<Pick<RunState, 'url' | 'child' | 'dir'>> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'herald-test-redis-'));
  const child = spawn(
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
  return { url, child, dir };
}

/** Lists (and then deletes, so the shared Redis is clean again) the keys this run left. */
async function checkLeftovers(state: RunState): Promise<void> {
  const redis = new Redis(state.url, { maxRetriesPerRequest: 1 });
  try {
    const left = (await runKeys(redis)).filter((k) => !state.before.has(k)).sort();
    if (left.length === 0) return;
    for (let i = 0; i < left.length; i += 500) await redis.unlink(...left.slice(i, i + 500));
    // vitest only prints an error thrown here: the exit code is what fails the run.
    process.exitCode = 1;
    // Per prefix first (its label names the test that took it), then the keys themselves.
    const perPrefix = new Map<string, number>();
    for (const k of left) {
      const tag = k.slice(0, k.indexOf('}') + 1);
      perPrefix.set(tag, (perPrefix.get(tag) ?? 0) + 1);
    }
    const prefixes = [...perPrefix].map(([tag, n]) => `${n}\t${tag}`).join('\n  ');
    const shown = left.slice(0, 50).join('\n  ');
    const more = left.length > 50 ? `\n  … and ${left.length - 50} more` : '';
    throw new Error(
      `the tests left ${left.length} key(s) in the shared Redis at ${state.url} (now deleted); ` +
        `each test file must delete what it wrote (useTestRedis, dropPrefix, TestHerald.close).\n` +
        `Per prefix:\n  ${prefixes}\nKeys:\n  ${shown}${more}`,
    );
  } finally {
    redis.disconnect();
  }
}

export default async function setup(): Promise<() => Promise<void>> {
  const g = globalThis as WithState;
  process.env[RUN_ENV] ??= randomBytes(4).toString('hex');
  if (g[STATE]) {
    g[STATE].users++;
  } else {
    const wanted = process.env.HERALD_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
    const state: RunState = (await reachable(wanted))
      ? { users: 1, url: wanted, before: new Set() }
      : { users: 1, ...(await startPrivate()), before: new Set() };
    if (!state.child) {
      const redis = new Redis(state.url, { maxRetriesPerRequest: 1 });
      try {
        state.before = new Set(await runKeys(redis));
      } finally {
        redis.disconnect();
      }
    }
    g[STATE] = state;
    process.env.HERALD_TEST_REDIS_URL = state.url;
  }
  return async () => {
    const state = g[STATE];
    if (!state || --state.users > 0) return;
    g[STATE] = undefined;
    if (state.child) {
      state.child.kill('SIGKILL');
      if (state.dir) rmSync(state.dir, { recursive: true, force: true });
      return;
    }
    await checkLeftovers(state);
  };
}
