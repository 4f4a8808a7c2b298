import { describe, expect, it } from 'vitest';
import { SYSTEM_ACTOR } from '../../src/domain/common/actor.js';
import { safeParseInput } from '../../src/domain/common/validation.js';
import {
  applyMaintenancePatch,
  applyManualUpdate,
  applyStep,
  canMove,
  dueStep,
  MaintenanceCreateSchema,
  MaintenancePatchSchema,
  newMaintenance,
  nextStep,
  type StoredMaintenance,
} from '../../src/domain/maintenance/maintenance.js';
import { domainErrorOf } from '../support/domain-error.js';

const T0 = Date.parse('2026-12-01T22:00:00.000Z');
const MIN = 60_000;

function aMaintenance(over: Record<string, unknown> = {}): StoredMaintenance {
  const input = MaintenanceCreateSchema.parse({
    title: 'Database upgrade',
    scheduled_for: new Date(T0).toISOString(),
    scheduled_until: new Date(T0 + 60 * MIN).toISOString(),
    remind_before: 30,
    ...over,
  });
  return newMaintenance('mnt_01JH3ZK6X2B8V4N0Q7R5T9W1YC', input, SYSTEM_ACTOR, new Date(T0 - 1440 * MIN).toISOString());
}
const at = (ms: number) => new Date(ms).toISOString();

describe('maintenance requests', () => {
  it('takes times with an offset and answers them in UTC', () => {
    const m = aMaintenance({
      scheduled_for: '2026-12-01T23:00:00+01:00',
      scheduled_until: '2026-12-02T01:00:00+01:00',
    });
    expect(m.scheduled_for).toBe('2026-12-01T22:00:00.000Z');
    expect(m.scheduled_until).toBe('2026-12-02T00:00:00.000Z');
    expect(m).toMatchObject({ status: 'scheduled', auto_transition: true, components: [], body: '', rev: 1 });
  });

  it.each([
    ['a time without offset', { scheduled_for: '2026-12-01T22:00:00' }, 'scheduled_for'],
    ['a date only', { scheduled_until: '2026-12-02' }, 'scheduled_until'],
    ['the end before the start', { scheduled_until: '2026-12-01T21:00:00Z' }, 'scheduled_until'],
    ['the end at the start', { scheduled_until: '2026-12-01T22:00:00Z' }, 'scheduled_until'],
    ['remind_before 0', { remind_before: 0 }, 'remind_before'],
    ['remind_before over a week', { remind_before: 10_081 }, 'remind_before'],
    ['remind_before a fraction', { remind_before: 1.5 }, 'remind_before'],
    ['a component twice', { components: ['cmp_a', 'cmp_a'] }, 'components.1'],
    ['an unknown field', { colour: 'red' }, ''],
  ])('refuses %s', (_what, over, field) => {
    const r = safeParseInput(MaintenanceCreateSchema, {
      title: 'x',
      scheduled_for: '2026-12-01T22:00:00Z',
      scheduled_until: '2026-12-01T23:00:00Z',
      ...over,
    });
    expect(r.success).toBe(false);
    if (!r.success) expect(r.error.issues.map((i) => i.path.join('.'))).toContain(field);
  });

  it('accepts remind_before 1, 10080 and null', () => {
    for (const remind_before of [1, 10_080, null])
      expect(aMaintenance({ remind_before }).remind_before).toBe(remind_before);
  });
});

describe('the state machine', () => {
  it('moves forward only', () => {
    expect(canMove('scheduled', 'in_progress')).toBe(true);
    expect(canMove('scheduled', 'completed')).toBe(true);
    expect(canMove('verifying', 'completed')).toBe(true);
    expect(canMove('in_progress', 'scheduled')).toBe(false);
    expect(canMove('completed', 'verifying')).toBe(false);
    expect(canMove('verifying', 'verifying')).toBe(false);
  });

  it('a manual update moves forward, stamps the times, and never goes back', () => {
    const m = aMaintenance();
    const now = at(T0 + MIN);
    const started = applyManualUpdate(m, { status: 'in_progress', body: 'Started early.' }, 'evt_1', now);
    expect(started).toMatchObject({ status: 'in_progress', started_at: now, completed_at: null, rev: 2 });
    expect(started.updates).toEqual([
      { id: 'evt_1', status: 'in_progress', body: 'Started early.', kind: 'update', created_at: now },
    ]);
    const plain = applyManualUpdate(started, { body: 'Still going.' }, 'evt_2', now);
    expect(plain.status).toBe('in_progress');
    expect(
      domainErrorOf(() => applyManualUpdate(started, { status: 'scheduled', body: 'back' }, 'evt_3', now)).code,
    ).toBe('invalid_transition');
    const done = applyManualUpdate(plain, { status: 'completed', body: 'Done.' }, 'evt_4', now);
    expect(done).toMatchObject({ status: 'completed', completed_at: now });
    expect(domainErrorOf(() => applyManualUpdate(done, { body: 'more' }, 'evt_5', now)).code).toBe('conflict');
  });

  it('PATCH: scheduled_for only while scheduled, the window stays ordered, completed takes nothing', () => {
    const m = aMaintenance();
    const now = at(T0);
    const patch = (x: unknown) => MaintenancePatchSchema.parse(x);
    const moved = applyMaintenancePatch({ ...m, reminded_at: now }, patch({ scheduled_for: at(T0 + 10 * MIN) }), now);
    expect(moved.next).toMatchObject({ scheduled_for: at(T0 + 10 * MIN), reminded_at: null, rev: 2 });
    expect(moved.changes).toEqual({ scheduled_for: { from: m.scheduled_for, to: at(T0 + 10 * MIN) } });
    expect(
      domainErrorOf(() => applyMaintenancePatch(m, patch({ scheduled_for: at(T0 + 61 * MIN) }), now)).errors[0]?.field,
    ).toBe('scheduled_until');
    const running = { ...m, status: 'in_progress' as const };
    expect(
      domainErrorOf(() => applyMaintenancePatch(running, patch({ scheduled_for: at(T0 - MIN) }), now)).errors[0]?.field,
    ).toBe('scheduled_for');
    expect(
      applyMaintenancePatch(running, patch({ scheduled_until: at(T0 + 90 * MIN) }), now).next.scheduled_until,
    ).toBe(at(T0 + 90 * MIN));
    const same = applyMaintenancePatch(m, patch({ title: m.title }), now);
    expect(same.next).toBe(m);
    expect(
      domainErrorOf(() => applyMaintenancePatch({ ...m, status: 'completed' }, patch({ title: 'x' }), now)).code,
    ).toBe('conflict');
  });
});

describe('the automatic steps', () => {
  it('reminder, then start, then end, each due at its time', () => {
    let m = aMaintenance();
    expect(nextStep(m)).toEqual({ kind: 'reminder', atMs: T0 - 30 * MIN });
    expect(dueStep(m, T0 - 30 * MIN - 1)).toBeNull();
    const reminderStep = dueStep(m, T0 - 30 * MIN)!;
    m = applyStep(m, reminderStep, 'evt_r', at(T0 - 30 * MIN));
    expect(m).toMatchObject({ status: 'scheduled', reminded_at: at(T0 - 30 * MIN) });
    expect(m.updates.at(-1)).toMatchObject({
      kind: 'reminder',
      status: 'scheduled',
      body: 'Reminder: this maintenance begins in 30 minutes.',
    });
    expect(dueStep(m, T0 - 1)).toBeNull();
    expect(nextStep(m)).toEqual({ kind: 'start', atMs: T0 });
    m = applyStep(m, dueStep(m, T0)!, 'evt_s', at(T0));
    expect(m).toMatchObject({ status: 'in_progress', started_at: at(T0) });
    expect(m.updates.at(-1)).toMatchObject({ kind: 'transition', status: 'in_progress' });
    expect(nextStep(m)).toEqual({ kind: 'end', atMs: T0 + 60 * MIN });
    m = applyStep(m, dueStep(m, T0 + 60 * MIN)!, 'evt_e', at(T0 + 60 * MIN));
    expect(m).toMatchObject({ status: 'completed', completed_at: at(T0 + 60 * MIN) });
    expect(nextStep(m)).toBeNull();
    expect(m.updates.map((u) => u.kind)).toEqual(['reminder', 'transition', 'transition']);
  });

  it('no reminder without remind_before; verifying still ends at scheduled_until', () => {
    const m = aMaintenance({ remind_before: null });
    expect(nextStep(m)).toEqual({ kind: 'start', atMs: T0 });
    expect(nextStep({ ...m, status: 'verifying' })).toEqual({ kind: 'end', atMs: T0 + 60 * MIN });
  });

  it('a late reminder whose start has come is passed over for the start', () => {
    const m = aMaintenance();
    expect(dueStep(m, T0 + 5 * MIN)).toEqual({ kind: 'start', atMs: T0 });
  });

  it('nothing is automatic with auto_transition off', () => {
    const m = aMaintenance({ auto_transition: false });
    expect(nextStep(m)).toBeNull();
    expect(dueStep(m, T0 + 1000 * MIN)).toBeNull();
  });
});
