import type { IncidentEvent } from '../incident/incident-event.js';

/**
 * What the event outbox (a Redis stream, src/store/timeline.ts) holds for each integrator event:
 * the event's own id and type, the subject that orders it (`sequence` counts per subject), the
 * incident it belongs to if any, the timeline event it comes from, and a snapshot of the resource
 * as of the change (so a `full` payload shows the resource as it was then, not as it is when the
 * dispatcher gets to it).
 */
export interface OutboxEntry {
  /** The integrator event's id: also the `webhook-id` of every delivery of it. */
  id: string;
  type: string;
  /** What `sequence` counts per: the incident, or the component / maintenance the event is about. */
  subjectId: string;
  /** The incident the event belongs to; null for a component's or maintenance's own event. */
  incidentId: string | null;
  /** The timeline event, JSON, as stored on the timeline. */
  event: string;
  /** The resource snapshot (JSON), when the change has one. */
  resource?: string;
}

/** Snapshots a change can give its events (JSON strings, stored forms). */
export interface OutboxSnapshots {
  /** The incident as stored after the change (store/incident-record.ts form). */
  incident?: string;
  /** The execution record the change created. */
  execution?: string;
}

/**
 * The integrator events a timeline event stands for (docs/events.md, "Event catalog"):
 *   incident.executed                      → execution.created
 *   incident.status_changed to resolved    → incident.status_changed, incident.resolved
 *   every other timeline type              → itself
 * A second event's id is the timeline event's id with a suffix, so it is as stable as the first.
 */
export function outboxEntries(
  incidentId: string,
  events: readonly IncidentEvent[],
  snapshots: OutboxSnapshots = {},
): OutboxEntry[] {
  const out: OutboxEntry[] = [];
  for (const e of events) {
    const json = JSON.stringify(e);
    const isExecution =
      e.type === 'incident.executed' || e.type === 'execution.corrected' || e.type === 'execution.retracted';
    // A component change on an incident's timeline names its component in its data; the incident
    // snapshot is not the resource it is about.
    const resource = isExecution
      ? (snapshots.execution ?? snapshots.incident)
      : e.type.startsWith('component.')
        ? undefined
        : snapshots.incident;
    const base = { subjectId: incidentId, incidentId, event: json, ...(resource === undefined ? {} : { resource }) };
    const type: string = e.type === 'incident.executed' ? 'execution.created' : e.type;
    out.push({ id: e.id, type, ...base });
    if (e.type === 'incident.status_changed' && e.data.to === 'resolved')
      out.push({ id: `${e.id}.resolved`, type: 'incident.resolved', ...base });
  }
  return out;
}

/**
 * The incident an event of another subject names, if any: `data.incident_id`, or a cause
 * `{kind: 'incident', id}` (a component changed by an incident).
 */
export function incidentNamedBy(data: Record<string, unknown>): string | null {
  if (typeof data.incident_id === 'string') return data.incident_id;
  const cause = data.cause as { kind?: unknown; id?: unknown } | null | undefined;
  return cause?.kind === 'incident' && typeof cause.id === 'string' ? cause.id : null;
}

/**
 * The outbox entries of events about `subjectId` (a component, a maintenance): one each, typed as
 * on the timeline, with the resource snapshot `resource` (JSON) when given.
 */
export function subjectOutboxEntries(
  subjectId: string,
  events: readonly IncidentEvent[],
  resource?: string,
): OutboxEntry[] {
  return events.map((e) => ({
    id: e.id,
    type: e.type,
    subjectId,
    incidentId: incidentNamedBy(e.data),
    event: JSON.stringify(e),
    ...(resource === undefined ? {} : { resource }),
  }));
}
