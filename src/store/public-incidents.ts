import type { RedisClient as Redis } from './redis-connect.js';
import type {
  EditPublishedRequest,
  MessageRef,
  PublishRequest,
  RemovePublishedRequest,
  StatusPagePort,
} from '../contracts/channel.js';
import {
  COMPONENT_STATUSES,
  type ComponentStatus,
  type PublicImpact,
  type PublicIncident,
  type PublicState,
  type PublicUpdate,
} from '../domain/status/public.js';
import { Change } from './commit.js';
import { decodeIncident } from './incident-record.js';
import type { Keys } from './keys.js';
import { bumpStatusVersion } from './status-version.js';

/**
 * Published incidents: the public face of an incident once a status_page delivery published
 * something (docs/status-page.md). Internal incidents never appear here; only what was published.
 *
 * - `pub:<incident id>`: the JSON record (StoredPublicIncident), its updates in publish order;
 * - `pubs`: score-0 sorted set of `<first publish ms, 13 digits>|<incident id>`, newest first BYLEX REV.
 *
 * Every write is one Change that compare-and-sets the record as read, keeps the index in step and
 * bumps the status version (the page's snapshot rebuilds from it). An update's id is the delivery
 * that published it, so a retried publish rewrites the same update instead of adding one.
 */

export interface StoredPublicUpdate {
  id: string;
  status: PublicState;
  body: string;
  created_at: string;
  updated_at: string | null;
  affected_components: { id: string; status: ComponentStatus }[];
}

export interface StoredPublicIncident {
  id: string;
  name: string;
  /** The update whose subject named the incident (a correction of it renames it). */
  named_by: string | null;
  impact: PublicImpact;
  component_ids: string[];
  created_at: string;
  updated_at: string;
  /** When it was first published (ms): its index member, so its place in the list never moves. */
  first_published_ms: number;
  /** Oldest first. */
  updates: StoredPublicUpdate[];
}

/** The internal incident's state a published one follows (see withInternalStatus). */
export interface InternalIncidentState {
  status: string;
  resolved_at: string | null;
}

/** Severity → Statuspage's impact. */
export function impactOf(severity: string): PublicImpact {
  switch (severity) {
    case 'critical':
      return 'critical';
    case 'major':
      return 'major';
    case 'minor':
      return 'minor';
    default:
      return 'none';
  }
}

const indexMember = (p: Pick<StoredPublicIncident, 'id' | 'first_published_ms'>): string =>
  `${String(p.first_published_ms).padStart(13, '0')}|${p.id}`;

/** How often a write re-reads after losing a compare-and-set before the caller retries (the delivery's own retry). */
const WRITE_ATTEMPTS = 10;

/** The incident's components as A's `components` field holds them; absent or malformed: none. */
function componentsOf(incident: Record<string, unknown> | null): { id: string; status: ComponentStatus }[] {
  const raw = incident?.components;
  if (!Array.isArray(raw)) return [];
  const known = new Set<string>(COMPONENT_STATUSES);
  return raw.flatMap((c: unknown) => {
    if (typeof c !== 'object' || c === null) return [];
    const { id, status } = c as { id?: unknown; status?: unknown };
    return typeof id === 'string' && typeof status === 'string' && known.has(status)
      ? [{ id, status: status as ComponentStatus }]
      : [];
  });
}

export class RedisPublicIncidentStore implements StatusPagePort {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly now: () => number = Date.now,
  ) {}

  /** The stored record and the exact string it was read as (for the compare-and-set). */
  async read(incidentId: string): Promise<{ raw: string | null; record: StoredPublicIncident | null }> {
    const raw = await this.redis.get(this.keys.publicIncident(incidentId));
    return { raw, record: raw === null ? null : (JSON.parse(raw) as StoredPublicIncident) };
  }

  async publish(p: PublishRequest): Promise<MessageRef> {
    await this.write(p.incident.id, async (current, nowMs) => {
      const at = new Date(nowMs).toISOString();
      const internalRaw = await this.redis.get(this.keys.incident(p.incident.id));
      const internal =
        internalRaw === null
          ? null
          : (decodeIncident(internalRaw, p.incident.id, false) as unknown as Record<string, unknown>);
      const affected = componentsOf(internal);
      const existing = current?.updates.find((u) => u.id === p.deliveryId);
      const update: StoredPublicUpdate = {
        id: p.deliveryId,
        status: p.status,
        body: p.body,
        created_at: existing?.created_at ?? at,
        updated_at: existing?.updated_at ?? null,
        affected_components: affected,
      };
      // A retry of the same publish writes what is already there: nothing changes, nothing is bumped.
      if (current && existing && JSON.stringify(existing) === JSON.stringify(update)) return current;
      const subject = p.subject.trim();
      const base: StoredPublicIncident = current ?? {
        id: p.incident.id,
        name: subject !== '' ? subject : p.incident.title,
        named_by: subject !== '' ? p.deliveryId : null,
        impact: impactOf(p.incident.severity),
        component_ids: [],
        created_at: at,
        updated_at: at,
        first_published_ms: nowMs,
        updates: [],
      };
      return {
        ...base,
        // The incident as it is now: its severity and components may have moved since the first update.
        impact: impactOf(p.incident.severity),
        component_ids: affected.map((c) => c.id),
        updated_at: at,
        updates: existing ? base.updates.map((u) => (u.id === update.id ? update : u)) : [...base.updates, update],
      };
    });
    return { id: p.deliveryId, channel: p.incident.id, permalink: null };
  }

  async edit(p: EditPublishedRequest): Promise<MessageRef | null> {
    let found = false;
    await this.write(p.incident.id, (current, nowMs) => {
      const target = current?.updates.find((u) => u.id === p.updateId);
      found = target !== undefined;
      if (!current || !target) return Promise.resolve(current);
      const subject = p.subject.trim();
      const renames = current.named_by === p.updateId && subject !== '';
      const status = p.status ?? target.status;
      // A retried correction finds its text already in place: unchanged, not marked again.
      if (target.body === p.body && target.status === status && (!renames || current.name === subject))
        return Promise.resolve(current);
      const at = new Date(nowMs).toISOString();
      return Promise.resolve({
        ...current,
        name: renames ? subject : current.name,
        updated_at: at,
        updates: current.updates.map((u) => (u.id === p.updateId ? { ...u, body: p.body, status, updated_at: at } : u)),
      });
    });
    return found ? { id: p.updateId, channel: p.incident.id, permalink: null } : null;
  }

  async remove(p: RemovePublishedRequest): Promise<void> {
    await this.write(p.incidentId, (current, nowMs) => {
      if (!current || !current.updates.some((u) => u.id === p.updateId)) return Promise.resolve(current);
      const updates = current.updates.filter((u) => u.id !== p.updateId);
      // The last update retracted: the incident is no longer public at all.
      if (updates.length === 0) return Promise.resolve(null);
      return Promise.resolve({ ...current, updates, updated_at: new Date(nowMs).toISOString() });
    });
  }

  /**
   * Reads the record, computes the next one (the same object: nothing to write; null: remove it)
   * and commits it with the index and the status version, compare-and-set on what was read.
   */
  private async write(
    incidentId: string,
    next: (current: StoredPublicIncident | null, nowMs: number) => Promise<StoredPublicIncident | null>,
  ): Promise<void> {
    const k = this.keys;
    for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
      const { raw, record } = await this.read(incidentId);
      const after = await next(record, this.now());
      if (after === record) return;
      const change = new Change(this.redis).expect(k.publicIncident(incidentId), raw);
      if (after === null) {
        change.write('DEL', k.publicIncident(incidentId));
        if (record) change.write('ZREM', k.publicIncidents(), indexMember(record));
      } else {
        change.write('SET', k.publicIncident(incidentId), JSON.stringify(after));
        if (!record) change.write('ZADD', k.publicIncidents(), 0, indexMember(after));
      }
      bumpStatusVersion(change, k);
      if (await change.commit()) return;
    }
    throw new Error('the published incident kept changing');
  }
}

/** The public view of a stored record: updates newest first, the state of the latest one. */
export function toPublicIncident(s: StoredPublicIncident): PublicIncident {
  const updates: PublicUpdate[] = [...s.updates].reverse().map((u) => ({
    id: u.id,
    status: u.status,
    body: u.body,
    created_at: u.created_at,
    updated_at: u.updated_at,
    affected_components: u.affected_components.map((c) => ({ ...c })),
  }));
  const latest = updates[0];
  // Resolved since the first update of the latest run of `resolved` ones.
  let resolvedAt: string | null = null;
  for (const u of updates) {
    if (u.status !== 'resolved') break;
    resolvedAt = u.created_at;
  }
  return {
    id: s.id,
    name: s.name,
    impact: s.impact,
    status: latest?.status ?? 'investigating',
    created_at: s.created_at,
    updated_at: s.updated_at,
    resolved_at: resolvedAt,
    component_ids: [...s.component_ids],
    updates,
  };
}

/**
 * The internal incident decides when a published one is over: resolved or closed inside Herald
 * shows `resolved` (resolved_at = the incident's) even when no `resolved` update was published.
 * Otherwise the latest published update's state stands (a reopened incident shows what was last
 * said publicly).
 */
export function withInternalStatus(p: PublicIncident, internal: InternalIncidentState | null): PublicIncident {
  if (!internal || (internal.status !== 'resolved' && internal.status !== 'closed')) return p;
  return { ...p, status: 'resolved', resolved_at: internal.resolved_at ?? p.resolved_at ?? p.updated_at };
}

/** The internal state of each incident (null: gone), for withInternalStatus. */
async function internalStates(redis: Redis, keys: Keys, ids: string[]): Promise<(InternalIncidentState | null)[]> {
  if (ids.length === 0) return [];
  const raws = await redis.mget(...ids.map((id) => keys.incident(id)));
  return raws.map((raw, n) => {
    if (raw === null) return null;
    const i = decodeIncident(raw, ids[n]!, false);
    return { status: i.status, resolved_at: i.resolved_at };
  });
}

export interface LoadOptions {
  /** Apply the internal incidents' resolved/closed state (withInternalStatus); default true. */
  internal?: boolean;
}

/** The `limit` most recently first-published incidents, newest first, as the page shows them. */
export async function loadPublicIncidents(
  redis: Redis,
  keys: Keys,
  limit: number,
  opts: LoadOptions = {},
): Promise<PublicIncident[]> {
  if (limit <= 0) return [];
  const members = await redis.zrange(keys.publicIncidents(), '+', '-', 'BYLEX', 'REV', 'LIMIT', 0, limit);
  const ids = members.map((m) => m.slice(m.indexOf('|') + 1));
  if (ids.length === 0) return [];
  const raws = await redis.mget(...ids.map((id) => keys.publicIncident(id)));
  const states = opts.internal === false ? ids.map(() => null) : await internalStates(redis, keys, ids);
  return raws.flatMap((raw, i) =>
    raw === null ? [] : [withInternalStatus(toPublicIncident(JSON.parse(raw) as StoredPublicIncident), states[i]!)],
  );
}

/** One published incident as the page shows it; null when nothing of it is public. */
export async function getPublicIncident(
  redis: Redis,
  keys: Keys,
  id: string,
  opts: LoadOptions = {},
): Promise<PublicIncident | null> {
  const raw = await redis.get(keys.publicIncident(id));
  if (raw === null) return null;
  const [state] = opts.internal === false ? [null] : await internalStates(redis, keys, [id]);
  return withInternalStatus(toPublicIncident(JSON.parse(raw) as StoredPublicIncident), state ?? null);
}
