import { describe, expect, it } from 'vitest';
import { AudienceCreateSchema, newAudience, type Audience } from '../../src/domain/audience/audience.js';
import { LIMITS } from '../../src/domain/common/limits.js';
import { HEALTHY, type ConnectionRecord } from '../../src/domain/connection/connection.js';
import { newTemplate, TemplateCreateSchema } from '../../src/domain/template/template.js';
import type { AudienceRepo, ConnectionRepo, TemplateRepo } from '../../src/ports/index.js';
import { RedisAudienceRepo } from '../../src/store/audiences.js';
import { RedisConnectionRepo } from '../../src/store/connections.js';
import { RedisTemplateRepo } from '../../src/store/templates.js';
import { InMemoryAudienceRepo, InMemoryConnectionRepo, InMemoryTemplateRepo } from '../service/fakes.js';
import { allPages, contractRedis, ids, plain } from './support.js';

/**
 * The audience repository's contract, as AudienceService and execute rely on it, together with
 * the connection store's half of it: a connection delete takes the connection out of every
 * audience in the same step.
 */
const db = contractRedis('c-aud');

interface Store {
  repo: AudienceRepo;
  connections: ConnectionRepo;
  templates: TemplateRepo;
  /** Marks approvals of these executions as pending for the audience (the approval engine's index). */
  pending(audienceId: string, executionIds: string[]): Promise<void>;
}

const NOW = '2026-11-22T10:00:00.000Z';
const LATER = '2026-11-22T11:00:00.000Z';

const audience = (key: string, over: Partial<Audience> = {}): Audience => ({
  ...newAudience(ids.next('audience'), AudienceCreateSchema.parse({ key, name: key.toUpperCase() }), NOW),
  ...over,
});
const revised = (a: Audience, over: Partial<Audience>): Audience => ({
  ...a,
  ...over,
  rev: a.rev + 1,
  updated_at: LATER,
});

function connection(): ConnectionRecord {
  return {
    id: ids.next('connection'),
    name: 'hook',
    type: 'webhook',
    enabled: true,
    config: { url: 'https://hooks.example.com/herald' },
    secrets: {},
    rate_limit_per_minute: null,
    update_mode: 'thread',
    health: HEALTHY,
    last_test: null,
    created_at: NOW,
    updated_at: NOW,
    rev: 1,
  };
}

async function seed(s: Store): Promise<{ cons: ConnectionRecord[]; tpl: string }> {
  const cons = [connection(), connection(), connection()];
  for (const c of cons) expect(await s.connections.create(c)).toBe(true);
  const t = newTemplate(
    ids.next('template'),
    TemplateCreateSchema.parse({ name: `T ${ids.next('template')}`, body: 'x' }),
    NOW,
  );
  expect(await s.templates.create([t])).toEqual({ ok: true });
  return { cons, tpl: t.id };
}

function contract(make: () => Store) {
  it('reads back what it created, by id and by key; a key is taken once', async () => {
    const s = make();
    const a = audience('customers');
    expect(await s.repo.create(a)).toEqual({ ok: true });
    expect(plain(await s.repo.get(a.id))).toEqual(a);
    expect(await s.repo.create(audience('customers'))).toEqual({ ok: false, reason: 'key_taken' });
    const b = audience('responders');
    expect(await s.repo.create(b)).toEqual({ ok: true });
    expect(plain(await s.repo.getByKeys(['responders', 'nobody', 'customers']))).toEqual([b, null, a]);
    expect(await s.repo.getByKeys([])).toEqual([]);
    expect(await s.repo.get(ids.next('audience'))).toBeNull();
  });

  it('lists every audience by key, and pages newest first', async () => {
    const s = make();
    const made = ['zeta', 'alpha', 'mid', 'beta', 'omega'].map((k) => audience(k));
    for (const a of made) expect(await s.repo.create(a)).toEqual({ ok: true });
    expect((await s.repo.all()).map((a) => a.key)).toEqual(['alpha', 'beta', 'mid', 'omega', 'zeta']);
    const pages = await allPages((p) => s.repo.list(p), 2);
    expect(pages.map((p) => p.length)).toEqual([2, 2, 1]);
    expect(pages.flat().map((a) => a.id)).toEqual(made.map((a) => a.id).reverse());
  });

  it('creates and updates only with connections and templates that exist', async () => {
    const s = make();
    const { cons, tpl } = await seed(s);
    const gone = ids.next('connection');
    expect(await s.repo.create(audience('a', { connection_ids: [cons[0]!.id, gone] }))).toEqual({
      ok: false,
      reason: 'conflict',
    });
    expect(await s.repo.create(audience('a', { template_ids: [ids.next('template')] }))).toEqual({
      ok: false,
      reason: 'conflict',
    });
    const a = audience('a', { connection_ids: [cons[0]!.id], template_ids: [tpl] });
    expect(await s.repo.create(a)).toEqual({ ok: true });
    expect(await s.repo.update(a, revised(a, { connection_ids: [cons[0]!.id, gone] }))).toEqual({
      ok: false,
      reason: 'conflict',
    });
    const b = revised(a, { connection_ids: [cons[1]!.id, cons[2]!.id] });
    expect(await s.repo.update(a, b)).toEqual({ ok: true });
    expect(plain(await s.repo.get(a.id))).toEqual(b);
  });

  it('updates and deletes by compare-and-set: a stale `prev` loses and changes nothing', async () => {
    const s = make();
    const a = audience('a');
    await s.repo.create(a);
    const b = revised(a, { name: 'B' });
    expect(await s.repo.update(a, b)).toEqual({ ok: true });
    expect(await s.repo.update(a, revised(a, { name: 'stale' }))).toEqual({ ok: false, reason: 'conflict' });
    expect(await s.repo.delete(a)).toEqual({ ok: false, reason: 'conflict' });
    expect(plain(await s.repo.get(a.id))).toEqual(b);
    expect(await s.repo.delete(b)).toEqual({ ok: true });
    expect(await s.repo.get(a.id)).toBeNull();
    expect(await s.repo.getByKeys(['a'])).toEqual([null]);
    expect(await s.repo.all()).toEqual([]);
    // The key is free again.
    expect(await s.repo.create(audience('a'))).toEqual({ ok: true });
  });

  it(`holds at most ${LIMITS.audiences} audiences; a delete frees a place`, async () => {
    const s = make();
    const made: Audience[] = [];
    for (let i = 0; i < LIMITS.audiences; i++) {
      const a = audience(`a${i}`);
      expect(await s.repo.create(a)).toEqual({ ok: true });
      made.push(a);
    }
    expect(await s.repo.create(audience('one-more'))).toEqual({ ok: false, reason: 'too_many' });
    expect(await s.repo.delete(made[0]!)).toEqual({ ok: true });
    expect(await s.repo.create(audience('one-more'))).toEqual({ ok: true });
    expect(await s.repo.all()).toHaveLength(LIMITS.audiences);
  });

  it('refuses a delete while approvals are pending, naming the executions', async () => {
    const s = make();
    const a = audience('customers');
    await s.repo.create(a);
    const exes = [ids.next('execution'), ids.next('execution')];
    await s.pending(a.id, exes);
    expect(await s.repo.delete(a)).toEqual({ ok: false, reason: 'in_use', executionIds: [...exes].sort() });
    expect(plain(await s.repo.get(a.id))).toEqual(a);
  });

  it('a connection delete takes the connection out of every audience, each a new revision', async () => {
    const s = make();
    const { cons } = await seed(s);
    const [c0, c1] = [cons[0]!, cons[1]!];
    const a = audience('a', { connection_ids: [c0.id, c1.id] });
    const b = audience('b', { connection_ids: [c0.id] });
    const c = audience('c', { connection_ids: [c1.id] });
    for (const x of [a, b, c]) expect(await s.repo.create(x)).toEqual({ ok: true });
    expect(await s.connections.delete(c0, LATER)).toBe(true);
    expect(plain(await s.repo.get(a.id))).toEqual({ ...a, connection_ids: [c1.id], rev: 2, updated_at: LATER });
    expect(plain(await s.repo.get(b.id))).toEqual({ ...b, connection_ids: [], rev: 2, updated_at: LATER });
    expect(plain(await s.repo.get(c.id))).toEqual(c);
    // No audience can take the deleted connection in again.
    const b2 = (await s.repo.get(b.id))!;
    expect(await s.repo.update(b2, revised(b2, { connection_ids: [c0.id] }))).toEqual({
      ok: false,
      reason: 'conflict',
    });
  });

  it('a connection that left an audience is not taken out of it again by a later delete', async () => {
    const s = make();
    const { cons } = await seed(s);
    const a = audience('a', { connection_ids: [cons[0]!.id] });
    await s.repo.create(a);
    const b = revised(a, { connection_ids: [cons[1]!.id] });
    expect(await s.repo.update(a, b)).toEqual({ ok: true });
    expect(await s.connections.delete(cons[0]!, LATER)).toBe(true);
    expect(plain(await s.repo.get(a.id))).toEqual(b);
    // A deleted audience is no longer one the connection belongs to.
    expect(await s.repo.delete(b)).toEqual({ ok: true });
    expect(await s.connections.delete(cons[1]!, LATER)).toBe(true);
    expect(await s.repo.get(a.id)).toBeNull();
  });
}

describe.each<[string, () => Store]>([
  [
    'in-memory',
    () => {
      const templates = new InMemoryTemplateRepo();
      const connections = new InMemoryConnectionRepo();
      const repo = new InMemoryAudienceRepo();
      repo.connectionExists = (id) => connections.connections.has(id);
      repo.templateExists = (id) => templates.templates.has(id);
      connections.audiences = repo;
      return {
        repo,
        connections,
        templates,
        pending: (id, exes) => {
          repo.pending.set(id, new Set([...(repo.pending.get(id) ?? []), ...exes]));
          return Promise.resolve();
        },
      };
    },
  ],
  [
    'redis',
    () => {
      const redis = db.redis();
      const keys = db.keys();
      return {
        repo: new RedisAudienceRepo(redis, keys),
        connections: new RedisConnectionRepo(redis, keys),
        templates: new RedisTemplateRepo(redis, keys),
        pending: async (id, exes) => {
          await redis.sadd(keys.audiencePendingApprovals(id), ...exes);
        },
      };
    },
  ],
])('AudienceRepo contract: %s', (_name, make) => contract(make));

describe('AudienceRepo on Redis under concurrency', () => {
  it('a connection delete that read the memberships before an audience joined reads again', async () => {
    const redis = db.redis();
    const keys = db.keys();
    const repo = new RedisAudienceRepo(redis, keys);
    // The delete's store sees an audience join right after it read the memberships: the one
    // moment a delete could otherwise commit and leave the new member naming a gone connection.
    let between: (() => Promise<void>) | null = null;
    const watched = new Proxy(redis, {
      get(target, prop) {
        if (prop === 'smembers')
          return async (key: string) => {
            const read = await target.smembers(key);
            const run = between;
            between = null;
            if (run) await run();
            return read;
          };
        const v: unknown = Reflect.get(target, prop, target);
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const connections = new RedisConnectionRepo(watched, keys);
    const c = connection();
    await connections.create(c);
    const early = audience('early', { connection_ids: [c.id] });
    expect(await repo.create(early)).toEqual({ ok: true });
    const late = audience('late', { connection_ids: [c.id] });
    between = async () => {
      expect(await repo.create(late)).toEqual({ ok: true });
    };
    expect(await connections.delete(c, LATER)).toBe(false);
    expect(await connections.delete(c, LATER)).toBe(true);
    expect((await repo.get(early.id))?.connection_ids).toEqual([]);
    expect((await repo.get(late.id))?.connection_ids).toEqual([]);
  });

  it('lets only one of several creates racing for the last place take it', async () => {
    const repo = new RedisAudienceRepo(db.redis(), db.keys());
    for (let i = 0; i < LIMITS.audiences - 1; i++) expect(await repo.create(audience(`a${i}`))).toEqual({ ok: true });
    const racing = await Promise.all(Array.from({ length: 6 }, (_, i) => repo.create(audience(`last-${i}`))));
    expect(racing.filter((r) => r.ok)).toHaveLength(1);
    expect(await repo.all()).toHaveLength(LIMITS.audiences);
    expect(await repo.create(audience('after'))).toEqual({ ok: false, reason: 'too_many' });
  });
});
