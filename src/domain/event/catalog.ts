import { z } from 'zod';
import { ActorSchema, type Actor } from '../common/actor.js';
import { IncidentSchema } from '../incident/incident.js';
import { COMPONENT_STATUSES, MAINTENANCE_STATES } from '../status/public.js';

/**
 * The integrator event catalog (docs/events.md): every type, the payload each is sent with, and
 * how a stored event becomes that payload. `CATALOG_VERSION` is in every payload; a change that
 * removes or renames a field makes a new version (fields may be added within one).
 */
export const CATALOG_VERSION = 1;

export const EVENT_CATALOG_TYPES = [
  'incident.created',
  'incident.updated',
  'incident.status_changed',
  'incident.resolved',
  'incident.closed',
  'incident.update_overdue',
  'execution.created',
  'execution.completed',
  'execution.corrected',
  'execution.retracted',
  'execution.approval_requested',
  'execution.approved',
  'execution.rejected',
  'execution.approval_expired',
  'delivery.failed',
  'component.status_changed',
  'maintenance.created',
  'maintenance.updated',
  'maintenance.status_changed',
  'maintenance.deleted',
] as const;
export type EventCatalogType = (typeof EVENT_CATALOG_TYPES)[number];

/** Types about a component or a maintenance: `incident_id` is null unless an incident caused them. */
const SUBJECT_TYPES = new Set<string>(
  EVENT_CATALOG_TYPES.filter(
    (t) => !t.startsWith('incident.') && !t.startsWith('execution.') && t !== 'delivery.failed',
  ),
);
export const isSubjectEventType = (type: string): boolean => SUBJECT_TYPES.has(type);

/** `ping`: sent only by POST /v1/event-endpoints/{id}/test, never subscribed to. */
export const PING = 'ping';

// ── resources as the API shows them, as of the change ───────────────────────────────────────

const STORAGE_ONLY = new Set(['rev', 'next_reminder_at', 'update_reminders', 'last_executed_by']);

/** The incident as GET /v1/incidents/{id} answers (storage-only fields dropped). */
export function incidentResource(record: Record<string, unknown>): Record<string, unknown> {
  const wire: Record<string, unknown> = {};
  for (const k in record) if (!STORAGE_ONLY.has(k)) wire[k] = record[k];
  wire.next_update_due_at ??= null;
  return wire;
}

export const EventExecutionSchema = z
  .looseObject({
    id: z.string(),
    incident_id: z.string(),
    kind: z.string(),
    target_execution_id: z.string().nullable(),
    note: z.string().nullable(),
    variables: z.record(z.string(), z.string()),
    created_at: z.string(),
    delivery_ids: z.array(z.string()),
  })
  .meta({ id: 'EventExecution', description: 'The execution as committed (its deliveries by id).' });

/** An execution record, as an event shows it. */
export function executionResource(record: Record<string, unknown>): z.infer<typeof EventExecutionSchema> {
  return {
    id: String(record.id),
    incident_id: String(record.incident_id),
    kind: typeof record.kind === 'string' ? record.kind : 'announcement',
    target_execution_id: typeof record.target_execution_id === 'string' ? record.target_execution_id : null,
    note: typeof record.note === 'string' ? record.note : null,
    variables: (record.variables ?? {}) as Record<string, string>,
    created_at: String(record.created_at),
    delivery_ids: Array.isArray(record.delivery_ids) ? (record.delivery_ids as string[]) : [],
  };
}

export const EventDeliverySchema = z
  .looseObject({
    id: z.string(),
    execution_id: z.string(),
    connection_id: z.string(),
    connection_type: z.string(),
    status: z.string(),
    attempts: z.array(z.unknown()),
  })
  .meta({
    id: 'EventDelivery',
    description: 'The delivery receipt (as in GET …/executions/{id}), without its content.',
  });

export function deliveryResource(record: Record<string, unknown>): z.infer<typeof EventDeliverySchema> {
  return {
    id: String(record.id),
    execution_id: String(record.execution_id),
    connection_id: String(record.connection_id),
    connection_type: String(record.connection_type),
    template_id: record.template_id ?? null,
    status: String(record.status),
    attempts: Array.isArray(record.attempts) ? record.attempts : [],
    delivered_at: record.delivered_at ?? null,
  };
}

export const EventComponentSchema = z
  .looseObject({ id: z.string(), name: z.string(), status: z.enum(COMPONENT_STATUSES) })
  .meta({ id: 'EventComponent', description: 'The component as GET /v1/components/{id} answers, as of the change.' });

export const EventMaintenanceSchema = z
  .looseObject({
    id: z.string(),
    title: z.string(),
    status: z.enum(MAINTENANCE_STATES),
    components: z.array(z.string()),
    scheduled_for: z.string(),
    scheduled_until: z.string(),
  })
  .meta({
    id: 'EventMaintenance',
    description: 'The maintenance as GET /v1/maintenances/{id} answers, as of the change (deleted: as it was).',
  });

// ── payloads ─────────────────────────────────────────────────────────────────────────────────

/** An event as the store keeps it (store/event-store.ts), before it becomes a payload. */
export interface StoredEvent {
  id: string;
  type: string;
  /** Null for an event of a component or maintenance that names no incident. */
  incident_id: string | null;
  sequence: number;
  /** The timeline event (JSON): time, actor, data. */
  event: string;
  /** The resource as of the change, already decoded to plain JSON (record form). */
  resource?: Record<string, unknown> | undefined;
  /** When it was committed (ms). */
  at_ms: number;
}

export interface EventPayload {
  id: string;
  type: string;
  version: number;
  timestamp: string;
  sequence: number | null;
  incident_id: string | null;
  actor?: Actor;
  data: Record<string, unknown>;
}

/** The ids a thin payload carries, found in the event's data. */
const ID_FIELDS = [
  'execution_id',
  'delivery_id',
  'connection_id',
  'target_execution_id',
  'component_id',
  'maintenance_id',
] as const;

/** The payload of `e` as `mode` sends it. */
export function payloadOf(e: StoredEvent, mode: 'full' | 'thin'): EventPayload {
  const timeline = JSON.parse(e.event) as { at?: string; actor?: Actor; data?: Record<string, unknown> };
  const eventData = timeline.data ?? {};
  const head = {
    id: e.id,
    type: e.type,
    version: CATALOG_VERSION,
    timestamp: timeline.at ?? new Date(e.at_ms).toISOString(),
    sequence: e.sequence,
    incident_id: e.incident_id,
  };
  if (mode === 'thin') {
    const data: Record<string, unknown> = { incident_id: e.incident_id };
    for (const f of ID_FIELDS) if (typeof eventData[f] === 'string') data[f] = eventData[f];
    return { ...head, data };
  }
  const data: Record<string, unknown> = { ...eventData };
  // A component change on an incident's timeline says what caused it only by being there.
  if (e.type === 'component.status_changed' && data.cause === undefined)
    data.cause = { kind: 'incident', id: e.incident_id };
  if (e.resource !== undefined) {
    if (e.type.startsWith('incident.')) data.incident = incidentResource(e.resource);
    else if (e.type.startsWith('component.')) data.component = e.resource;
    else if (e.type.startsWith('maintenance.')) data.maintenance = e.resource;
    else if (e.type === 'delivery.failed') data.delivery = deliveryResource(e.resource);
    else if (e.type.startsWith('execution.') && 'delivery_ids' in e.resource)
      data.execution = executionResource(e.resource);
  }
  return { ...head, ...(timeline.actor ? { actor: timeline.actor } : {}), data };
}

/** The `ping` a test sends: no incident, no sequence. */
export function pingPayload(id: string, at: string, endpointId: string): EventPayload {
  return {
    id,
    type: PING,
    version: CATALOG_VERSION,
    timestamp: at,
    sequence: null,
    incident_id: null,
    data: { endpoint_id: endpointId, message: 'Herald test event: your endpoint is reachable.' },
  };
}

// ── schemas (the OpenAPI `webhooks` section; tests validate what they receive against them) ──

const ThinData = z.looseObject({
  incident_id: z.string(),
  execution_id: z.string().optional(),
  delivery_id: z.string().optional(),
});
const ThinComponentData = z.looseObject({ incident_id: z.string().nullable(), component_id: z.string() });
const ThinMaintenanceData = z.looseObject({ incident_id: z.null(), maintenance_id: z.string() });
const thinData = (type: EventCatalogType): z.ZodType =>
  type.startsWith('component.') ? ThinComponentData : type.startsWith('maintenance.') ? ThinMaintenanceData : ThinData;

const IncidentData = { incident: IncidentSchema };
const MaintenanceData = { maintenance_id: z.string(), maintenance: EventMaintenanceSchema.optional() };
const STATUS = z.string();

/** The full form of each type's `data` (the thin form is ids only). */
const FULL_DATA: Record<EventCatalogType, z.ZodType> = {
  'incident.created': z.looseObject({ title: z.string(), severity: z.string(), ...IncidentData }),
  'incident.updated': z.looseObject({
    changes: z.record(z.string(), z.object({ from: z.unknown(), to: z.unknown() })).meta({
      description: 'Each changed field, from and to.',
    }),
    ...IncidentData,
  }),
  'incident.status_changed': z.looseObject({ from: STATUS, to: STATUS, ...IncidentData }),
  'incident.resolved': z.looseObject({ from: STATUS, to: z.literal('resolved'), ...IncidentData }),
  'incident.closed': z.looseObject({ from: STATUS, resolution_summary: z.string().nullable(), ...IncidentData }),
  'incident.update_overdue': z.looseObject({ ...IncidentData }),
  'execution.created': z.looseObject({ execution_id: z.string(), execution: EventExecutionSchema.optional() }),
  'execution.completed': z.looseObject({
    execution_id: z.string(),
    delivered: z.number().int(),
    failed: z.number().int(),
    cancelled: z.number().int(),
  }),
  'execution.corrected': z.looseObject({ execution: EventExecutionSchema.optional() }),
  'execution.retracted': z.looseObject({ execution: EventExecutionSchema.optional() }),
  'execution.approval_requested': z.looseObject({}),
  'execution.approved': z.looseObject({}),
  'execution.rejected': z.looseObject({}),
  'execution.approval_expired': z.looseObject({}),
  'delivery.failed': z.looseObject({
    execution_id: z.string(),
    delivery_id: z.string(),
    connection_id: z.string(),
    error: z.string(),
    delivery: EventDeliverySchema.optional(),
  }),
  'component.status_changed': z.looseObject({
    component_id: z.string(),
    from: z.enum(COMPONENT_STATUSES),
    to: z.enum(COMPONENT_STATUSES),
    cause: z.object({ kind: z.enum(['incident', 'maintenance', 'manual']), id: z.string().nullable() }).meta({
      description: 'What changed it: an incident or a maintenance (its id), or a person (`manual`, id null).',
    }),
    component: EventComponentSchema.optional(),
  }),
  'maintenance.created': z.looseObject({ ...MaintenanceData }),
  'maintenance.updated': z.looseObject({
    ...MaintenanceData,
    changes: z
      .record(z.string(), z.object({ from: z.unknown(), to: z.unknown() }))
      .optional()
      .meta({ description: 'Each changed field, from and to (an edit).' }),
    update: z
      .looseObject({ id: z.string(), kind: z.string(), status: z.string(), body: z.string() })
      .optional()
      .meta({ description: 'The update posted (a manual update or a reminder).' }),
  }),
  'maintenance.status_changed': z.looseObject({
    ...MaintenanceData,
    from: z.enum(MAINTENANCE_STATES),
    to: z.enum(MAINTENANCE_STATES),
  }),
  'maintenance.deleted': z.looseObject({ ...MaintenanceData }),
};

const DESCRIPTIONS: Record<EventCatalogType, string> = {
  'incident.created': 'An incident was declared.',
  'incident.updated': 'Fields of an incident changed (`data.changes` names each, from and to).',
  'incident.status_changed': 'An incident moved to another status.',
  'incident.resolved': 'An incident was resolved (sent with its `incident.status_changed`).',
  'incident.closed': 'An incident was closed.',
  'incident.update_overdue': 'An incident passed its next-update time without an update.',
  'execution.created': 'An execute (announcement) was committed and its deliveries queued.',
  'execution.completed': 'Every delivery of an execution is final; counts per outcome.',
  'execution.corrected': 'An earlier execution was corrected.',
  'execution.retracted': 'An earlier execution was retracted.',
  'execution.approval_requested': 'An execution waits for approval.',
  'execution.approved': 'A held execution was approved and is being sent.',
  'execution.rejected': 'A held execution was rejected.',
  'execution.approval_expired': 'A held execution was not approved in time.',
  'delivery.failed': 'A delivery failed for good (after its retries).',
  'component.status_changed':
    "A component's effective status changed (by an incident, a maintenance or a person; `data.cause` says which).",
  'maintenance.created': 'A maintenance was scheduled.',
  'maintenance.updated': 'A maintenance was edited, or an update (or its reminder) was posted on it.',
  'maintenance.status_changed': 'A maintenance moved to another status (scheduled, in_progress, verifying, completed).',
  'maintenance.deleted': 'A scheduled maintenance was deleted.',
};

const envelope = (type: string, data: z.ZodType) =>
  z.object({
    id: z.string().meta({ description: 'The event id: also the `webhook-id`, the same on every retry and replay.' }),
    type: z.literal(type),
    version: z.literal(CATALOG_VERSION),
    timestamp: z.string().meta({ description: 'When the change was committed (ISO 8601).' }),
    sequence: z
      .number()
      .int()
      .min(1)
      .meta({
        description: isSubjectEventType(type)
          ? `The event's place among the events of its ${type.split('.')[0]} (of its incident when \`incident_id\` is set): order by it, not by arrival.`
          : "The event's place among its incident's events (1, 2, 3, …): order by it, not by arrival.",
      }),
    incident_id: isSubjectEventType(type)
      ? z.string().nullable().meta({ description: 'The incident that caused it; null when none did.' })
      : z.string(),
    actor: ActorSchema.optional().meta({ description: 'Who made the change (full payloads).' }),
    data: z.union([data, thinData(type as EventCatalogType)]),
  });

/** One zod schema per event type (and `ping`), keyed by type. */
export const EVENT_SCHEMAS: Record<string, z.ZodType> = {
  ...Object.fromEntries(
    EVENT_CATALOG_TYPES.map((t) => [t, envelope(t, FULL_DATA[t]).meta({ description: DESCRIPTIONS[t] })]),
  ),
  [PING]: z
    .object({
      id: z.string(),
      type: z.literal(PING),
      version: z.literal(CATALOG_VERSION),
      timestamp: z.string(),
      sequence: z.null(),
      incident_id: z.null(),
      data: z.object({ endpoint_id: z.string(), message: z.string() }),
    })
    .meta({ description: 'Sent by POST /v1/event-endpoints/{id}/test only.' }),
};

export const eventDescription = (type: string): string =>
  (DESCRIPTIONS as Record<string, string>)[type] ?? 'A test event.';
