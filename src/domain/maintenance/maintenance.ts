import { z } from 'zod';
import { ActorSchema, type Actor } from '../common/actor.js';
import { DomainError, emptyPatch } from '../common/errors.js';
import type { FieldError } from '../common/errors.js';
import { LIMITS } from '../common/limits.js';
import { noRepeats } from '../common/validation.js';
import { MAINTENANCE_STATES, type MaintenanceState } from '../status/public.js';

/**
 * Maintenance windows (docs/api.md, Maintenances): planned work on some components, shown on the
 * public status page. States only move forward: scheduled → in_progress → verifying → completed.
 * With `auto_transition` Herald takes the timed steps itself: a reminder `remind_before` minutes
 * before the start, the start at `scheduled_for`, the end at `scheduled_until` (verifying is a
 * manual step only). The request shapes, the record and the pure rules live here; the store makes
 * each step one compare-and-set (store/maintenances.ts), so a step is never lost nor doubled.
 */

export { MAINTENANCE_STATES, type MaintenanceState };

export const MaintenanceStateSchema = z.enum(MAINTENANCE_STATES).meta({
  id: 'MaintenanceState',
  description: '`scheduled`, `in_progress`, `verifying` or `completed`; it only ever moves forward.',
});

/** What an update on a maintenance is: written by a person, a reminder, or an automatic transition. */
export const MAINTENANCE_UPDATE_KINDS = ['update', 'reminder', 'transition'] as const;
export type MaintenanceUpdateKind = (typeof MAINTENANCE_UPDATE_KINDS)[number];

/** remind_before bounds, in minutes: one minute to one week. */
export const REMIND_BEFORE_MAX = 10_080;
/** Components one maintenance names at most (as many as an incident). */
export const MAINTENANCE_COMPONENTS_MAX = LIMITS.incidentComponents;
/** Updates one maintenance holds at most (the record is one JSON value). */
export const MAINTENANCE_UPDATES_MAX = 200;

const STATE_RANK: Record<MaintenanceState, number> = { scheduled: 0, in_progress: 1, verifying: 2, completed: 3 };

// ── request shapes ───────────────────────────────────────────────────────────────────────────

const title = z
  .string()
  .trim()
  .min(1, 'title is required.')
  .max(LIMITS.title, `title is at most ${LIMITS.title} characters.`)
  .meta({ example: 'Database upgrade' });
const body = z
  .string()
  .max(LIMITS.longText, `body is at most ${LIMITS.longText} characters.`)
  .meta({ description: 'What happens and what customers notice (plain text, shown on the public page).' });
const when = (what: string) =>
  z.iso
    .datetime({ offset: true, message: `${what} is an ISO 8601 time with a UTC offset, e.g. 2026-12-01T22:00:00Z.` })
    .meta({ example: '2026-12-01T22:00:00Z' });
const components = z
  .array(z.string().min(1).max(64).meta({ example: 'cmp_01JH3ZK6X2B8V4N0Q7R5T9W1YC' }))
  .max(MAINTENANCE_COMPONENTS_MAX, `At most ${MAINTENANCE_COMPONENTS_MAX} components.`)
  .superRefine(noRepeats((id: string) => id))
  .meta({
    description: 'Component ids; each shows `under_maintenance` while the maintenance is in progress or verifying.',
  });
const remindBefore = z
  .int('remind_before is a whole number of minutes.')
  .min(1, 'remind_before is at least 1 minute.')
  .max(REMIND_BEFORE_MAX, `remind_before is at most ${REMIND_BEFORE_MAX} minutes (a week).`)
  .nullable()
  .meta({ description: 'Minutes before `scheduled_for` a reminder update is published (automatic only); null: none.' });
const autoTransition = z.boolean().meta({
  description: 'Herald starts it at `scheduled_for` and completes it at `scheduled_until` (and posts the reminder).',
});

/** scheduled_until must come after scheduled_for (both parsed; a malformed one is its own error). */
function windowIssue(forIso: string | undefined, untilIso: string | undefined): FieldError | null {
  if (forIso === undefined || untilIso === undefined) return null;
  const a = Date.parse(forIso);
  const b = Date.parse(untilIso);
  if (Number.isNaN(a) || Number.isNaN(b) || b > a) return null;
  return { field: 'scheduled_until', code: 'window_order', message: 'scheduled_until must be after scheduled_for.' };
}

export const MaintenanceCreateSchema = z
  .strictObject({
    title,
    body: body.default(''),
    components: components.default([]),
    scheduled_for: when('scheduled_for'),
    scheduled_until: when('scheduled_until'),
    remind_before: remindBefore.default(null),
    auto_transition: autoTransition.default(true),
  })
  .superRefine((m, ctx) => {
    const issue = windowIssue(m.scheduled_for, m.scheduled_until);
    if (issue)
      ctx.addIssue({
        code: 'custom',
        path: ['scheduled_until'],
        input: m.scheduled_until,
        message: issue.message,
        params: { code: issue.code },
      });
  })
  .meta({
    id: 'MaintenanceCreate',
    example: {
      title: 'Database upgrade',
      body: 'The API may answer slowly for a few minutes.',
      components: ['cmp_01JH3ZK6X2B8V4N0Q7R5T9W1YC'],
      scheduled_for: '2026-12-01T22:00:00Z',
      scheduled_until: '2026-12-01T23:00:00Z',
      remind_before: 60,
    },
  });
export type MaintenanceCreate = z.output<typeof MaintenanceCreateSchema>;

export const MaintenancePatchSchema = z
  .strictObject({
    title: title.optional(),
    body: body.optional(),
    components: components.optional(),
    scheduled_for: when('scheduled_for').optional().meta({ description: 'Only while scheduled.' }),
    scheduled_until: when('scheduled_until')
      .optional()
      .meta({ description: 'While scheduled, in progress or verifying (a window that runs long may be extended).' }),
    remind_before: remindBefore.optional(),
    auto_transition: autoTransition.optional(),
  })
  .meta({
    id: 'MaintenancePatch',
    example: { scheduled_until: '2026-12-01T23:30:00Z' },
    description: 'Fields sent replace, fields left out are kept. A completed maintenance takes no changes.',
  });
export type MaintenancePatch = z.output<typeof MaintenancePatchSchema>;

export const MaintenanceUpdateCreateSchema = z
  .strictObject({
    status: MaintenanceStateSchema.optional().meta({
      description: 'Moves the maintenance forward to this state (never back); left out: the state stays.',
    }),
    body: body.trim().min(1, 'body is required.'),
  })
  .meta({
    id: 'MaintenanceUpdateCreate',
    example: { status: 'verifying', body: 'The upgrade is done; we are checking that everything works.' },
  });
export type MaintenanceUpdateCreate = z.output<typeof MaintenanceUpdateCreateSchema>;

// ── the wire shape and the stored record ─────────────────────────────────────────────────────

export const MaintenanceUpdateSchema = z
  .object({
    id: z.string().meta({ example: 'evt_01JH3ZK6X2B8V4N0Q7R5T9W1YC' }),
    status: MaintenanceStateSchema.meta({ description: 'The state as of this update.' }),
    body: z.string(),
    kind: z.enum(MAINTENANCE_UPDATE_KINDS).meta({
      description:
        '`update` (posted by a person), `reminder` (the automatic reminder) or `transition` (an automatic step).',
    }),
    created_at: z.string(),
  })
  .meta({ id: 'MaintenanceUpdate' });
export type MaintenanceUpdate = z.infer<typeof MaintenanceUpdateSchema>;

export const MaintenanceSchema = z
  .object({
    id: z.string().meta({ example: 'mnt_01JH3ZK6X2B8V4N0Q7R5T9W1YC' }),
    title: z.string(),
    body: z.string(),
    status: MaintenanceStateSchema,
    components: z.array(z.string()),
    scheduled_for: z.string(),
    scheduled_until: z.string(),
    remind_before: z.int().nullable(),
    auto_transition: z.boolean(),
    updates: z.array(MaintenanceUpdateSchema).meta({ description: 'Oldest first.' }),
    started_at: z.string().nullable(),
    completed_at: z.string().nullable(),
    reminded_at: z.string().nullable(),
    created_at: z.string(),
    updated_at: z.string(),
    created_by: ActorSchema,
  })
  .meta({
    id: 'Maintenance',
    example: {
      id: 'mnt_01JH3ZK6X2B8V4N0Q7R5T9W1YC',
      title: 'Database upgrade',
      body: 'The API may answer slowly for a few minutes.',
      status: 'scheduled',
      components: ['cmp_01JH3ZK6X2B8V4N0Q7R5T9W1YC'],
      scheduled_for: '2026-12-01T22:00:00.000Z',
      scheduled_until: '2026-12-01T23:00:00.000Z',
      remind_before: 60,
      auto_transition: true,
      updates: [],
      started_at: null,
      completed_at: null,
      reminded_at: null,
      created_at: '2026-11-27T10:00:00.000Z',
      updated_at: '2026-11-27T10:00:00.000Z',
      created_by: { type: 'api_key', id: 'key_01JH3ZK6X2B8V4N0Q7R5T9W1YD', name: 'ops' },
    },
  });
export type MaintenanceWire = z.infer<typeof MaintenanceSchema>;

/** The stored maintenance (JSON at `mnt:<id>`): the wire shape plus `rev`, its ETag and CAS revision. */
export interface StoredMaintenance extends MaintenanceWire {
  rev: number;
}

// ── rules ────────────────────────────────────────────────────────────────────────────────────

/** While in progress or verifying, the maintenance puts its components `under_maintenance`. */
export function isActive(status: MaintenanceState): boolean {
  return status === 'in_progress' || status === 'verifying';
}

/** Forward only: a state further along than `from` (the same state is not a move). */
export function canMove(from: MaintenanceState, to: MaintenanceState): boolean {
  return STATE_RANK[to] > STATE_RANK[from];
}

const normal = (t: string): string => new Date(Date.parse(t)).toISOString();

export function newMaintenance(id: string, input: MaintenanceCreate, actor: Actor, now: string): StoredMaintenance {
  return {
    id,
    title: input.title,
    body: input.body,
    status: 'scheduled',
    components: input.components,
    scheduled_for: normal(input.scheduled_for),
    scheduled_until: normal(input.scheduled_until),
    remind_before: input.remind_before,
    auto_transition: input.auto_transition,
    updates: [],
    started_at: null,
    completed_at: null,
    reminded_at: null,
    created_at: now,
    updated_at: now,
    created_by: actor,
    rev: 1,
  };
}

function refuse(field: string, code: string, message: string): DomainError {
  return new DomainError('validation_failed', message, [{ field, code, message }]);
}

/** The fields a PATCH changed, `{field: {from, to}}` (the `maintenance.updated` event's `changes`). */
export type MaintenanceChanges = Record<string, { from: unknown; to: unknown }>;

/**
 * Applies a PATCH (the component ids are the service's check): the next record and what changed,
 * or the record itself when nothing did. A completed maintenance takes no changes; scheduled_for
 * only while scheduled. Moving the start or the reminder clears `reminded_at`: the new time gets
 * its own reminder.
 */
export function applyMaintenancePatch(
  current: StoredMaintenance,
  patch: MaintenancePatch,
  now: string,
): { next: StoredMaintenance; changes: MaintenanceChanges } {
  if (Object.keys(patch).length === 0) throw emptyPatch();
  if (current.status === 'completed')
    throw new DomainError('conflict', `Maintenance ${current.id} is completed; it takes no more changes.`);
  const next: StoredMaintenance = { ...current };
  const changes: MaintenanceChanges = {};
  const set = <K extends keyof MaintenancePatch & keyof StoredMaintenance>(
    k: K,
    v: StoredMaintenance[K] | undefined,
  ) => {
    if (v === undefined || JSON.stringify(v) === JSON.stringify(current[k])) return;
    changes[k] = { from: current[k], to: v };
    next[k] = v;
  };
  set('title', patch.title);
  set('body', patch.body);
  set('components', patch.components);
  set('scheduled_for', patch.scheduled_for === undefined ? undefined : normal(patch.scheduled_for));
  set('scheduled_until', patch.scheduled_until === undefined ? undefined : normal(patch.scheduled_until));
  set('remind_before', patch.remind_before);
  set('auto_transition', patch.auto_transition);
  if ('scheduled_for' in changes && current.status !== 'scheduled')
    throw refuse(
      'scheduled_for',
      'already_started',
      'scheduled_for can only change while the maintenance is scheduled.',
    );
  const issue = windowIssue(next.scheduled_for, next.scheduled_until);
  if (issue) throw refuse(issue.field, issue.code, issue.message);
  if (Object.keys(changes).length === 0) return { next: current, changes };
  if ('scheduled_for' in changes || 'remind_before' in changes) next.reminded_at = null;
  return { next: { ...next, rev: current.rev + 1, updated_at: now }, changes };
}

/** Moves the record to `to` (forward), stamping started_at / completed_at, with `update` appended. */
function moveTo(m: StoredMaintenance, to: MaintenanceState, update: MaintenanceUpdate, now: string): StoredMaintenance {
  const next: StoredMaintenance = {
    ...m,
    status: to,
    updates: [...m.updates, update],
    rev: m.rev + 1,
    updated_at: now,
  };
  if (to !== 'scheduled' && next.started_at === null) next.started_at = now;
  if (to === 'completed') next.completed_at = now;
  return next;
}

/**
 * A manual update (`POST /v1/maintenances/{id}/updates`): appended as kind `update`, moving the
 * state forward when `status` names a later one. The same state is allowed (a plain update); an
 * earlier one is refused (422 invalid_transition); a completed maintenance takes none (409).
 */
export function applyManualUpdate(
  m: StoredMaintenance,
  input: MaintenanceUpdateCreate,
  updateId: string,
  now: string,
): StoredMaintenance {
  if (m.status === 'completed')
    throw new DomainError('conflict', `Maintenance ${m.id} is completed; it takes no more updates.`);
  if (m.updates.length >= MAINTENANCE_UPDATES_MAX)
    throw refuse('', 'too_many', `A maintenance holds at most ${MAINTENANCE_UPDATES_MAX} updates.`);
  const to = input.status ?? m.status;
  if (to !== m.status && !canMove(m.status, to)) {
    const message = `A maintenance moves forward only (scheduled → in_progress → verifying → completed): ${m.status} cannot become ${to}.`;
    throw new DomainError('invalid_transition', message, [{ field: 'status', code: 'invalid_transition', message }]);
  }
  return moveTo(m, to, { id: updateId, status: to, body: input.body, kind: 'update', created_at: now }, now);
}

// ── the automatic steps ──────────────────────────────────────────────────────────────────────

export type StepKind = 'reminder' | 'start' | 'end';
export interface DueStep {
  kind: StepKind;
  /** When it is due (ms). */
  atMs: number;
}

/** The next automatic step of the record and when it is due; null when none lies ahead. */
export function nextStep(m: StoredMaintenance): DueStep | null {
  if (!m.auto_transition) return null;
  const start = Date.parse(m.scheduled_for);
  switch (m.status) {
    case 'scheduled':
      if (m.remind_before !== null && m.reminded_at === null)
        return { kind: 'reminder', atMs: start - m.remind_before * 60_000 };
      return { kind: 'start', atMs: start };
    case 'in_progress':
    case 'verifying':
      return { kind: 'end', atMs: Date.parse(m.scheduled_until) };
    case 'completed':
      return null;
  }
}

/**
 * The step to take at `nowMs`, or null when nothing is due. A step that is late still runs (once:
 * it changes the record it is derived from). A reminder whose start is already due is passed over
 * for the start: it would announce a start that has already happened.
 */
export function dueStep(m: StoredMaintenance, nowMs: number): DueStep | null {
  const step = nextStep(m);
  if (step === null || step.atMs > nowMs) return null;
  const start = Date.parse(m.scheduled_for);
  if (step.kind === 'reminder' && nowMs >= start) return { kind: 'start', atMs: start };
  return step;
}

/** The record after `step`, taken at `now`, with the update it publishes. */
export function applyStep(m: StoredMaintenance, step: DueStep, updateId: string, now: string): StoredMaintenance {
  const nowMs = Date.parse(now);
  switch (step.kind) {
    case 'reminder': {
      const minutes = Math.max(1, Math.round((Date.parse(m.scheduled_for) - nowMs) / 60_000));
      const text = `Reminder: this maintenance begins in ${minutes} minute${minutes === 1 ? '' : 's'}.`;
      const update: MaintenanceUpdate = {
        id: updateId,
        status: m.status,
        body: text,
        kind: 'reminder',
        created_at: now,
      };
      return { ...m, updates: [...m.updates, update], reminded_at: now, rev: m.rev + 1, updated_at: now };
    }
    case 'start':
      return moveTo(
        m,
        'in_progress',
        {
          id: updateId,
          status: 'in_progress',
          body: 'This maintenance is in progress.',
          kind: 'transition',
          created_at: now,
        },
        now,
      );
    case 'end':
      return moveTo(
        m,
        'completed',
        {
          id: updateId,
          status: 'completed',
          body: 'This maintenance has been completed.',
          kind: 'transition',
          created_at: now,
        },
        now,
      );
  }
}

/** The maintenance as the API shows it: the record without `rev` (that is the ETag). */
export function maintenanceWire(m: StoredMaintenance): MaintenanceWire {
  const { rev: _rev, ...wire } = m;
  return wire;
}
