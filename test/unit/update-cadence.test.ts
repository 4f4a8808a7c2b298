import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Actor } from '../../src/domain/common/actor.js';
import { newIncident, type Incident, type IncidentStatus } from '../../src/domain/incident/incident.js';
import { cadenceAfterExecute, reminderStep } from '../../src/domain/incident/update-cadence.js';

/** The update cadence's pure rules (src/domain/incident/update-cadence.ts). */
const actor: Actor = { type: 'api_key', id: 'key_1', name: 'oncall' };
const T0 = Date.parse('2026-11-25T10:00:00.000Z');
const MIN = 60_000;
const R = 15 * MIN;
const at = (ms: number): Date => new Date(ms);
const isoAt = (ms: number): string => new Date(ms).toISOString();

/** An open incident whose next update was due at `dueMs`, with `sent` reminders already recorded. */
function overdue(dueMs: number | null, sent?: number, over: Partial<Incident> = {}): Incident {
  const base = newIncident(
    'inc_1',
    { title: 'T', severity: 'major', description: '', impact: '', template_ids: [] },
    actor,
    isoAt(T0 - 60 * MIN),
  );
  const due = dueMs === null ? null : isoAt(dueMs);
  return {
    ...base,
    next_update_due_at: due,
    next_reminder_at: dueMs === null ? null : isoAt(dueMs + (sent ?? 0) * R),
    ...(sent === undefined ? {} : { update_reminders: sent }),
    last_executed_by: actor,
    rev: 5,
    ...over,
  };
}

describe('cadenceAfterExecute', () => {
  it('without next_update_in clears the due time and the reminder bookkeeping', () => {
    expect(cadenceAfterExecute(undefined, at(T0), actor)).toEqual({
      next_update_due_at: null,
      next_reminder_at: null,
      update_reminders: 0,
      last_executed_by: actor,
    });
  });

  it.each([
    ['1m', MIN],
    ['15m', 15 * MIN],
    ['90m', 90 * MIN],
    ['1h', 60 * MIN],
    ['24h', 24 * 60 * MIN],
  ])('next_update_in %s is due that long after the execute, the first reminder then, none sent yet', (input, ms) => {
    const c = cadenceAfterExecute(input, at(T0 + 123), actor);
    expect(c.next_update_due_at).toBe(isoAt(T0 + 123 + ms));
    expect(c.next_reminder_at).toBe(c.next_update_due_at);
    expect(c.update_reminders).toBe(0);
    expect(c.last_executed_by).toEqual(actor);
  });

  it('counts reminders afresh on a new execute (a later reminderStep starts at reminder 1 again)', () => {
    const before = overdue(T0, 3);
    const after: Incident = { ...before, ...cadenceAfterExecute('30m', at(T0 + 3 * R + 1), actor) };
    expect(after.update_reminders).toBe(0);
    const step = reminderStep(after, at(T0 + 3 * R + 1 + 30 * MIN), R);
    expect(step).toMatchObject({ kind: 'remind', reminder: 1, overdueMs: 0, dueAt: isoAt(T0 + 3 * R + 1 + 30 * MIN) });
  });
});

describe('reminderStep', () => {
  it.each(['resolved', 'closed'] as IncidentStatus[])(
    'stops for a %s incident, even one with a due time in the past',
    (status) => {
      expect(reminderStep(overdue(T0, 0, { status }), at(T0 + R), R)).toEqual({ kind: 'stop' });
    },
  );

  it.each(['investigating', 'identified', 'monitoring'] as IncidentStatus[])(
    'reminds for an open (%s) incident',
    (status) => {
      expect(reminderStep(overdue(T0, 0, { status }), at(T0), R).kind).toBe('remind');
    },
  );

  it('stops when no update is due', () => {
    expect(reminderStep(overdue(null), at(T0), R)).toEqual({ kind: 'stop' });
  });

  it('waits until the due time, to the millisecond', () => {
    expect(reminderStep(overdue(T0, 0), at(T0 - 1), R)).toEqual({ kind: 'wait', atMs: T0 });
    expect(reminderStep(overdue(T0, 0), at(T0 - 10 * R), R)).toEqual({ kind: 'wait', atMs: T0 });
  });

  it('sends reminder 1 exactly at the due time, recorded with the next one a repeat later', () => {
    const inc = overdue(T0, 0);
    const step = reminderStep(inc, at(T0), R);
    expect(step).toEqual({
      kind: 'remind',
      reminder: 1,
      dueAt: isoAt(T0),
      overdueMs: 0,
      next: { ...inc, update_reminders: 1, next_reminder_at: isoAt(T0 + R), rev: 6 },
    });
  });

  it('treats a record without update_reminders (never reminded) as 0 sent', () => {
    const inc = overdue(T0);
    expect(inc.update_reminders).toBeUndefined();
    expect(reminderStep(inc, at(T0 - 1), R)).toEqual({ kind: 'wait', atMs: T0 });
    expect(reminderStep(inc, at(T0 + 5), R)).toMatchObject({ kind: 'remind', reminder: 1, overdueMs: 5 });
  });

  it('after reminder 1, waits one repeat, then sends reminder 2', () => {
    const inc = overdue(T0, 1);
    expect(reminderStep(inc, at(T0 + 1), R)).toEqual({ kind: 'wait', atMs: T0 + R });
    expect(reminderStep(inc, at(T0 + R - 1), R)).toEqual({ kind: 'wait', atMs: T0 + R });
    const step = reminderStep(inc, at(T0 + R), R);
    expect(step).toMatchObject({ kind: 'remind', reminder: 2, overdueMs: R, dueAt: isoAt(T0) });
    if (step.kind !== 'remind') throw new Error('unreachable');
    expect(step.next.update_reminders).toBe(2);
    expect(step.next.next_reminder_at).toBe(isoAt(T0 + 2 * R));
  });

  it('a worker down for several intervals sends ONE reminder, numbered by the intervals passed', () => {
    // Reminder 1 went out at T0; nobody looked until 3 intervals and a bit later: reminders 2, 3
    // and 4 were due (at T0+R, T0+2R, T0+3R): one step, number 4, the next at T0+4R.
    const step = reminderStep(overdue(T0, 1), at(T0 + 3 * R + 7), R);
    expect(step).toMatchObject({ kind: 'remind', reminder: 4, overdueMs: 3 * R + 7 });
    if (step.kind !== 'remind') throw new Error('unreachable');
    expect(step.next.update_reminders).toBe(4);
    expect(step.next.next_reminder_at).toBe(isoAt(T0 + 4 * R));
    // …and the recorded incident then waits for reminder 5.
    expect(reminderStep(step.next, at(T0 + 3 * R + 8), R)).toEqual({ kind: 'wait', atMs: T0 + 4 * R });
  });

  it('never sent at all and found late: one reminder numbered by the slots passed', () => {
    expect(reminderStep(overdue(T0, 0), at(T0 + 2 * R + R / 2), R)).toMatchObject({ kind: 'remind', reminder: 3 });
  });

  it('does not change the incident it is given', () => {
    const inc = overdue(T0, 0);
    const copy = structuredClone(inc);
    reminderStep(inc, at(T0 + 5 * R), R);
    expect(inc).toEqual(copy);
  });

  it('a clock that went back (or more reminders recorded than due) only waits, never renumbers', () => {
    expect(reminderStep(overdue(T0, 3), at(T0 + R), R)).toEqual({ kind: 'wait', atMs: T0 + 3 * R });
  });

  it('property: stepping at any times, reminder numbers strictly increase, each recorded step is due, the next is in the future', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 10_000, max: 86_400_000 }),
        fc.array(fc.integer({ min: 0, max: 5 * 86_400_000 }), { minLength: 1, maxLength: 30 }),
        (repeat, gaps) => {
          let inc = overdue(T0, 0);
          let now = T0 - 1000;
          let last = 0;
          for (const gap of gaps) {
            now += gap;
            const step = reminderStep(inc, at(now), repeat);
            if (step.kind === 'stop') return false;
            if (step.kind === 'wait') {
              if (!(step.atMs > now) || step.atMs !== T0 + last * repeat) return false;
              continue;
            }
            // Number k is due at T0 + (k-1)·repeat and is the latest one due.
            if (step.reminder <= last) return false;
            if (T0 + (step.reminder - 1) * repeat > now || T0 + step.reminder * repeat <= now) return false;
            if (step.overdueMs !== now - T0) return false;
            if (Date.parse(step.next.next_reminder_at!) <= now) return false;
            last = step.reminder;
            inc = step.next;
          }
          return true;
        },
      ),
    );
  });
});
