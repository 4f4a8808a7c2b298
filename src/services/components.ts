import type { Actor } from '../domain/common/actor.js';
import { iso } from '../domain/common/clock.js';
import { checkRevision, DomainError, keptChanging, notFound } from '../domain/common/errors.js';
import { isId } from '../domain/common/ids.js';
import { LIMITS } from '../domain/common/limits.js';
import { expectCursorKind, type Page, type PageRequest } from '../domain/common/pagination.js';
import { parseInput } from '../domain/common/validation.js';
import {
  applyComponentPatch,
  ComponentCreateSchema,
  ComponentPatchSchema,
  componentInUse,
  effectiveStatus,
  newComponent,
  type StoredComponent,
} from '../domain/component/component.js';
import { newEvent, type IncidentEvent } from '../domain/incident/incident-event.js';
import type { Clock, ComponentRepo, IdGenerator, MaintenanceRepo } from '../ports/index.js';
import { LOST_RACE, retryOnConflict } from './retry.js';

export interface ComponentServiceDeps {
  repo: ComponentRepo;
  clock: Clock;
  ids: IdGenerator;
  /**
   * The maintenances not completed that name this component (a scheduled one names it before it
   * impacts it). Absent: none exist here.
   */
  maintenancesNaming?: (componentId: string) => Promise<string[]>;
}

/**
 * Components (docs/api.md, Components): CRUD with names unique ignoring case, ETag/If-Match on
 * the revision, a delete refused while an open incident or an active maintenance impacts the
 * component, and the component's own timeline: a `component.status_changed` event (cause
 * `manual`) whenever a PATCH changes what it shows.
 */
export class ComponentService {
  constructor(private readonly d: ComponentServiceDeps) {}

  async create(input: unknown): Promise<StoredComponent> {
    const body = parseInput(ComponentCreateSchema, input);
    const id = this.d.ids.next('component');
    const now = iso(this.d.clock.now());
    return retryOnConflict(
      async () => {
        // Default position: after the last one of its group.
        const all = body.position === undefined ? await this.d.repo.listAll() : [];
        const last = all.filter((c) => c.group === body.group).reduce((m, c) => Math.max(m, c.position), -1);
        const component = newComponent(id, body, Math.min(last + 1, LIMITS.componentPosition), now);
        const outcome = await this.d.repo.create(component);
        if (outcome.ok) return component;
        if (outcome.reason === 'name_taken') throw nameTaken(component.name);
        if (outcome.reason === 'too_many') {
          const message = `Herald holds at most ${LIMITS.components} components; delete one first.`;
          throw new DomainError('validation_failed', message, [{ field: '', code: 'too_many', message }]);
        }
        return LOST_RACE;
      },
      () => keptChanging('component'),
    );
  }

  async get(id: string): Promise<StoredComponent> {
    const component = isId('component', id) ? await this.d.repo.get(id) : null;
    if (!component) throw notFound('Component', id);
    return component;
  }

  /** By id, in order; null where none exists (malformed ids included). */
  async getMany(ids: string[]): Promise<(StoredComponent | null)[]> {
    const valid = ids.map((id) => isId('component', id));
    const found = await this.d.repo.getMany(ids.filter((_, i) => valid[i]));
    let next = 0;
    return ids.map((_, i) => (valid[i] ? (found[next++] ?? null) : null));
  }

  list(page: PageRequest): Promise<Page<StoredComponent>> {
    return this.d.repo.list(expectCursorKind(page, 'after'));
  }

  /** Every component, in page order. */
  listAll(): Promise<StoredComponent[]> {
    return this.d.repo.listAll();
  }

  /** The component's own timeline (manual changes), oldest first. */
  async events(id: string, page: PageRequest): Promise<Page<IncidentEvent>> {
    await this.get(id);
    return this.d.repo.events(id, expectCursorKind(page, 'offset'));
  }

  /**
   * PATCH: fields sent replace; `status` sets the manual status. `ifMatch` is the revision the
   * caller saw (an incident or maintenance changing the impacts moves it too); stale: 412.
   */
  async update(id: string, input: unknown, actor: Actor, ifMatch: number | null = null): Promise<StoredComponent> {
    return retryOnConflict(
      async () => {
        const current = await this.get(id);
        checkRevision('component', current.rev, ifMatch);
        const patch = parseInput(ComponentPatchSchema, input);
        const now = iso(this.d.clock.now());
        const next = applyComponentPatch(current, patch, now);
        if (next === current) return current;
        const from = effectiveStatus(current);
        const to = effectiveStatus(next);
        const events =
          from === to
            ? []
            : [
                newEvent(this.d.ids.next('event'), 'component.status_changed', now, actor, {
                  component_id: id,
                  from,
                  to,
                  cause: { kind: 'manual', id: null },
                }),
              ];
        const outcome = await this.d.repo.update(current, next, events);
        if (outcome.ok) return next;
        if (outcome.reason === 'name_taken') throw nameTaken(next.name);
        return LOST_RACE;
      },
      () => keptChanging('component'),
    );
  }

  /**
   * DELETE: refused (409 `component_in_use`, naming them) while open incidents or active
   * maintenances impact it, or a maintenance not completed names it.
   */
  async delete(id: string, ifMatch: number | null = null): Promise<void> {
    return retryOnConflict(
      async () => {
        const current = await this.get(id);
        checkRevision('component', current.rev, ifMatch);
        // Impacts are checked in the delete's own step; a maintenance that only names it yet is read here.
        const planned = (await this.d.maintenancesNaming?.(id)) ?? [];
        if (planned.length > 0) throw componentInUse(current, [...Object.keys(current.impacts), ...planned]);
        const outcome = await this.d.repo.delete(current);
        if (outcome.ok) return;
        if (outcome.reason === 'in_use') throw componentInUse(current, outcome.sourceIds);
        return LOST_RACE;
      },
      () => keptChanging('component'),
    );
  }
}

function nameTaken(name: string): DomainError {
  const message = `A component named "${name}" already exists (names are unique, ignoring case).`;
  return new DomainError('component_name_taken', message, [{ field: 'name', code: 'component_name_taken', message }]);
}

/** The maintenances not completed that name a component, from the maintenances' store. */
export async function maintenancesNaming(repo: MaintenanceRepo, componentId: string): Promise<string[]> {
  const out: string[] = [];
  let cursor: PageRequest['cursor'] = null;
  do {
    const page: Page<{ id: string; components: string[] }> = await repo.list(
      { status: ['scheduled', 'in_progress', 'verifying'] },
      { limit: 100, cursor },
    );
    for (const m of page.data) if (m.components.includes(componentId)) out.push(m.id);
    cursor = page.nextCursor;
  } while (cursor !== null);
  return out;
}
