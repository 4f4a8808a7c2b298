import { describe, expect, it } from 'vitest';
import type { Actor } from '../../src/domain/common/actor.js';
import { createdEventId, newEvent, type IncidentEvent } from '../../src/domain/incident/incident-event.js';
import { newIncident, type Incident, type Severity } from '../../src/domain/incident/incident.js';
import type { IncidentRepo } from '../../src/ports/index.js';
import { RedisIncidentRepo } from '../../src/store/incidents.js';
import { InMemoryIncidentRepo } from '../service/fakes.js';
import { allPages, contractRedis, ids, plain, type Make } from './support.js';

/** The incident repository's contract, as IncidentService and the delivery engine rely on it. */
const db = contractRedis('c-inc');
const actor: Actor = { type: 'api_key', id: 'key_01JABCDEFGHJKMNPQRSTVWXYZ0', name: 'contract' };
let clock = Date.parse('2026-11-22T10:00:00.000Z');
const now = () => new Date((clock += 1000)).toISOString();

function incident(over: { severity?: Severity; title?: string } = {}): Incident {
  return newIncident(
    ids.next('incident'),
    {
      title: over.title ?? 'Database outage',
      severity: over.severity ?? 'major',
      description: 'The primary is down.',
      impact: 'Checkout fails.',
      template_ids: [],
    },
    actor,
    now(),
  );
}

/** The incident and its created event, as IncidentService.create writes them. */
async function created(repo: IncidentRepo, over: { severity?: Severity; title?: string } = {}): Promise<Incident> {
  const i = incident(over);
  const event = newEvent(createdEventId(i.id), 'incident.created', i.created_at, actor, {
    title: i.title,
    severity: i.severity,
  });
  expect(await repo.create(i, [event])).toBe(true);
  return i;
}

const event = (type: IncidentEvent['type'], data: Record<string, unknown> = {}): IncidentEvent =>
  newEvent(ids.next('event'), type, now(), actor, data);

function contract(make: Make<IncidentRepo>) {
  it('reads back what it created, and null (or a null slot) for an id it never stored', async () => {
    const repo = make();
    const a = await created(repo);
    expect(plain(await repo.get(a.id))).toEqual(a);
    expect(await repo.get(ids.next('incident'))).toBeNull();
    const b = await created(repo, { severity: 'critical' });
    const many = await repo.getMany([b.id, ids.next('incident'), a.id]);
    expect(plain(many)).toEqual([b, null, a]);
    expect(await repo.getMany([])).toEqual([]);
  });

  it('updates only from the stored state (compare-and-set): a stale `prev` loses and changes nothing', async () => {
    const repo = make();
    const a = await created(repo);
    const next: Incident = { ...a, status: 'identified', updated_at: now(), rev: a.rev + 1 };
    expect(await repo.update(a, next, [event('incident.status_changed', { from: a.status, to: next.status })])).toBe(
      true,
    );
    expect(plain(await repo.get(a.id))).toEqual(next);
    // A writer that read `a` before that update loses.
    const stale: Incident = { ...a, title: 'Renamed', updated_at: now(), rev: a.rev + 1 };
    expect(await repo.update(a, stale, [event('incident.updated')])).toBe(false);
    expect(plain(await repo.get(a.id))).toEqual(next);
    // Nothing of the lost write reached the timeline either.
    const timeline = (await allPages((p) => repo.listEvents(a.id, p), 50)).flat();
    expect(timeline.map((e) => e.type)).toEqual(['incident.created', 'incident.status_changed']);
  });

  it('refuses to update an incident that is not stored', async () => {
    const repo = make();
    const ghost = incident();
    expect(await repo.update(ghost, { ...ghost, title: 'x', rev: 2 }, [])).toBe(false);
    expect(await repo.get(ghost.id)).toBeNull();
  });

  it('lists newest first, and pages through every incident exactly once with the cursor', async () => {
    const repo = make();
    const made: Incident[] = [];
    for (let n = 0; n < 7; n++) made.push(await created(repo));
    const newestFirst = [...made].reverse().map((i) => i.id);
    const one = await repo.list({}, { limit: 50, cursor: null });
    expect(one.data.map((i) => i.id)).toEqual(newestFirst);
    expect(one.nextCursor).toBeNull();
    const pages = await allPages((p) => repo.list({}, p), 3);
    expect(pages.map((p) => p.length)).toEqual([3, 3, 1]);
    expect(pages.flat().map((i) => i.id)).toEqual(newestFirst);
  });

  it('filters by status and severity, and follows a status change', async () => {
    const repo = make();
    const minor = await created(repo, { severity: 'minor' });
    const critical = await created(repo, { severity: 'critical' });
    const other = await created(repo, { severity: 'critical' });
    const resolved: Incident = { ...other, status: 'resolved', resolved_at: now(), updated_at: now(), rev: 2 };
    expect(await repo.update(other, resolved, [])).toBe(true);
    const listed = async (f: Parameters<IncidentRepo['list']>[0]) =>
      (await allPages((p) => repo.list(f, p), 2)).flat().map((i) => i.id);
    expect(await listed({ severity: ['critical'] })).toEqual([other.id, critical.id]);
    expect(await listed({ status: ['investigating'] })).toEqual([critical.id, minor.id]);
    expect(await listed({ status: ['resolved'] })).toEqual([other.id]);
    expect(await listed({ status: ['investigating'], severity: ['critical'] })).toEqual([critical.id]);
    expect(await listed({ status: ['closed'] })).toEqual([]);
    // An empty list filters nothing.
    expect(await listed({ status: [], severity: [] })).toEqual([other.id, critical.id, minor.id]);
  });

  it('keeps the timeline in order: created first, then appended events, paged by offset', async () => {
    const repo = make();
    const a = await created(repo);
    const later = [event('incident.updated', { changes: { title: 'x' } }), event('incident.executed')];
    await repo.appendEvents(a.id, later.slice(0, 1));
    await repo.appendEvents(a.id, later.slice(1));
    await repo.appendEvents(a.id, []);
    const pages = await allPages((p) => repo.listEvents(a.id, p), 2);
    expect(pages.map((p) => p.length)).toEqual([2, 1]);
    const all = pages.flat();
    expect(all[0]).toMatchObject({ id: createdEventId(a.id), type: 'incident.created' });
    expect(plain(all.slice(1))).toEqual(later);
    // An incident never stored has no timeline.
    expect(await repo.listEvents(ids.next('incident'), { limit: 10, cursor: null })).toEqual({
      data: [],
      nextCursor: null,
    });
  });
}

describe.each<[string, Make<IncidentRepo>]>([
  ['in-memory', () => new InMemoryIncidentRepo()],
  ['redis', () => new RedisIncidentRepo(db.redis(), db.keys())],
])('IncidentRepo contract: %s', (_name, make) => contract(make));
