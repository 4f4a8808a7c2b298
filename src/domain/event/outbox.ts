import type { IncidentEvent } from '../incident/incident-event.js';

/**
 * What the event outbox (a Redis stream, src/store/timeline.ts) holds for each integrator event:
 * the event's own id and type, the incident it belongs to, the timeline event it comes from, and
 * a snapshot of the resource as of the change (so a `full` payload shows the resource as it was
 * then, not as it is when the dispatcher gets to it).
 */
export interface OutboxEntry {
  /** The integrator event's id: also the `webhook-id` of every delivery of it. */
  id: string;
  type: string;
  incidentId: string;
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
    const resource = isExecution ? (snapshots.execution ?? snapshots.incident) : snapshots.incident;
    const base = { incidentId, event: json, ...(resource === undefined ? {} : { resource }) };
    const type: string = e.type === 'incident.executed' ? 'execution.created' : e.type;
    out.push({ id: e.id, type, ...base });
    if (e.type === 'incident.status_changed' && e.data.to === 'resolved')
      out.push({ id: `${e.id}.resolved`, type: 'incident.resolved', ...base });
  }
  return out;
}
