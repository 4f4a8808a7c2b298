import type { RedisClient as Redis } from './redis-connect.js';
import type { IncidentEvent } from '../domain/incident/incident-event.js';
import {
  isActive,
  maintenanceWire,
  nextStep,
  type MaintenanceState,
  type StoredMaintenance,
} from '../domain/maintenance/maintenance.js';
import type { Page, PageRequest } from '../domain/common/pagination.js';
import type { PublicMaintenance, PublicMaintenanceUpdate } from '../domain/status/public.js';
import type { MaintenanceRepo, ImpactEventOf } from '../ports/index.js';
import { Change } from './commit.js';
import { RedisComponentRepo, stageImpacts } from './components.js';
import { loadJson, pageFiltered } from './index-page.js';
import type { Keys } from './keys.js';
import { bumpStatusVersion } from './status-version.js';
import { appendSubjectEvents } from './timeline.js';

/**
 * Maintenances as JSON strings at `mnt:<id>` (StoredMaintenance), with:
 * - `mnts`, the score-0 sorted set of ids paged BYLEX, newest first;
 * - `mnts-due`, the schedule: id → when its next automatic step is due (ms), absent when none is.
 * Every write compare-and-sets the record as the exact JSON read, and writes the schedule entry
 * derived from the record it writes (nextStep) in the same Change: the schedule can never point at
 * a step the record has already taken, and a step taken by two workers at once commits once.
 * Every write bumps the status version (the page shows maintenances) and appends its events.
 * While a maintenance is in progress or verifying its components carry its `under_maintenance`
 * impact, staged in the same Change (stageImpacts, CAS on every component touched).
 */

/** How long a completed maintenance stays on the public page. */
export const PUBLIC_COMPLETED_MS = 90 * 86_400_000;

/**
 * How many of the newest maintenances (by creation: ids are ULIDs) the page reads. The snapshot
 * is rebuilt on every public change, so its cost must not grow with years of history; a window
 * still open after a thousand newer ones were created is not a case worth a second index.
 */
export const PUBLIC_MAINTENANCES_READ = 1000;

export class RedisMaintenanceRepo implements MaintenanceRepo {
  private readonly components: RedisComponentRepo;

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {
    this.components = new RedisComponentRepo(redis, keys);
  }

  async get(id: string): Promise<StoredMaintenance | null> {
    const raw = await this.redis.get(this.keys.maintenance(id));
    return raw === null ? null : (JSON.parse(raw) as StoredMaintenance);
  }

  list(filter: { status?: MaintenanceState[] }, page: PageRequest): Promise<Page<StoredMaintenance>> {
    const wanted = filter.status && filter.status.length > 0 ? new Set(filter.status) : null;
    return pageFiltered(
      this.redis,
      [this.keys.maintenances()],
      page,
      (ids) =>
        loadJson<StoredMaintenance>(
          this.redis,
          ids.map((id) => this.keys.maintenance(id)),
        ),
      (m) => wanted === null || wanted.has(m.status),
      wanted === null ? page.limit : 50,
    );
  }

  /** Ids whose next step is due at or before `nowMs`, soonest first. */
  due(nowMs: number, limit: number): Promise<string[]> {
    return this.redis.zrangebyscore(this.keys.maintenancesDue(), '-inf', String(nowMs), 'LIMIT', 0, limit);
  }

  async create(m: StoredMaintenance, events: IncidentEvent[]): Promise<boolean> {
    const k = this.keys;
    const change = new Change(this.redis)
      .expect(k.maintenance(m.id), null)
      .write('SET', k.maintenance(m.id), JSON.stringify(m))
      .write('ZADD', k.maintenances(), '0', m.id);
    stageSchedule(change, k, null, m);
    bumpStatusVersion(change, k);
    appendSubjectEvents(change, k, m.id, events, { resource: maintenanceWire(m) });
    return change.commit({ kind: 'maintenance', maintenance: m });
  }

  /**
   * Replaces `prev` (compare-and-set) with `next`: the schedule follows the record, the
   * components' impacts follow its state and component list (`impactEvent` builds the
   * `component.status_changed` event of each effective change), and `events` are appended.
   * False when the record or a touched component changed meanwhile (read again and retry).
   */
  async update(
    prev: StoredMaintenance,
    next: StoredMaintenance,
    events: IncidentEvent[],
    impactEvent: ImpactEventOf,
  ): Promise<boolean> {
    const k = this.keys;
    const change = new Change(this.redis)
      .expect(k.maintenance(prev.id), JSON.stringify(prev))
      .write('SET', k.maintenance(next.id), JSON.stringify(next));
    stageSchedule(change, k, prev, next);
    const impactEvents = await this.stageComponentImpacts(change, prev, next, impactEvent);
    bumpStatusVersion(change, k);
    appendSubjectEvents(change, k, next.id, events, { resource: maintenanceWire(next) });
    for (const [componentId, evs] of impactEvents) appendSubjectEvents(change, k, componentId, evs);
    // The effect: a manual update's Idempotency-Key replay is stored with it (and the write is durable).
    return change.commit({ kind: 'maintenance', maintenance: next });
  }

  /** Deletes `prev` (compare-and-set); the caller allows it while scheduled only (nothing impacted). */
  async delete(prev: StoredMaintenance, events: IncidentEvent[]): Promise<boolean> {
    const k = this.keys;
    const change = new Change(this.redis)
      .expect(k.maintenance(prev.id), JSON.stringify(prev))
      .write('DEL', k.maintenance(prev.id))
      .write('ZREM', k.maintenances(), prev.id)
      .write('ZREM', k.maintenancesDue(), prev.id);
    bumpStatusVersion(change, k);
    appendSubjectEvents(change, k, prev.id, events, { resource: maintenanceWire(prev) });
    return change.commit();
  }

  /**
   * Stages the impact of the maintenance on its components: `under_maintenance` on the ones it
   * names while active, none on the rest of those it named before. Components deleted meanwhile
   * are skipped (nothing to show them on). Returns the component events per component id.
   */
  private async stageComponentImpacts(
    change: Change,
    prev: StoredMaintenance,
    next: StoredMaintenance,
    impactEvent: ImpactEventOf,
  ): Promise<Map<string, IncidentEvent[]>> {
    const wasActive = isActive(prev.status);
    const active = isActive(next.status);
    const sameList = JSON.stringify(prev.components) === JSON.stringify(next.components);
    const out = new Map<string, IncidentEvent[]>();
    if (!wasActive && !active) return out;
    if (wasActive === active && sameList) return out;
    const touched = [...new Set([...(wasActive ? prev.components : []), ...(active ? next.components : [])])];
    const current = (await this.components.getMany(touched)).flatMap((c) => (c === null ? [] : [c]));
    const named = new Set(active ? next.components : []);
    const changes = stageImpacts(
      change,
      this.keys,
      current,
      next.id,
      (c) => (named.has(c.id) ? 'under_maintenance' : null),
      next.updated_at,
    );
    for (const ic of changes) out.set(ic.component_id, [impactEvent(ic)]);
    return out;
  }
}

/** The schedule entry follows the record: its next step's time, or none. */
function stageSchedule(change: Change, keys: Keys, prev: StoredMaintenance | null, next: StoredMaintenance): void {
  const before = prev === null ? null : (nextStep(prev)?.atMs ?? null);
  const after = nextStep(next)?.atMs ?? null;
  if (before === after && prev !== null) return;
  if (after === null) change.write('ZREM', keys.maintenancesDue(), next.id);
  else change.write('ZADD', keys.maintenancesDue(), String(after), next.id);
}

/**
 * For the page: every maintenance not completed, and those completed in the last 90 days, soonest
 * first (by scheduled_for), mapped to PublicMaintenance with their updates newest first.
 */
export async function loadPublicMaintenances(redis: Redis, keys: Keys, nowMs: number): Promise<PublicMaintenance[]> {
  const [ids, componentIds] = await Promise.all([
    redis.zrange(keys.maintenances(), '+', '-', 'BYLEX', 'REV', 'LIMIT', 0, PUBLIC_MAINTENANCES_READ),
    redis.zrange(keys.components(), '0', '-1'),
  ]);
  // A component deleted after the maintenance named it is not shown as affected.
  const components = new Set(componentIds);
  const records = await loadJson<StoredMaintenance>(
    redis,
    ids.map((id) => keys.maintenance(id)),
  );
  const cut = nowMs - PUBLIC_COMPLETED_MS;
  return records
    .flatMap((m) => (m === null ? [] : [m]))
    .filter((m) => m.status !== 'completed' || Date.parse(m.completed_at ?? m.updated_at) >= cut)
    .sort((a, b) => Date.parse(a.scheduled_for) - Date.parse(b.scheduled_for) || (a.id < b.id ? -1 : 1))
    .map((m) => ({
      id: m.id,
      name: m.title,
      status: m.status,
      scheduled_for: m.scheduled_for,
      scheduled_until: m.scheduled_until,
      component_ids: m.components.filter((id) => components.has(id)),
      created_at: m.created_at,
      updated_at: m.updated_at,
      updates: publicUpdates(m),
    }));
}

/**
 * Newest first; the maintenance's own description is its oldest update (as Statuspage shows a
 * scheduled maintenance's body), id = the maintenance id.
 */
function publicUpdates(m: StoredMaintenance): PublicMaintenanceUpdate[] {
  const out: PublicMaintenanceUpdate[] = m.updates.map((u) => ({
    id: u.id,
    status: u.status,
    body: u.body,
    kind: u.kind,
    created_at: u.created_at,
  }));
  if (m.body.trim() !== '')
    out.unshift({ id: m.id, status: 'scheduled', body: m.body, kind: 'update', created_at: m.created_at });
  return out.reverse();
}
