import type { Incident } from '../domain/incident/incident.js';
import { rememberText, storedText } from './stored-text.js';

/**
 * The stored form of an incident: its JSON without the fields that hold their default, which a
 * new incident mostly does (about 200 bytes of a 900-byte record, enough to drop it into a smaller
 * allocation). Reading restores them in the wire order, so every answer is the same bytes.
 *
 *   omitted when        field
 *   "investigating"     status
 *   ""                  impact
 *   []                  template_ids, components
 *   null                resolution_summary, resolved_at, closed_at, last_executed_at,
 *                       next_update_due_at (and the cadence bookkeeping: next_reminder_at,
 *                       last_executed_by; update_reminders when 0)
 *   0                   execution_count
 *   = created_at        updated_at
 *   1                   rev
 *
 * Records written before this form (every field present) read the same way, and keep working:
 * an update compares against the string that was read (see `storedString`), never a re-encoding.
 */
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

function isDefault(field: Field, value: unknown, incident: Stored): boolean {
  const d = DEFAULTS[field];
  if (d === undefined) return false;
  const v = d(incident);
  return Array.isArray(v) ? Array.isArray(value) && value.length === 0 : value === v;
}

/** The string stored for `incident`. */
export function encodeIncident(incident: Incident): string {
  const stored: Stored = {};
  for (const [k, v] of Object.entries(incident)) {
    if (isDefault(k as Field, v, incident)) continue;
    // The cadence bookkeeping, unset: absent reads the same.
    if (k in CADENCE_UNSET && (v === undefined || v === CADENCE_UNSET[k])) continue;
    stored[k] = v;
  }
  return JSON.stringify(stored);
}

/**
 * The incident stored as `raw` (either form), in wire field order. `remember` ties the record to
 * `raw` for a later compare-and-set (storedString); a record only shown (a list page) need not
 * be: a weak-map entry per record is a measurable share of a list's CPU and garbage, and a
 * compare-and-set of a record not remembered still works (storedString encodes it).
 *
 * One object literal in ORDER, each field its stored value or its default (DEFAULTS): a list
 * decodes 25 of these per request, and filling a fresh object field by field from the tables
 * cost as much again as JSON.parse itself. decodeIncident's test holds it to ORDER and DEFAULTS.
 */
export function decodeIncident(raw: string, remember = true): Incident {
  const p = JSON.parse(raw) as Stored;
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
  return remember ? rememberText(out as unknown as Incident, raw) : (out as unknown as Incident);
}

/** The fields of ORDER without a default. */
const REQUIRED = ORDER.filter((f) => DEFAULTS[f] === undefined);

/** What a compare-and-set against `incident` expects: the string it was read or written as, else its encoding. */
export function storedString(incident: Incident): string {
  return storedText(incident, () => encodeIncident(incident));
}
