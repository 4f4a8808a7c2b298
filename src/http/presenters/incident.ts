import type { z } from 'zod';
import type { Incident, IncidentSchema } from '../../domain/incident/incident.js';

type IncidentWire = z.infer<typeof IncidentSchema>;

/** Storage-only fields: never on the wire. */
const STORAGE_ONLY = new Set<string>([
  'rev',
  'next_reminder_at',
  'update_reminders',
  'last_executed_by',
] satisfies (keyof Incident)[]);

/**
 * Strips storage-only fields: what goes on the wire, in the record's field order. One copy, field
 * by field: a list presents 25 records a request, and a rest pattern plus a spread made two.
 */
export function presentIncident(i: Incident): IncidentWire {
  const record = i as unknown as Record<string, unknown>;
  const wire: Record<string, unknown> = {};
  for (const k in record) if (!STORAGE_ONLY.has(k)) wire[k] = record[k];
  // Records from before the update cadence have no due time.
  wire.next_update_due_at ??= null;
  // A record built in memory without components (a read one always has them) affects none.
  wire.components ??= [];
  return wire as IncidentWire;
}
