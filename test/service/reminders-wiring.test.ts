import { describe, expect, it } from 'vitest';
import { LateReminderNotifier } from '../../src/composition/services.js';
import type { Incident } from '../../src/domain/incident/incident.js';
import type { ReminderNotifier, ReminderSchedule } from '../../src/ports/index.js';
import { apiActor } from './fakes.js';
import { world } from './world.js';

/**
 * The reminders as buildServices wires them: the notifier is the Slack announcer, which exists
 * only after the services, so it is attached late (LateReminderNotifier); a recorded reminder is
 * an incident change, like any other, for the announcement to follow.
 */
const REPEAT_MS = 30 * 60_000;

/** A schedule with one incident due, handed out once. */
function dueOnce(): ReminderSchedule & { incidentId: string | null; released: (number | null)[] } {
  return {
    incidentId: null,
    released: [],
    claimDue(): Promise<{ incidentId: string; lease: number }[]> {
      const id = this.incidentId;
      this.incidentId = null;
      return Promise.resolve(id === null ? [] : [{ incidentId: id, lease: 1 }]);
    },
    release(_id: string, _lease: number, atMs: number | null): Promise<void> {
      this.released.push(atMs);
      return Promise.resolve();
    },
  };
}

/** A world whose only incident's update is 10 minutes overdue. */
async function overdueWorld() {
  const schedule = dueOnce();
  const notifier = new LateReminderNotifier();
  const w = world({ reminders: { schedule, repeatMs: REPEAT_MS, leaseMs: 10_000, notifier } });
  const { id } = await w.services.incidents.create({ title: 'Checkout down', severity: 'critical' }, apiActor);
  const stored = w.repos.incidents.incidents.get(id)!;
  w.repos.incidents.put({
    ...stored,
    next_update_due_at: new Date(w.clock.now().getTime() - 10 * 60_000).toISOString(),
  });
  schedule.incidentId = id;
  return { w, id, notifier };
}

describe('reminders built by buildServices', () => {
  it('tell the notifier attached after the services were built, and report the incident changed', async () => {
    const { w, id, notifier } = await overdueWorld();
    const told: { incident: Incident; reminder: number; overdueMs: number }[] = [];
    const slack: ReminderNotifier = {
      remind: (incident, reminder, overdueMs) => Promise.resolve(void told.push({ incident, reminder, overdueMs })),
    };
    notifier.attach(slack);

    expect(await w.services.reminders.runDue()).toBe(1);
    expect(told.map((t) => [t.incident.id, t.reminder, t.overdueMs])).toEqual([[id, 1, 10 * 60_000]]);
    expect((await w.repos.incidents.get(id))?.update_reminders).toBe(1);
    expect(w.seen.changes.at(-1)).toEqual({ id, kind: 'updated' });
  });

  it('with nothing attached (Slack off) still record the reminder on the incident', async () => {
    const { w, id, notifier } = await overdueWorld();
    notifier.attach(null);

    expect(await w.services.reminders.runDue()).toBe(1);
    expect((await w.repos.incidents.get(id))?.update_reminders).toBe(1);
    const events = w.repos.incidents.events.get(id) ?? [];
    expect(events.map((e) => e.type)).toContain('incident.update_overdue');
  });

  it('refuse a second attach: two announcers would each post the reminder', () => {
    const notifier = new LateReminderNotifier();
    notifier.attach(null);
    expect(() => notifier.attach({ remind: () => Promise.resolve() })).toThrow(/already attached/);
  });
});
