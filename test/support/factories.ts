import type { Execution } from '../../src/domain/execution/execution.js';
import { newIncident, type Incident } from '../../src/domain/incident/incident.js';

/** A stored incident for view and announcement tests: a fresh `investigating` one, then `over`. */
export function anIncident(over: Partial<Incident> = {}): Incident {
  const base = newIncident(
    'inc_1',
    { title: 'T', severity: 'major', description: '', impact: '', template_ids: [] },
    { type: 'api_key', id: 'key_1', name: 'k' },
    '2026-11-22T10:00:00.000Z',
  );
  return { ...base, ...over };
}

/** A new execution of `incidentId` with no variables, templates or deliveries yet. */
export function anExecution(id: string, incidentId: string, createdAt: string): Execution {
  return {
    id,
    incident_id: incidentId,
    variables: {},
    created_at: createdAt,
    template_versions: {},
    delivery_ids: [],
  };
}
