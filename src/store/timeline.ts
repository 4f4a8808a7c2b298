import type { IncidentEvent } from '../domain/incident/incident-event.js';
import { outboxEntries, type OutboxSnapshots } from '../domain/event/outbox.js';
import type { Change } from './commit.js';
import type { Keys } from './keys.js';

/**
 * appendTimeline — the one way a change records what happened: its timeline events go on the
 * incident's timeline (`inc:<id>:events`) and the integrator events they stand for go on the event
 * outbox stream (`evt-stream`), both as writes of the same atomic Change. So no change is ever
 * without its events, and no event reports a change that was not committed (docs/events.md).
 *
 * `timeline` is what is stored on the timeline; `outbox` (default: the same) what integrators are
 * told. They differ only for an incident's creation, whose `incident.created` event is implied by
 * the record (store/incidents.ts) and so not stored, but still sent. The stream entry's fields:
 * `id` the event id, `t` its type, `i` the incident, `e` the timeline event (JSON), `r` the
 * resource as of the change (JSON, optional). The dispatcher (src/delivery/event-dispatcher.ts)
 * gives each event its per-incident `sequence` in stream order, which is commit order.
 */
export function appendTimeline(
  change: Change,
  keys: Keys,
  incidentId: string,
  timeline: readonly IncidentEvent[],
  opts: { outbox?: readonly IncidentEvent[]; snapshots?: OutboxSnapshots } = {},
): void {
  if (timeline.length > 0)
    change.write('RPUSH', keys.incidentEvents(incidentId), ...timeline.map((e) => JSON.stringify(e)));
  for (const entry of outboxEntries(incidentId, opts.outbox ?? timeline, opts.snapshots)) {
    const fields: string[] = ['id', entry.id, 't', entry.type, 'i', entry.incidentId, 'e', entry.event];
    if (entry.resource !== undefined) fields.push('r', entry.resource);
    change.write('XADD', keys.eventStream(), '*', ...fields);
  }
}
