import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import { LIMITS } from '../../src/domain/common/limits.js';
import {
  ComponentCreateSchema,
  effectiveStatus,
  newComponent,
  type StoredComponent,
} from '../../src/domain/component/component.js';
import { Change } from '../../src/store/commit.js';
import { HISTORY_KEEP_MS, loadPublicComponents, RedisComponentRepo, stageImpacts } from '../../src/store/components.js';
import { createKeys, type Keys } from '../../src/store/keys.js';
import { RedisIncidentRepo } from '../../src/store/incidents.js';
import { incidentImpactOf, newIncident } from '../../src/domain/incident/incident.js';
import { connectTestRedis, dropPrefix, uniquePrefix } from '../support/redis.js';

const DAY = 86_400_000;
const ids = createIdGenerator();
let redis: Redis;
const prefixes: string[] = [];

beforeAll(() => {
  redis = connectTestRedis();
});
afterAll(async () => {
  for (const p of prefixes) await dropPrefix(redis, p);
  await redis.quit();
});

/** A fresh key space per test: counts, names and the status version start from nothing. */
function space(): { keys: Keys; repo: RedisComponentRepo } {
  const prefix = uniquePrefix('cmp-store');
  prefixes.push(prefix);
  const keys = createKeys(prefix);
  return { keys, repo: new RedisComponentRepo(redis, keys) };
}

const make = (name: string, at = new Date().toISOString(), extra: Record<string, unknown> = {}): StoredComponent =>
  newComponent(ids.next('component'), ComponentCreateSchema.parse({ name, ...extra }), 0, at);

const version = async (keys: Keys) => Number((await redis.hget(keys.statusVersion(), 'v')) ?? 0);
const historyOf = async (keys: Keys, id: string) =>
  (await redis.zrange(keys.componentHistory(id), '0', '-1')).map(
    (m) => JSON.parse(m) as { at: string; status: string },
  );

async function impact(
  keys: Keys,
  repo: RedisComponentRepo,
  cids: string[],
  source: string,
  status: StoredComponent['manual_status'] | null,
  at: string,
) {
  const current = (await repo.getMany(cids)).flatMap((c) => (c ? [c] : []));
  const change = new Change(redis);
  const changes = stageImpacts(change, keys, current, source, status, at);
  return { ok: await change.commit(), changes };
}

describe('RedisComponentRepo', () => {
  it('creates, reads back, records the first history entry and bumps the status version', async () => {
    const { keys, repo } = space();
    const c = make('API');
    expect(await repo.create(c)).toEqual({ ok: true });
    expect(await repo.get(c.id)).toEqual(c);
    expect(await repo.get('cmp_nope')).toBeNull();
    expect(await historyOf(keys, c.id)).toEqual([{ at: c.created_at, status: 'operational' }]);
    expect(await version(keys)).toBe(1);
    expect(await redis.hget(keys.componentCount(), 'n')).toBe('1');
  });

  it('names are unique ignoring case, also on rename', async () => {
    const { repo } = space();
    const a = make('Website');
    const b = make('Database');
    await repo.create(a);
    await repo.create(b);
    expect(await repo.create(make('WEBSITE'))).toEqual({ ok: false, reason: 'name_taken' });
    const renamed = { ...b, name: 'website', rev: b.rev + 1 };
    expect(await repo.update(b, renamed)).toEqual({ ok: false, reason: 'name_taken' });
    const freed = { ...a, name: 'Web', rev: a.rev + 1 };
    expect(await repo.update(a, freed)).toEqual({ ok: true });
    expect(await repo.create(make('website'))).toEqual({ ok: true });
  });

  it('update is a compare-and-set: a stale record loses', async () => {
    const { keys, repo } = space();
    const c = make('Search');
    await repo.create(c);
    const v = await version(keys);
    const later = new Date(Date.parse(c.updated_at) + 1000).toISOString();
    const first = { ...c, manual_status: 'major_outage' as const, rev: 2, updated_at: later };
    const second = { ...c, description: 'x', rev: 2 };
    expect(await repo.update(c, first)).toEqual({ ok: true });
    expect(await repo.update(c, second)).toEqual({ ok: false, reason: 'conflict' });
    expect(await repo.get(c.id)).toEqual(first);
    expect((await historyOf(keys, c.id)).map((h) => h.status)).toEqual(['operational', 'major_outage']);
    expect(await version(keys)).toBe(v + 1);
  });

  it('the limit holds when creates race for the last places', async () => {
    const { keys, repo } = space();
    await redis.hset(keys.componentCount(), 'n', String(LIMITS.components - 2));
    // As the service does: a create that lost the count's compare-and-set reads again.
    const create = async (c: StoredComponent) => {
      for (;;) {
        const r = await repo.create(c);
        if (r.ok || r.reason !== 'conflict') return r;
      }
    };
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => create(make(`C${i}`))));
    expect(results.filter((r) => r.ok)).toHaveLength(2);
    expect(results.filter((r) => !r.ok && r.reason === 'too_many')).toHaveLength(6);
    expect(await redis.hget(keys.componentCount(), 'n')).toBe(String(LIMITS.components));
  });

  it('delete: refused while impacted, else removes record, name, index, history and count', async () => {
    const { keys, repo } = space();
    const c = make('CDN');
    await repo.create(c);
    const inc = ids.next('incident');
    await impact(keys, repo, [c.id], inc, 'partial_outage', new Date().toISOString());
    const impacted = (await repo.get(c.id))!;
    expect(await repo.delete(impacted)).toEqual({ ok: false, reason: 'in_use', sourceIds: [inc] });
    await impact(keys, repo, [c.id], inc, null, new Date().toISOString());
    const free = (await repo.get(c.id))!;
    expect(await repo.delete(impacted)).toEqual({ ok: false, reason: 'in_use', sourceIds: [inc] });
    expect(await repo.delete(c)).toEqual({ ok: false, reason: 'conflict' });
    expect(await repo.delete(free)).toEqual({ ok: true });
    expect(await repo.get(c.id)).toBeNull();
    expect(await redis.exists(keys.componentHistory(c.id), keys.componentNames())).toBe(0);
    expect(await redis.zcard(keys.components())).toBe(0);
    expect(await redis.hget(keys.componentCount(), 'n')).toBe('0');
  });

  it('lists every component in page order and pages newest first', async () => {
    const { repo } = space();
    const b = make('B', undefined, { group: 'Core', position: 1 });
    const a = make('A', undefined, { group: 'Core', position: 1 });
    const z = make('Z', undefined, { position: 5 });
    for (const c of [b, a, z]) await repo.create(c);
    expect((await repo.listAll()).map((c) => c.name)).toEqual(['Z', 'A', 'B']);
    const p1 = await repo.list({ limit: 2, cursor: null });
    expect(p1.data.map((c) => c.name)).toEqual(['Z', 'A']);
    const p2 = await repo.list({ limit: 2, cursor: p1.nextCursor });
    expect(p2.data.map((c) => c.name)).toEqual(['B']);
    expect(p2.nextCursor).toBeNull();
  });
});

describe('stageImpacts', () => {
  it('the worst open impact decides; removing impacts restores the manual status', async () => {
    const { keys, repo } = space();
    const api = make('API', undefined, { status: 'degraded_performance' });
    const web = make('Web');
    await repo.create(api);
    await repo.create(web);
    const [i1, i2] = [ids.next('incident'), ids.next('incident')];
    const t = (n: number) => new Date(Date.now() + n).toISOString();
    const v0 = await version(keys);

    const r1 = await impact(keys, repo, [api.id, web.id], i1, 'partial_outage', t(1));
    expect(r1.ok).toBe(true);
    expect(r1.changes).toEqual([
      { component_id: api.id, from: 'degraded_performance', to: 'partial_outage' },
      { component_id: web.id, from: 'operational', to: 'partial_outage' },
    ]);
    expect(await version(keys)).toBe(v0 + 1);

    const r2 = await impact(keys, repo, [api.id], i2, 'major_outage', t(2));
    expect(r2.changes).toEqual([{ component_id: api.id, from: 'partial_outage', to: 'major_outage' }]);
    // A lesser impact under a worse one: the record changes, the effective status does not.
    const r3 = await impact(keys, repo, [web.id], i2, 'degraded_performance', t(3));
    expect(r3.changes).toEqual([]);
    expect((await repo.get(web.id))!.impacts).toEqual({ [i1]: 'partial_outage', [i2]: 'degraded_performance' });

    const r4 = await impact(keys, repo, [api.id, web.id], i1, null, t(4));
    expect(r4.changes).toEqual([{ component_id: web.id, from: 'partial_outage', to: 'degraded_performance' }]);
    const r5 = await impact(keys, repo, [api.id, web.id], i2, null, t(5));
    expect(r5.changes).toEqual([
      { component_id: api.id, from: 'major_outage', to: 'degraded_performance' },
      { component_id: web.id, from: 'degraded_performance', to: 'operational' },
    ]);
    // Nothing left to change: no write, no version bump.
    const v = await version(keys);
    const r6 = await impact(keys, repo, [api.id, web.id], i2, null, t(6));
    expect(r6).toEqual({ ok: true, changes: [] });
    expect(await version(keys)).toBe(v);

    expect((await historyOf(keys, api.id)).map((h) => h.status)).toEqual([
      'degraded_performance',
      'partial_outage',
      'major_outage',
      'degraded_performance',
    ]);
    const after = (await repo.get(api.id))!;
    expect(after.impacts).toEqual({});
    expect(effectiveStatus(after)).toBe('degraded_performance');
    expect(after.rev).toBeGreaterThan(api.rev);
  });

  it('compare-and-sets every component it touches', async () => {
    const { keys, repo } = space();
    const c = make('Queue');
    await repo.create(c);
    const stale = (await repo.get(c.id))!;
    await repo.update(stale, { ...stale, description: 'moved on', rev: stale.rev + 1 });
    const change = new Change(redis);
    stageImpacts(change, keys, [stale], ids.next('incident'), 'major_outage', new Date().toISOString());
    expect(await change.commit()).toBe(false);
    expect((await repo.get(c.id))!.impacts).toEqual({});
  });

  it('a function decides per component', async () => {
    const { keys, repo } = space();
    const a = make('A1');
    const b = make('B1');
    await repo.create(a);
    await repo.create(b);
    const current = (await repo.getMany([a.id, b.id])).flatMap((c) => (c ? [c] : []));
    const change = new Change(redis);
    const mnt = ids.next('maintenance');
    const changes = stageImpacts(
      change,
      keys,
      current,
      mnt,
      (c) => (c.id === a.id ? 'under_maintenance' : null),
      new Date().toISOString(),
    );
    expect(await change.commit()).toBe(true);
    expect(changes).toEqual([{ component_id: a.id, from: 'operational', to: 'under_maintenance' }]);
    expect((await repo.get(a.id))!.impacts).toEqual({ [mnt]: 'under_maintenance' });
  });

  it('history is trimmed past 100 days, keeping the latest change before the cut', async () => {
    const { keys, repo } = space();
    const now = Date.now();
    const at = (daysAgo: number) => new Date(now - daysAgo * DAY).toISOString();
    const c = make('Old', at(200));
    await repo.create(c);
    const inc = ids.next('incident');
    await impact(keys, repo, [c.id], inc, 'major_outage', at(150));
    await impact(keys, repo, [c.id], inc, null, at(120));
    await impact(keys, repo, [c.id], inc, 'partial_outage', at(50));
    // Each write drops what was stale when its record was read: the 200- and 150-day-old entries.
    expect(await historyOf(keys, c.id)).toEqual([
      { at: at(120), status: 'operational' },
      { at: at(50), status: 'partial_outage' },
    ]);
    await impact(keys, repo, [c.id], inc, null, at(0));
    const kept = await historyOf(keys, c.id);
    expect(kept).toEqual([
      { at: at(120), status: 'operational' },
      { at: at(50), status: 'partial_outage' },
      { at: at(0), status: 'operational' },
    ]);
    expect(Date.parse(kept[0]!.at)).toBeLessThan(now - HISTORY_KEEP_MS);
    // The history reader gives the window and the change before it.
    expect(await repo.history(c.id, now - 90 * DAY)).toEqual(kept);
    expect(await repo.history(c.id, now - 10 * DAY)).toEqual(kept.slice(1));
  });
});

describe('loadPublicComponents', () => {
  it('maps shown components with 90 days of history and the change before', async () => {
    const { keys, repo } = space();
    const now = Date.now();
    const at = (daysAgo: number) => new Date(now - daysAgo * DAY).toISOString();
    const shown = make('Shown', at(95), { group: 'G', description: 'd' });
    const hidden = make('Hidden', at(95), { show_on_status_page: false });
    await repo.create(shown);
    await repo.create(hidden);
    await impact(keys, repo, [shown.id], ids.next('incident'), 'major_outage', at(1));
    const [one, ...rest] = await loadPublicComponents(redis, keys, now);
    expect(rest).toEqual([]);
    expect(one).toMatchObject({
      id: shown.id,
      name: 'Shown',
      description: 'd',
      group: 'G',
      position: 0,
      status: 'major_outage',
      created_at: shown.created_at,
      history: [
        { at: at(95), status: 'operational' },
        { at: at(1), status: 'major_outage' },
      ],
    });
    expect(Object.keys(one!).sort()).toEqual(
      ['created_at', 'description', 'group', 'history', 'id', 'name', 'position', 'status', 'updated_at'].sort(),
    );
  });
});

describe('an incident write with impacts', () => {
  it('is one step with its components: a component changed meanwhile fails both', async () => {
    const { keys, repo } = space();
    const incidents = new RedisIncidentRepo(redis, keys);
    const c = make('Billing');
    await repo.create(c);
    const actor = { type: 'system' as const, id: 't', name: 't' };
    const now = new Date().toISOString();
    const inc = newIncident(
      ids.next('incident'),
      {
        title: 't',
        severity: 'major',
        description: '',
        impact: '',
        template_ids: [],
        components: [{ id: c.id, status: 'major_outage' }],
      },
      actor,
      now,
    );
    const read = (await repo.getMany([c.id])).flatMap((x) => (x ? [x] : []));
    // Someone changes the component between the incident's read and its write.
    await repo.update(read[0]!, { ...read[0]!, description: 'changed', rev: read[0]!.rev + 1 });
    const status = (x: StoredComponent) => incidentImpactOf(inc, x.id);
    expect(await incidents.create(inc, [], { current: read, status, at: now })).toBe(false);
    expect(await incidents.get(inc.id)).toBeNull();
    expect((await repo.get(c.id))!.impacts).toEqual({});

    const fresh = (await repo.getMany([c.id])).flatMap((x) => (x ? [x] : []));
    const v = await version(keys);
    expect(await incidents.create(inc, [], { current: fresh, status, at: now })).toBe(true);
    expect((await repo.get(c.id))!.impacts).toEqual({ [inc.id]: 'major_outage' });
    expect(await version(keys)).toBe(v + 1);

    // Resolving: the status moves (a version bump) and the impact goes, in the incident's Change.
    const stored = (await incidents.get(inc.id))!;
    const resolved = { ...stored, status: 'resolved' as const, rev: stored.rev + 1 };
    const current = (await repo.getMany([c.id])).flatMap((x) => (x ? [x] : []));
    const ok = await incidents.update(stored, resolved, [], {
      current,
      status: (x) => incidentImpactOf(resolved, x.id),
      at: new Date().toISOString(),
    });
    expect(ok).toBe(true);
    expect((await repo.get(c.id))!.impacts).toEqual({});
    expect(await version(keys)).toBeGreaterThanOrEqual(v + 2);
  });
});
