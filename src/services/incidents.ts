import type { Actor } from '../domain/common/actor.js';
import { iso } from '../domain/common/clock.js';
import { checkRevision, DomainError, keptChanging, notFound, type FieldError } from '../domain/common/errors.js';
import { isId } from '../domain/common/ids.js';
import { LIMITS } from '../domain/common/limits.js';
import {
  applyPatch,
  assertWritable,
  closeIncident,
  componentsOf,
  incidentImpactOf,
  IncidentCloseSchema,
  IncidentCreateSchema,
  IncidentPatchSchema,
  newIncident,
  type Incident,
} from '../domain/incident/incident.js';
import { createdEventId, newEvent, type IncidentEvent } from '../domain/incident/incident-event.js';
import { expectCursorKind, type Page, type PageRequest } from '../domain/common/pagination.js';
import { parseInput } from '../domain/common/validation.js';
import { LOST_RACE, retryOnConflict } from './retry.js';
import { effectiveStatus, withImpact, type StoredComponent } from '../domain/component/component.js';
import type { Clock, ComponentImpactWrite, IdGenerator, IncidentFilter, IncidentRepo } from '../ports/index.js';

export interface IncidentServiceDeps {
  incidents: IncidentRepo;
  /** Which of these template ids exist (kept narrow so this service needs no template repo). */
  templatesExist(ids: string[]): Promise<boolean[]>;
  /**
   * The names of the variables each template declares (null for a missing one). The templates
   * attached to one incident may declare at most 50 variables together: an execute takes at most
   * 50 values, so more could never be sent.
   */
  templateVariables(ids: string[]): Promise<(string[] | null)[]>;
  /** The components an incident names (absent: none exist, every id named is unknown). */
  components?: { getMany(ids: string[]): Promise<(StoredComponent | null)[]> };
  clock: Clock;
  ids: IdGenerator;
  /** Called after an incident is created or changes (Slack announcements hook in here). */
  onChange?: (incident: Incident, kind: 'created' | 'updated' | 'closed') => void;
}

export class IncidentService {
  constructor(private readonly d: IncidentServiceDeps) {}

  async create(input: unknown, actor: Actor): Promise<Incident> {
    const body = parseInput(IncidentCreateSchema, input);
    return retryOnConflict(
      async () => {
        await this.assertTemplatesExist(body.template_ids);
        await this.assertVariableUnion(body.template_ids);
        const now = iso(this.d.clock.now());
        const incident = newIncident(this.d.ids.next('incident'), body, actor, now);
        const created = newEvent(createdEventId(incident.id), 'incident.created', now, actor, {
          title: incident.title,
          severity: incident.severity,
        });
        const impacts = await this.impacts(null, incident, actor, now);
        const write = impacts?.write;
        if (await this.d.incidents.create(incident, [created, ...(impacts?.events ?? [])], write)) {
          this.d.onChange?.(incident, 'created');
          return incident;
        }
        return LOST_RACE;
      },
      () => keptChanging('incident'),
    );
  }

  async get(id: string): Promise<Incident> {
    const incident = isId('incident', id) ? await this.d.incidents.get(id) : null;
    if (!incident) throw notFound('Incident', id);
    return incident;
  }

  /**
   * The incident, for a change about to be asked for (a form to fill in): 404 when it does not
   * exist, `incident_closed` (409) when it is closed — what update, close and execute would answer.
   */
  async getWritable(id: string): Promise<Incident> {
    const incident = await this.get(id);
    assertWritable(incident);
    return incident;
  }

  list(filter: IncidentFilter, page: PageRequest): Promise<Page<Incident>> {
    return this.d.incidents.list(filter, expectCursorKind(page, 'after'));
  }

  /**
   * PATCH under the state machine; `ifMatch` is the revision the caller saw (from the ETag), and
   * a stale one answers 412 instead of overwriting someone else's change.
   */
  async update(id: string, input: unknown, actor: Actor, ifMatch: number | null = null): Promise<Incident> {
    return retryOnConflict(
      async () => {
        const current = await this.get(id);
        checkRevision('incident', current.rev, ifMatch);
        // Order of checks (docs/api.md): closed (409) before the body's content (422).
        if (current.status === 'closed') applyPatch(current, {}, '');
        const patch = parseInput(IncidentPatchSchema, input);
        const now = iso(this.d.clock.now());
        const { next, changes, statusChange } = applyPatch(current, patch, now);
        if (next === current) return current;
        if (patch.template_ids) {
          await this.assertTemplatesExist(patch.template_ids);
          if (!sameIds(patch.template_ids, current.template_ids)) await this.assertVariableUnion(patch.template_ids);
        }
        const events: IncidentEvent[] = [];
        if (Object.keys(changes).length > 0)
          events.push(newEvent(this.d.ids.next('event'), 'incident.updated', now, actor, { changes }));
        if (statusChange)
          events.push(newEvent(this.d.ids.next('event'), 'incident.status_changed', now, actor, { ...statusChange }));
        const impacts = await this.impacts(current, next, actor, now);
        if (impacts) events.push(...impacts.events);
        if (await this.d.incidents.update(current, next, events, impacts?.write)) {
          this.d.onChange?.(next, 'updated');
          return next;
        }
        return LOST_RACE;
      },
      () => keptChanging('incident'),
    );
  }

  async close(id: string, input: unknown, actor: Actor, ifMatch: number | null = null): Promise<Incident> {
    return retryOnConflict(
      async () => {
        const current = await this.get(id);
        checkRevision('incident', current.rev, ifMatch);
        if (current.status === 'closed') closeIncident(current, {}, '');
        const body = parseInput(IncidentCloseSchema, input ?? {});
        const now = iso(this.d.clock.now());
        const next = closeIncident(current, body, now);
        // One event for the close, whatever the state it leaves: `from` says which.
        const events: IncidentEvent[] = [
          newEvent(this.d.ids.next('event'), 'incident.closed', now, actor, {
            from: current.status,
            resolution_summary: next.resolution_summary,
          }),
        ];
        const impacts = await this.impacts(current, next, actor, now);
        if (impacts) events.push(...impacts.events);
        if (await this.d.incidents.update(current, next, events, impacts?.write)) {
          this.d.onChange?.(next, 'closed');
          return next;
        }
        return LOST_RACE;
      },
      () => keptChanging('incident'),
    );
  }

  async events(id: string, page: PageRequest): Promise<Page<IncidentEvent>> {
    await this.get(id);
    return this.d.incidents.listEvents(id, expectCursorKind(page, 'offset'));
  }

  /**
   * The component impacts of going from `prev` (null: a create) to `next`: the components whose
   * impact by this incident changes (or that it newly names: they must exist, 422
   * `unknown_component` otherwise), as read for the write's compare-and-set, and a
   * `component.status_changed` timeline event per effective status change. Null when nothing
   * about the incident's components changes. A component it named before and that was deleted
   * since (while the incident was resolved) is left out.
   */
  private async impacts(
    prev: Incident | null,
    next: Incident,
    actor: Actor,
    now: string,
  ): Promise<{ write: ComponentImpactWrite; events: IncidentEvent[] } | null> {
    const before = prev === null ? [] : componentsOf(prev);
    const after = componentsOf(next);
    const ids = [...new Set([...before, ...after].map((c) => c.id))];
    if (ids.length === 0) return null;
    const added = new Set(after.filter((c) => !before.some((b) => b.id === c.id)).map((c) => c.id));
    const valid = ids.map((id) => isId('component', id));
    const read = this.d.components ? await this.d.components.getMany(ids.filter((_, i) => valid[i])) : [];
    let at = 0;
    const records = ids.map((_, i) => (valid[i] ? (read[at++] ?? null) : null));
    const errors: FieldError[] = [];
    after.forEach((c, i) => {
      if (added.has(c.id) && records[ids.indexOf(c.id)] === null)
        errors.push({
          field: `components.${i}.id`,
          code: 'unknown_component',
          message: `Component ${c.id} does not exist.`,
        });
    });
    if (errors.length > 0)
      throw new DomainError('unknown_component', 'Some components do not exist; see errors.', errors);
    const status = (c: StoredComponent) => incidentImpactOf(next, c.id);
    const current: StoredComponent[] = [];
    const events: IncidentEvent[] = [];
    for (const c of records) {
      if (c === null) continue;
      const moved = withImpact(c, next.id, status(c), now);
      if (moved === c && !added.has(c.id)) continue;
      current.push(c);
      const [from, to] = [effectiveStatus(c), effectiveStatus(moved)];
      if (from !== to)
        events.push(
          newEvent(this.d.ids.next('event'), 'component.status_changed', now, actor, { component_id: c.id, from, to }),
        );
    }
    return current.length === 0 ? null : { write: { current, status, at: now }, events };
  }

  private async assertTemplatesExist(ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    const exist = await this.d.templatesExist(ids);
    const errors: FieldError[] = [];
    ids.forEach((tid, i) => {
      if (!exist[i])
        errors.push({
          field: `template_ids.${i}`,
          code: 'unknown_template',
          message: `Template ${tid} does not exist.`,
        });
    });
    if (errors.length > 0) throw new DomainError('unknown_template', 'Some template_ids do not exist.', errors);
  }

  /** The templates' variables together (one per name) are within what one execute can take. */
  private async assertVariableUnion(ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    const names = new Set((await this.d.templateVariables(ids)).flatMap((v) => v ?? []));
    if (names.size <= LIMITS.variables) return;
    const message = `These templates declare ${names.size} different variables together; an execute takes at most ${LIMITS.variables}. Attach fewer templates, or share variable names between them.`;
    throw new DomainError('validation_failed', message, [
      { field: 'template_ids', code: 'too_many_variables', message },
    ]);
  }
}

/** The same templates in any order: re-sending the current list changes nothing and is not refused. */
function sameIds(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && [...a].sort().join('\n') === [...b].sort().join('\n');
}
