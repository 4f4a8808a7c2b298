import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeRedisInUse } from '../../src/composition/cli.js';
import { loadConfig } from '../../src/config.js';
import { redisLocation } from '../../src/store/redis-location.js';
import {
  CHILD_DEADLINE_MS,
  childEnv,
  freePort,
  runEntry,
  spawnEntry,
  startPrivateRedis,
  stopChild,
  type Child,
} from '../support/child.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { testRedisUrl } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

let h: TestHerald;
let dataDir: string;
beforeAll(async () => {
  h = await startHerald();
  dataDir = mkdtempSync(join(tmpdir(), 'herald-cli-'));
});
afterAll(async () => {
  await h.close();
  rmSync(dataDir, { recursive: true, force: true });
});

/** The CLI against the test Herald's Redis and key prefix, as `npm run --silent herald -- …`. */
const herald = (...args: string[]) =>
  runEntry(
    'cli',
    args,
    childEnv({
      REDIS_URL: testRedisUrl(),
      HERALD_KEY_PREFIX: h.prefix,
      HERALD_SECRET_KEY: randomBytes(32).toString('base64'),
      HERALD_DATA_DIR: dataDir,
    }),
  );

describe('herald keys (CLI)', () => {
  let created: { id: string; token: string; name: string };

  it('creates a key with --json: exactly the documented fields, and the token works', async () => {
    const r = await herald(
      'keys',
      'create',
      '--name',
      'ci deploy',
      '--scopes',
      'incidents:read,incidents:write',
      '--expires-in',
      '90d',
      '--json',
    );
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(Object.keys(out).sort()).toEqual(['created_at', 'expires_at', 'id', 'name', 'scopes', 'token']);
    expect(out).toMatchObject({ name: 'ci deploy', scopes: ['incidents:read', 'incidents:write'] });
    expect(out.id).toMatch(/^key_[0-9A-Z]{26}$/);
    expect(out.token).toMatch(/^hld_[0-9A-Za-z]{49}$/);
    expect(Date.parse(out.expires_at) - Date.parse(out.created_at)).toBe(90 * 86_400_000);
    expect(r.stderr).not.toContain(out.token);
    // Which Redis the key went to, first on stderr.
    expect(r.stderr.split('\n')[0]).toBe(`herald: using Redis ${redisLocation(testRedisUrl())} (REDIS_URL)`);
    created = out;

    const stored = await h.herald.services.apiKeys.get(out.id);
    expect(stored.created_by).toEqual({ type: 'system', id: 'cli', name: 'cli' });
    const made = await h.api('POST', '/v1/incidents', {
      token: out.token,
      body: { title: 'via CLI key', severity: 'minor' },
    });
    expect(made.status).toBe(201);
    expect(made.body.created_by).toMatchObject({ type: 'api_key', id: out.id, name: 'ci deploy' });
    expect(stored.scopes).toEqual(['incidents:read', 'incidents:write']);
  });

  it('creates for people: the token on stdout, the once-only warning on stderr', async () => {
    const r = await herald('keys', 'create', '--name', 'human', '--scopes', '*');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/Created API key key_[0-9A-Z]{26} "human"/);
    expect(r.stdout).toMatch(/token: +hld_[0-9A-Za-z]{49}/);
    expect(r.stdout).toContain('expires: never');
    expect(r.stderr).toMatch(/shown only once/);
  });

  it('lists keys as a table and as JSON, never with tokens', async () => {
    const [table, json] = await Promise.all([herald('keys', 'list'), herald('keys', 'list', '--json')]);
    expect(table.code).toBe(0);
    const lines = table.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^ID +NAME +SCOPES +CREATED +EXPIRES +LAST USED +REVOKED$/);
    const row = lines.find((l) => l.startsWith(created.id));
    expect(row).toContain('ci deploy');
    expect(row).toContain('incidents:read,incidents:write');
    expect(table.stdout).not.toMatch(/hld_/);

    expect(json.code).toBe(0);
    const keys = JSON.parse(json.stdout);
    const mine = keys.find((k: { id: string }) => k.id === created.id);
    expect(mine).toMatchObject({ name: 'ci deploy', revoked_at: null, created_by: { type: 'system', id: 'cli' } });
    expect(mine.last_used_at).not.toBeNull();
    expect(json.stdout).not.toMatch(/hld_|sha/);
  });

  it('revokes: the token is refused within a second; revoking again is harmless', async () => {
    expect((await h.api('GET', '/v1/incidents', { token: created.token })).status).toBe(200);
    const r = await herald('keys', 'revoke', created.id);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`Revoked ${created.id}`);
    const refusedAt = Date.now();
    const res = await waitFor(
      async () => {
        const x = await h.api('GET', '/v1/incidents', { token: created.token });
        return x.status === 401 ? x : false;
      },
      { timeoutMs: 1000, what: '401 after revoke' },
    );
    expect(Date.now() - refusedAt).toBeLessThan(1000);
    expect(res.headers.get('www-authenticate')).toContain('error="invalid_token"');

    const again = await herald('keys', 'revoke', created.id, '--json');
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ id: created.id, revoked_at: expect.any(String) });
  });

  it('explains mistakes on stderr with exit 2 (usage) or 1 (failure), printing nothing on stdout', async () => {
    const [scope, expiry, missing, unknownId, unknownCmd, unknownFlag] = await Promise.all([
      herald('keys', 'create', '--name', 'x', '--scopes', 'incidents:read,incidents:delete', '--json'),
      herald('keys', 'create', '--name', 'x', '--scopes', '*', '--expires-in', '5y'),
      herald('keys', 'create', '--scopes', '*'),
      herald('keys', 'revoke', 'key_01J00000000000000000000000'),
      herald('keys', 'rotate'),
      herald('keys', 'list', '--verbose'),
    ]);
    expect(scope.code).toBe(2);
    expect(scope.stderr).toContain('"incidents:delete"');
    expect(scope.stderr).toContain('incidents:read, incidents:write');
    expect(expiry.code).toBe(2);
    expect(expiry.stderr).toMatch(/--expires-in: .*30m, 12h or 90d/);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('--name is required');
    expect(unknownId.code).toBe(1);
    expect(unknownId.stderr).toMatch(/key_01J00000000000000000000000 was not found/);
    expect(unknownCmd.code).toBe(2);
    expect(unknownFlag.code).toBe(2);
    expect(unknownFlag.stderr).toContain('--verbose');
    for (const r of [scope, expiry, missing, unknownId, unknownCmd, unknownFlag]) expect(r.stdout).toBe('');
  });

  it('prints help on stdout with exit 0', async () => {
    const r = await herald('--help');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Usage: npm run --silent herald -- /);
    expect(r.stdout).toContain('keys create --name NAME --scopes');
    expect(r.stdout).toContain('--embedded');
    expect(r.stdout).toContain('node dist/cli/main.js');
    // Help opens no Redis, so it names none.
    expect(r.stderr).toBe('');
  });

  it('fails with exit 1 and a clear message when Redis is unreachable', async () => {
    const r = await runEntry(
      'cli',
      ['keys', 'list'],
      childEnv({ REDIS_URL: 'redis://:hunter2@127.0.0.1:1', HERALD_KEY_PREFIX: h.prefix }),
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('Cannot reach Redis at redis://127.0.0.1:1');
    expect(r.stderr).not.toContain('hunter2');
    expect(r.stdout).toBe('');
  });
});

describe('which Redis the CLI uses', () => {
  const dirs: string[] = [];
  let server: Child | undefined;
  afterAll(async () => {
    await stopChild(server);
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  const tempDir = () => {
    const d = mkdtempSync(join(tmpdir(), 'herald-cli-redis-'));
    dirs.push(d);
    return d;
  };
  /** Embedded-Redis runs: no REDIS_URL at all, the data directory as given. */
  const embeddedCli = (args: string[], vars: Record<string, string | undefined>) =>
    runEntry(
      'cli',
      args,
      childEnv({ HERALD_KEY_PREFIX: 'herald', HERALD_SECRET_KEY: randomBytes(32).toString('base64'), ...vars }),
    );

  it('names a REDIS_URL without its credentials', async () => {
    const password = `pw-${randomBytes(8).toString('hex')}`;
    // A user of its own with a password (the default user stays open, for the start-up probe).
    const redis = await startPrivateRedis(['--user', 'herald', 'on', `>${password}`, '~*', '&*', '+@all']);
    try {
      const url = redis.url.replace('redis://', `redis://herald:${password}@`);
      const r = await runEntry('cli', ['keys', 'list', '--json'], childEnv({ REDIS_URL: url }));
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toBe(`herald: using Redis ${redis.url} (REDIS_URL)\n`);
      expect(r.stderr).not.toContain(password);
      expect(JSON.parse(r.stdout)).toEqual([]);
    } finally {
      redis.kill();
    }
  });

  it('describes a Cluster, Sentinels and the embedded Redis, never with a password', () => {
    const secret = 'hunter2-secret';
    const cluster = loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:7000,10.0.0.2:7001', REDIS_PASSWORD: secret });
    expect(describeRedisInUse(cluster)).toBe('Redis Cluster 10.0.0.1:7000,10.0.0.2:7001 (REDIS_CLUSTER_NODES)');
    const sentinel = loadConfig({
      REDIS_SENTINELS: '10.0.0.5:26379,10.0.0.6:26379',
      REDIS_SENTINEL_NAME: 'mymaster',
      REDIS_PASSWORD: secret,
    });
    expect(describeRedisInUse(sentinel)).toBe(
      'Redis Sentinel primary "mymaster" via 10.0.0.5:26379,10.0.0.6:26379 (REDIS_SENTINELS)',
    );
    const url = loadConfig({ REDIS_URL: `rediss://herald:${secret}@redis.internal:6380/2` });
    expect(describeRedisInUse(url)).toBe('Redis rediss://redis.internal:6380/2 (REDIS_URL)');
    const embedded = loadConfig({ HERALD_DATA_DIR: '/srv/herald/data' });
    expect(describeRedisInUse(embedded, true)).toBe(
      'the embedded Redis in /srv/herald/data (started for this command)',
    );
    expect(describeRedisInUse(embedded, false)).toBe('the embedded Redis in /srv/herald/data (of the running Herald)');
  });

  it('refuses to create a data directory and a new Redis without --embedded (exit 1, saying what to set)', async () => {
    const missing = join(tempDir(), 'data');
    const [plain, production] = await Promise.all([
      embeddedCli(['keys', 'create', '--name', 'admin', '--scopes', '*'], { HERALD_DATA_DIR: missing }),
      embeddedCli(['keys', 'list'], { HERALD_DATA_DIR: missing, NODE_ENV: 'production' }),
    ]);
    for (const r of [plain, production]) {
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr).toContain(`the data directory ${missing} (HERALD_DATA_DIR) does not exist`);
      expect(r.stderr).toContain('Set REDIS_URL');
      expect(r.stderr).toContain('run the command where Herald runs');
      expect(r.stderr).toContain('--embedded');
      expect(r.stderr).not.toContain('herald: using');
    }
    expect(existsSync(missing)).toBe(false);
  });

  it('refuses to start an embedded Redis under NODE_ENV=production, even where the data directory exists', async () => {
    const dataDir = tempDir();
    const r = await embeddedCli(['keys', 'create', '--name', 'admin', '--scopes', '*'], {
      HERALD_DATA_DIR: dataDir,
      NODE_ENV: 'production',
    });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain(`no Herald runs on the data directory ${dataDir}, and NODE_ENV=production`);
    expect(r.stderr).toContain('Set REDIS_URL');
    expect(r.stderr).toContain('--embedded');
    // No server was started: no socket, no pid file, no append-only file.
    expect(existsSync(join(dataDir, 'redis', 'redis.sock'))).toBe(false);
    expect(existsSync(join(dataDir, 'redis', 'redis.pid'))).toBe(false);
  });

  it('starts one for the command with --embedded (before or after the command), and says so', async () => {
    const missing = join(tempDir(), 'new-data');
    const first = await embeddedCli(['--embedded', 'keys', 'create', '--name', 'admin', '--scopes', '*', '--json'], {
      HERALD_DATA_DIR: missing,
      NODE_ENV: 'production',
    });
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr.split('\n')[0]).toBe(
      `herald: using the embedded Redis in ${missing} (started for this command)`,
    );
    expect(JSON.parse(first.stdout)).toMatchObject({ name: 'admin', scopes: ['*'] });
    // The same data, read again by a command with the flag at its end.
    const again = await embeddedCli(['keys', 'list', '--json', '--embedded'], {
      HERALD_DATA_DIR: missing,
      NODE_ENV: 'production',
    });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr.split('\n')[0]).toBe(
      `herald: using the embedded Redis in ${missing} (started for this command)`,
    );
    expect(JSON.parse(again.stdout).map((k: { name: string }) => k.name)).toEqual(['admin']);
    await waitFor(() => !existsSync(join(missing, 'redis', 'redis.sock')), {
      timeoutMs: 10_000,
      what: 'the command to stop the Redis it started',
    });
  });

  it("starts one outside production where the data directory exists (the quick start's ./data)", async () => {
    const dataDir = tempDir();
    const r = await embeddedCli(['keys', 'list'], { HERALD_DATA_DIR: dataDir });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr.split('\n')[0]).toBe(`herald: using the embedded Redis in ${dataDir} (started for this command)`);
  });

  it("uses the running Herald's embedded Redis, with NODE_ENV=production too, and its keys authenticate", async () => {
    const dataDir = tempDir();
    const port = await freePort();
    const env = {
      HERALD_DATA_DIR: dataDir,
      HERALD_SECRET_KEY: randomBytes(32).toString('base64'),
      PORT: String(port),
      HOST: '127.0.0.1',
    };
    server = spawnEntry('main', [], childEnv(env));
    await waitFor(
      async () => {
        if (server!.proc.exitCode !== null) throw new Error(`Herald exited: ${server!.stderr()}`);
        return (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null))?.status === 200;
      },
      { timeoutMs: CHILD_DEADLINE_MS, intervalMs: 100, what: 'Herald with its embedded Redis to be ready' },
    );
    const serverPid = readFileSync(join(dataDir, 'redis', 'redis.pid'), 'utf8').trim();
    const line = `herald: using the embedded Redis in ${dataDir} (of the running Herald)`;
    const [dev, production] = await Promise.all([
      embeddedCli(['keys', 'create', '--name', 'dev', '--scopes', '*', '--json'], env),
      embeddedCli(['keys', 'create', '--name', 'prod', '--scopes', '*', '--json'], { ...env, NODE_ENV: 'production' }),
    ]);
    for (const r of [dev, production]) {
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr.split('\n')[0]).toBe(line);
      const { token } = JSON.parse(r.stdout) as { token: string };
      const res = await fetch(`http://127.0.0.1:${port}/v1/incidents`, {
        headers: { Authorization: `Bearer ${token}` },
      });
      expect(res.status).toBe(200);
    }
    // Reused, not replaced.
    expect(readFileSync(join(dataDir, 'redis', 'redis.pid'), 'utf8').trim()).toBe(serverPid);
  });
});
