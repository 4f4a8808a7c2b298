import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { newIncident, type Incident } from '../../src/domain/incident/incident.js';
import { presentIncident } from '../../src/http/presenters/incident.js';
import { DEFAULTS, decodeIncident, encodeIncident, ORDER, storedString } from '../../src/store/incident-record.js';

/**
 * decodeIncident and presentIncident are written out field by field for speed (a list decodes and
 * presents 25 records per request). These hold them to their definitions: the table-driven decode
 * over incident-record.ts's own ORDER and DEFAULTS (so a field added there and not to the literal
 * fails here) and the rest-and-spread presenter they replaced.
 */

type Stored = Record<string, unknown>;

function referenceDecode(raw: string): Stored {
  const parsed = JSON.parse(raw) as Stored;
  const out: Stored = {};
  for (const f of ORDER) {
    const d = DEFAULTS[f];
    if (f in parsed) out[f] = parsed[f];
    else if (d) out[f] = d(parsed);
  }
  for (const [k, v] of Object.entries(parsed)) if (!(k in out)) out[k] = v;
  return out;
}

function referencePresent(i: Incident): Stored {
  const { rev: _rev, next_reminder_at: _n, update_reminders: _u, last_executed_by: _l, ...wire } = i;
  return { ...wire, next_update_due_at: wire.next_update_due_at ?? null };
}

/** Same keys in the same order, same values. */
const sameRecord = (a: unknown, b: unknown) => {
  expect(Object.keys(a as object)).toEqual(Object.keys(b as object));
  expect(a).toStrictEqual(b);
};

const actor = { type: 'api_key' as const, id: 'key_01M889X2ENAAPM65S2Q1HTHDFK', name: 'bench' };
const fresh = newIncident(
  'inc_01M889X7AT8DQKG4WFKWM82TZJ',
  { title: 'Checkout errors', severity: 'major', description: 'x', impact: '', template_ids: [] },
  actor,
  '2026-11-25T02:52:40.154Z',
);

/** A stored record: any subset of the wire fields (old and compact forms, and broken ones), plus extras. */
const storedRecord = fc
  .record(
    {
      id: fc.constant('inc_01M889X7AT8DQKG4WFKWM82TZJ'),
      title: fc.string(),
      severity: fc.constantFrom('minor', 'major', 'critical'),
      status: fc.constantFrom('investigating', 'identified', 'monitoring', 'resolved', 'closed'),
      description: fc.string(),
      impact: fc.string(),
      template_ids: fc.array(fc.string(), { maxLength: 2 }),
      resolution_summary: fc.option(fc.string()),
      created_at: fc.constant('2026-11-25T02:52:40.154Z'),
      updated_at: fc.constant('2026-11-25T03:00:00.000Z'),
      resolved_at: fc.option(fc.constant('2026-11-25T04:00:00.000Z')),
      closed_at: fc.option(fc.constant('2026-11-25T05:00:00.000Z')),
      last_executed_at: fc.option(fc.constant('2026-11-25T03:30:00.000Z')),
      next_update_due_at: fc.option(fc.constant('2026-11-25T03:45:00.000Z')),
      execution_count: fc.nat(),
      created_by: fc.constant(actor),
      rev: fc.integer({ min: 1, max: 99 }),
      next_reminder_at: fc.option(fc.constant('2026-11-25T03:40:00.000Z')),
      update_reminders: fc.nat(3),
      last_executed_by: fc.option(fc.constant(actor)),
      some_future_field: fc.string(),
    },
    { requiredKeys: [] },
  )
  // Stored field order varies too (records written by other versions).
  .chain((r) =>
    fc
      .shuffledSubarray(Object.keys(r), { minLength: Object.keys(r).length })
      .map((keys) => Object.fromEntries(keys.map((k) => [k, (r as Stored)[k]]))),
  );

describe('decodeIncident', () => {
  it('reads any stored record as the table-driven decode does: same fields, same order, same defaults', () => {
    fc.assert(
      fc.property(storedRecord, (stored) => {
        const raw = JSON.stringify(stored);
        sameRecord(decodeIncident(raw), referenceDecode(raw));
        sameRecord(decodeIncident(raw, false), referenceDecode(raw));
      }),
    );
  });

  it('reads the compact form back as the incident written', () => {
    const raw = encodeIncident(fresh);
    expect(raw.length).toBeLessThan(JSON.stringify(fresh).length);
    sameRecord(decodeIncident(raw), fresh);
  });

  it('remembers the text read unless told not to (then storedString encodes the record)', () => {
    const old = JSON.stringify(fresh);
    expect(storedString(decodeIncident(old))).toBe(old);
    expect(storedString(decodeIncident(old, false))).toBe(encodeIncident(fresh));
  });
});

describe('presentIncident', () => {
  it('answers what the rest-and-spread presenter did: same fields, same order', () => {
    fc.assert(
      fc.property(storedRecord, (stored) => {
        const incident = decodeIncident(JSON.stringify(stored), false);
        sameRecord(presentIncident(incident), referencePresent(incident));
        expect(JSON.stringify(presentIncident(incident))).toBe(JSON.stringify(referencePresent(incident)));
      }),
    );
  });

  it('leaves the record untouched', () => {
    const before = JSON.stringify(fresh);
    presentIncident(fresh);
    expect(JSON.stringify(fresh)).toBe(before);
  });
});
