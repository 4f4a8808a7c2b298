import { execFile } from 'node:child_process';
import {
  copyFileSync,
  cpSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { childEnv, freePort, ROOT, type Child } from '../support/child.js';
import { dropPrefix, connectTestRedis, testRedisUrl, uniquePrefix } from '../support/redis.js';
import { waitFor } from '../support/wait.js';
import { spawn } from 'node:child_process';

/**
 * The Dockerfile's own commands, run in clean directories as its two stages run them (no image
 * registry is reachable here, so no `docker build`): each stage's COPY lines copy from the
 * repository (or the build stage's directory), each RUN line runs with sh, then the runtime
 * stage's CMD starts and must become ready. Only the lines that prepare /data for the image's
 * user are left out: the data directory is a temporary one here.
 */
const run = promisify(execFile);

/**
 * Two clean `npm ci` runs, a compile and a start: about 30 s on a quiet machine, over 120 s
 * with a second test suite running beside it. The deadline is for a job that is long by nature,
 * not a wait for something that may never come: each step still fails at once on an error.
 */
const DOCKERFILE_DEADLINE_MS = 600_000;

interface Stage {
  name: string;
  env: Record<string, string>;
  steps: ({ kind: 'copy'; from: string | null; sources: string[]; dest: string } | { kind: 'run'; command: string })[];
  cmd: string[] | null;
}

function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  // Join continuation lines, drop comments.
  const lines = text
    .replace(/\\\n\s*/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  for (const line of lines) {
    const [instr, ...restParts] = line.split(/\s+/);
    const rest = restParts.join(' ');
    const stage = stages.at(-1);
    switch (instr) {
      case 'FROM':
        stages.push({ name: /AS (\S+)$/i.exec(rest)?.[1] ?? String(stages.length), env: {}, steps: [], cmd: null });
        break;
      case 'ENV':
        for (const [, k, v] of rest.matchAll(/([A-Z_]+)=(\S+)/g)) stage!.env[k!] = v!;
        break;
      case 'COPY': {
        const from = /--from=(\S+)/.exec(rest)?.[1] ?? null;
        const parts = rest.replace(/--\S+/g, '').trim().split(/\s+/);
        stage!.steps.push({ kind: 'copy', from, sources: parts.slice(0, -1), dest: parts.at(-1)! });
        break;
      }
      case 'RUN':
        stage!.steps.push({ kind: 'run', command: rest });
        break;
      case 'CMD':
        stage!.cmd = JSON.parse(rest) as string[];
        break;
      default:
        break;
    }
  }
  return stages;
}

/**
 * The runtime stage ends with `npm cache clean --force`. Run against the user's npm cache, that
 * wipes it under every other npm beside this test (a second `npm test` here failed its own
 * `npm ci` with ENOTEMPTY), so every RUN line gets a private cache: a tree of hard links to the
 * user's cache (cheap, and cacache never rewrites a file in place, it writes new ones), which
 * the clean then empties without touching the user's.
 */
function privateNpmCache(into: string): string {
  const userCache = process.env.npm_config_cache ?? join(homedir(), '.npm');
  const cache = join(into, 'npm-cache');
  mkdirSync(cache, { recursive: true });
  const source = join(userCache, '_cacache');
  if (existsSync(source)) linkTree(source, join(cache, '_cacache'));
  return cache;
}

/** Mirrors a directory as hard links (copies across file systems); files that vanish meanwhile are skipped. */
function linkTree(from: string, to: string): void {
  mkdirSync(to, { recursive: true });
  let entries;
  try {
    entries = readdirSync(from, { withFileTypes: true });
  } catch {
    return; // removed by another npm while we walked
  }
  for (const e of entries) {
    if (e.name === 'tmp') continue; // another npm's files in flight
    const a = join(from, e.name);
    const b = join(to, e.name);
    if (e.isDirectory()) linkTree(a, b);
    else if (e.isFile()) {
      try {
        linkSync(a, b);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'EXDEV') copyFileSync(a, b);
        else if (code !== 'ENOENT') throw err;
      }
    }
  }
}

const dirs: string[] = [];
let server: Child | undefined;
const redis = connectTestRedis();
const prefix = uniquePrefix('docker');
afterAll(async () => {
  server?.proc.kill('SIGKILL');
  await dropPrefix(redis, prefix);
  redis.disconnect();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('the Dockerfile', () => {
  it(
    'builds in a clean directory, installs production dependencies only, and its CMD becomes ready',
    async () => {
      const stages = parseDockerfile(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'));
      expect(stages.map((s) => s.name)).toEqual(['build', 'runtime']);
      const workdirs = new Map<string, string>();
      const dataDir = mkdtempSync(join(tmpdir(), 'herald-docker-data-'));
      dirs.push(dataDir);
      const cacheDir = mkdtempSync(join(tmpdir(), 'herald-docker-npm-'));
      dirs.push(cacheDir);
      const npmCache = privateNpmCache(cacheDir);
      const skipped: string[] = [];
      for (const stage of stages) {
        const dir = mkdtempSync(join(tmpdir(), `herald-docker-${stage.name}-`));
        dirs.push(dir);
        workdirs.set(stage.name, dir);
        for (const step of stage.steps) {
          if (step.kind === 'copy') {
            const base = step.from === null ? ROOT : workdirs.get(step.from)!;
            for (const source of step.sources) {
              // `COPY --from=build /app/dist ./dist`: /app is the stage's WORKDIR.
              const from = join(base, source.replace(/^\/app\//, ''));
              const to =
                step.dest.endsWith('/') || step.sources.length > 1
                  ? join(dir, step.dest, source.split('/').pop()!)
                  : join(dir, step.dest);
              mkdirSync(join(to, '..'), { recursive: true });
              cpSync(from, to, { recursive: true });
            }
          } else if (/\/data\b/.test(step.command)) {
            skipped.push(step.command);
          } else {
            await run('sh', ['-c', step.command], {
              cwd: dir,
              env: { ...process.env, ...stage.env, HERALD_DATA_DIR: dataDir, npm_config_cache: npmCache },
              maxBuffer: 64 * 1024 * 1024,
            });
          }
        }
      }
      expect(skipped).toEqual(['mkdir -p /data && chown node:node /data']);

      const runtime = workdirs.get('runtime')!;
      // Production dependencies only: no TypeScript, no test tools.
      await expect(run(process.execPath, ['-e', "require.resolve('typescript')"], { cwd: runtime })).rejects.toThrow();
      await run(process.execPath, ['-e', "require.resolve('ioredis')"], { cwd: runtime });

      const cmd = stages.at(-1)!.cmd!;
      expect(cmd[0]).toBe('node');
      const port = await freePort();
      const proc = spawn(process.execPath, cmd.slice(1), {
        cwd: runtime,
        env: childEnv({
          ...stages.at(-1)!.env,
          PORT: String(port),
          HOST: '127.0.0.1',
          REDIS_URL: testRedisUrl(),
          HERALD_KEY_PREFIX: prefix,
          HERALD_DATA_DIR: dataDir,
        }),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      proc.stdout.on('data', (c: Buffer) => (out += c.toString()));
      proc.stderr.on('data', (c: Buffer) => (out += c.toString()));
      const exited = new Promise<number | null>((resolve) => proc.on('close', resolve));
      server = { proc, stdout: () => out, stderr: () => out, exited };
      await waitFor(
        async () => {
          if (proc.exitCode !== null) throw new Error(`exited: ${out}`);
          return (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null))?.status === 200;
        },
        { timeoutMs: 90_000, intervalMs: 200, what: 'the image command to be ready' },
      );
      proc.kill('SIGTERM');
      expect(await exited).toBe(0);
    },
    DOCKERFILE_DEADLINE_MS,
  );
});
