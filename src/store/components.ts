import type { RedisClient as Redis } from './redis-connect.js';
import {
  componentNameKey,
  componentWire,
  effectiveStatus,
  withImpact,
  type ComponentStatus,
  type StoredComponent,
} from '../domain/component/component.js';
import type { IncidentEvent } from '../domain/incident/incident-event.js';
import type { ComponentRepo, ComponentWriteOutcome } from '../ports/index.js';
import { LIMITS } from '../domain/common/limits.js';
import type { Page, PageRequest } from '../domain/common/pagination.js';
import type { PublicComponent, PublicStatusChange } from '../domain/status/public.js';
import { Change } from './commit.js';
import { loadJson, pageFiltered } from './index-page.js';
import type { Keys } from './keys.js';
import { bumpStatusVersion } from './status-version.js';
import { appendSubjectEvents } from './timeline.js';

/**
 * Components as JSON strings at `cmp:<id>` (StoredComponent), with:
 * - `cmps`, the score-0 sorted set paged BYLEX, newest first;
 * - `cmp-names`, a hash of the case-folded name → id, claimed in the same Change as the write;
 * - `cmp-count`, how many there are (a create compare-and-sets it: LIMITS.components holds under races);
 * - `cmp:<id>:history`, the effective status changes: members JSON {at, status}, score = ms,
 *   appended in the same Change as the write that changes the effective status, and trimmed to
 *   HISTORY_KEEP_MS while always keeping the latest change before that window (so the status at
 *   the start of the window is known);
 * - `cmp:<id>:events`, the component's own timeline (manual changes).
 * Every write compare-and-sets the record as the exact JSON read and bumps the status version.
 * Impacts (open incidents and maintenances on the component) are written by their own Changes
 * through stageImpacts, with the same compare-and-set.
 */

/** How far back the history is kept: the page shows 90 days; 10 more are slack. */
export const HISTORY_KEEP_MS = 100 * 86_400_000;
/** How far back the page's history reaches. */
export const PUBLIC_HISTORY_MS = 90 * 86_400_000;

/**
 * History members a trim may drop, per record as read by this module: the entries older than
 * HISTORY_KEEP_MS but the latest of them. A Change cannot read, so the read that produced the
 * record also finds these and the write that follows removes them (ZREM is harmless for members
 * already gone, and appends are always newer than the cut). Records that did not come from a
 * read here (built by a caller) simply trim nothing.
 */
const staleHistory = new WeakMap<StoredComponent, string[]>();

export interface ImpactChange {
  component_id: string;
  from: ComponentStatus;
  to: ComponentStatus;
}

/** The history member of one effective status change. */
function historyEntry(at: string, status: ComponentStatus): string {
  return JSON.stringify({ at, status } satisfies PublicStatusChange);
}

/** Appends an effective change to the history (and drops what the record's read found stale). */
function stageHistory(change: Change, keys: Keys, prev: StoredComponent, at: string, status: ComponentStatus): void {
  change.write('ZADD', keys.componentHistory(prev.id), String(Date.parse(at)), historyEntry(at, status));
  const stale = staleHistory.get(prev);
  if (stale !== undefined && stale.length > 0) change.write('ZREM', keys.componentHistory(prev.id), ...stale);
}

/**
 * Stages, in `change`, source `sourceId` (an incident or a maintenance id) impacting each listed
 * component with `status` (null: no longer impacting; a function decides per component). `current`
 * are the records as read: each one's JSON is compare-and-set, so a component changed or deleted
 * meanwhile fails the whole Change (the caller reads again). Writes the records (a new `rev`
 * whenever the impacts change) and their history, bumps the status version when anything changed,
 * and returns the effective status changes (for timeline events).
 */
export function stageImpacts(
  change: Change,
  keys: Keys,
  current: StoredComponent[],
  sourceId: string,
  status: ComponentStatus | null | ((c: StoredComponent) => ComponentStatus | null),
  nowIso: string,
): ImpactChange[] {
  const changes: ImpactChange[] = [];
  let wrote = false;
  for (const c of current) {
    change.expect(keys.component(c.id), JSON.stringify(c));
    const next = withImpact(c, sourceId, typeof status === 'function' ? status(c) : status, nowIso);
    if (next === c) continue;
    change.write('SET', keys.component(c.id), JSON.stringify(next));
    wrote = true;
    const from = effectiveStatus(c);
    const to = effectiveStatus(next);
    if (from !== to) {
      stageHistory(change, keys, c, nowIso, to);
      changes.push({ component_id: c.id, from, to });
    }
  }
  if (wrote) bumpStatusVersion(change, keys);
  return changes;
}

export class RedisComponentRepo implements ComponentRepo {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  async get(id: string): Promise<StoredComponent | null> {
    const [one] = await this.getMany([id]);
    return one ?? null;
  }

  /**
   * The records, in order (null where none), each remembered with its stale history entries so
   * the write that follows trims them (staleHistory).
   */
  async getMany(ids: string[]): Promise<(StoredComponent | null)[]> {
    if (ids.length === 0) return [];
    const cut = Date.now() - HISTORY_KEEP_MS;
    const pipeline = this.redis.pipeline();
    for (const id of ids) {
      pipeline.get(this.keys.component(id));
      pipeline.zrangebyscore(this.keys.componentHistory(id), '-inf', `(${cut}`);
    }
    const results = (await pipeline.exec()) ?? [];
    return ids.map((_, i) => {
      const [e1, raw] = results[2 * i] ?? [null, null];
      const [e2, old] = results[2 * i + 1] ?? [null, []];
      if (e1) throw e1;
      if (e2) throw e2;
      if (typeof raw !== 'string') return null;
      const record = JSON.parse(raw) as StoredComponent;
      const before = old as string[];
      if (before.length > 1) staleHistory.set(record, before.slice(0, -1));
      return record;
    });
  }

  /** Every component (at most LIMITS.components), in page order: group, position, name. */
  async listAll(): Promise<StoredComponent[]> {
    const ids = await this.redis.zrange(this.keys.components(), '0', '-1');
    const records = await loadJson<StoredComponent>(
      this.redis,
      ids.map((id) => this.keys.component(id)),
    );
    return records.flatMap((r) => (r === null ? [] : [r])).sort(pageOrder);
  }

  list(page: PageRequest): Promise<Page<StoredComponent>> {
    // A component deleted between reading the index and the record is skipped, not a hole.
    return pageFiltered(
      this.redis,
      [this.keys.components()],
      page,
      (ids) =>
        loadJson<StoredComponent>(
          this.redis,
          ids.map((id) => this.keys.component(id)),
        ),
      () => true,
    );
  }

  /** Effective status changes since `sinceMs`, oldest first, with the latest one before it. */
  history(id: string, sinceMs: number): Promise<PublicStatusChange[]> {
    return readHistory(this.redis, this.keys, [id], sinceMs).then((h) => h[0] ?? []);
  }

  /** The component's own timeline, oldest first, paged by offset (the list only grows at its end). */
  async events(id: string, page: PageRequest): Promise<Page<IncidentEvent>> {
    const offset = page.cursor && 'offset' in page.cursor ? page.cursor.offset : 0;
    const raw = await this.redis.lrange(this.keys.componentEvents(id), offset, offset + page.limit);
    const items = raw.map((r) => JSON.parse(r) as IncidentEvent);
    return {
      data: items.slice(0, page.limit),
      nextCursor: items.length > page.limit ? { offset: offset + page.limit } : null,
    };
  }

  async create(c: StoredComponent): Promise<ComponentWriteOutcome> {
    const k = this.keys;
    const count = await this.redis.hget(k.componentCount(), 'n');
    if (Number(count ?? 0) >= LIMITS.components) return { ok: false, reason: 'too_many' };
    const nameKey = componentNameKey(c.name);
    const change = new Change(this.redis)
      .expectHashField(k.componentCount(), 'n', count)
      .write('HINCRBY', k.componentCount(), 'n', 1)
      .expect(k.component(c.id), null)
      .expectHashField(k.componentNames(), nameKey, null)
      .write('SET', k.component(c.id), JSON.stringify(c))
      .write('HSET', k.componentNames(), nameKey, c.id)
      .write('ZADD', k.components(), '0', c.id);
    change.write(
      'ZADD',
      k.componentHistory(c.id),
      String(Date.parse(c.created_at)),
      historyEntry(c.created_at, effectiveStatus(c)),
    );
    bumpStatusVersion(change, k);
    if (await change.commit({ kind: 'component', component: c })) return { ok: true };
    const holder = await this.redis.hget(k.componentNames(), nameKey);
    return holder !== null && holder !== c.id ? { ok: false, reason: 'name_taken' } : { ok: false, reason: 'conflict' };
  }

  /**
   * Replaces `prev` (compare-and-set) with `next`, recording an effective status change in the
   * history and appending `events` to the component's timeline and the event outbox (with the
   * component as the API shows it after the change).
   */
  async update(
    prev: StoredComponent,
    next: StoredComponent,
    events: IncidentEvent[] = [],
  ): Promise<ComponentWriteOutcome> {
    const k = this.keys;
    const prevJson = JSON.stringify(prev);
    const change = new Change(this.redis).expect(k.component(prev.id), prevJson);
    const oldName = componentNameKey(prev.name);
    const newName = componentNameKey(next.name);
    if (newName !== oldName) {
      change
        .expectHashField(k.componentNames(), newName, null)
        .write('HDEL', k.componentNames(), oldName)
        .write('HSET', k.componentNames(), newName, next.id);
    }
    change.write('SET', k.component(next.id), JSON.stringify(next));
    const to = effectiveStatus(next);
    if (effectiveStatus(prev) !== to) stageHistory(change, k, prev, next.updated_at, to);
    bumpStatusVersion(change, k);
    appendSubjectEvents(change, k, next.id, events, {
      list: k.componentEvents(next.id),
      resource: componentWire(next),
    });
    if (await change.commit()) return { ok: true };
    if ((await this.redis.get(k.component(prev.id))) !== prevJson) return { ok: false, reason: 'conflict' };
    return { ok: false, reason: 'name_taken' };
  }

  /**
   * Deletes `prev` unless something impacts it (an open incident, an active maintenance): the
   * record's compare-and-set makes the check and the delete one step.
   */
  async delete(prev: StoredComponent): Promise<ComponentWriteOutcome> {
    const sourceIds = Object.keys(prev.impacts);
    if (sourceIds.length > 0) return { ok: false, reason: 'in_use', sourceIds };
    const k = this.keys;
    const change = new Change(this.redis)
      .expect(k.component(prev.id), JSON.stringify(prev))
      .write('DEL', k.component(prev.id))
      .write('DEL', k.componentHistory(prev.id))
      .write('DEL', k.componentEvents(prev.id))
      .write('HDEL', k.componentNames(), componentNameKey(prev.name))
      .write('ZREM', k.components(), prev.id)
      .write('HINCRBY', k.componentCount(), 'n', -1);
    bumpStatusVersion(change, k);
    return (await change.commit()) ? { ok: true } : { ok: false, reason: 'conflict' };
  }
}

/** Page order: ungrouped first, then by group name, position, name, id. */
export function pageOrder(a: StoredComponent, b: StoredComponent): number {
  const ga = a.group ?? '';
  const gb = b.group ?? '';
  if (ga !== gb) return ga < gb ? -1 : 1;
  if (a.position !== b.position) return a.position - b.position;
  if (a.name !== b.name) return a.name < b.name ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/** Per component, its history since `sinceMs` (oldest first) with the latest change before it. */
async function readHistory(redis: Redis, keys: Keys, ids: string[], sinceMs: number): Promise<PublicStatusChange[][]> {
  if (ids.length === 0) return [];
  const pipeline = redis.pipeline();
  for (const id of ids) {
    pipeline.zrevrangebyscore(keys.componentHistory(id), `(${sinceMs}`, '-inf', 'LIMIT', 0, 1);
    pipeline.zrangebyscore(keys.componentHistory(id), sinceMs, '+inf');
  }
  const results = (await pipeline.exec()) ?? [];
  return ids.map((_, i) => {
    const [e1, before] = results[2 * i] ?? [null, []];
    const [e2, since] = results[2 * i + 1] ?? [null, []];
    if (e1) throw e1;
    if (e2) throw e2;
    return [...(before as string[]), ...(since as string[])].map((m) => JSON.parse(m) as PublicStatusChange);
  });
}

/**
 * For the page: every component with show_on_status_page, in page order, mapped to
 * PublicComponent with its effective status history over PUBLIC_HISTORY_MS (and the change
 * before it, so the status at the window's start is known).
 */
export async function loadPublicComponents(redis: Redis, keys: Keys, nowMs: number): Promise<PublicComponent[]> {
  const all = await new RedisComponentRepo(redis, keys).listAll();
  const shown = all.filter((c) => c.show_on_status_page);
  const histories = await readHistory(
    redis,
    keys,
    shown.map((c) => c.id),
    nowMs - PUBLIC_HISTORY_MS,
  );
  return shown.map((c, i) => ({
    id: c.id,
    name: c.name,
    description: c.description,
    group: c.group,
    position: c.position,
    status: effectiveStatus(c),
    created_at: c.created_at,
    updated_at: c.updated_at,
    history: histories[i] ?? [],
  }));
}
