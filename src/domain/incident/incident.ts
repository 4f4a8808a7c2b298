import { z } from 'zod';
import { ActorSchema, type Actor } from '../common/actor.js';
import { DomainError, emptyPatch, fieldError } from '../common/errors.js';
import { LIMITS } from '../common/limits.js';
import { ComponentImpactSchema, ComponentImpactsSchema, type ComponentImpacts } from '../component/component.js';

export const SEVERITIES = ['critical', 'major', 'minor', 'low'] as const;
export const OPEN_STATUSES = ['investigating', 'identified', 'monitoring'] as const;
export const STATUSES = [...OPEN_STATUSES, 'resolved', 'closed'] as const;

export const SeveritySchema = z.enum(SEVERITIES).meta({ id: 'Severity' });
export const StatusSchema = z.enum(STATUSES).meta({ id: 'IncidentStatus' });
export type Severity = z.infer<typeof SeveritySchema>;
export type IncidentStatus = z.infer<typeof StatusSchema>;

const title = z
  .string()
  .trim()
  .min(1, 'title is required.')
  .max(LIMITS.title, `title is at most ${LIMITS.title} characters.`);
const longText = (name: string) => z.string().max(LIMITS.longText, `${name} is at most ${LIMITS.longText} characters.`);
const templateIds = z
  .array(z.string().min(1).max(64))
  .max(LIMITS.templateIds, `At most ${LIMITS.templateIds} templates.`)
  .refine((ids) => new Set(ids).size === ids.length, 'template_ids must not repeat.');

export const IncidentCreateSchema = z
  .strictObject({
    title,
    severity: SeveritySchema,
    description: longText('description').default(''),
    impact: longText('impact').default(''),
    template_ids: templateIds.default([]),
    components: ComponentImpactsSchema.default([]),
  })
  .meta({ id: 'IncidentCreate' });
export type IncidentCreate = z.infer<typeof IncidentCreateSchema>;

export const IncidentPatchSchema = z
  .strictObject({
    title: title.optional(),
    severity: SeveritySchema.optional(),
    description: longText('description').optional(),
    impact: longText('impact').optional(),
    template_ids: templateIds.optional(),
    components: ComponentImpactsSchema.optional(),
    status: StatusSchema.optional(),
    resolution_summary: longText('resolution_summary').nullable().optional(),
  })
  .meta({ id: 'IncidentPatch' });
export type IncidentPatch = z.infer<typeof IncidentPatchSchema>;

export const IncidentCloseSchema = z
  .strictObject({ resolution_summary: longText('resolution_summary').optional() })
  .meta({ id: 'IncidentClose' });
export type IncidentClose = z.infer<typeof IncidentCloseSchema>;

export const IncidentSchema = z
  .object({
    id: z.string(),
    title: z.string(),
    severity: SeveritySchema,
    status: StatusSchema,
    description: z.string(),
    impact: z.string(),
    template_ids: z.array(z.string()),
    components: z.array(ComponentImpactSchema).meta({
      description:
        'Components this incident affects and the status each shows while the incident is open (investigating, identified, monitoring).',
    }),
    resolution_summary: z.string().nullable(),
    created_at: z.string(),
    updated_at: z.string(),
    resolved_at: z.string().nullable(),
    closed_at: z.string().nullable(),
    last_executed_at: z.string().nullable(),
    next_update_due_at: z.string().nullable().meta({
      description:
        "When the next update is due (set by execute's `next_update_in`, cleared by an execute without it, by resolve and by close); Herald reminds once it has passed.",
    }),
    execution_count: z.number().int(),
    created_by: ActorSchema,
  })
  .meta({ id: 'Incident' });

/**
 * The stored incident: the wire shape plus a revision that backs ETag and compare-and-set, and
 * the update cadence's bookkeeping (src/domain/incident/update-cadence.ts), absent when unused.
 */
export type Incident = Omit<z.infer<typeof IncidentSchema>, 'components'> & {
  /** Read records always have it (the store fills in `[]`); records built elsewhere may not. */
  components?: ComponentImpacts;
  rev: number;
} & CadenceState;

/** The incident's affected components (`[]` for a record from before they existed). */
export const componentsOf = (incident: Pick<Incident, 'components'>): ComponentImpacts => incident.components ?? [];

export type CadenceState = {
  /** When the next overdue reminder is due (mirrored by the store's reminder schedule). */
  next_reminder_at?: string | null;
  /** Reminders sent since `next_update_due_at` was set. */
  update_reminders?: number;
  /** Who made the last execute: the person a reminder names. */
  last_executed_by?: Actor | null;
};

export const isOpen = (s: IncidentStatus): boolean => (OPEN_STATUSES as readonly string[]).includes(s);

export function newIncident(
  id: string,
  input: Omit<IncidentCreate, 'components'> & { components?: ComponentImpacts },
  actor: Actor,
  now: string,
): Incident {
  return {
    id,
    title: input.title,
    severity: input.severity,
    status: 'investigating',
    description: input.description,
    impact: input.impact,
    template_ids: input.template_ids,
    components: input.components ?? [],
    resolution_summary: null,
    created_at: now,
    updated_at: now,
    resolved_at: null,
    closed_at: null,
    last_executed_at: null,
    next_update_due_at: null,
    execution_count: 0,
    created_by: actor,
    rev: 1,
  };
}

/** Closed is terminal: no write of any kind (docs/api.md "Incident states"). */
export const isWritable = (incident: Pick<Incident, 'status'>): boolean => incident.status !== 'closed';

export function assertWritable(incident: Incident): void {
  if (!isWritable(incident)) {
    throw new DomainError('incident_closed', `Incident ${incident.id} is closed; closed incidents cannot change.`);
  }
}

export type FieldChanges = Record<string, { from: unknown; to: unknown }>;

export interface PatchOutcome {
  next: Incident;
  /** Changed detail fields (everything but status), for `incident.updated`. */
  changes: FieldChanges;
  /** The status move, for `incident.status_changed`, when there is one. */
  statusChange: { from: IncidentStatus; to: IncidentStatus } | null;
}

/**
 * Applies a PATCH under the state machine of docs/api.md "Incident states". Setting a value the incident already has is
 * not a change: an all-no-op patch returns the incident untouched (same updated_at, no events).
 */
export function applyPatch(incident: Incident, patch: IncidentPatch, now: string): PatchOutcome {
  assertWritable(incident);
  if (Object.keys(patch).length === 0) {
    throw emptyPatch();
  }
  if (patch.status === 'closed') {
    throw fieldError('use_close_endpoint', 'status', 'Close an incident with POST /v1/incidents/{id}/close.');
  }
  const next: Incident = { ...incident };
  const changes: FieldChanges = {};
  for (const field of ['title', 'severity', 'description', 'impact', 'resolution_summary'] as const) {
    const value = patch[field];
    if (value === undefined || value === incident[field]) continue;
    changes[field] = { from: incident[field], to: value };
    Object.assign(next, { [field]: value });
  }
  if (patch.template_ids !== undefined && !sameList(patch.template_ids, incident.template_ids)) {
    changes.template_ids = { from: incident.template_ids, to: patch.template_ids };
    next.template_ids = patch.template_ids;
  }
  if (patch.components !== undefined && !sameImpacts(patch.components, componentsOf(incident))) {
    changes.components = { from: componentsOf(incident), to: patch.components };
    next.components = patch.components;
  }
  let statusChange: PatchOutcome['statusChange'] = null;
  if (patch.status !== undefined && patch.status !== incident.status) {
    statusChange = { from: incident.status, to: patch.status };
    next.status = patch.status;
    // Entering resolved stamps the time; reopening from resolved clears it (docs/api.md "Incident states").
    next.resolved_at = patch.status === 'resolved' ? now : null;
    // A resolved incident owes no more updates: its reminders stop.
    if (patch.status === 'resolved') {
      const stopped = withoutUpdateDue(next);
      return finishPatch(incident, stopped, changes, statusChange, now);
    }
  }
  return finishPatch(incident, next, changes, statusChange, now);
}

function finishPatch(
  incident: Incident,
  next: Incident,
  changes: FieldChanges,
  statusChange: PatchOutcome['statusChange'],
  now: string,
): PatchOutcome {
  if (statusChange === null && Object.keys(changes).length === 0) return { next: incident, changes, statusChange };
  next.updated_at = now;
  next.rev = incident.rev + 1;
  return { next, changes, statusChange };
}

/**
 * Closes an incident (terminal). An incident closed without having been resolved gets
 * `resolved_at` = the close time, so time-to-resolve is always measurable.
 */
export function closeIncident(incident: Incident, input: IncidentClose, now: string): Incident {
  assertWritable(incident);
  return {
    ...withoutUpdateDue(incident),
    status: 'closed',
    resolution_summary: input.resolution_summary ?? incident.resolution_summary,
    resolved_at: incident.resolved_at ?? now,
    closed_at: now,
    updated_at: now,
    rev: incident.rev + 1,
  };
}

/** The incident owing no update (resolve, close): no due time, no reminder scheduled. */
export function withoutUpdateDue(incident: Incident): Incident {
  const { next_reminder_at: _at, update_reminders: _sent, ...rest } = incident;
  return { ...rest, next_update_due_at: null };
}

function sameImpacts(a: ComponentImpacts, b: ComponentImpacts): boolean {
  return a.length === b.length && a.every((c, i) => c.id === b[i]!.id && c.status === b[i]!.status);
}

/**
 * What the incident makes each component show: while open, the status it names for each of its
 * components; resolved or closed, nothing (null: no impact).
 */
export function incidentImpactOf(incident: Pick<Incident, 'status' | 'components'>, componentId: string) {
  if (!isOpen(incident.status)) return null;
  return componentsOf(incident).find((c) => c.id === componentId)?.status ?? null;
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}
