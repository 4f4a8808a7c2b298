import type { z } from 'zod';
import type { Incident, IncidentSchema } from '../../domain/incident/incident.js';

/** Strips storage-only fields: what goes on the wire. */
export function presentIncident(i: Incident): z.infer<typeof IncidentSchema> {
  const { rev: _rev, next_reminder_at: _n, update_reminders: _u, last_executed_by: _l, ...wire } = i;
  // Records from before the update cadence have no due time.
  return { ...wire, next_update_due_at: wire.next_update_due_at ?? null };
}
