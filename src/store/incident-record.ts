import type { Incident } from '../domain/incident/incident.js';
import { rememberText, storedText } from './stored-text.js';

/**
 * The stored form of an incident: a JSON array of its fields by position, without the id (it is
 * in the key, `inc:<id>`) and with its times as milliseconds. Most of an incident is its
 * description; what is left is field names and ISO times, and dropping them brings a closed
 * incident with a 500-character description from 966 bytes to about 730, one allocation class of
 * Redis' below (768 bytes instead of 1,024), which is a quarter of what an incident costs Redis
 * (docs/scaling.md).
 *
 *   position  field                    stored as
 *   0–7       title, severity, status, description, impact, template_ids, components,
 *             resolution_summary       their values
 *   8         created_at               ms since the epoch
 *   9–13      updated_at, resolved_at, closed_at, last_executed_at, next_update_due_at
 *                                      ms after created_at (null when unset)
 *   14        execution_count
 *   15        created_by               [type, id, name]
 *   16        rev
 *   17        anything else (the update cadence's bookkeeping, unset: absent), by name; the
 *             position is absent when there is nothing
 *
 * A time that does not read back as the same string (not the canonical ISO form of a millisecond)
 * is stored as that string, as is every time after a created_at stored so.
 *
 * Records written before this form are JSON objects (every field by name, or only those that do
 * not hold their default: see DEFAULTS) and read the same way. An update compares against the
 * string that was read (see `storedString`), never a re-encoding, and writes this form.
 */
/** The wire order of an incident's fields: every decoded record has them in this order. */
export const ORDER = [
  'id',
  'title',
  'severity',
  'status',
  'description',
  'impact',
  'template_ids',
  'components',
  'resolution_summary',
  'created_at',
  'updated_at',
  'resolved_at',
  'closed_at',
  'last_executed_at',
  'next_update_due_at',
  'execution_count',
  'created_by',
  'rev',
] as const satisfies readonly (keyof Incident)[];

type Field = (typeof ORDER)[number];
type Stored = Partial<Record<Field, unknown>> & Record<string, unknown>;

/** The value a field holds when an object-form record leaves it out. */
export const DEFAULTS: Partial<Record<Field, (i: Stored) => unknown>> = {
  status: () => 'investigating',
  impact: () => '',
  template_ids: () => [],
  components: () => [],
  resolution_summary: () => null,
  updated_at: (i) => i.created_at,
  resolved_at: () => null,
  closed_at: () => null,
  last_executed_at: () => null,
  next_update_due_at: () => null,
  execution_count: () => 0,
  rev: () => 1,
};

/** Storage-only cadence fields and their unset value (they are not on the wire, so have no place in ORDER). */
const CADENCE_UNSET: Record<string, unknown> = { next_reminder_at: null, update_reminders: 0, last_executed_by: null };

/** The millisecond `at` names, when `at` is its canonical ISO form; else null. */
function msOf(at: string): number | null {
  const ms = Date.parse(at);
  return Number.isFinite(ms) && new Date(ms).toISOString() === at ? ms : null;
}

/**
 * A time stored as milliseconds after the creation (`created`, the ms of `createdAt`), when both
 * are in canonical ISO form; else as it is.
 */
function afterCreated(at: string | null | undefined, createdAt: string, created: number | null): unknown {
  if (at === null || at === undefined) return null;
  if (created === null) return at;
  // An incident's first update time is its creation time: no need to parse it again.
  if (at === createdAt) return 0;
  const ms = msOf(at);
  return ms === null ? at : ms - created;
}

/** The fields with a place in the array form (id: the key); the rest goes to its last position. */
const PLACED = new Set<string>(ORDER);

/** The string stored for `incident`. */
export function encodeIncident(incident: Incident): string {
  const created = msOf(incident.created_at);
  const by = incident.created_by;
  const rest: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(incident)) {
    if (PLACED.has(k) || v === undefined) continue;
    // The cadence bookkeeping, unset: absent reads the same.
    if (k in CADENCE_UNSET && v === CADENCE_UNSET[k]) continue;
    rest[k] = v;
  }
  const a: unknown[] = [
    incident.title,
    incident.severity,
    incident.status,
    incident.description,
    incident.impact,
    incident.template_ids,
    incident.components ?? [],
    incident.resolution_summary,
    created ?? incident.created_at,
    afterCreated(incident.updated_at, incident.created_at, created),
    afterCreated(incident.resolved_at, incident.created_at, created),
    afterCreated(incident.closed_at, incident.created_at, created),
    afterCreated(incident.last_executed_at, incident.created_at, created),
    afterCreated(incident.next_update_due_at, incident.created_at, created),
    incident.execution_count,
    isPlainActor(by) ? [by.type, by.id, by.name] : by,
    incident.rev,
  ];
  if (Object.keys(rest).length > 0) a.push(rest);
  return JSON.stringify(a);
}

/** An actor with exactly its three fields, which the array form stores as [type, id, name]. */
function isPlainActor(by: unknown): by is Incident['created_by'] {
  if (typeof by !== 'object' || by === null) return false;
  const keys = Object.keys(by);
  return keys.length === 3 && keys[0] === 'type' && keys[1] === 'id' && keys[2] === 'name';
}

/**
 * The incident `id` stored as `raw` (either form), in wire field order. `remember` ties the record to
 * `raw` for a later compare-and-set (storedString); a record only shown (a list page) need not
 * be: a weak-map entry per record is a measurable share of a list's CPU and garbage, and a
 * compare-and-set of a record not remembered still works (storedString encodes it).
 *
 * One object literal in ORDER, each field its stored value or its default (DEFAULTS): a list
 * decodes 25 of these per request, and filling a fresh object field by field from the tables
 * cost as much again as JSON.parse itself. decodeIncident's test holds it to ORDER and DEFAULTS.
 */
export function decodeIncident(raw: string, id: string, remember = true): Incident {
  const parsed = JSON.parse(raw) as unknown;
  const out = Array.isArray(parsed) ? fromArray(parsed, id) : fromObject(parsed as Stored);
  return remember ? rememberText(out as unknown as Incident, raw) : (out as unknown as Incident);
}

/** The array form (the table at the top). A position past the end holds its field's default. */
function fromArray(a: unknown[], id: string): Stored {
  const created = a[8];
  const createdAt = typeof created === 'number' ? new Date(created).toISOString() : created;
  const at = (v: unknown): unknown =>
    typeof v === 'number' && typeof created === 'number' ? new Date(created + v).toISOString() : (v ?? null);
  const by: unknown = a[15];
  const out: Stored = {
    id,
    title: a[0],
    severity: a[1],
    status: a[2] ?? 'investigating',
    description: a[3],
    impact: a[4] ?? '',
    template_ids: a[5] ?? [],
    components: a[6] ?? [],
    resolution_summary: a[7] ?? null,
    created_at: createdAt,
    updated_at: a[9] === undefined ? createdAt : at(a[9]),
    resolved_at: at(a[10]),
    closed_at: at(a[11]),
    last_executed_at: at(a[12]),
    next_update_due_at: at(a[13]),
    execution_count: a[14] ?? 0,
    created_by: isActorArray(by) ? { type: by[0], id: by[1], name: by[2] } : by,
    rev: a[16] ?? 1,
  };
  const rest = a[17];
  if (typeof rest === 'object' && rest !== null && !Array.isArray(rest))
    for (const [k, v] of Object.entries(rest)) if (!(k in out)) out[k] = v;
  return out;
}

const isActorArray = (v: unknown): v is [unknown, unknown, unknown] => Array.isArray(v) && v.length === 3;

/** The object form, written before the array form: every field by name, or those not at their default. */
function fromObject(p: Stored): Stored {
  const out: Stored = {
    id: p.id,
    title: p.title,
    severity: p.severity,
    status: p.status !== undefined ? p.status : 'investigating',
    description: p.description,
    impact: p.impact !== undefined ? p.impact : '',
    template_ids: p.template_ids !== undefined ? p.template_ids : [],
    components: p.components !== undefined ? p.components : [],
    resolution_summary: p.resolution_summary !== undefined ? p.resolution_summary : null,
    created_at: p.created_at,
    updated_at: p.updated_at !== undefined ? p.updated_at : p.created_at,
    resolved_at: p.resolved_at !== undefined ? p.resolved_at : null,
    closed_at: p.closed_at !== undefined ? p.closed_at : null,
    last_executed_at: p.last_executed_at !== undefined ? p.last_executed_at : null,
    next_update_due_at: p.next_update_due_at !== undefined ? p.next_update_due_at : null,
    execution_count: p.execution_count !== undefined ? p.execution_count : 0,
    created_by: p.created_by,
    rev: p.rev !== undefined ? p.rev : 1,
  };
  // Fields without a default are absent when the record lacks them, as they were stored.
  for (const f of REQUIRED) if (p[f] === undefined) delete out[f];
  for (const k in p) if (!(k in out)) out[k] = p[k];
  return out;
}

/** The fields of ORDER without a default. */
const REQUIRED = ORDER.filter((f) => DEFAULTS[f] === undefined);

/** What a compare-and-set against `incident` expects: the string it was read or written as, else its encoding. */
export function storedString(incident: Incident): string {
  return storedText(incident, () => encodeIncident(incident));
}
