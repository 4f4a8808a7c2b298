import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { formatToken, isWellFormedToken, TOKEN_PATTERN } from '../../src/domain/common/api-key.js';
import { AccessPolicy } from '../../src/services/access.js';
import { ApiKeyService, AUTH_CACHE_MS } from '../../src/services/api-keys.js';
import { FakeTokenCrypto, fieldsOf, idOf, refusal, refusalOf, slackActor } from './fakes.js';
import { webhookBody, world } from './world.js';

/** ApiKeyService's rules over in-memory fakes. */

describe('ApiKeyService.create', () => {
  it('returns the token once and stores only its SHA-256; scopes deduplicated, * alone when granted', async () => {
    const w = world();
    const { key, token } = await w.services.apiKeys.create(
      { name: 'ci', scopes: ['incidents:read', 'incidents:read', 'templates:read'] },
      slackActor,
    );
    expect(token).toMatch(TOKEN_PATTERN);
    expect(key).toMatchObject({
      name: 'ci',
      scopes: ['incidents:read', 'templates:read'],
      expires_at: null,
      revoked_at: null,
      last_used_at: null,
      created_by: slackActor,
    });
    expect(JSON.stringify([...w.repos.apiKeys.keys.values()])).not.toContain(token);
    expect([...w.repos.apiKeys.byHash.keys()]).toEqual([createHash('sha256').update(token).digest('hex')]);
    const all = await w.services.apiKeys.create({ name: 'admin', scopes: ['incidents:read', '*'] }, slackActor);
    expect(all.key.scopes).toEqual(['*']);
    expect(all.token).not.toBe(token);
  });

  it('sets expires_at from expires_in, and refuses a malformed duration on expires_in', async () => {
    const w = world();
    const { key } = await w.services.apiKeys.create(
      { name: 'short', scopes: ['incidents:read'], expires_in: '12h' },
      slackActor,
    );
    expect(key.expires_at).toBe('2026-11-22T22:00:00.000Z');
    const e = await refusal(
      w.services.apiKeys.create({ name: 'bad', scopes: ['incidents:read'], expires_in: 'soon' }, slackActor),
    );
    expect(e.code).toBe('validation_failed');
    expect(fieldsOf(e)).toEqual(['expires_in:invalid_format']);
  });

  it('refuses a missing name, no scopes and unknown scopes', async () => {
    const w = world();
    const e = await refusal(w.services.apiKeys.create({ name: ' ', scopes: [] }, slackActor));
    expect(e.errors.map((x) => x.field).sort()).toEqual(['name', 'scopes']);
    expect(
      (await refusal(w.services.apiKeys.create({ name: 'x', scopes: ['everything'] }, slackActor))).errors[0]!.field,
    ).toMatch(/^scopes/);
    expect(w.repos.apiKeys.keys.size).toBe(0);
  });

  it('refuses a Slack user who is not an admin itself (insufficient_scope), and lets the system actor (the CLI)', async () => {
    const w = world();
    const mallory = { type: 'slack_user' as const, id: 'UMALLORY', name: 'mallory' };
    const e = await refusal(w.services.apiKeys.create({ name: 'evil', scopes: ['*'] }, mallory));
    expect(e.code).toBe('insufficient_scope');
    expect(e.meta).toEqual({ task: 'manage_api_keys' });
    expect(w.repos.apiKeys.keys.size).toBe(0);
    // An API key manages no keys, whatever its scopes.
    const apiKey = { type: 'api_key' as const, id: 'key_1', name: 'ci' };
    expect((await refusal(w.services.apiKeys.create({ name: 'k', scopes: ['*'] }, apiKey))).code).toBe(
      'insufficient_scope',
    );
    const cli = { type: 'system' as const, id: 'cli', name: 'cli' };
    const { key } = await w.services.apiKeys.create({ name: 'ops', scopes: ['*'] }, cli);

    const refused = await refusal(w.services.apiKeys.revoke(key.id, mallory));
    expect(refused.code).toBe('insufficient_scope');
    expect((await w.services.apiKeys.get(key.id)).revoked_at).toBeNull();
    expect((await w.services.apiKeys.revoke(key.id, cli)).revoked_at).not.toBeNull();
  });
});

describe('AdminViewService.overview', () => {
  it('shows an admin the connections and API keys, capped, and refuses anyone else itself', async () => {
    const w = world();
    for (const name of ['a', 'b', 'c']) await w.services.apiKeys.create({ name, scopes: ['*'] }, slackActor);
    await w.services.connections.create(webhookBody('Hook'));
    const view = await w.services.admin.overview(slackActor, { connections: 5, keys: 2 });
    expect(view.keys).toHaveLength(2);
    expect(view.moreKeys).toBe(true);
    expect(view.connections.map((c) => c.name)).toEqual(['Hook']);
    expect(view.moreConnections).toBe(false);

    const e = await refusal(
      w.services.admin.overview({ type: 'slack_user', id: 'UMALLORY' }, { connections: 5, keys: 5 }),
    );
    expect(e.code).toBe('insufficient_scope');
    expect(e.meta).toEqual({ task: 'view_admin' });
  });
});

describe('ApiKeyService.authenticate', () => {
  it('resolves an active token to its key and records its use', async () => {
    const w = world();
    const { key, token } = await w.services.apiKeys.create({ name: 'ci', scopes: ['*'] }, slackActor);
    w.clock.advance(5000);
    await expect(w.services.apiKeys.authenticate(token)).resolves.toMatchObject({ id: key.id });
    expect(w.repos.apiKeys.touched).toEqual([{ id: key.id, at: '2026-11-22T10:00:05.000Z' }]);
  });

  it('refuses a missing, malformed, unknown, revoked or expired token as unauthenticated', async () => {
    const w = world();
    const { key, token } = await w.services.apiKeys.create({ name: 'ci', scopes: ['*'] }, slackActor);
    const { token: short } = await w.services.apiKeys.create(
      { name: 'short', scopes: ['*'], expires_in: '30m' },
      slackActor,
    );
    expect((await refusal(w.services.apiKeys.authenticate(null))).code).toBe('unauthenticated');
    expect((await refusal(w.services.apiKeys.authenticate('hld_nope'))).code).toBe('unauthenticated');
    // Well-formed (checksum holds) but never issued.
    const other = formatToken(Buffer.alloc(32, 7));
    expect(isWellFormedToken(other)).toBe(true);
    expect((await refusal(w.services.apiKeys.authenticate(other))).code).toBe('unauthenticated');
    w.clock.advance(31 * 60_000);
    expect((await refusal(w.services.apiKeys.authenticate(short))).code).toBe('unauthenticated');
    await w.services.apiKeys.revoke(key.id, slackActor);
    expect((await refusal(w.services.apiKeys.authenticate(token))).code).toBe('unauthenticated');
    expect(w.repos.apiKeys.touched).toEqual([]);
  });
});

describe('ApiKeyService.authenticate: the per-process cache', () => {
  it('looks a key up (and records its use) at most once per AUTH_CACHE_MS', async () => {
    const w = world();
    const { key, token } = await w.services.apiKeys.create({ name: 'ci', scopes: ['*'] }, slackActor);
    for (let i = 0; i < 5; i += 1) await w.services.apiKeys.authenticate(token);
    w.clock.advance(AUTH_CACHE_MS - 1);
    await w.services.apiKeys.authenticate(token);
    expect(w.repos.apiKeys.touched.map((t) => t.id)).toEqual([key.id]);
    w.clock.advance(1);
    await w.services.apiKeys.authenticate(token);
    expect(w.repos.apiKeys.touched.map((t) => t.id)).toEqual([key.id, key.id]);
  });

  it('a revocation by another process takes effect within AUTH_CACHE_MS; by this one, at once', async () => {
    const w = world();
    const { key, token } = await w.services.apiKeys.create({ name: 'ci', scopes: ['*'] }, slackActor);
    const { key: key2, token: token2 } = await w.services.apiKeys.create({ name: 'ci2', scopes: ['*'] }, slackActor);
    await w.services.apiKeys.authenticate(token);
    await w.services.apiKeys.authenticate(token2);
    // Another instance sharing the same Redis.
    const other = new ApiKeyService({
      repo: w.repos.apiKeys,
      clock: w.clock,
      ids: w.ids,
      crypto: new FakeTokenCrypto(),
      access: new AccessPolicy({ slackAdmins: [slackActor.id] }),
    });
    await other.revoke(key.id, slackActor);
    await expect(w.services.apiKeys.authenticate(token)).resolves.toMatchObject({ id: key.id });
    w.clock.advance(AUTH_CACHE_MS);
    expect((await refusal(w.services.apiKeys.authenticate(token))).code).toBe('unauthenticated');
    // This process's own revocation drops its cached entry.
    await w.services.apiKeys.revoke(key2.id, slackActor);
    expect((await refusal(w.services.apiKeys.authenticate(token2))).code).toBe('unauthenticated');
  });

  it('checks an expiry on every request, cached or not; an unknown token is never cached', async () => {
    const w = world();
    const { token } = await w.services.apiKeys.create({ name: 'short', scopes: ['*'], expires_in: '30m' }, slackActor);
    w.clock.advance(30 * 60_000 - 100);
    await w.services.apiKeys.authenticate(token);
    w.clock.advance(100);
    expect((await refusal(w.services.apiKeys.authenticate(token))).code).toBe('unauthenticated');
    const later = formatToken(Buffer.alloc(32, 9));
    expect((await refusal(w.services.apiKeys.authenticate(later))).code).toBe('unauthenticated');
    // Issued afterwards (by the CLI, say) under that very token: it works at once.
    const { key: fresh } = await w.services.apiKeys.create({ name: 'fresh', scopes: ['*'] }, slackActor);
    w.repos.apiKeys.byHash.set(createHash('sha256').update(later).digest('hex'), fresh.id);
    await expect(w.services.apiKeys.authenticate(later)).resolves.toMatchObject({ id: fresh.id });
  });
});

describe('ApiKeyService.authenticateNow: the cache without a promise', () => {
  it('answers a cached key at once, refuses at once, and leaves a lookup to authenticate()', async () => {
    const w = world();
    const { key, token } = await w.services.apiKeys.create({ name: 'ci', scopes: ['*'] }, slackActor);
    const keys = w.services.apiKeys;
    // Not looked up yet: Redis must be asked.
    expect(keys.authenticateNow(token)).toBeUndefined();
    await keys.authenticate(token);
    expect(keys.authenticateNow(token)).toMatchObject({ id: key.id });
    expect(() => keys.authenticateNow(null)).toThrow(expect.objectContaining({ code: 'unauthenticated' }));
    // Once the cache entry is old, a fresh lookup again.
    w.clock.advance(AUTH_CACHE_MS);
    expect(keys.authenticateNow(token)).toBeUndefined();
    // Revoked by this process: refused at once.
    await keys.authenticate(token);
    await keys.revoke(key.id, slackActor);
    expect(keys.authenticateNow(token)).toBeUndefined();
    expect((await refusal(keys.authenticate(token))).code).toBe('unauthenticated');
  });
});

describe('ApiKeyService.authenticate: one lookup per token at a time', () => {
  it('requests that miss the cache together share one lookup (one read, one last-use write)', async () => {
    const w = world();
    const { key, token } = await w.services.apiKeys.create({ name: 'ci', scopes: ['*'] }, slackActor);
    let reads = 0;
    const find = w.repos.apiKeys.findByTokenHash.bind(w.repos.apiKeys);
    w.repos.apiKeys.findByTokenHash = (hash) => {
      reads += 1;
      return find(hash);
    };
    const all = await Promise.all(Array.from({ length: 20 }, () => w.services.apiKeys.authenticate(token)));
    expect(all.map((k) => k.id)).toEqual(Array(20).fill(key.id));
    expect(reads).toBe(1);
    expect(w.repos.apiKeys.touched).toHaveLength(1);
    // Once it expires, the next burst shares the next lookup.
    w.clock.advance(AUTH_CACHE_MS);
    await Promise.all(Array.from({ length: 20 }, () => w.services.apiKeys.authenticate(token)));
    expect(reads).toBe(2);
    expect(w.repos.apiKeys.touched).toHaveLength(2);
  });

  it('a failed lookup fails every request waiting for it, and the next request looks up again', async () => {
    const w = world();
    const { key, token } = await w.services.apiKeys.create({ name: 'ci', scopes: ['*'] }, slackActor);
    const find = w.repos.apiKeys.findByTokenHash.bind(w.repos.apiKeys);
    w.repos.apiKeys.findByTokenHash = () => Promise.reject(new Error('redis away'));
    const outcomes = await Promise.allSettled(Array.from({ length: 5 }, () => w.services.apiKeys.authenticate(token)));
    expect(outcomes.map((o) => o.status)).toEqual(Array(5).fill('rejected'));
    w.repos.apiKeys.findByTokenHash = find;
    await expect(w.services.apiKeys.authenticate(token)).resolves.toMatchObject({ id: key.id });
  });

  it('a lookup under way when this process revokes the key caches nothing', async () => {
    const w = world();
    const { key, token } = await w.services.apiKeys.create({ name: 'ci', scopes: ['*'] }, slackActor);
    let release: () => void = () => undefined;
    const find = w.repos.apiKeys.findByTokenHash.bind(w.repos.apiKeys);
    w.repos.apiKeys.findByTokenHash = async (hash) => {
      const found = await find(hash);
      await new Promise<void>((r) => (release = r));
      return found;
    };
    // Read before the revocation: this request itself still gets the key it read.
    const early = w.services.apiKeys.authenticate(token);
    await new Promise((r) => setTimeout(r, 0));
    w.repos.apiKeys.findByTokenHash = find;
    await w.services.apiKeys.revoke(key.id, slackActor);
    release();
    await expect(early).resolves.toMatchObject({ id: key.id });
    expect((await refusal(w.services.apiKeys.authenticate(token))).code).toBe('unauthenticated');
  });
});

describe('ApiKeyService.revoke / get / list / requireScope', () => {
  it('revokes once: a second revoke keeps the first time', async () => {
    const w = world();
    const { key } = await w.services.apiKeys.create({ name: 'ci', scopes: ['*'] }, slackActor);
    const first = await w.services.apiKeys.revoke(key.id, slackActor);
    expect(first.revoked_at).toBe('2026-11-22T10:00:00.000Z');
    w.clock.advance(60_000);
    expect((await w.services.apiKeys.revoke(key.id, slackActor)).revoked_at).toBe(first.revoked_at);
    expect((await refusal(w.services.apiKeys.revoke(idOf('apiKey', 99), slackActor))).code).toBe('not_found');
  });

  it('retries a revoke that lost a race', async () => {
    const w = world();
    const { key } = await w.services.apiKeys.create({ name: 'ci', scopes: ['*'] }, slackActor);
    let raced = false;
    w.repos.apiKeys.interfere = (id) => {
      if (raced) return;
      raced = true;
      // A change to the record itself (a use, kept apart, would not conflict).
      w.repos.apiKeys.keys.set(id, { ...w.repos.apiKeys.keys.get(id)!, name: 'renamed meanwhile' });
    };
    expect(await w.services.apiKeys.revoke(key.id, slackActor)).toMatchObject({
      name: 'renamed meanwhile',
      revoked_at: '2026-11-22T10:00:00.000Z',
    });
  });

  it('gets (404 when unknown) and lists newest first', async () => {
    const w = world();
    for (const name of ['a', 'b', 'c']) await w.services.apiKeys.create({ name, scopes: ['*'] }, slackActor);
    const p = await w.services.apiKeys.list({ limit: 2, cursor: null });
    expect(p.data.map((k) => k.name)).toEqual(['c', 'b']);
    expect((await w.services.apiKeys.list({ limit: 2, cursor: p.nextCursor })).data.map((k) => k.name)).toEqual(['a']);
    expect((await w.services.apiKeys.get(p.data[0]!.id)).name).toBe('c');
    expect((await refusal(w.services.apiKeys.get(idOf('apiKey', 99)))).code).toBe('not_found');
  });

  it('requireScope lets a granted scope or * through and names a missing one', async () => {
    const w = world();
    const { key } = await w.services.apiKeys.create({ name: 'reader', scopes: ['incidents:read'] }, slackActor);
    const { key: star } = await w.services.apiKeys.create({ name: 'all', scopes: ['*'] }, slackActor);
    expect(() => w.services.apiKeys.requireScope(key, 'incidents:read')).not.toThrow();
    expect(() => w.services.apiKeys.requireScope(star, 'connections:write')).not.toThrow();
    const e = refusalOf(() => w.services.apiKeys.requireScope(key, 'incidents:write'));
    expect(e.code).toBe('insufficient_scope');
    expect(e.meta).toEqual({ scope: 'incidents:write' });
  });
});
