import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { waitForRedis } from './redis.js';

/**
 * Child processes for the end-to-end tests of the entry points: the compiled `dist/main.js` and
 * `dist/cli/main.js`, run with plain node exactly as `npm start` and `npm run herald` run them
 * (`npm test` builds dist/ before the tests), with an environment built from scratch so the
 * developer's own REDIS_URL or HERALD_* variables never leak in.
 */
export const ROOT = join(import.meta.dirname, '..', '..');
const ENTRIES = { main: join(ROOT, 'dist', 'main.js'), cli: join(ROOT, 'dist', 'cli', 'main.js') } as const;
export type Entry = keyof typeof ENTRIES;

/**
 * How long a child may take before the test gives up on it. Generous on purpose: a busy 2-core
 * machine running the whole suite can take seconds to start a process; a test that waits for a
 * specific line or exit never waits this long when things work.
 */
export const CHILD_DEADLINE_MS = 90_000;

export interface Child {
  proc: ChildProcess;
  /** Everything written so far. */
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
}

/** The minimum environment: PATH and HOME plus what the test sets (undefined removes a name). */
export function childEnv(vars: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'info' };
  for (const [k, v] of Object.entries(vars)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

function track(proc: ChildProcess): Child {
  let out = '';
  let err = '';
  proc.stdout?.on('data', (c: Buffer) => (out += c.toString('utf8')));
  proc.stderr?.on('data', (c: Buffer) => (err += c.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => proc.on('close', (code) => resolve(code)));
  return { proc, stdout: () => out, stderr: () => err, exited };
}

/**
 * Starts `node [nodeArgs] dist/<entry> ...args` in the project root: one process, signalled
 * directly. `nodeArgs` are node's own flags (some, like V8's heap sizes, NODE_OPTIONS refuses).
 */
export function spawnEntry(entry: Entry, args: string[], env: NodeJS.ProcessEnv, nodeArgs: string[] = []): Child {
  return track(
    spawn(process.execPath, [...nodeArgs, ENTRIES[entry], ...args], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
}

/** Starts `npm start` itself (npm, its shell, then node), as an init system or a container would. */
export function spawnNpmStart(env: NodeJS.ProcessEnv): Child {
  return track(spawn('npm', ['start'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] }));
}

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `node dist/<entry> ...args` to completion (killed only at the deadline). */
export async function runEntry(
  entry: Entry,
  args: string[],
  env: NodeJS.ProcessEnv,
  timeoutMs = CHILD_DEADLINE_MS,
): Promise<RunResult> {
  const child = spawnEntry(entry, args, env);
  const timer = setTimeout(() => child.proc.kill('SIGKILL'), timeoutMs);
  const code = await child.exited.finally(() => clearTimeout(timer));
  return { code, stdout: child.stdout(), stderr: child.stderr() };
}

/** Stops a child that a test left running (first politely, then not). */
export async function stopChild(child: Child | undefined): Promise<void> {
  if (!child || child.proc.exitCode !== null || child.proc.signalCode !== null) return;
  child.proc.kill('SIGTERM');
  const t = setTimeout(() => child.proc.kill('SIGKILL'), 10_000);
  await child.exited;
  clearTimeout(t);
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      s.close(() => (addr && typeof addr === 'object' ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/** A private redis-server on a free TCP port with extra arguments; kill() it when done. */
export async function startPrivateRedis(extra: string[]): Promise<{ url: string; proc: ChildProcess; kill(): void }> {
  const port = await freePort();
  const proc = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', '/tmp', ...extra],
    { stdio: 'ignore' },
  );
  const url = `redis://127.0.0.1:${port}`;
  await waitForRedis(url, 10_000);
  return { url, proc, kill: () => proc.kill('SIGKILL') };
}
