import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { childEnv, runEntry } from '../support/child.js';
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
