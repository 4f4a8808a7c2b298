import type { StoredEvent } from './catalog.js';
import type { EventFacts } from './endpoint.js';

/**
 * What an event tells an endpoint's filter (docs/events.md, "Registering an endpoint"): its
 * incident's severity and components, the components it is about, the audiences it went to. Pure:
 * what the event does not carry is looked up by the dispatcher (`EventLookups`) beforehand.
 */

/** An incident as the filters see it (its current record, for events that carry no snapshot). */
export interface IncidentFacts {
  severity: string;
  component_ids: string[];
}

export interface EventLookups {
  incidents: ReadonlyMap<string, IncidentFacts>;
  /** Audience keys by execution id (its audiences) and by delivery id (its audience). */
  audiences: ReadonlyMap<string, readonly string[]>;
}

/** Which filter lists any endpoint uses: facts no filter asks for are not worked out. */
export interface FactsWanted {
  severity: boolean;
  components: boolean;
  audiences: boolean;
}

/** What has to be read for `e` (beyond the event itself). */
export interface LookupsNeeded {
  incident: string | null;
  execution: string | null;
  delivery: string | null;
}

type Data = Record<string, unknown>;

export function eventData(e: StoredEvent): Data {
  return (JSON.parse(e.event) as { data?: Data }).data ?? {};
}

/** The incident snapshot an incident event carries (the record as of the change). */
const incidentSnapshot = (e: StoredEvent): Data | null =>
  e.type.startsWith('incident.') && e.resource !== undefined ? e.resource : null;

/** Ids out of a list of ids or of records with an `id` (or `key`) field. */
function idsIn(value: unknown, field: 'id' | 'key'): string[] {
  if (!Array.isArray(value)) return [];
  return value.flatMap((v: unknown) => {
    if (typeof v === 'string') return [v];
    const id = (v as Record<string, unknown> | null)?.[field];
    return typeof id === 'string' ? [id] : [];
  });
}

/** Audience keys the event carries itself: an approval's audience, an execution's audiences, a delivery's. */
function carriedAudiences(e: StoredEvent, data: Data): string[] | null {
  if (typeof data.audience === 'string') return [data.audience];
  if (Array.isArray(e.resource?.audiences)) return idsIn(e.resource.audiences, 'key');
  if (e.type === 'delivery.failed' && e.resource !== undefined)
    return typeof e.resource.audience === 'string' ? [e.resource.audience] : [];
  return null;
}

export function lookupsNeeded(e: StoredEvent, data: Data, wanted: FactsWanted): LookupsNeeded {
  const incident =
    (wanted.severity || wanted.components) && e.incident_id !== null && incidentSnapshot(e) === null
      ? e.incident_id
      : null;
  const audiences = wanted.audiences && carriedAudiences(e, data) === null;
  return {
    incident,
    delivery: audiences && typeof data.delivery_id === 'string' ? data.delivery_id : null,
    execution:
      audiences && typeof data.delivery_id !== 'string' && typeof data.execution_id === 'string'
        ? data.execution_id
        : null,
  };
}

export function factsOf(e: StoredEvent, data: Data, lookups: EventLookups): EventFacts {
  const snapshot = incidentSnapshot(e);
  const incident: IncidentFacts | undefined =
    snapshot !== null
      ? { severity: String(snapshot.severity), component_ids: idsIn(snapshot.components, 'id') }
      : e.incident_id !== null
        ? lookups.incidents.get(e.incident_id)
        : undefined;
  const components = new Set(incident?.component_ids ?? []);
  if (typeof data.component_id === 'string') components.add(data.component_id);
  if (e.type.startsWith('maintenance.')) for (const c of idsIn(e.resource?.components, 'id')) components.add(c);
  const audiences =
    carriedAudiences(e, data) ??
    (typeof data.delivery_id === 'string'
      ? lookups.audiences.get(data.delivery_id)
      : typeof data.execution_id === 'string'
        ? lookups.audiences.get(data.execution_id)
        : undefined) ??
    [];
  return {
    type: e.type,
    severity: incident?.severity ?? null,
    component_ids: [...components],
    audience_keys: audiences,
  };
}
