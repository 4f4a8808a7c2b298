import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { formatToken, isWellFormedToken, TOKEN_PATTERN } from '../../src/domain/api-key.js';
import { fieldsOf, idOf, refusal, refusalOf, slackActor } from './fakes.js';
import { world } from './world.js';

/** ApiKeyService's rules over in-memory fakes. */

describe('ApiKeyService.create', () => {
  it('returns the token once and stores only its SHA-256; scopes deduplicated, * alone when granted', async () => {
    const w = world();
    const { key, token } = await w.services.apiKeys.create({ name: 'ci', scopes: ['incidents:read', 'incidents:read', 'templates:read'] }, slackActor);
    expect(token).toMatch(TOKEN_PATTERN);
    expect(key).toMatchObject({ name: 'ci', scopes: ['incidents:read', 'templates:read'], expires_at: null, revoked_at: null, last_used_at: null, created_by: slackActor });
    expect(JSON.stringify([...w.repos.apiKeys.keys.values()])).not.toContain(token);
    expect([...w.repos.apiKeys.byHash.keys()]).toEqual([createHash('sha256').update(token).digest('hex')]);
    const all = await w.services.apiKeys.create({ name: 'admin', scopes: ['incidents:read', '*'] }, slackActor);
    expect(all.key.scopes).toEqual(['*']);
    expect(all.token).not.toBe(token);
  });

  it('sets expires_at from expires_in, and refuses a malformed duration on expires_in', async () => {
    const w = world();
    const { key } = await w.services.apiKeys.create({ name: 'short', scopes: ['incidents:read'], expires_in: '12h' }, slackActor);
    expect(key.expires_at).toBe('2026-11-22T22:00:00.000Z');
    const e = await refusal(w.services.apiKeys.create({ name: 'bad', scopes: ['incidents:read'], expires_in: 'soon' }, slackActor));
    expect(e.code).toBe('validation_failed');
    expect(fieldsOf(e)).toEqual(['expires_in:invalid_format']);
  });

  it('refuses a missing name, no scopes and unknown scopes', async () => {
    const w = world();
    const e = await refusal(w.services.apiKeys.create({ name: ' ', scopes: [] }, slackActor));
    expect(e.errors.map((x) => x.field).sort()).toEqual(['name', 'scopes']);
    expect((await refusal(w.services.apiKeys.create({ name: 'x', scopes: ['everything'] }, slackActor))).errors[0]!.field).toMatch(/^scopes/);
    expect(w.repos.apiKeys.keys.size).toBe(0);
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
    const { token: short } = await w.services.apiKeys.create({ name: 'short', scopes: ['*'], expires_in: '30m' }, slackActor);
    expect((await refusal(w.services.apiKeys.authenticate(null))).code).toBe('unauthenticated');
    expect((await refusal(w.services.apiKeys.authenticate('hld_nope'))).code).toBe('unauthenticated');
    // Well-formed (checksum holds) but never issued.
    const other = formatToken(Buffer.alloc(32, 7));
    expect(isWellFormedToken(other)).toBe(true);
    expect((await refusal(w.services.apiKeys.authenticate(other))).code).toBe('unauthenticated');
    w.clock.advance(31 * 60_000);
    expect((await refusal(w.services.apiKeys.authenticate(short))).code).toBe('unauthenticated');
    await w.services.apiKeys.revoke(key.id);
    expect((await refusal(w.services.apiKeys.authenticate(token))).code).toBe('unauthenticated');
    expect(w.repos.apiKeys.touched).toEqual([]);
  });
});

describe('ApiKeyService.revoke / get / list / requireScope', () => {
  it('revokes once: a second revoke keeps the first time', async () => {
    const w = world();
    const { key } = await w.services.apiKeys.create({ name: 'ci', scopes: ['*'] }, slackActor);
    const first = await w.services.apiKeys.revoke(key.id);
    expect(first.revoked_at).toBe('2026-11-22T10:00:00.000Z');
    w.clock.advance(60_000);
    expect((await w.services.apiKeys.revoke(key.id)).revoked_at).toBe(first.revoked_at);
    expect((await refusal(w.services.apiKeys.revoke(idOf('apiKey', 99)))).code).toBe('not_found');
  });

  it('retries a revoke that lost a race', async () => {
    const w = world();
    const { key } = await w.services.apiKeys.create({ name: 'ci', scopes: ['*'] }, slackActor);
    let raced = false;
    w.repos.apiKeys.interfere = (id) => {
      if (raced) return;
      raced = true;
      w.repos.apiKeys.keys.set(id, { ...w.repos.apiKeys.keys.get(id)!, last_used_at: 'meanwhile' });
    };
    expect(await w.services.apiKeys.revoke(key.id)).toMatchObject({ last_used_at: 'meanwhile', revoked_at: '2026-11-22T10:00:00.000Z' });
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
