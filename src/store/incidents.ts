import type { RedisClient as Redis } from './redis-connect.js';
import { mirrorReminder } from './reminders.js';
import { SEVERITIES, STATUSES, type Incident } from '../domain/incident/incident.js';
import { createdEventId, type IncidentEvent } from '../domain/incident/incident-event.js';
import type { Page, PageRequest } from '../domain/common/pagination.js';
import type { ComponentImpactWrite, IncidentFilter, IncidentRepo } from '../ports/index.js';
import { Change } from './commit.js';
import { decodeIncident, encodeIncident, storedString } from './incident-record.js';
import { pageFiltered } from './index-page.js';
import { incidentIndexKeys } from './incident-indexes.js';
import type { Keys } from './keys.js';
import { DecodedCache } from './decoded-cache.js';
import { rememberText } from './stored-text.js';
import { appendTimeline } from './timeline.js';
import { stageImpacts } from './components.js';
import { bumpStatusVersion } from './status-version.js';

/**
 * Incidents as JSON arrays, their fields by position (src/store/incident-record.ts), with:
 * - `incs:by:<status>:<severity>`, one score-0 sorted set per status and severity, paged BYLEX,
 *   newest first, and merged by one script for a list of several (src/store/incident-indexes.ts,
 *   which also moves incidents out of the former `incs:status:<s>` sets). The all-incidents index
 *   before those, `incs`, is neither read nor written any more: a deployment from before keeps
 *   its old one untouched (147 B per incident of then; `DEL {prefix}:incs` reclaims it).
 * - `inc:<id>:events`, the append-only timeline (a list, so offset cursors are exact). An
 *   incident's `incident.created` event is implied rather than stored when it says only what the
 *   record says (its id is derived from the incident's, its time and actor are created_at and
 *   created_by, its data the title and severity); the list then holds the events after it (and
 *   does not exist until there is one). `inc:<id>:created` keeps the created event's data once
 *   an update changes the title or severity. A timeline whose first item is `incident.created`
 *   (every incident from before) is read as it is.
 * - `tpl:<id>:incs`, the non-closed incidents attaching a template (the template in-use rule).
 * Every update compares against the exact string read or written (store/stored-text.ts).
 */
export class RedisIncidentRepo implements IncidentRepo {
  /** The same stored text decodes to the same (frozen) record: see DecodedCache. */
  private readonly decoded = new DecodedCache<Incident>(DECODED_INCIDENTS, (raw, id) => decodeIncident(raw, id));

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  async get(id: string): Promise<Incident | null> {
    const [one] = await this.getMany([id]);
    return one ?? null;
  }

  async getMany(ids: string[]): Promise<(Incident | null)[]> {
    if (ids.length === 0) return [];
    const raw = await this.redis.mget(...ids.map((id) => this.keys.incident(id)));
    return raw.map((r, i) => (r === null ? null : this.decoded.get(ids[i]!, r)));
  }

  async create(incident: Incident, events: IncidentEvent[], impacts?: ComponentImpactWrite): Promise<boolean> {
    const k = this.keys;
    const change = new Change(this.redis).expect(k.incident(incident.id), null);
    for (const t of incident.template_ids)
      change.expectExists(k.template(t)).write('SADD', k.templateIncidents(t), incident.id);
    const raw = encodeIncident(incident);
    change
      .write('SET', k.incident(incident.id), raw)
      .write('ZADD', k.incidentsBy(incident.status, incident.severity), '0', incident.id);
    if (impacts) stageImpacts(change, k, impacts.current, incident.id, impacts.status, impacts.at);
    const first = events[0];
    // The implied created event is not stored, but integrators are still told (store/timeline.ts).
    appendTimeline(
      change,
      k,
      incident.id,
      first && sameJson(first, impliedCreated(incident, null)) ? events.slice(1) : events,
      {
        outbox: events,
        snapshots: { incident: raw },
      },
    );
    const ok = await change.commit({ kind: 'incident', incident });
    if (ok) rememberText(incident, raw);
    return ok;
  }

  async update(
    prev: Incident,
    next: Incident,
    events: IncidentEvent[],
    impacts?: ComponentImpactWrite,
  ): Promise<boolean> {
    const k = this.keys;
    const change = new Change(this.redis).expect(k.incident(prev.id), storedString(prev));
    const raw = encodeIncident(next);
    change.write('SET', k.incident(next.id), raw);
    if (prev.status !== next.status || prev.severity !== next.severity) {
      // Also out of the former status set, should the move not have reached it yet.
      change
        .write('ZREM', k.incidentsBy(prev.status, prev.severity), prev.id)
        .write('ZREM', k.incidentsByStatus(prev.status), prev.id)
        .write('ZADD', k.incidentsBy(next.status, next.severity), '0', next.id);
    }
    if (prev.title !== next.title || prev.severity !== next.severity) {
      // Only updates change these, and the first one that does keeps them (NX) for an implied
      // created event; an incident whose created event is stored never reads it.
      change.write('SET', k.incidentCreated(prev.id), JSON.stringify(createdData(prev)), 'NX');
    }
    // Template links exist only while the incident is not closed.
    const before = prev.status === 'closed' ? [] : prev.template_ids;
    const after = next.status === 'closed' ? [] : next.template_ids;
    for (const t of before) if (!after.includes(t)) change.write('SREM', k.templateIncidents(t), prev.id);
    for (const t of after) {
      if (!before.includes(t)) change.expectExists(k.template(t)).write('SADD', k.templateIncidents(t), next.id);
    }
    if (impacts) stageImpacts(change, k, impacts.current, next.id, impacts.status, impacts.at);
    // What a published incident shows follows its status (and its components): the page rebuilds.
    if (prev.status !== next.status || JSON.stringify(prev.components ?? []) !== JSON.stringify(next.components ?? []))
      bumpStatusVersion(change, k);
    appendTimeline(change, k, next.id, events, { snapshots: { incident: raw } });
    mirrorReminder(change, k, prev, next);
    const ok = await change.commit({ kind: 'incident', incident: next });
    if (ok) rememberText(next, raw);
    return ok;
  }

  list(filter: IncidentFilter, page: PageRequest): Promise<Page<Incident>> {
    const statuses = filter.status && filter.status.length > 0 ? new Set(filter.status) : null;
    const severities = filter.severity && filter.severity.length > 0 ? new Set(filter.severity) : null;
    return pageFiltered(
      this.redis,
      incidentIndexKeys(this.keys, [...(statuses ?? STATUSES)], [...(severities ?? SEVERITIES)]),
      page,
      (ids) => this.getMany(ids),
      // The re-check covers an incident that moved between reading the index and the record, and
      // ids still in a former status set, which holds every severity: a page reads its own size
      // (plus one id), and again only when the re-check dropped one.
      (i) => (severities === null || severities.has(i.severity)) && (statuses === null || statuses.has(i.status)),
      page.limit,
    );
  }

  async appendEvents(incidentId: string, events: IncidentEvent[]): Promise<void> {
    if (events.length === 0) return;
    await this.redis.rpush(this.keys.incidentEvents(incidentId), ...events.map((e) => JSON.stringify(e)));
  }

  async listEvents(incidentId: string, page: PageRequest): Promise<Page<IncidentEvent>> {
    const k = this.keys;
    const offset = page.cursor && 'offset' in page.cursor ? page.cursor.offset : 0;
    // Timeline item i is list item i, or i - 1 after an implied created event: read from one
    // earlier, one extra item telling whether another page exists. The list only grows and its
    // first item never changes, so offsets are stable and these reads need not be one snapshot.
    const start = Math.max(offset - 1, 0);
    const [raw, head, record, created] = await Promise.all([
      this.redis.lrange(k.incidentEvents(incidentId), start, offset + page.limit),
      offset > 0 ? this.redis.lindex(k.incidentEvents(incidentId), 0) : Promise.resolve(null),
      this.redis.get(k.incident(incidentId)),
      this.redis.get(k.incidentCreated(incidentId)),
    ]);
    const first = offset > 0 ? head : (raw[0] ?? null);
    const stored = first !== null && (JSON.parse(first) as IncidentEvent).type === 'incident.created';
    let items = raw.map((r) => JSON.parse(r) as IncidentEvent);
    if (stored || record === null) items = items.slice(offset - start);
    else if (offset === 0) items.unshift(impliedCreated(decodeIncident(record, incidentId), created));
    return {
      data: items.slice(0, page.limit),
      nextCursor: items.length > page.limit ? { offset: offset + page.limit } : null,
    };
  }
}

const createdData = (i: Incident) => ({ title: i.title, severity: i.severity });

/** The `incident.created` event the record implies (as the service writes it); `data` when kept apart. */
function impliedCreated(incident: Incident, data: string | null): IncidentEvent {
  return {
    id: createdEventId(incident.id),
    type: 'incident.created',
    at: incident.created_at,
    actor: incident.created_by,
    data: data === null ? createdData(incident) : (JSON.parse(data) as Record<string, unknown>),
  };
}

const sameJson = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

/**
 * Incidents kept decoded per process: a few MB at most, and more than the open incidents and
 * first list pages any deployment reads over and over.
 */
const DECODED_INCIDENTS = 512;
