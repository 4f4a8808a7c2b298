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

const ID = 'inc_01M889X7AT8DQKG4WFKWM82TZJ';
const actor = { type: 'api_key' as const, id: 'key_01M889X2ENAAPM65S2Q1HTHDFK', name: 'bench' };
const fresh = newIncident(
  ID,
  { title: 'Checkout errors', severity: 'major', description: 'x', impact: '', template_ids: [] },
  actor,
  '2026-11-25T02:52:40.154Z',
);

/** A stored record: any subset of the wire fields (old and compact forms, and broken ones), plus extras. */
const storedRecord = fc
  .record(
    {
      id: fc.constant(ID),
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

const time = fc.integer({ min: 0, max: 4_102_444_800_000 }).map((ms) => new Date(ms).toISOString());
/** Any time as an API field may hold it, canonical or not. */
const anyTime = fc.oneof(time, time, fc.constantFrom('2026-11-25T03:00:00Z', '2026-11-25T03:00:00.1+01:00'));

/** A whole incident, every wire field present (as domain code makes them), in wire order. */
const wholeRecord: fc.Arbitrary<Incident> = fc
  .record({
    title: fc.string(),
    severity: fc.constantFrom('low', 'minor', 'major', 'critical'),
    status: fc.constantFrom('investigating', 'identified', 'monitoring', 'resolved', 'closed'),
    description: fc.string(),
    impact: fc.string(),
    template_ids: fc.array(fc.string(), { maxLength: 2 }),
    components: fc.array(
      fc
        .tuple(fc.string(), fc.constantFrom('degraded_performance', 'major_outage'))
        .map(([id, status]) => ({ id, status })),
      {
        maxLength: 2,
      },
    ),
    resolution_summary: fc.option(fc.string()),
    created_at: anyTime,
    updated_at: anyTime,
    resolved_at: fc.option(anyTime),
    closed_at: fc.option(anyTime),
    last_executed_at: fc.option(anyTime),
    next_update_due_at: fc.option(anyTime),
    execution_count: fc.nat(),
    created_by: fc.oneof(fc.constant(actor), fc.constant({ name: 'n', id: 'i', type: 'system' as const })),
    rev: fc.integer({ min: 1, max: 99 }),
  })
  .chain((wire) =>
    fc
      .record(
        {
          // Set, or absent: unset (null, 0) they are not stored, and read back absent.
          next_reminder_at: time,
          update_reminders: fc.integer({ min: 1, max: 3 }),
          last_executed_by: fc.constant(actor),
          some_future_field: fc.string(),
        },
        { requiredKeys: [] },
      )
      .map((rest) => ({ id: ID, ...wire, ...rest })),
  );

describe('decodeIncident', () => {
  it('reads any stored record as the table-driven decode does: same fields, same order, same defaults', () => {
    fc.assert(
      fc.property(storedRecord, (stored) => {
        const raw = JSON.stringify(stored);
        sameRecord(decodeIncident(raw, ID), referenceDecode(raw));
        sameRecord(decodeIncident(raw, ID, false), referenceDecode(raw));
      }),
    );
  });

  it('reads the array form back as the incident written, whatever its fields hold', () => {
    fc.assert(
      fc.property(wholeRecord, (incident) => {
        const raw = encodeIncident(incident);
        expect(JSON.parse(raw)).toBeInstanceOf(Array);
        expect(raw).not.toContain(ID);
        sameRecord(decodeIncident(raw, ID), incident);
      }),
    );
    sameRecord(decodeIncident(encodeIncident(fresh), ID), fresh);
  });

  it('stores times as milliseconds only when they read back as the same string', () => {
    const odd = { ...fresh, updated_at: '2026-11-25T03:00:00Z', resolved_at: '2026-11-25T04:00:00.000Z' };
    const stored = JSON.parse(encodeIncident(odd)) as unknown[];
    expect(stored.slice(8, 11)).toEqual([Date.parse(fresh.created_at), '2026-11-25T03:00:00Z', 4_039_846]);
    const undated = { ...odd, created_at: 'yesterday' };
    expect((JSON.parse(encodeIncident(undated)) as unknown[]).slice(8, 11)).toEqual([
      'yesterday',
      '2026-11-25T03:00:00Z',
      '2026-11-25T04:00:00.000Z',
    ]);
    sameRecord(decodeIncident(encodeIncident(undated), ID), undated);
  });

  it('keeps a closed incident with a 500-character description within 762 bytes (Redis: 768, not 1,024)', () => {
    // Redis keeps a string of 256–762 bytes in a 768-byte allocation (5 bytes of header, 1 of NUL).
    let closed: Incident = {
      ...fresh,
      title: 'Checkout API: degraded performance',
      description: 'x'.repeat(500),
      status: 'closed',
      resolution_summary: 'Rolled back the faulty deploy; error rates are back to normal.',
      updated_at: '2026-11-25T08:02:11.815Z',
      resolved_at: '2026-11-25T07:12:40.154Z',
      closed_at: '2026-11-25T08:02:11.815Z',
      rev: 5,
    };
    expect(JSON.stringify(closed).length).toBeGreaterThan(1000);
    expect(encodeIncident(closed).length).toBeLessThanOrEqual(762);
    closed = { ...closed, last_executed_at: '2026-11-25T03:02:11.815Z', execution_count: 3 };
    expect(encodeIncident(closed).length).toBeLessThanOrEqual(762);
  });

  it('remembers the text read unless told not to (then storedString encodes the record)', () => {
    const old = JSON.stringify(fresh);
    expect(storedString(decodeIncident(old, ID))).toBe(old);
    expect(storedString(decodeIncident(old, ID, false))).toBe(encodeIncident(fresh));
  });
});

describe('presentIncident', () => {
  it('answers what the rest-and-spread presenter did: same fields, same order', () => {
    fc.assert(
      fc.property(storedRecord, (stored) => {
        const incident = decodeIncident(JSON.stringify(stored), ID, false);
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
