/**
 * Helpers shared by the benchmark's processes: bounded polling, free ports, and child processes
 * that are always killed when this process ends (normally, on an error, or on Ctrl-C).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request, type Agent } from 'node:http';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

export const ROOT = join(import.meta.dirname, '..');

/** Milliseconds since the epoch with sub-millisecond precision, comparable across processes on one machine. */
export const epochMs = (): number => performance.timeOrigin + performance.now();

/** Polls `probe` every `intervalMs` until it returns something other than undefined/false, or throws at the deadline. */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  opts: { timeoutMs: number; intervalMs?: number },
): Promise<T> {
  const deadline = Date.now() + opts.timeoutMs;
  let lastError: unknown = null;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v;
    } catch (e) {
      lastError = e;
    }
    if (Date.now() >= deadline) {
      const why =
        lastError === null
          ? ''
          : ` (last error: ${lastError instanceof Error ? lastError.message : String(lastError)})`;
      throw new Error(`timed out after ${opts.timeoutMs} ms waiting for ${what}${why}`);
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 20));
  }
}

/** A port that was free a moment ago (bound on 127.0.0.1:0, then released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

export function median(xs: readonly number[]): number {
  const s = [...xs].filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2;
}

/** fetch with a deadline: no request of the harness can hang it. */
export async function fetchWithin(url: string, init: RequestInit & { timeoutMs?: number } = {}): Promise<Response> {
  const { timeoutMs = 10_000, ...rest } = init;
  return fetch(url, { ...rest, signal: AbortSignal.timeout(timeoutMs) });
}

const live = new Set<Child>();
const exitCleanups: Array<() => void> = [];
let exitHooked = false;

/** Synchronous clean-up for when the process exits without reaching its `finally` (a signal, the backstop). */
export function onExit(fn: () => void): void {
  hookExit();
  exitCleanups.push(fn);
}

function hookExit(): void {
  if (exitHooked) return;
  exitHooked = true;
  // Last resort: whatever is still running when this process exits is killed, whatever the reason.
  process.on('exit', () => {
    for (const c of live) c.proc.kill('SIGKILL');
    for (const fn of exitCleanups) {
      try {
        fn();
      } catch {
        // Best effort at exit.
      }
    }
  });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      process.stderr.write(`\nbench: ${signal}: stopping every child process\n`);
      process.exit(130);
    });
  }
}

/** A child process with its stdout split into lines and the tail of its stderr kept for error messages. */
export class Child {
  readonly lines: string[] = [];
  private partial = '';
  private errTail = '';
  exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  readonly exited: Promise<void>;

  constructor(
    readonly name: string,
    readonly proc: ChildProcess,
  ) {
    proc.stdout?.setEncoding('utf8');
    proc.stdout?.on('data', (chunk: string) => {
      const parts = (this.partial + chunk).split('\n');
      this.partial = parts.pop() ?? '';
      // Keep memory bounded: only the newest lines matter to the harness.
      for (const p of parts) if (this.lines.push(p) > 1000) this.lines.shift();
    });
    proc.stderr?.setEncoding('utf8');
    proc.stderr?.on('data', (chunk: string) => {
      this.errTail = (this.errTail + chunk).slice(-4000);
    });
    this.exited = new Promise((resolve) => {
      proc.once('exit', (code, signal) => {
        this.exit = { code, signal };
        live.delete(this);
        resolve();
      });
      proc.once('error', (err) => {
        this.errTail += `\nspawn error: ${err.message}`;
        this.exit ??= { code: null, signal: null };
        live.delete(this);
        resolve();
      });
    });
  }

  get pid(): number {
    return this.proc.pid ?? -1;
  }

  stderrTail(): string {
    return this.errTail.trim();
  }

  /** Waits for the first stdout line that `match` accepts; fails early if the process exits. */
  async line<T>(what: string, match: (line: string) => T | undefined, timeoutMs: number): Promise<T> {
    return waitFor(
      `${this.name}: ${what}`,
      () => {
        for (const l of this.lines) {
          const v = match(l);
          if (v !== undefined) return v;
        }
        if (this.exit)
          throw new Error(`${this.name} exited (${JSON.stringify(this.exit)}): ${this.stderrTail() || 'no stderr'}`);
        return undefined;
      },
      { timeoutMs, intervalMs: 5 },
    );
  }

  /** The first stdout line that parses as a JSON object carrying `key`. */
  json<T extends Record<string, unknown>>(key: string, timeoutMs: number): Promise<T> {
    return this.line(
      `a JSON line with "${key}"`,
      (l) => {
        if (!l.startsWith('{')) return undefined;
        try {
          const v = JSON.parse(l) as Record<string, unknown>;
          return key in v ? (v as T) : undefined;
        } catch {
          return undefined;
        }
      },
      timeoutMs,
    );
  }

  /** Sends `signal`, waits up to `timeoutMs` for the exit, then SIGKILLs. Returns how long it took. */
  async stop(
    signal: NodeJS.Signals = 'SIGTERM',
    timeoutMs = 15_000,
  ): Promise<{ ms: number; code: number | null; killed: boolean }> {
    const t0 = performance.now();
    if (this.exit) return { ms: 0, code: this.exit.code, killed: false };
    this.proc.kill(signal);
    let timer: NodeJS.Timeout | undefined;
    const late = await Promise.race([
      this.exited.then(() => false),
      new Promise<boolean>((r) => {
        timer = setTimeout(() => r(true), timeoutMs);
      }),
    ]);
    clearTimeout(timer);
    if (late) {
      this.proc.kill('SIGKILL');
      await Promise.race([this.exited, new Promise((r) => setTimeout(r, 5000))]);
    }
    const exit = this.exit as Child['exit'];
    return { ms: performance.now() - t0, code: exit?.code ?? null, killed: late };
  }
}

export function startChild(
  name: string,
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  opts: { stdin?: boolean } = {},
): Child {
  hookExit();
  const proc = spawn(command, args, { cwd: ROOT, env, stdio: [opts.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
  const child = new Child(name, proc);
  live.add(child);
  return child;
}

/** Runs one of bench/*.ts in its own node process (tsx's loader; plain node once loaded). */
export function startTsChild(
  name: string,
  file: string,
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
  opts: { stdin?: boolean; nodeArgs?: string[] } = {},
): Child {
  const { nodeArgs = [], ...rest } = opts;
  return startChild(
    name,
    process.execPath,
    [...nodeArgs, '--import', 'tsx', join(ROOT, 'bench', file), ...args],
    env,
    rest,
  );
}

/**
 * Waits until a Herald (`child`, serving `base`) answers 200 from /readyz, polling every
 * `intervalMs`; fails at once, with the end of its stderr, should it exit first.
 */
export async function untilReady(
  name: string,
  child: Child,
  base: string,
  { timeoutMs = 30_000, intervalMs = 10 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<void> {
  await waitFor(
    `${name} /readyz 200`,
    async () => {
      if (child.exit) throw new Error(`${name} exited ${JSON.stringify(child.exit)}: ${child.stderrTail()}`);
      const r = await fetchWithin(`${base}/readyz`, { timeoutMs: 1000 }).catch(() => null);
      await r?.body?.cancel();
      return r?.status === 200;
    },
    { timeoutMs, intervalMs },
  );
}

/** Kills every child still running (SIGTERM, then SIGKILL after `timeoutMs`). */
export async function stopAll(timeoutMs = 10_000): Promise<void> {
  await Promise.all([...live].map((c) => c.stop('SIGTERM', timeoutMs)));
}

/**
 * For the harness's own helper processes: exit when the harness is gone (even SIGKILLed, when its
 * exit hook cannot run), so nothing is left behind listening.
 */
export function exitWithParent(): void {
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) process.exit(0);
  }, 500).unref();
}

/**
 * A fan-out helper's start, once it is ready: prints {"ready":true}, waits for the go on stdin (a
 * line with the body size in bytes) and runs `go` with a webhook body of that size.
 */
export function onGo(go: (body: Buffer) => Promise<void>): void {
  process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
  const rl = createInterface({ input: process.stdin });
  rl.once('line', (line) => {
    rl.close();
    const size = Number(line) || 600;
    void go(Buffer.from(JSON.stringify({ event: 'incident.executed', text: 'x'.repeat(Math.max(0, size - 40)) })));
  });
}

/**
 * One webhook POST of `body` to `<base>/h/<i>` with node:http (`agent`: Node's default when not
 * given), as the fan-out baselines send them: true when it was answered with a 2xx.
 */
export function postWebhook(base: string, i: number, body: Buffer, agent?: Agent): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request(
      `${base}/h/${i}`,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': String(body.length) },
        timeout: 10_000,
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve((res.statusCode ?? 0) < 300));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve(false));
    req.end(body);
  });
}

/** user + system CPU seconds of a process so far (/proc/<pid>/stat, in clock ticks of 1/100 s). */
export const cpuSeconds = (pid: number): number => statCpuSeconds(`/proc/${pid}/stat`);

/** The same for a process' main thread alone: for Node, the event loop's. */
export const mainThreadCpuSeconds = (pid: number): number => statCpuSeconds(`/proc/${pid}/task/${pid}/stat`);

function statCpuSeconds(path: string): number {
  const fields = readFileSync(path, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Runs `fn` over 0..n-1 with `concurrency` at once. */
export async function pool(n: number, concurrency: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, concurrency) }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

/** An API key with every scope from Herald's CLI (`keys create`), as an operator makes one; `root` holds the dist/. */
export function createBenchKey(env: NodeJS.ProcessEnv, name: string, root = ROOT): string {
  const created = spawnSync(
    process.execPath,
    [join(root, 'dist', 'cli', 'main.js'), 'keys', 'create', '--name', name, '--scopes', '*', '--json'],
    { cwd: ROOT, env, timeout: 30_000 },
  );
  if (created.status !== 0) throw new Error(`keys create → ${created.status}: ${created.stderr.toString()}`);
  return String((JSON.parse(created.stdout.toString()) as { token: string }).token);
}
