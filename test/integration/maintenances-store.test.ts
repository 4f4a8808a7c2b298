import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Actor } from '../../src/domain/common/actor.js';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import { ComponentCreateSchema, effectiveStatus, newComponent } from '../../src/domain/component/component.js';
import type { StoredMaintenance } from '../../src/domain/maintenance/maintenance.js';
import { MaintenanceService } from '../../src/services/maintenances.js';
import { RedisComponentRepo } from '../../src/store/components.js';
import { createKeys, type Keys } from '../../src/store/keys.js';
import { loadPublicMaintenances, RedisMaintenanceRepo } from '../../src/store/maintenances.js';
import { connectTestRedis, dropPrefix, uniquePrefix } from '../support/redis.js';

/**
 * Maintenances in Redis: the record, its index and schedule entry, the components' impacts, and
 * the timer (runDue) under a clock the test moves. Two services over two connections take the
 * same due steps at once: each step commits exactly once.
 */
const MIN = 60_000;
const T0 = Date.parse('2026-12-01T22:00:00.000Z');
const actor: Actor = { type: 'api_key', id: 'key_test', name: 'test' };
let redis: Redis;
let redis2: Redis;
const prefixes: string[] = [];

beforeAll(() => {
  redis = connectTestRedis();
  redis2 = connectTestRedis();
});
afterAll(async () => {
  for (const p of prefixes) await dropPrefix(redis, p);
  await redis.quit();
  await redis2.quit();
});

interface Space {
  keys: Keys;
  clock: { ms: number; now(): Date };
  /** Two workers: services over their own connections, sharing the clock. */
  a: MaintenanceService;
  b: MaintenanceService;
  repo: RedisMaintenanceRepo;
  components: RedisComponentRepo;
}

function space(): Space {
  const prefix = uniquePrefix('mnt-store');
  prefixes.push(prefix);
  const keys = createKeys(prefix);
  const clock = {
    ms: T0 - 24 * 60 * MIN,
    now() {
      return new Date(this.ms);
    },
  };
  const ids = createIdGenerator(() => clock.ms);
  const service = (r: Redis) =>
    new MaintenanceService({
      repo: new RedisMaintenanceRepo(r, keys),
      components: new RedisComponentRepo(r, keys),
      clock,
      ids,
      onError: (what, err) => {
        throw new Error(`${what}: ${String(err)}`);
      },
    });
  return {
    keys,
    clock,
    a: service(redis),
    b: service(redis2),
    repo: new RedisMaintenanceRepo(redis, keys),
    components: new RedisComponentRepo(redis, keys),
  };
}

const ids = createIdGenerator();
async function aComponent(s: Space, name: string): Promise<string> {
  const c = newComponent(
    ids.next('component'),
    ComponentCreateSchema.parse({ name }),
    0,
    new Date(s.clock.ms).toISOString(),
  );
  expect(await s.components.create(c)).toEqual({ ok: true });
  return c.id;
}

const window = (over: Record<string, unknown> = {}) => ({
  title: 'Database upgrade',
  body: 'The API may be slow.',
  scheduled_for: new Date(T0).toISOString(),
  scheduled_until: new Date(T0 + 60 * MIN).toISOString(),
  remind_before: 10,
  ...over,
});

/** The outbox stream's events of one type (the subject id when it differs from the incident). */
async function events(s: Space, type: string): Promise<{ subject: string; data: Record<string, unknown> }[]> {
  const entries = await redis.xrange(s.keys.eventStream(), '-', '+');
  return entries.flatMap(([, fields]) => {
    const f: Record<string, string> = {};
    for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i]!] = fields[i + 1]!;
    if (f.t !== type) return [];
    const e = JSON.parse(f.e!) as { data: Record<string, unknown> };
    return [{ subject: f.s ?? f.i ?? '', data: e.data }];
  });
}
const version = async (s: Space) => Number((await redis.hget(s.keys.statusVersion(), 'v')) ?? 0);
const dueAt = async (s: Space, id: string) => {
  const score = await redis.zscore(s.keys.maintenancesDue(), id);
  return score === null ? null : Number(score);
};
const statusOf = async (s: Space, cid: string) => effectiveStatus((await s.components.get(cid))!);

/** Both workers run their due steps at the same time; answers how many each took. */
const bothRun = async (s: Space) => Promise.all([s.a.runDue(), s.b.runDue()]);

describe('RedisMaintenanceRepo', () => {
  it('create writes the record, the index, the schedule, the status version and the event in one step', async () => {
    const s = space();
    const v0 = await version(s);
    const m = await s.a.create(window(), actor);
    expect(await s.repo.get(m.id)).toEqual(m);
    expect(await redis.zrange(s.keys.maintenances(), '0', '-1')).toEqual([m.id]);
    expect(await dueAt(s, m.id)).toBe(T0 - 10 * MIN);
    expect(await version(s)).toBe(v0 + 1);
    expect(await events(s, 'maintenance.created')).toEqual([
      {
        subject: m.id,
        data: {
          maintenance_id: m.id,
          title: m.title,
          scheduled_for: m.scheduled_for,
          scheduled_until: m.scheduled_until,
        },
      },
    ]);
  });

  it('update is compare-and-set: a write from a stale read commits nothing', async () => {
    const s = space();
    const m = await s.a.create(window(), actor);
    const next: StoredMaintenance = { ...m, title: 'x', rev: m.rev + 1 };
    expect(
      await s.repo.update(m, next, [], () => ({ id: 'e', type: 'component.status_changed', at: '', actor, data: {} })),
    ).toBe(true);
    expect(
      await s.repo.update(m, { ...m, title: 'y', rev: m.rev + 1 }, [], () => ({
        id: 'e',
        type: 'component.status_changed',
        at: '',
        actor,
        data: {},
      })),
    ).toBe(false);
    expect((await s.repo.get(m.id))?.title).toBe('x');
  });

  it('lists newest first, filtered by status, paged by cursor', async () => {
    const s = space();
    const first = await s.a.create(window(), actor);
    const second = await s.a.create(window({ title: 'Second' }), actor);
    await s.a.addUpdate(second.id, { status: 'in_progress', body: 'Started.' }, actor);
    const all = await s.a.list({}, { limit: 1, cursor: null });
    expect(all.data.map((m) => m.id)).toEqual([second.id]);
    const rest = await s.a.list({}, { limit: 5, cursor: all.nextCursor });
    expect(rest.data.map((m) => m.id)).toEqual([first.id]);
    expect((await s.a.list({ status: ['scheduled'] }, { limit: 5, cursor: null })).data.map((m) => m.id)).toEqual([
      first.id,
    ]);
    expect(
      (await s.a.list({ status: ['in_progress', 'verifying'] }, { limit: 5, cursor: null })).data.map((m) => m.id),
    ).toEqual([second.id]);
  });
});

describe('runDue (the timer)', () => {
  it('reminder, start and end each happen once, with two workers at every step', async () => {
    const s = space();
    const api = await aComponent(s, 'API');
    const web = await aComponent(s, 'Web');
    const m = await s.a.create(window({ components: [api, web] }), actor);

    s.clock.ms = T0 - 10 * MIN - 1;
    expect(await bothRun(s)).toEqual([0, 0]);

    s.clock.ms = T0 - 10 * MIN;
    expect((await bothRun(s)).reduce((a, b) => a + b)).toBe(1);
    expect(await bothRun(s)).toEqual([0, 0]);
    let now = (await s.repo.get(m.id))!;
    expect(now.updates.map((u) => u.kind)).toEqual(['reminder']);
    expect(now).toMatchObject({ status: 'scheduled', reminded_at: new Date(T0 - 10 * MIN).toISOString() });
    expect(await dueAt(s, m.id)).toBe(T0);
    expect(await statusOf(s, api)).toBe('operational');

    s.clock.ms = T0 + 500;
    const v = await version(s);
    expect((await bothRun(s)).reduce((a, b) => a + b)).toBe(1);
    now = (await s.repo.get(m.id))!;
    expect(now).toMatchObject({ status: 'in_progress', started_at: new Date(T0 + 500).toISOString() });
    expect(await statusOf(s, api)).toBe('under_maintenance');
    expect(await statusOf(s, web)).toBe('under_maintenance');
    expect(await version(s)).toBeGreaterThan(v);
    expect(await dueAt(s, m.id)).toBe(T0 + 60 * MIN);

    s.clock.ms = T0 + 60 * MIN;
    expect((await bothRun(s)).reduce((a, b) => a + b)).toBe(1);
    expect(await bothRun(s)).toEqual([0, 0]);
    now = (await s.repo.get(m.id))!;
    expect(now).toMatchObject({ status: 'completed', completed_at: new Date(T0 + 60 * MIN).toISOString() });
    expect(now.updates.map((u) => `${u.kind}:${u.status}`)).toEqual([
      'reminder:scheduled',
      'transition:in_progress',
      'transition:completed',
    ]);
    expect(await statusOf(s, api)).toBe('operational');
    expect(await statusOf(s, web)).toBe('operational');
    expect((await s.components.get(api))!.impacts).toEqual({});
    expect(await dueAt(s, m.id)).toBeNull();

    expect((await events(s, 'maintenance.status_changed')).map((e) => e.data)).toEqual([
      { maintenance_id: m.id, from: 'scheduled', to: 'in_progress' },
      { maintenance_id: m.id, from: 'in_progress', to: 'completed' },
    ]);
    const componentEvents = await events(s, 'component.status_changed');
    expect(componentEvents).toHaveLength(4);
    expect(componentEvents[0]).toEqual({
      subject: expect.stringMatching(/^cmp_/),
      data: expect.objectContaining({
        from: 'operational',
        to: 'under_maintenance',
        cause: { kind: 'maintenance', id: m.id },
      }),
    });
  });

  it('a worker that was away takes the late steps once each; the stale reminder is skipped', async () => {
    const s = space();
    const api = await aComponent(s, 'API');
    const m = await s.a.create(window({ components: [api] }), actor);
    s.clock.ms = T0 + 2 * 60 * MIN;
    const taken = await bothRun(s);
    expect(taken.reduce((a, b) => a + b)).toBe(2);
    const now = (await s.repo.get(m.id))!;
    expect(now.status).toBe('completed');
    expect(now.updates.map((u) => u.status)).toEqual(['in_progress', 'completed']);
    expect(now.reminded_at).toBeNull();
    expect(await statusOf(s, api)).toBe('operational');
    expect(await events(s, 'maintenance.status_changed')).toHaveLength(2);
  });

  it('auto_transition off: nothing is scheduled and nothing happens; turning it on schedules the next step', async () => {
    const s = space();
    const m = await s.a.create(window({ auto_transition: false }), actor);
    expect(await dueAt(s, m.id)).toBeNull();
    s.clock.ms = T0 + MIN;
    expect(await bothRun(s)).toEqual([0, 0]);
    await s.a.update(m.id, { auto_transition: true }, actor);
    expect(await dueAt(s, m.id)).toBe(T0 - 10 * MIN);
    expect((await bothRun(s)).reduce((a, b) => a + b)).toBe(1);
    expect((await s.repo.get(m.id))?.status).toBe('in_progress');
  });

  it('a manual step moves the schedule and the impacts; changing components while active moves them too', async () => {
    const s = space();
    const api = await aComponent(s, 'API');
    const web = await aComponent(s, 'Web');
    const m = await s.a.create(window({ components: [api], remind_before: null }), actor);
    await s.a.addUpdate(m.id, { status: 'verifying', body: 'Checking.' }, actor);
    expect(await statusOf(s, api)).toBe('under_maintenance');
    expect(await dueAt(s, m.id)).toBe(T0 + 60 * MIN);
    await s.a.update(m.id, { components: [web] }, actor);
    expect(await statusOf(s, api)).toBe('operational');
    expect(await statusOf(s, web)).toBe('under_maintenance');
    await s.a.addUpdate(m.id, { status: 'completed', body: 'Done.' }, actor);
    expect(await statusOf(s, web)).toBe('operational');
    expect(await dueAt(s, m.id)).toBeNull();
  });
});

describe('loadPublicMaintenances', () => {
  it('shows the open ones and those completed in the last 90 days, soonest first, updates newest first', async () => {
    const s = space();
    const later = await s.a.create(
      window({
        scheduled_for: new Date(T0 + 60 * MIN).toISOString(),
        scheduled_until: new Date(T0 + 120 * MIN).toISOString(),
      }),
      actor,
    );
    const sooner = await s.a.create(window({ body: '' }), actor);
    const old = await s.a.create(window({ title: 'Old' }), actor);
    await s.a.addUpdate(old.id, { status: 'completed', body: 'Done.' }, actor);
    const pub = await loadPublicMaintenances(redis, s.keys, s.clock.ms);
    // Same start: by id (creation order).
    expect(pub.map((m) => m.id)).toEqual([sooner.id, old.id, later.id]);
    const shown = pub.find((m) => m.id === old.id)!;
    expect(shown.updates).toEqual([
      {
        id: expect.stringMatching(/^evt_/),
        status: 'completed',
        body: 'Done.',
        kind: 'update',
        created_at: expect.any(String),
      },
      { id: old.id, status: 'scheduled', body: 'The API may be slow.', kind: 'update', created_at: old.created_at },
    ]);
    expect(pub.find((m) => m.id === sooner.id)!.updates).toEqual([]);
    // A component deleted after the maintenance named it is not shown as affected.
    const gone = await aComponent(s, 'Gone');
    const kept = await aComponent(s, 'Kept');
    const naming = await s.a.create(window({ components: [gone, kept] }), actor);
    expect(await s.components.delete((await s.components.get(gone))!)).toEqual({ ok: true });
    const shownNaming = (await loadPublicMaintenances(redis, s.keys, s.clock.ms)).find((m) => m.id === naming.id);
    expect(shownNaming?.component_ids).toEqual([kept]);
    const ninetyOneDaysOn = s.clock.ms + 91 * 24 * 60 * MIN;
    expect((await loadPublicMaintenances(redis, s.keys, ninetyOneDaysOn)).map((m) => m.id)).not.toContain(old.id);
  });
});
