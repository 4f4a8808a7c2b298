import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Actor } from '../../src/domain/common/actor.js';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import { newIncident, type Incident } from '../../src/domain/incident/incident.js';
import { presentIncident } from '../../src/http/presenters/incident.js';
import { createdEventId, newEvent, type IncidentEvent } from '../../src/domain/incident/incident-event.js';
import { IncidentService } from '../../src/services/incidents.js';
import { RedisExecutionRepo } from '../../src/store/executions.js';
import { encodeIncident, storedString } from '../../src/store/incident-record.js';
import { RedisIncidentRepo } from '../../src/store/incidents.js';
import { createKeys, type Keys } from '../../src/store/keys.js';
import { connectTestRedis, dropPrefix, uniquePrefix } from '../support/redis.js';

let redis: Redis;
let keys: Keys;
let repo: RedisIncidentRepo;
let svc: IncidentService;
const prefix = uniquePrefix('inc-store');
const ids = createIdGenerator();
const actor: Actor = { type: 'api_key', id: 'key_01JABCDEFGHJKMNPQRSTVWXYZ0', name: 'bench' };

beforeAll(() => {
  redis = connectTestRedis();
  keys = createKeys(prefix);
  repo = new RedisIncidentRepo(redis, keys);
  svc = new IncidentService({
    incidents: repo,
    templatesExist: (t) => Promise.resolve(t.map(() => true)),
    templateVariables: (t) => Promise.resolve(t.map(() => [])),
    clock: { now: () => new Date() },
    ids,
  });
});
afterAll(async () => {
  await dropPrefix(redis, prefix);
  await redis.quit();
});

const allEvents = async (id: string, limit: number): Promise<IncidentEvent[]> => {
  const out: IncidentEvent[] = [];
  let cursor: { offset: number } | null = null;
  for (;;) {
    const page = await svc.events(id, { limit, cursor });
    out.push(...page.data);
    if (!page.nextCursor) return out;
    cursor = page.nextCursor as { offset: number };
  }
};

/** An incident as the store wrote it before the compact form: every field, its created event in the list, and `incs`. */
async function writeOldFormat(): Promise<{ incident: Incident; created: IncidentEvent }> {
  const now = new Date().toISOString();
  // Every field present, as JSON.stringify of a new record wrote it.
  const incident = newIncident(
    ids.next('incident'),
    { title: 'Old', severity: 'major', description: 'from before', impact: '', template_ids: [] },
    actor,
    now,
  );
  const created = newEvent(ids.next('event'), 'incident.created', now, actor, { title: 'Old', severity: 'major' });
  await redis
    .multi()
    .set(keys.incident(incident.id), JSON.stringify(incident))
    .zadd(keys.incidents(), '0', incident.id)
    .zadd(keys.incidentsByStatus('investigating'), '0', incident.id)
    .rpush(keys.incidentEvents(incident.id), JSON.stringify(created))
    .exec();
  return { incident, created };
}

describe('RedisIncidentRepo: the stored form', () => {
  it('stores a new incident as an array without its id and reads it back whole, in wire order', async () => {
    const i = await svc.create({ title: 'Compact', severity: 'minor', description: 'd' }, actor);
    const raw = (await redis.get(keys.incident(i.id)))!;
    expect(JSON.parse(raw)).toEqual([
      'Compact',
      'minor',
      'investigating',
      'd',
      '',
      [],
      [],
      null,
      Date.parse(i.created_at),
      0,
      null,
      null,
      null,
      null,
      0,
      [actor.type, actor.id, actor.name],
      1,
    ]);
    const back = (await repo.get(i.id))!;
    expect(JSON.stringify(presentIncident(back))).toBe(JSON.stringify(presentIncident(i)));
    expect(back).toEqual(i);
    // A compare-and-set on either object (an update, the execute commit) expects the stored string.
    expect(storedString(back)).toBe(raw);
    expect(storedString(i)).toBe(raw);
    // JSON.stringify of a record stays the whole record: nothing hides the stored form in it.
    expect(JSON.parse(JSON.stringify(back))).toEqual(i);
    expect(await redis.exists(keys.incidents())).toBe(0);
  });

  it('keeps every non-default value through update, execute and close', async () => {
    const i = await svc.create({ title: 'Full', severity: 'major', impact: 'EU', template_ids: [] }, actor);
    const u = await svc.update(i.id, { status: 'resolved', resolution_summary: '' }, actor);
    expect(u).toMatchObject({ status: 'resolved', impact: 'EU', resolution_summary: '', rev: 2 });
    const executions = new RedisExecutionRepo(redis, keys);
    const prev = await svc.get(i.id);
    const next = { ...prev, execution_count: 1, last_executed_at: new Date().toISOString(), rev: prev.rev + 1 };
    const exe = {
      id: ids.next('execution'),
      incident_id: i.id,
      variables: {},
      created_at: '',
      template_versions: {},
      delivery_ids: [],
    };
    expect(await executions.create(exe, [], prev, next, [])).toBe(true);
    expect(await svc.get(i.id)).toEqual(next);
    const closed = await svc.close(i.id, {}, actor);
    expect(presentIncident((await repo.get(i.id))!)).toEqual(presentIncident(closed));
    expect(closed).toMatchObject({ status: 'closed', execution_count: 1, resolution_summary: '', rev: 4 });
  });

  it("reads unchanged text as one shared record, and any change at once: its own, or another process' write", async () => {
    const i = await svc.create({ title: 'Shared', severity: 'minor' }, actor);
    const a = (await repo.get(i.id))!;
    expect(await repo.get(i.id)).toBe(a);
    const [fromList] = await repo.getMany([i.id]);
    expect(fromList).toBe(a);
    expect(Object.isFrozen(a)).toBe(true);
    const u = await svc.update(i.id, { title: 'Shared, renamed' }, actor);
    const b = (await repo.get(i.id))!;
    expect(b).not.toBe(a);
    expect(b).toEqual(u);
    // Another process (another Herald, or a restore) writes the key: the next read has it.
    const other = encodeIncident({ ...u, title: 'From elsewhere', rev: 9 });
    await redis.set(keys.incident(i.id), other);
    const c = (await repo.get(i.id))!;
    expect(c).toMatchObject({ title: 'From elsewhere', rev: 9 });
    expect(storedString(c)).toBe(other);
    // An update from the shared record compares against its exact text and writes a new one.
    const v = await svc.update(i.id, { severity: 'major' }, actor);
    expect(v).toMatchObject({ title: 'From elsewhere', severity: 'major', rev: 10 });
  });

  it('reads, updates and closes an incident stored in the old, full form', async () => {
    const { incident, created } = await writeOldFormat();
    expect(await svc.get(incident.id)).toEqual(incident);
    const updated = await svc.update(incident.id, { title: 'Old, renamed', status: 'identified' }, actor);
    expect(updated).toMatchObject({ title: 'Old, renamed', status: 'identified', rev: 2 });
    // An execute against the old record's string, as src/store/executions.ts builds it.
    const executions = new RedisExecutionRepo(redis, keys);
    const prev = await svc.get(incident.id);
    const next = { ...prev, execution_count: 1, rev: prev.rev + 1 };
    const exe = {
      id: ids.next('execution'),
      incident_id: incident.id,
      variables: {},
      created_at: '',
      template_versions: {},
      delivery_ids: [],
    };
    expect(
      await executions.create(exe, [], prev, next, [
        newEvent(ids.next('event'), 'incident.executed', prev.updated_at, actor, {}),
      ]),
    ).toBe(true);
    const closed = await svc.close(incident.id, { resolution_summary: 'fixed' }, actor);
    expect(closed).toMatchObject({ status: 'closed', resolution_summary: 'fixed', execution_count: 1, rev: 4 });
    expect(await svc.get(incident.id)).toEqual(closed);
    const events = await allEvents(incident.id, 2);
    expect(events.map((e) => e.type)).toEqual([
      'incident.created',
      'incident.updated',
      'incident.status_changed',
      'incident.executed',
      'incident.closed',
    ]);
    expect(events[0]).toEqual(created);
    expect((await svc.list({ status: ['closed'] }, { limit: 100, cursor: null })).data.map((i) => i.id)).toContain(
      incident.id,
    );
  });
});

describe('RedisIncidentRepo: the timeline', () => {
  it('implies the created event: no list until a second event, the same page whatever the page size', async () => {
    const i = await svc.create({ title: 'First', severity: 'critical' }, actor);
    expect(await redis.exists(keys.incidentEvents(i.id))).toBe(0);
    const created = {
      id: createdEventId(i.id),
      type: 'incident.created',
      at: i.created_at,
      actor,
      data: { title: 'First', severity: 'critical' },
    };
    expect(await svc.events(i.id, { limit: 5, cursor: null })).toEqual({ data: [created], nextCursor: null });
    expect(JSON.stringify((await svc.events(i.id, { limit: 5, cursor: null })).data[0])).toBe(JSON.stringify(created));

    await svc.update(i.id, { title: 'Second' }, actor);
    await svc.update(i.id, { severity: 'low' }, actor);
    await svc.update(i.id, { title: 'Third', status: 'monitoring' }, actor);
    await svc.close(i.id, {}, actor);
    const types = [
      'incident.created',
      'incident.updated',
      'incident.updated',
      'incident.updated',
      'incident.status_changed',
      'incident.closed',
    ];
    for (const limit of [1, 2, 3, 5, 6, 7, 100]) {
      const events = await allEvents(i.id, limit);
      expect(events.map((e) => e.type)).toEqual(types);
      // The created event still says what the incident was created as.
      expect(events[0]).toEqual(created);
    }
    expect(await svc.events(i.id, { limit: 2, cursor: { offset: 4 } })).toMatchObject({
      data: [{ type: 'incident.status_changed' }, { type: 'incident.closed' }],
      nextCursor: null,
    });
    expect(await svc.events(i.id, { limit: 2, cursor: { offset: 6 } })).toEqual({ data: [], nextCursor: null });
  });

  it('keeps a created event given in another shape as it was given', async () => {
    const now = new Date().toISOString();
    const incident: Incident = {
      ...(await svc.create({ title: 'x', severity: 'low' }, actor)),
      id: ids.next('incident'),
    };
    const odd = newEvent(ids.next('event'), 'incident.created', now, actor, {
      title: 'x',
      severity: 'low',
      note: 'more',
    });
    expect(await repo.create(incident, [odd])).toBe(true);
    expect((await repo.listEvents(incident.id, { limit: 10, cursor: null })).data).toEqual([odd]);
  });
});

describe('RedisIncidentRepo: lists', () => {
  it('pages every status together, newest first, without the all-incidents index', async () => {
    const made: Incident[] = [];
    for (let n = 0; n < 7; n++)
      made.push(await svc.create({ title: `L${n}`, severity: n % 2 ? 'minor' : 'major' }, actor));
    await svc.update(made[1]!.id, { status: 'resolved' }, actor);
    await svc.close(made[3]!.id, {}, actor);
    await svc.update(made[5]!.id, { status: 'identified' }, actor);
    const seen: string[] = [];
    let cursor: { after: string } | null = null;
    for (;;) {
      const page = await svc.list({}, { limit: 3, cursor });
      seen.push(...page.data.map((i) => i.id));
      if (!page.nextCursor) break;
      cursor = page.nextCursor as { after: string };
    }
    const newest = made.map((i) => i.id).reverse();
    expect(seen.slice(0, 7)).toEqual(newest);
    expect(seen).toEqual([...seen].sort().reverse());
    expect(new Set(seen).size).toBe(seen.length);
    const minor = await svc.list(
      { severity: ['minor'], status: ['resolved', 'closed', 'identified'] },
      { limit: 2, cursor: null },
    );
    expect(minor.data.map((i) => i.id)).toEqual([made[5]!.id, made[3]!.id]);
    expect(minor.nextCursor).not.toBeNull();
  });

  it('sees an incident that moves between two status indexes while a page is read exactly once', async () => {
    const i = await svc.create({ title: 'Mover', severity: 'major' }, actor);
    const statuses = ['investigating', 'identified', 'monitoring'] as const;
    let moving = true;
    const mover = (async () => {
      for (let n = 0; moving && n < 200; n++) await svc.update(i.id, { status: statuses[(n + 1) % 3]! }, actor);
    })();
    try {
      for (let n = 0; n < 50; n++) {
        const page = await repo.list({ status: [...statuses] }, { limit: 1, cursor: null });
        expect(page.data.map((x) => x.id)).toEqual([i.id]);
      }
    } finally {
      moving = false;
      await mover;
    }
  });
});
