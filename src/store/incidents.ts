import type { RedisClient as Redis } from './redis-connect.js';
import type { Incident } from '../domain/incident.js';
import type { IncidentEvent } from '../domain/incident-event.js';
import type { Page, PageRequest } from '../domain/pagination.js';
import type { IncidentFilter, IncidentRepo } from '../ports/index.js';
import { Change } from './commit.js';
import { loadJson, pageFiltered } from './index-page.js';
import type { Keys } from './keys.js';

/**
 * Incidents as JSON strings, with:
 * - `incs` (every incident) and `incs:status:<s>` (one per status), score-0 sorted sets paged
 *   BYLEX, newest first;
 * - `inc:<id>:events`, the append-only timeline (a list, so offset cursors are exact);
 * - `tpl:<id>:incs`, the non-closed incidents attaching a template (the template in-use rule).
 * Records are written with JSON.stringify and compared as the exact string read, which is the
 * compare-and-set of every update.
 */
export class RedisIncidentRepo implements IncidentRepo {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  async get(id: string): Promise<Incident | null> {
    const [one] = await this.getMany([id]);
    return one ?? null;
  }

  getMany(ids: string[]): Promise<(Incident | null)[]> {
    return loadJson<Incident>(this.redis, ids.map((id) => this.keys.incident(id)));
  }

  async create(incident: Incident, events: IncidentEvent[]): Promise<boolean> {
    const k = this.keys;
    const change = new Change(this.redis).expect(k.incident(incident.id), null);
    for (const t of incident.template_ids) change.expectExists(k.template(t)).write('SADD', k.templateIncidents(t), incident.id);
    change
      .write('SET', k.incident(incident.id), JSON.stringify(incident))
      .write('ZADD', k.incidents(), '0', incident.id)
      .write('ZADD', k.incidentsByStatus(incident.status), '0', incident.id);
    this.pushEvents(change, incident.id, events);
    return change.commit({ kind: 'incident', incident });
  }

  async update(prev: Incident, next: Incident, events: IncidentEvent[]): Promise<boolean> {
    const k = this.keys;
    const change = new Change(this.redis).expect(k.incident(prev.id), JSON.stringify(prev));
    change.write('SET', k.incident(next.id), JSON.stringify(next));
    if (prev.status !== next.status) {
      change.write('ZREM', k.incidentsByStatus(prev.status), prev.id).write('ZADD', k.incidentsByStatus(next.status), '0', next.id);
    }
    // Template links exist only while the incident is not closed.
    const before = prev.status === 'closed' ? [] : prev.template_ids;
    const after = next.status === 'closed' ? [] : next.template_ids;
    for (const t of before) if (!after.includes(t)) change.write('SREM', k.templateIncidents(t), prev.id);
    for (const t of after) {
      if (!before.includes(t)) change.expectExists(k.template(t)).write('SADD', k.templateIncidents(t), next.id);
    }
    this.pushEvents(change, next.id, events);
    return change.commit({ kind: 'incident', incident: next });
  }

  list(filter: IncidentFilter, page: PageRequest): Promise<Page<Incident>> {
    const k = this.keys;
    const indexes = filter.status && filter.status.length > 0 ? filter.status.map((s) => k.incidentsByStatus(s)) : [k.incidents()];
    const severities = filter.severity && filter.severity.length > 0 ? new Set(filter.severity) : null;
    const statuses = filter.status && filter.status.length > 0 ? new Set(filter.status) : null;
    return pageFiltered(
      this.redis,
      indexes,
      page,
      (ids) => this.getMany(ids),
      // The status re-check covers an incident that moved between reading the index and the record.
      (i) => (severities === null || severities.has(i.severity)) && (statuses === null || statuses.has(i.status)),
    );
  }

  async appendEvents(incidentId: string, events: IncidentEvent[]): Promise<void> {
    if (events.length === 0) return;
    await this.redis.rpush(this.keys.incidentEvents(incidentId), ...events.map((e) => JSON.stringify(e)));
  }

  async listEvents(incidentId: string, page: PageRequest): Promise<Page<IncidentEvent>> {
    const offset = page.cursor && 'offset' in page.cursor ? page.cursor.offset : 0;
    // One extra item tells whether another page exists; the list only grows, so offsets are stable.
    const raw = await this.redis.lrange(this.keys.incidentEvents(incidentId), offset, offset + page.limit);
    const data = raw.slice(0, page.limit).map((r) => JSON.parse(r) as IncidentEvent);
    return { data, nextCursor: raw.length > page.limit ? { offset: offset + page.limit } : null };
  }

  private pushEvents(change: Change, incidentId: string, events: IncidentEvent[]): void {
    if (events.length > 0) change.write('RPUSH', this.keys.incidentEvents(incidentId), ...events.map((e) => JSON.stringify(e)));
  }
}
