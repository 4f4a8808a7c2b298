import { SYSTEM_ACTOR, type Actor } from '../domain/common/actor.js';
import { iso } from '../domain/common/clock.js';
import { checkRevision, DomainError, keptChanging, notFound } from '../domain/common/errors.js';
import { isId } from '../domain/common/ids.js';
import { expectCursorKind, type Page, type PageRequest } from '../domain/common/pagination.js';
import { parseInput } from '../domain/common/validation.js';
import { newEvent, type IncidentEvent } from '../domain/incident/incident-event.js';
import {
  applyManualUpdate,
  applyMaintenancePatch,
  applyStep,
  dueStep,
  MaintenanceCreateSchema,
  MaintenancePatchSchema,
  MaintenanceUpdateCreateSchema,
  newMaintenance,
  type MaintenanceState,
  type StoredMaintenance,
} from '../domain/maintenance/maintenance.js';
import type { Clock, ComponentRepo, IdGenerator, ImpactEventOf, MaintenanceRepo } from '../ports/index.js';
import type { SubscriberNotices } from '../ports/subscribers.js';
import { LOST_RACE, retryOnConflict } from './retry.js';

export interface MaintenanceServiceDeps {
  repo: MaintenanceRepo;
  /** To check the component ids a maintenance names exist. */
  components: Pick<ComponentRepo, 'getMany'>;
  clock: Clock;
  ids: IdGenerator;
  onError?: (what: string, err: unknown) => void;
  /** Tells the page's subscribers of each published update (docs/subscribers.md); absent: nobody to tell. */
  notices?: SubscriberNotices;
}

/**
 * Maintenance windows (docs/api.md, Maintenances): CRUD with ETag/If-Match, manual updates that
 * move the state forward, and `runDue`, the worker's timer. Every write is one compare-and-set
 * of the record (store/maintenances.ts) that also moves its schedule entry, its components'
 * impacts and its events; a write that lost a race reads again. So an automatic step taken by
 * two workers at once, or repeated after a crash, commits once: the second finds it taken.
 */
export class MaintenanceService {
  constructor(private readonly d: MaintenanceServiceDeps) {}

  async create(input: unknown, actor: Actor): Promise<StoredMaintenance> {
    const body = parseInput(MaintenanceCreateSchema, input);
    await this.checkComponents(body.components);
    const now = iso(this.d.clock.now());
    const m = newMaintenance(this.d.ids.next('maintenance'), body, actor, now);
    const event = newEvent(this.d.ids.next('event'), 'maintenance.created', now, actor, {
      maintenance_id: m.id,
      title: m.title,
      scheduled_for: m.scheduled_for,
      scheduled_until: m.scheduled_until,
    });
    if (!(await this.d.repo.create(m, [event]))) throw keptChanging('maintenance');
    // Its own description is its first public update (the page shows it as such).
    await this.tellSubscribers(m.id, m.id);
    return m;
  }

  async get(id: string): Promise<StoredMaintenance> {
    const m = isId('maintenance', id) ? await this.d.repo.get(id) : null;
    if (!m) throw notFound('Maintenance', id);
    return m;
  }

  list(filter: { status?: MaintenanceState[] }, page: PageRequest): Promise<Page<StoredMaintenance>> {
    return this.d.repo.list(filter, expectCursorKind(page, 'after'));
  }

  /** PATCH under If-Match: fields sent replace (see applyMaintenancePatch for what may change when). */
  async update(id: string, input: unknown, actor: Actor, ifMatch: number | null = null): Promise<StoredMaintenance> {
    const patch = parseInput(MaintenancePatchSchema, input);
    if (patch.components) await this.checkComponents(patch.components);
    return this.writeRecord(id, ifMatch, (current, now) => {
      const { next, changes } = applyMaintenancePatch(current, patch, now);
      if (next === current) return null;
      return { next, events: [this.event('maintenance.updated', now, actor, { maintenance_id: id, changes })] };
    });
  }

  /** A manual update: appended, moving the state forward when it names a later one. */
  async addUpdate(id: string, input: unknown, actor: Actor): Promise<StoredMaintenance> {
    const body = parseInput(MaintenanceUpdateCreateSchema, input);
    const record = await this.writeRecord(id, null, (current, now) => {
      const next = applyManualUpdate(current, body, this.d.ids.next('event'), now);
      const u = next.updates[next.updates.length - 1]!;
      const events = [
        this.event('maintenance.updated', now, actor, {
          maintenance_id: id,
          update: { id: u.id, kind: u.kind, status: u.status, body: u.body },
        }),
      ];
      if (next.status !== current.status) events.push(this.statusChanged(id, current.status, next.status, now, actor));
      return { next, events };
    });
    const published = record.updates[record.updates.length - 1];
    if (published) await this.tellSubscribers(id, published.id);
    return record;
  }

  /** DELETE: a scheduled maintenance only (one under way or done is history: 409). */
  async delete(id: string, actor: Actor, ifMatch: number | null = null): Promise<void> {
    await retryOnConflict(
      async () => {
        const current = await this.get(id);
        checkRevision('maintenance', current.rev, ifMatch);
        if (current.status !== 'scheduled')
          throw new DomainError(
            'conflict',
            `Maintenance ${id} is ${current.status}; only a scheduled maintenance can be deleted (complete it instead).`,
          );
        const now = iso(this.d.clock.now());
        const event = this.event('maintenance.deleted', now, actor, { maintenance_id: id });
        return (await this.d.repo.delete(current, [event])) ? true : LOST_RACE;
      },
      () => keptChanging('maintenance'),
    );
  }

  /**
   * The timer: takes every automatic step due now (a reminder, a start, an end), each as its own
   * compare-and-set. A step whose record moved meanwhile is read again and taken only if still due.
   * Answers how many steps were taken.
   */
  async runDue(limit = 50): Promise<number> {
    const ids = await this.d.repo.due(this.d.clock.now().getTime(), limit);
    let taken = 0;
    for (const id of ids) {
      try {
        // A late maintenance may owe several steps (start, then end): each one is its own commit.
        for (let i = 0; i < 3 && (await this.stepOne(id)); i++) taken++;
      } catch (err) {
        // Still in the schedule: the next run tries again.
        this.d.onError?.(`maintenance ${id}`, err);
      }
    }
    return taken;
  }

  private async stepOne(id: string): Promise<boolean> {
    // Deleted since the schedule was read (its delete took the schedule entry too): nothing to do.
    if ((await this.d.repo.get(id)) === null) return false;
    const result = await this.write(id, null, (current, now) => {
      const step = dueStep(current, Date.parse(now));
      if (step === null) return null;
      const next = applyStep(current, step, this.d.ids.next('event'), now);
      const u = next.updates[next.updates.length - 1]!;
      const events = [
        this.event('maintenance.updated', now, SYSTEM_ACTOR, {
          maintenance_id: id,
          update: { id: u.id, kind: u.kind, status: u.status, body: u.body },
        }),
      ];
      if (next.status !== current.status)
        events.push(this.statusChanged(id, current.status, next.status, now, SYSTEM_ACTOR));
      return { next, events };
    });
    const published = result.record.updates[result.record.updates.length - 1];
    if (result.changed && published) await this.tellSubscribers(id, published.id);
    return result.changed;
  }

  /**
   * Opens the subscribers' notice of a published update, after its write committed. A failure is
   * logged, not thrown: the update is public already, and failing the request (or the timer's
   * step) would make its caller repeat a write that is done — a second manual update, or a step
   * the schedule no longer holds. The notice is what may be lost then, never the maintenance.
   */
  private async tellSubscribers(maintenanceId: string, updateId: string): Promise<void> {
    if (!this.d.notices) return;
    try {
      await this.d.notices.maintenanceNotice({ maintenanceId, updateId });
    } catch (err) {
      this.d.onError?.(`subscriber notice of maintenance ${maintenanceId}`, err);
    }
  }

  private async writeRecord(id: string, ifMatch: number | null, decide: Decide): Promise<StoredMaintenance> {
    return (await this.write(id, ifMatch, decide)).record;
  }

  /**
   * The optimistic-write loop every change goes through: read, decide (`decide` answers null for
   * "nothing to do"), compare-and-set; a lost race reads again.
   */
  private write(
    id: string,
    ifMatch: number | null,
    decide: Decide,
  ): Promise<{ record: StoredMaintenance; changed: boolean }> {
    return retryOnConflict(
      async () => {
        const current = await this.get(id);
        checkRevision('maintenance', current.rev, ifMatch);
        const now = iso(this.d.clock.now());
        const decided = decide(current, now);
        if (decided === null) return { record: current, changed: false };
        const actor = decided.events[0]?.actor ?? SYSTEM_ACTOR;
        const ok = await this.d.repo.update(current, decided.next, decided.events, this.impactEvent(id, now, actor));
        return ok ? { record: decided.next, changed: true } : LOST_RACE;
      },
      () => keptChanging('maintenance'),
    );
  }

  private impactEvent(maintenanceId: string, now: string, actor: Actor): ImpactEventOf {
    return (ic) =>
      newEvent(this.d.ids.next('event'), 'component.status_changed', now, actor, {
        component_id: ic.component_id,
        from: ic.from,
        to: ic.to,
        cause: { kind: 'maintenance', id: maintenanceId },
      });
  }

  private event(
    type: 'maintenance.updated' | 'maintenance.deleted',
    now: string,
    actor: Actor,
    data: Record<string, unknown>,
  ): IncidentEvent {
    return newEvent(this.d.ids.next('event'), type, now, actor, data);
  }

  private statusChanged(id: string, from: MaintenanceState, to: MaintenanceState, now: string, actor: Actor) {
    return newEvent(this.d.ids.next('event'), 'maintenance.status_changed', now, actor, {
      maintenance_id: id,
      from,
      to,
    });
  }

  /** Every id must name a stored component: 422 unknown_component naming the first that does not. */
  private async checkComponents(ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    const valid = ids.map((id) => isId('component', id));
    const found = await this.d.components.getMany(ids.filter((_, i) => valid[i]));
    let next = 0;
    const errors = ids.flatMap((id, i) => {
      const exists = valid[i] ? found[next++] != null : false;
      return exists
        ? []
        : [{ field: `components.${i}`, code: 'unknown_component', message: `Component ${id} does not exist.` }];
    });
    if (errors.length > 0) throw new DomainError('unknown_component', errors[0]!.message, errors);
  }
}

/** What a change decides from the record as read: the next record and its events, or null (nothing to do). */
type Decide = (current: StoredMaintenance, now: string) => { next: StoredMaintenance; events: IncidentEvent[] } | null;
