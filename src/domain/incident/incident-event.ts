import { z } from 'zod';
import { ActorSchema, type Actor } from '../common/actor.js';
import { ID_PREFIX } from '../common/ids.js';

export const EVENT_TYPES = [
  'incident.created',
  'incident.updated',
  'incident.status_changed',
  'incident.executed',
  'delivery.failed',
  'incident.closed',
  'execution.corrected',
  'execution.retracted',
  'incident.update_overdue',
  'execution.approval_requested',
  'execution.approved',
  'execution.rejected',
  'execution.approval_expired',
  // Events of other subjects (a component, a maintenance), stored on their own timelines and sent
  // through the same outbox (store/timeline.ts, appendSubjectEvents).
  'component.status_changed',
  'maintenance.created',
  'maintenance.updated',
  'maintenance.status_changed',
  'maintenance.deleted',
] as const;

export const IncidentEventSchema = z
  .object({
    id: z.string(),
    type: z.enum(EVENT_TYPES),
    at: z.string(),
    actor: ActorSchema,
    data: z.record(z.string(), z.unknown()),
  })
  .meta({ id: 'IncidentEvent', description: 'One entry of an incident timeline (oldest first).' });

export type IncidentEvent = z.infer<typeof IncidentEventSchema>;
export type IncidentEventType = IncidentEvent['type'];

export function newEvent(
  id: string,
  type: IncidentEventType,
  at: string,
  actor: Actor,
  data: Record<string, unknown> = {},
): IncidentEvent {
  return { id, type, at, actor, data };
}

/**
 * The id of an incident's `incident.created` event: the incident's own ULID under the event
 * prefix. Derived rather than drawn, so the store can keep that event implied by the record
 * (src/store/incidents.ts) instead of writing it; still unique among events, and sorted by time.
 */
export function createdEventId(incidentId: string): string {
  return `${ID_PREFIX.event}_${incidentId.slice(incidentId.indexOf('_') + 1)}`;
}
