import type { IncidentEvent } from '../domain/incident/incident-event.js';
import { outboxEntries, subjectOutboxEntries, type OutboxEntry, type OutboxSnapshots } from '../domain/event/outbox.js';
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
 * `id` the event id, `t` its type, `i` the incident (absent when none), `s` the subject when it is
 * not the incident, `e` the timeline event (JSON), `r` the resource as of the change (JSON,
 * optional). The dispatcher (src/delivery/event-dispatcher.ts) gives each event its per-subject
 * `sequence` in stream order, which is commit order.
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
  writeOutbox(change, keys, outboxEntries(incidentId, opts.outbox ?? timeline, opts.snapshots));
}

/**
 * Events about something that is not an incident (a component, a maintenance), into the same
 * outbox stream in the same Change. `subjectId` orders them (`sequence` per subject). An event
 * whose data names an incident (`incident_id`, or `cause: {kind: 'incident', id}`) carries it as
 * its `incident_id`; the others carry null.
 *
 * `opts.list`: a timeline list key the events are RPUSHed to as well (the subject's own timeline).
 * `opts.resource`: the subject as the API shows it after the change (for `deleted`: as it was),
 * sent as `data.component` / `data.maintenance` in full payloads (docs/events.md).
 */
export function appendSubjectEvents(
  change: Change,
  keys: Keys,
  subjectId: string,
  events: readonly IncidentEvent[],
  opts: { list?: string; resource?: unknown } = {},
): void {
  if (events.length === 0) return;
  if (opts.list !== undefined) change.write('RPUSH', opts.list, ...events.map((e) => JSON.stringify(e)));
  const resource = opts.resource === undefined ? undefined : JSON.stringify(opts.resource);
  writeOutbox(change, keys, subjectOutboxEntries(subjectId, events, resource));
}

function writeOutbox(change: Change, keys: Keys, entries: readonly OutboxEntry[]): void {
  for (const entry of entries) {
    const fields: string[] = ['id', entry.id, 't', entry.type];
    if (entry.incidentId !== null) fields.push('i', entry.incidentId);
    if (entry.subjectId !== entry.incidentId) fields.push('s', entry.subjectId);
    fields.push('e', entry.event);
    if (entry.resource !== undefined) fields.push('r', entry.resource);
    change.write('XADD', keys.eventStream(), '*', ...fields);
  }
}
