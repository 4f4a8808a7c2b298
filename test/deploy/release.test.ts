import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { redisLocation } from '../../src/store/redis-location.js';
import { childEnv, freePort, ROOT, stopChild, type Child } from '../support/child.js';
import { connectTestRedis, dropPrefix, testRedisUrl, uniquePrefix } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/**
 * SLOW (minutes: three npm installs and two builds). The release as an operator gets it: a fresh
 * `git clone` of this repository's committed HEAD, `npm ci --omit=dev` there (succeeds, builds
 * nothing, and `npm start` then says what to do), `npm ci` (builds), `npm pack` (builds again,
 * then packs), and the tarball installed with `npm install --omit=dev` into an empty directory
 * and unpacked as docs/install/bare-metal.md says: the installed CLI and server run against
 * Redis, and a key made with that CLI authenticates. The npm registry is reached through the
 * user's npm cache (`--prefer-offline`).
 */
const RELEASE_DEADLINE_MS = 20 * 60_000;
const STEP_MS = 8 * 60_000;
const NPM_FLAGS = ['--prefer-offline', '--no-audit', '--no-fund'];
const run = promisify(execFile);
const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

const work = mkdtempSync(join(tmpdir(), 'herald-release-'));
const redis = connectTestRedis();
const prefix = uniquePrefix('release');
let server: Child | undefined;
afterAll(async () => {
  await stopChild(server);
  await dropPrefix(redis, prefix);
  redis.disconnect();
  rmSync(work, { recursive: true, force: true });
});

/** npm's environment: this machine's, minus what an outer `npm run` put there. */
function npmEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env, ...extra };
  for (const k of Object.keys(env)) if (k.startsWith('npm_') && k !== 'npm_config_cache') delete env[k];
  delete env.NODE_ENV;
  return env;
}

async function sh(file: string, args: string[], cwd: string, env = npmEnv()) {
  try {
    return await run(file, args, { cwd, env, timeout: STEP_MS, maxBuffer: 64 * 1024 * 1024 });
  } catch (e) {
    const err = e as Error & { stdout?: string; stderr?: string };
    throw new Error(
      `${file} ${args.join(' ')} failed in ${cwd}: ${err.message}\n${err.stdout ?? ''}\n${err.stderr ?? ''}`,
    );
  }
}

/** Starts `node <entry>` in `cwd` with the deployment's environment; resolves once /readyz is 200. */
async function startServer(entry: string, cwd: string, env: Record<string, string>): Promise<number> {
  const port = await freePort();
  const proc = spawn(process.execPath, [entry], {
    cwd,
    env: childEnv({ ...env, PORT: String(port), HOST: '127.0.0.1' }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr.on('data', (c: Buffer) => (out += c.toString()));
  server = { proc, stdout: () => out, stderr: () => out, exited: new Promise((r) => proc.on('close', r)) };
  await waitFor(
    async () => {
      if (proc.exitCode !== null) throw new Error(`the installed server exited: ${out}`);
      return (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null))?.status === 200;
    },
    { timeoutMs: 90_000, intervalMs: 200, what: 'the installed server to answer /readyz' },
  );
  return port;
}

describe('the release tarball (slow)', () => {
  it(
    'is built from a fresh clone, installs with --omit=dev, and its CLI and server work against Redis',
    async () => {
      const clone = join(work, 'clone');
      await sh('git', ['clone', '--quiet', ROOT, clone], work);

      // A production install of the source checkout: it succeeds, builds nothing, and says why.
      const prod = await sh('npm', ['ci', '--omit=dev', ...NPM_FLAGS], clone);
      expect(existsSync(join(clone, 'dist', 'main.js'))).toBe(false);
      expect(prod.stderr).toContain('this is a source checkout installed without its dev dependencies');
      // `npm start` then refuses, with the same two ways out, and starts nothing.
      const start = await run('npm', ['start'], { cwd: clone, env: npmEnv(), timeout: STEP_MS }).then(
        () => null,
        (e: Error & { code?: number; stderr?: string }) => e,
      );
      expect(start, 'npm start without dist/ must fail').not.toBeNull();
      expect(start!.code).toBe(1);
      expect(start!.stderr).toContain('npm ci && npm run build && npm prune --omit=dev');
      expect(start!.stderr).toContain('release tarball');

      // With the dev dependencies: built, then packed.
      await sh('npm', ['ci', ...NPM_FLAGS], clone);
      expect(existsSync(join(clone, 'dist', 'cli', 'main.js'))).toBe(true);
      const packed = await sh('npm', ['pack', '--json', ...NPM_FLAGS], clone);
      const [info] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as [
        { filename: string; files: { path: string }[] },
      ];
      expect(info.filename).toBe(`herald-${version}.tgz`);
      const files = info.files.map((f) => f.path);
      for (const f of [
        'package.json',
        'dist/main.js',
        'dist/cli/main.js',
        'dist/cli/herald.js',
        'scripts/ensure-build.mjs',
        'README.md',
        'LICENSE',
        'CHANGELOG.md',
        '.env.example',
        'manifest/openapi.json',
        'docs/install/bare-metal.md',
        'deploy/systemd/herald.service',
      ])
        expect(files, f).toContain(f);
      // A release, not a checkout: no sources, tests or build information.
      expect(files.filter((f) => /^(src|test|bench)\//.test(f) || f === 'dist/.tsbuildinfo')).toEqual([]);
      const tarball = join(clone, info.filename);

      const env = {
        NODE_ENV: 'production',
        REDIS_URL: testRedisUrl(),
        HERALD_KEY_PREFIX: prefix,
        HERALD_SECRET_KEY: randomBytes(32).toString('base64'),
        HERALD_DATA_DIR: join(work, 'data'),
      };

      // 1. Installed as a dependency into an empty directory.
      const app = join(work, 'app');
      mkdirSync(app);
      await sh('npm', ['install', '--omit=dev', ...NPM_FLAGS, tarball], app);
      expect(existsSync(join(app, 'node_modules', 'typescript'))).toBe(false);
      const help = await sh(join(app, 'node_modules', '.bin', 'herald'), ['help'], app, childEnv({}));
      expect(help.stdout).toMatch(/^Usage: /);
      const port = await startServer(join('node_modules', 'herald', 'dist', 'main.js'), app, env);
      const created = await sh(
        join(app, 'node_modules', '.bin', 'herald'),
        ['keys', 'create', '--name', 'release', '--scopes', '*', '--json'],
        app,
        childEnv(env),
      );
      expect(created.stderr.split('\n')[0]).toBe(`herald: using Redis ${redisLocation(testRedisUrl())} (REDIS_URL)`);
      const { token } = JSON.parse(created.stdout) as { token: string };
      const res = await fetch(`http://127.0.0.1:${port}/v1/incidents`, {
        headers: { Authorization: `Bearer ${token}` },
      });
      expect(res.status).toBe(200);
      await stopChild(server);

      // 2. Unpacked into its own directory, as the systemd unit runs it (docs/install/bare-metal.md).
      const opt = join(work, 'opt-herald');
      mkdirSync(opt);
      await sh('tar', ['-xzf', tarball, '-C', opt, '--strip-components=1'], work);
      await sh('npm', ['install', '--omit=dev', ...NPM_FLAGS], opt);
      const port2 = await startServer(join('dist', 'main.js'), opt, env);
      const listed = await sh(process.execPath, ['dist/cli/main.js', 'keys', 'list', '--json'], opt, childEnv(env));
      expect((JSON.parse(listed.stdout) as { name: string }[]).map((k) => k.name)).toEqual(['release']);
      const again = await fetch(`http://127.0.0.1:${port2}/v1/incidents`, {
        headers: { Authorization: `Bearer ${token}` },
      });
      expect(again.status).toBe(200);
      // `npm start` in the unpacked release has nothing to build and says nothing about it.
      const check = await sh(process.execPath, ['scripts/ensure-build.mjs'], opt);
      expect(check.stderr).toBe('');
    },
    RELEASE_DEADLINE_MS,
  );
});
