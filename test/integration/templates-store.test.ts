import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import { newTemplate, TemplateCreateSchema, type Template } from '../../src/domain/template/template.js';
import { createKeys, type Keys } from '../../src/store/keys.js';
import { RedisTemplateRepo } from '../../src/store/templates.js';
import { connectTestRedis, dropPrefix, uniquePrefix } from '../support/redis.js';

let redis: Redis;
let keys: Keys;
let repo: RedisTemplateRepo;
const prefix = uniquePrefix('tpl-store');
const ids = createIdGenerator();

beforeAll(() => {
  redis = connectTestRedis();
  keys = createKeys(prefix);
  repo = new RedisTemplateRepo(redis, keys);
});
afterAll(async () => {
  await dropPrefix(redis, prefix);
  await redis.quit();
});

let n = 0;
const uniqueName = (label = 'T') => `${label} ${++n} ${Math.random().toString(36).slice(2, 8)}`;
const make = (name = uniqueName(), body = 'Hello {{who}}'): Template =>
  newTemplate(ids.next('template'), TemplateCreateSchema.parse({ name, body }), new Date().toISOString());
const bump = (t: Template, changes: Partial<Template>): Template => ({ ...t, ...changes, version: t.version + 1 });

describe('RedisTemplateRepo', () => {
  it('creates, reads back, indexes the name and keeps version 1', async () => {
    const t = make();
    expect(await repo.create([t])).toEqual({ ok: true });
    expect(await repo.get(t.id)).toEqual(t);
    expect(await repo.getVersion(t.id, 1)).toEqual(t);
    expect(await redis.hget(keys.templateNames(), t.name.toLowerCase())).toBe(t.id);
    expect(await repo.get('tpl_nope')).toBeNull();
  });

  it('names are unique, ignoring case', async () => {
    const name = uniqueName('Outage');
    expect((await repo.create([make(name)])).ok).toBe(true);
    expect(await repo.create([make(name.toUpperCase())])).toEqual({ ok: false, reason: 'name_taken', indexes: [0] });
  });

  it('concurrent creates of one name: exactly one wins', async () => {
    const name = uniqueName('Race');
    const results = await Promise.all(Array.from({ length: 25 }, () => repo.create([make(name)])));
    expect(results.filter((r) => r.ok)).toHaveLength(1);
    expect(results.filter((r) => !r.ok && r.reason === 'name_taken')).toHaveLength(24);
  });

  it('a batch is all or nothing', async () => {
    const taken = make();
    await repo.create([taken]);
    const batch = [make(), make(taken.name), make()];
    expect(await repo.create(batch)).toEqual({ ok: false, reason: 'name_taken', indexes: [1] });
    for (const t of batch) expect(await repo.get(t.id)).toBeNull();
    expect(await redis.hget(keys.templateNames(), batch[0]!.name.toLowerCase())).toBeNull();
    const ok = [make(), make()];
    expect(await repo.create(ok)).toEqual({ ok: true });
    for (const t of ok) expect(await repo.get(t.id)).toEqual(t);
  });

  it('update is compare-and-set and keeps every version', async () => {
    const v1 = make();
    await repo.create([v1]);
    const v2 = bump(v1, { body: 'v2' });
    expect(await repo.update(v1, v2)).toEqual({ ok: true });
    // A writer that read v1 lost the race.
    expect(await repo.update(v1, bump(v1, { body: 'stale' }))).toEqual({ ok: false, reason: 'conflict' });
    expect(await repo.get(v1.id)).toEqual(v2);
    expect(await repo.getVersion(v1.id, 1)).toEqual(v1);
    expect(await repo.getVersion(v1.id, 2)).toEqual(v2);
    expect(await repo.getVersion(v1.id, 3)).toBeNull();
  });

  it('renames move the name claim; a taken name is refused', async () => {
    const a = make();
    const b = make();
    await repo.create([a, b]);
    expect(await repo.update(a, bump(a, { name: b.name.toUpperCase() }))).toEqual({
      ok: false,
      reason: 'name_taken',
      indexes: [0],
    });
    const renamed = bump(a, { name: uniqueName('Renamed') });
    expect(await repo.update(a, renamed)).toEqual({ ok: true });
    expect(await redis.hget(keys.templateNames(), a.name.toLowerCase())).toBeNull();
    expect(await redis.hget(keys.templateNames(), renamed.name.toLowerCase())).toBe(a.id);
    // Only the case changes: same claim, no conflict with itself.
    expect(await repo.update(renamed, bump(renamed, { name: renamed.name.toUpperCase() }))).toEqual({ ok: true });
    // The old name is free again.
    expect((await repo.create([make(a.name)])).ok).toBe(true);
  });

  it('delete refuses while a non-closed incident attaches it, then removes everything', async () => {
    const t = make();
    await repo.create([t]);
    const v2 = bump(t, { body: 'two' });
    await repo.update(t, v2);
    await redis.sadd(keys.templateIncidents(t.id), 'inc_x');
    expect(await repo.delete(v2)).toEqual({ ok: false, reason: 'in_use' });
    expect(await repo.get(t.id)).toEqual(v2);
    await redis.srem(keys.templateIncidents(t.id), 'inc_x');
    expect(await repo.delete(t)).toEqual({ ok: false, reason: 'conflict' });
    expect(await repo.delete(v2)).toEqual({ ok: true });
    expect(await repo.get(t.id)).toBeNull();
    expect(await redis.exists(keys.templateVersions(t.id))).toBe(0);
    expect(await redis.hget(keys.templateNames(), t.name.toLowerCase())).toBeNull();
    expect(await redis.zscore(keys.templates(), t.id)).toBeNull();
  });

  it('lists newest first without skipping or repeating while templates are added', async () => {
    const own = createKeys(uniquePrefix('tpl-list'));
    const r = new RedisTemplateRepo(redis, own);
    const made: Template[] = [];
    for (let i = 0; i < 5; i++) {
      const t = make();
      await r.create([t]);
      made.push(t);
    }
    const first = await r.list({ limit: 2, cursor: null });
    expect(first.data.map((t) => t.id)).toEqual([made[4]!.id, made[3]!.id]);
    await r.create([make()]); // a newer one appears between pages
    const second = await r.list({ limit: 2, cursor: first.nextCursor });
    expect(second.data.map((t) => t.id)).toEqual([made[2]!.id, made[1]!.id]);
    const third = await r.list({ limit: 2, cursor: second.nextCursor });
    expect(third.data.map((t) => t.id)).toEqual([made[0]!.id]);
    expect(third.nextCursor).toBeNull();
    await dropPrefix(redis, own.tag.slice(1, -1));
  });

  it('pages versions newest first', async () => {
    let cur = make();
    await repo.create([cur]);
    for (let v = 2; v <= 5; v++) {
      const next = bump(cur, { body: `v${v}` });
      await repo.update(cur, next);
      cur = next;
    }
    const p1 = await repo.listVersions(cur.id, 5, { limit: 2, cursor: null });
    expect(p1.data.map((t) => t.version)).toEqual([5, 4]);
    const p2 = await repo.listVersions(cur.id, 6, { limit: 2, cursor: p1.nextCursor });
    expect(p2.data.map((t) => t.version)).toEqual([3, 2]);
    const p3 = await repo.listVersions(cur.id, 6, { limit: 2, cursor: p2.nextCursor });
    expect(p3.data.map((t) => t.version)).toEqual([1]);
    expect(p3.nextCursor).toBeNull();
  });
});
