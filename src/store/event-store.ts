import type { RedisClient as Redis } from './redis-connect.js';
import type { StoredEvent } from '../domain/event/catalog.js';
import type { IncidentFacts } from '../domain/event/facts.js';
import type { EndpointRecord, EventDeliveryRecord } from '../domain/event/endpoint.js';
import type { Page, PageRequest } from '../domain/common/pagination.js';
import { Change } from './commit.js';
import { decodeIncident } from './incident-record.js';
import { loadJson, pageIndexes } from './index-page.js';
import type { Keys } from './keys.js';
import { luaScript, runScript } from './scripts.js';

/**
 * event_ingest — moves committed events from the outbox stream (store/timeline.ts) into the event
 * log, in stream order, which is commit order: each gets its subject's next `sequence` (the
 * subject is the incident, or the component / maintenance of an event without one: field `s`), a log
 * entry (kept for replay), and a place in the fan-out set. The cursor moves in the same step, so
 * an entry is taken exactly once whoever runs this and whenever a worker dies. While no endpoint
 * exists, entries are taken and dropped: nobody is told, and a Herald without integrators keeps
 * no event log (nor sequences) in its memory.
 * KEYS: stream, cursor, sequences, log, log-time, fan-out, endpoints. ARGV[1] how many at most.
 * Returns how many were taken.
 */
const INGEST_LUA = luaScript(
  'event_ingest',
  `
local cur = redis.call('GET', KEYS[2]) or '0-0'
local entries = redis.call('XRANGE', KEYS[1], '(' .. cur, '+', 'COUNT', tonumber(ARGV[1]))
local keep = redis.call('ZCARD', KEYS[7]) > 0
for _, en in ipairs(entries) do
  if keep then
    local f = {}
    for i = 1, #en[2], 2 do f[en[2][i]] = en[2][i + 1] end
    local ms = tonumber(string.match(en[1], '^(%d+)'))
    local seq = redis.call('HINCRBY', KEYS[3], f.s or f.i, 1)
    local rec = {id = f.id, type = f.t, incident_id = f.i, sequence = seq, event = f.e, at_ms = ms}
    if f.r then rec.resource = f.r end
    redis.call('HSET', KEYS[4], f.id, cjson.encode(rec))
    redis.call('ZADD', KEYS[5], ms, f.id)
    redis.call('ZADD', KEYS[6], ms, f.id)
  end
  cur = en[1]
end
if #entries > 0 then
  redis.call('SET', KEYS[2], cur)
  redis.call('XTRIM', KEYS[1], 'MINID', cur)
end
return #entries
`,
);

/**
 * event_fanout — creates an event's deliveries and takes it out of the fan-out set, at once. A
 * delivery that exists already (the fan-out ran before, then died) is left as it is: its id is
 * derived from the pair (fanoutDeliveryId), so running it again creates nothing twice.
 * KEYS[1] due set, KEYS[2] fan-out set, then per delivery: its record, its endpoint's log.
 * ARGV[1] the deliveries' due time (ms), ARGV[2] how many deliveries, ARGV[3] record TTL (ms),
 * then per delivery: its JSON and id; then the event ids done.
 */
const FANOUT_LUA = luaScript(
  'event_fanout',
  `
local n = tonumber(ARGV[2])
for i = 1, n do
  local json, id = ARGV[3 + 2 * i - 1], ARGV[3 + 2 * i]
  if redis.call('SET', KEYS[2 + 2 * i - 1], json, 'NX', 'PX', ARGV[3]) then
    redis.call('ZADD', KEYS[1], ARGV[1], id)
    redis.call('ZADD', KEYS[2 + 2 * i], 0, id)
  end
end
for j = 4 + 2 * n, #ARGV do redis.call('ZREM', KEYS[2], ARGV[j]) end
return 0
`,
);

/** event_claim — takes due deliveries, moving each a lease ahead (a crashed holder's comes back). */
const CLAIM_LUA = luaScript(
  'event_claim',
  `
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do redis.call('ZADD', KEYS[1], 'XX', ARGV[2], id) end
return ids
`,
);

/**
 * event_trim — the retention job's bounded step: drops up to ARGV[2] log entries older than
 * ARGV[1] (ms). Delivery records expire by themselves (their TTL). Returns how many went.
 */
const TRIM_LUA = luaScript(
  'event_trim',
  `
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #ids == 0 then return 0 end
redis.call('HDEL', KEYS[2], unpack(ids))
redis.call('ZREM', KEYS[1], unpack(ids))
redis.call('ZREM', KEYS[3], unpack(ids))
return #ids
`,
);

interface RawEvent {
  id: string;
  type: string;
  /** Absent for an event of another subject that names no incident. */
  incident_id?: string;
  sequence: number;
  event: string;
  at_ms: number;
  resource?: string;
}

/**
 * Event endpoints, the event log and event deliveries (docs/events.md). Endpoint secrets arrive
 * sealed. Event deliveries keep their attempts on the record and live as long as the retention.
 */
export class RedisEventStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  // ── endpoints ──

  async getEndpoint(id: string): Promise<EndpointRecord | null> {
    const [e] = await loadJson<EndpointRecord>(this.redis, [this.keys.eventEndpoint(id)]);
    return e ?? null;
  }

  listEndpoints(page: PageRequest): Promise<Page<EndpointRecord>> {
    return this.pageOf<EndpointRecord>(this.keys.eventEndpoints(), page, (id) => this.keys.eventEndpoint(id));
  }

  async allEndpoints(): Promise<EndpointRecord[]> {
    const ids = await this.redis.zrange(this.keys.eventEndpoints(), '0', '-1');
    const all = await loadJson<EndpointRecord>(
      this.redis,
      ids.map((id) => this.keys.eventEndpoint(id)),
    );
    return all.filter((e): e is EndpointRecord => e !== null);
  }

  countEndpoints(): Promise<number> {
    return this.redis.zcard(this.keys.eventEndpoints());
  }

  createEndpoint(e: EndpointRecord, signingSecret: string): Promise<boolean> {
    const k = this.keys;
    return new Change(this.redis)
      .expect(k.eventEndpoint(e.id), null)
      .write('SET', k.eventEndpoint(e.id), JSON.stringify(e))
      .write('ZADD', k.eventEndpoints(), '0', e.id)
      .commit({ kind: 'event_endpoint', endpoint: e, signingSecret });
  }

  updateEndpoint(prev: EndpointRecord, next: EndpointRecord, signingSecret: string | null = null): Promise<boolean> {
    const k = this.keys;
    const change = new Change(this.redis)
      .expect(k.eventEndpoint(prev.id), JSON.stringify(prev))
      .write('SET', k.eventEndpoint(next.id), JSON.stringify(next));
    // Turned back on: its failing streak starts over.
    if (next.enabled && !prev.enabled) change.write('HDEL', k.eventEndpointFailing(), next.id);
    return change.commit(
      signingSecret === null ? undefined : { kind: 'event_endpoint', endpoint: next, signingSecret },
    );
  }

  deleteEndpoint(prev: EndpointRecord): Promise<boolean> {
    const k = this.keys;
    return new Change(this.redis)
      .expect(k.eventEndpoint(prev.id), JSON.stringify(prev))
      .write('DEL', k.eventEndpoint(prev.id))
      .write('ZREM', k.eventEndpoints(), prev.id)
      .write('DEL', k.eventEndpointDeliveries(prev.id))
      .write('HDEL', k.eventEndpointFailing(), prev.id)
      .commit();
  }

  /** Notes a failure; answers since when the endpoint has been failing (ms). */
  async markFailing(endpointId: string, nowMs: number): Promise<number> {
    const key = this.keys.eventEndpointFailing();
    await this.redis.hsetnx(key, endpointId, String(nowMs));
    return Number((await this.redis.hget(key, endpointId)) ?? nowMs);
  }

  /**
   * Claims telling the admins of one disable (the endpoint's record at `rev`): true for the one
   * caller that gets it, whichever worker. Kept a week, far past any retry of the same disable.
   */
  async claimDisableNotice(endpointId: string, rev: number): Promise<boolean> {
    const set = await this.redis.set(this.keys.eventEndpointNotice(endpointId, rev), '1', 'PX', 7 * 86_400_000, 'NX');
    return set === 'OK';
  }

  async markHealthy(endpointId: string): Promise<void> {
    await this.redis.hdel(this.keys.eventEndpointFailing(), endpointId);
  }

  // ── the event log ──

  /** Moves up to `max` outbox entries into the log (event_ingest); how many it moved. */
  async ingest(max: number): Promise<number> {
    const k = this.keys;
    const keys = [
      k.eventStream(),
      k.eventCursor(),
      k.eventSequences(),
      k.eventLog(),
      k.eventLogTime(),
      k.eventFanout(),
      k.eventEndpoints(),
    ];
    return Number(await runScript(this.redis, INGEST_LUA, keys, [String(max)]));
  }

  /** Events waiting for their fan-out, oldest first. */
  async pendingFanout(max: number): Promise<StoredEvent[]> {
    const ids = await this.redis.zrange(this.keys.eventFanout(), '0', String(max - 1));
    return this.getEvents(ids);
  }

  async getEvents(ids: string[]): Promise<StoredEvent[]> {
    if (ids.length === 0) return [];
    const raw = await this.redis.hmget(this.keys.eventLog(), ...ids);
    const out: StoredEvent[] = [];
    for (const r of raw) if (r !== null) out.push(decodeEvent(r));
    return out;
  }

  /** Log entries committed in [sinceMs, untilMs], oldest first, at most `max`. */
  async eventsBetween(sinceMs: number, untilMs: number, max: number): Promise<StoredEvent[]> {
    const ids = await this.redis.zrangebyscore(this.keys.eventLogTime(), sinceMs, untilMs, 'LIMIT', 0, max);
    return this.getEvents(ids);
  }

  /** The current severities and components of incidents (for filters of events that carry no snapshot). */
  async incidentFacts(incidentIds: string[]): Promise<Map<string, IncidentFacts>> {
    const unique = [...new Set(incidentIds)];
    const out = new Map<string, IncidentFacts>();
    if (unique.length === 0) return out;
    const raw = await this.redis.mget(...unique.map((id) => this.keys.incident(id)));
    raw.forEach((r, i) => {
      if (r === null) return;
      const incident = decodeIncident(r, unique[i]!, false);
      const components = (incident as { components?: unknown }).components;
      out.set(unique[i]!, {
        severity: incident.severity,
        component_ids: Array.isArray(components)
          ? components.flatMap((c: unknown) => {
              const id = (c as { id?: unknown } | null)?.id;
              return typeof id === 'string' ? [id] : [];
            })
          : [],
      });
    });
    return out;
  }

  /** Audience keys of executions (every audience it named) and of deliveries (the one it went to), by id. */
  async audiences(executionIds: string[], deliveryIds: string[]): Promise<Map<string, string[]>> {
    const exes = [...new Set(executionIds)];
    const dlvs = [...new Set(deliveryIds)];
    const out = new Map<string, string[]>();
    const records = await loadJson<{ audiences?: { key: string }[]; audience?: string | null }>(this.redis, [
      ...exes.map((id) => this.keys.execution(id)),
      ...dlvs.map((id) => this.keys.delivery(id)),
    ]);
    records.forEach((r, i) => {
      if (r === null) return;
      if (i < exes.length)
        out.set(
          exes[i]!,
          (r.audiences ?? []).map((a) => a.key),
        );
      else out.set(dlvs[i - exes.length]!, typeof r.audience === 'string' ? [r.audience] : []);
    });
    return out;
  }

  /** Creates deliveries (new ones only, see FANOUT_LUA) and marks `doneEventIds` fanned out. */
  async fanout(deliveries: EventDeliveryRecord[], doneEventIds: string[], dueMs: number, ttlMs: number): Promise<void> {
    const k = this.keys;
    const keys = [k.eventDue(), k.eventFanout()];
    const args: string[] = [String(dueMs), String(deliveries.length), String(ttlMs)];
    for (const d of deliveries) {
      keys.push(k.eventDelivery(d.id), k.eventEndpointDeliveries(d.endpoint_id));
      args.push(JSON.stringify(d), d.id);
    }
    args.push(...doneEventIds);
    await runScript(this.redis, FANOUT_LUA, keys, args);
  }

  /** One retention step: drops up to `max` events older than `beforeMs`. */
  async trim(beforeMs: number, max: number): Promise<number> {
    const k = this.keys;
    return Number(
      await runScript(
        this.redis,
        TRIM_LUA,
        [k.eventLogTime(), k.eventLog(), k.eventFanout()],
        [String(beforeMs), String(max)],
      ),
    );
  }

  /** Drops from an endpoint's delivery log the ids of deliveries made before `beforeId` (expired records). */
  async trimDeliveryLog(endpointId: string, beforeId: string): Promise<void> {
    await this.redis.zremrangebylex(this.keys.eventEndpointDeliveries(endpointId), '-', `(${beforeId}`);
  }

  // ── deliveries ──

  /** Due deliveries (at most `max`), each moved `leaseMs` ahead while this worker holds it. */
  async claimDue(nowMs: number, leaseMs: number, max: number): Promise<string[]> {
    return (await runScript(
      this.redis,
      CLAIM_LUA,
      [this.keys.eventDue()],
      [String(nowMs), String(nowMs + leaseMs), String(max)],
    )) as string[];
  }

  async getDelivery(id: string): Promise<EventDeliveryRecord | null> {
    const [d] = await this.getDeliveries([id]);
    return d ?? null;
  }

  getDeliveries(ids: string[]): Promise<(EventDeliveryRecord | null)[]> {
    return loadJson<EventDeliveryRecord>(
      this.redis,
      ids.map((id) => this.keys.eventDelivery(id)),
    );
  }

  listDeliveries(endpointId: string, page: PageRequest): Promise<Page<EventDeliveryRecord>> {
    return this.pageOf<EventDeliveryRecord>(this.keys.eventEndpointDeliveries(endpointId), page, (id) =>
      this.keys.eventDelivery(id),
    );
  }

  /** A new delivery (a replay, a retry of a finished one), due at `dueMs`. */
  async addDeliveries(deliveries: EventDeliveryRecord[], dueMs: number, ttlMs: number): Promise<void> {
    if (deliveries.length > 0) await this.fanout(deliveries, [], dueMs, ttlMs);
  }

  /**
   * Writes the delivery over `prev` (compare-and-set), due again at `dueMs` or (null) done. False
   * when the record is not the one read (another worker got there first: nothing written).
   */
  saveDelivery(
    prev: EventDeliveryRecord,
    next: EventDeliveryRecord,
    dueMs: number | null,
    healthyEndpoint?: string,
  ): Promise<boolean> {
    const k = this.keys;
    const change = new Change(this.redis)
      .expect(k.eventDelivery(prev.id), JSON.stringify(prev))
      .write('SET', k.eventDelivery(next.id), JSON.stringify(next), 'KEEPTTL');
    if (dueMs === null) change.write('ZREM', k.eventDue(), next.id);
    else change.write('ZADD', k.eventDue(), String(dueMs), next.id);
    if (healthyEndpoint !== undefined) change.write('HDEL', k.eventEndpointFailing(), healthyEndpoint);
    return change.commit();
  }

  /** Drops a due entry whose record is gone (expired, or its endpoint deleted). */
  async forgetDue(id: string): Promise<void> {
    await this.redis.zrem(this.keys.eventDue(), id);
  }

  private async pageOf<T>(index: string, page: PageRequest, keyOf: (id: string) => string): Promise<Page<T>> {
    const { ids, nextCursor } = await pageIndexes(this.redis, [index], page);
    const list = await loadJson<T>(this.redis, ids.map(keyOf));
    return { data: list.filter((x): x is Awaited<T> & NonNullable<T> => x !== null), nextCursor };
  }
}

function decodeEvent(raw: string): StoredEvent {
  const r = JSON.parse(raw) as RawEvent;
  let resource: Record<string, unknown> | undefined;
  if (r.resource !== undefined) {
    // An incident snapshot is the stored form (store/incident-record.ts): decode it to the full record.
    resource = r.type.startsWith('incident.')
      ? decodeIncident(r.resource, r.incident_id ?? '', false)
      : (JSON.parse(r.resource) as Record<string, unknown>);
  }
  return {
    id: r.id,
    type: r.type,
    incident_id: r.incident_id ?? null,
    sequence: r.sequence,
    event: r.event,
    at_ms: r.at_ms,
    resource,
  };
}
