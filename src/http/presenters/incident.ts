import type { z } from 'zod';
import type { Incident, IncidentSchema } from '../../domain/incident/incident.js';

/** Strips storage-only fields: what goes on the wire. */
export function presentIncident(i: Incident): z.infer<typeof IncidentSchema> {
  const { rev: _rev, ...wire } = i;
  return wire;
}
