import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { ApiKey } from '../../src/domain/common/api-key.js';
import type { ApiKeyRepo } from '../../src/ports/index.js';
import { RedisApiKeyRepo } from '../../src/store/api-keys.js';
import { InMemoryApiKeyRepo } from '../service/fakes.js';
import { allPages, contractRedis, ids, plain, type Make } from './support.js';

/** The API key repository's contract, as ApiKeyService and the edge's authentication rely on it. */
const db = contractRedis('c-key');
const hash = (token: string) => createHash('sha256').update(token).digest('hex');

function apiKey(name = 'ci'): ApiKey {
  return {
    id: ids.next('apiKey'),
    name,
    scopes: ['incidents:read'],
    created_at: '2026-11-22T10:00:00.000Z',
    expires_at: null,
    last_used_at: null,
    revoked_at: null,
    created_by: { type: 'system', id: 'cli', name: 'cli' },
  };
}

function contract(make: Make<ApiKeyRepo>) {
  it('finds a key by id and by its token hash, and nothing for an unknown one', async () => {
    const repo = make();
    const k = apiKey();
    await repo.create(k, hash('token-a'));
    expect(plain(await repo.get(k.id))).toEqual(k);
    expect(plain(await repo.findByTokenHash(hash('token-a')))).toEqual(k);
    expect(await repo.findByTokenHash(hash('token-b'))).toBeNull();
    expect(await repo.get(ids.next('apiKey'))).toBeNull();
  });

  it('refuses a second key with a token hash already taken, and keeps the first', async () => {
    const repo = make();
    const first = apiKey('first');
    await repo.create(first, hash('same'));
    await expect(repo.create(apiKey('second'), hash('same'))).rejects.toThrow(/collision/);
    expect((await repo.findByTokenHash(hash('same')))?.id).toBe(first.id);
  });

  it('lists newest first and pages through every key once', async () => {
    const repo = make();
    const made: ApiKey[] = [];
    for (let n = 0; n < 5; n++) {
      const k = apiKey(`k${n}`);
      await repo.create(k, hash(k.id));
      made.push(k);
    }
    const pages = await allPages((p) => repo.list(p), 2);
    expect(pages.map((p) => p.length)).toEqual([2, 2, 1]);
    expect(pages.flat().map((k) => k.id)).toEqual(made.map((k) => k.id).reverse());
  });

  it('updates by compare-and-set: a stale `prev` loses, an unknown key is refused', async () => {
    const repo = make();
    const k = apiKey();
    await repo.create(k, hash(k.id));
    const revoked: ApiKey = { ...k, revoked_at: '2026-11-22T11:00:00.000Z' };
    expect(await repo.update(k, revoked)).toBe(true);
    expect(plain(await repo.get(k.id))).toEqual(revoked);
    expect(await repo.update(k, { ...k, name: 'renamed' })).toBe(false);
    expect((await repo.get(k.id))?.name).toBe('ci');
    const ghost = apiKey();
    expect(await repo.update(ghost, { ...ghost, name: 'x' })).toBe(false);
    expect(await repo.get(ghost.id)).toBeNull();
  });

  it('records use apart from the record: a touch shows on reads and never makes an update conflict', async () => {
    const repo = make();
    const k = apiKey();
    await repo.create(k, hash(k.id));
    const before = await repo.get(k.id);
    await repo.touch(k.id, '2026-11-22T12:00:00.000Z');
    expect((await repo.get(k.id))?.last_used_at).toBe('2026-11-22T12:00:00.000Z');
    expect((await repo.findByTokenHash(hash(k.id)))?.last_used_at).toBe('2026-11-22T12:00:00.000Z');
    // An admin who read the key before it was used still revokes it (use is a hint, not a change).
    expect(await repo.update(before!, { ...before!, revoked_at: '2026-11-22T12:30:00.000Z' })).toBe(true);
    const after = await repo.get(k.id);
    expect(after?.revoked_at).toBe('2026-11-22T12:30:00.000Z');
    expect(after?.last_used_at).toBe('2026-11-22T12:00:00.000Z');
    // Last writer wins.
    await repo.touch(k.id, '2026-11-22T13:00:00.000Z');
    expect((await repo.list({ limit: 10, cursor: null })).data[0]?.last_used_at).toBe('2026-11-22T13:00:00.000Z');
  });
}

describe.each<[string, Make<ApiKeyRepo>]>([
  ['in-memory', () => new InMemoryApiKeyRepo()],
  ['redis', () => new RedisApiKeyRepo(db.redis(), db.keys())],
])('ApiKeyRepo contract: %s', (_name, make) => contract(make));
