import { afterEach, describe, expect, it } from 'vitest';
import type { Actor } from '../../src/domain/common/actor.js';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import { newEvent, type IncidentEvent } from '../../src/domain/incident/incident-event.js';
import { newIncident, type Incident } from '../../src/domain/incident/incident.js';
import { cadenceAfterExecute } from '../../src/domain/incident/update-cadence.js';
import type { ReminderNotifier } from '../../src/ports/index.js';
import { IncidentService } from '../../src/services/incidents.js';
import { ReminderService } from '../../src/services/reminders.js';
import { RedisIncidentRepo } from '../../src/store/incidents.js';
import { createKeys, type Keys } from '../../src/store/keys.js';
import { RedisReminderSchedule } from '../../src/store/reminders.js';
import { dropPrefix, useTestRedis } from '../support/redis.js';

/**
 * The update cadence's reminders (src/services/reminders.ts) over the real store: the incident
 * repo (compare-and-set, the schedule mirrored from `next_reminder_at`) and the schedule's
 * claim/release scripts. Time is an injected clock the tests move; nothing waits.
 *
 * Each test gets its own key prefix: the schedule is one sorted set per prefix, and a test's clock
 * must not pick up another test's incidents.
 */
const db = useTestRedis('reminders');
const ids = createIdGenerator();
const oncall: Actor = { type: 'api_key', id: 'key_01JABCDEFGHJKMNPQRSTVWXYZ0', name: 'oncall' };
const MIN = 60_000;
const T0 = Date.parse('2026-11-25T10:00:00.000Z');

let used: string[] = [];
afterEach(async () => {
  for (const p of used) await dropPrefix(db.redis, p);
  used = [];
});

interface Call {
  worker: string;
  incidentId: string;
  reminder: number;
  overdueMs: number;
}

/** One test's world: keys, store, a movable clock, and reminder workers over it. */
function world(opts: { repeatMs: number; leaseMs: number }) {
  const prefix = `${db.prefix}-${used.length}-${Math.random().toString(36).slice(2, 8)}`;
  used.push(prefix);
  const keys: Keys = createKeys(prefix);
  const repo = new RedisIncidentRepo(db.redis, keys);
  const schedule = new RedisReminderSchedule(db.redis, keys);
  let nowMs = T0;
  const clock = { now: () => new Date(nowMs) };
  const incidents = new IncidentService({
    incidents: repo,
    templatesExist: (t) => Promise.resolve(t.map(() => true)),
    templateVariables: (t) => Promise.resolve(t.map(() => [])),
    clock,
    ids,
  });
  const calls: Call[] = [];
  const errors: { what: string; err: unknown }[] = [];

  /** A ReminderService "worker"; `notify` stands in for the Slack thread (default: records the call). */
  const worker = (
    name: string,
    notify?: (incident: Incident, reminder: number, overdueMs: number) => Promise<void>,
  ) => {
    const notifier: ReminderNotifier = {
      async remind(incident, reminder, overdueMs) {
        calls.push({ worker: name, incidentId: incident.id, reminder, overdueMs });
        await notify?.(incident, reminder, overdueMs);
      },
    };
    return new ReminderService({
      incidents: repo,
      schedule,
      notifier,
      clock,
      ids,
      repeatMs: opts.repeatMs,
      leaseMs: opts.leaseMs,
      onError: (what, err) => errors.push({ what, err }),
    });
  };

  /** An execute as far as the cadence goes: the incident's due time set `nextUpdateIn` from now (or cleared). */
  const execute = async (id: string, nextUpdateIn: string | undefined): Promise<Incident> => {
    for (let i = 0; i < 20; i++) {
      const cur = (await repo.get(id))!;
      const now = clock.now();
      const cadence = cadenceAfterExecute(nextUpdateIn, now, oncall);
      const next: Incident = {
        ...cur,
        execution_count: cur.execution_count + 1,
        last_executed_at: now.toISOString(),
        ...cadence,
        rev: cur.rev + 1,
      };
      const event = newEvent(ids.next('event'), 'incident.executed', now.toISOString(), oncall, {
        execution_id: ids.next('execution'),
        deliveries: 0,
        template_versions: {},
      });
      if (await repo.update(cur, next, [event])) return next;
    }
    throw new Error('execute kept losing');
  };

  /** A new incident, executed now with `next_update_in`. */
  const dueIncident = async (nextUpdateIn: string): Promise<Incident> => {
    const inc = newIncident(
      ids.next('incident'),
      { title: 'Checkout is down', severity: 'critical', description: '', impact: '', template_ids: [] },
      oncall,
      clock.now().toISOString(),
    );
    expect(await repo.create(inc, [])).toBe(true);
    return execute(inc.id, nextUpdateIn);
  };

  const events = async (id: string): Promise<IncidentEvent[]> =>
    (await db.redis.lrange(keys.incidentEvents(id), 0, -1)).map((s) => JSON.parse(s) as IncidentEvent);
  const overdueEvents = async (id: string) => (await events(id)).filter((e) => e.type === 'incident.update_overdue');
  const reminderNumbers = async (id: string) =>
    (await overdueEvents(id)).map((e) => (e.data as { reminder: number }).reminder);
  const score = async (id: string): Promise<number | null> => {
    const s = await db.redis.zscore(keys.reminders(), id);
    return s === null ? null : Number(s);
  };

  return {
    keys,
    repo,
    schedule,
    incidents,
    calls,
    errors,
    worker,
    execute,
    dueIncident,
    events,
    overdueEvents,
    reminderNumbers,
    score,
    now: () => nowMs,
    set: (ms: number) => {
      nowMs = ms;
    },
    advance: (ms: number) => {
      nowMs += ms;
    },
  };
}

/** A promise with its resolve handle: a notifier the test holds in the middle of a step. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  let entered!: () => void;
  const reached = new Promise<void>((r) => (entered = r));
  return { open, opened, entered, reached };
}

describe('reminders over the real store', () => {
  it('schedules the incident at its due time and sends nothing before it', async () => {
    const w = world({ repeatMs: 15 * MIN, leaseMs: 10_000 });
    const inc = await w.dueIncident('15m');
    const due = T0 + 15 * MIN;
    expect(inc.next_update_due_at).toBe(new Date(due).toISOString());
    expect(await w.score(inc.id)).toBe(due);
    const a = w.worker('A');
    for (const t of [0, MIN, 14 * MIN, 15 * MIN - 1]) {
      w.set(T0 + t);
      expect(await a.runDue()).toBe(0);
    }
    expect(await w.overdueEvents(inc.id)).toEqual([]);
    expect(w.calls).toEqual([]);
    expect(await w.score(inc.id)).toBe(due);
  });

  it('records exactly one reminder per interval however often two interleaved workers look', async () => {
    const R = 60_000;
    const w = world({ repeatMs: R, leaseMs: 5_000 });
    const inc = await w.dueIncident('1m');
    const due = T0 + MIN;
    const a = w.worker('A');
    const b = w.worker('B');
    const recordedAt: number[] = [];
    // Every 2.5 s of clock, up to 4.5 intervals past due: one after the other (who goes first
    // alternates per interval), then all at once.
    for (let t = T0; t <= due + 4.5 * R; t += 2_500) {
      w.set(t);
      const [x, y] = Math.abs(Math.floor((t - due) / R)) % 2 === 0 ? [a, b] : [b, a];
      const n =
        (await x.runDue()) +
        (await y.runDue()) +
        (await Promise.all([a.runDue(), b.runDue(), a.runDue(), b.runDue()])).reduce((p, q) => p + q, 0);
      expect(n).toBeLessThanOrEqual(1);
      if (n === 1) recordedAt.push(t);
    }
    expect(w.errors).toEqual([]);
    // Reminder k is due at due + (k-1)·R: 1 at due, 2 at +1R, … 5 at +4R.
    expect(recordedAt).toEqual([0, 1, 2, 3, 4].map((k) => due + k * R));
    const evs = await w.overdueEvents(inc.id);
    expect(evs.map((e) => e.data)).toEqual(
      [1, 2, 3, 4, 5].map((k) => ({
        due_at: new Date(due).toISOString(),
        overdue_ms: (k - 1) * R,
        reminder: k,
        last_executed_by: oncall,
      })),
    );
    expect(evs.map((e) => e.at)).toEqual(recordedAt.map((t) => new Date(t).toISOString()));
    expect(new Set(evs.map((e) => e.id)).size).toBe(5);
    for (const e of evs) expect(e.actor).toMatchObject({ type: 'system' });
    // The notifier was asked once per reminder, in order, by whichever worker held the lease.
    expect(w.calls.map((c) => c.reminder)).toEqual([1, 2, 3, 4, 5]);
    // Both workers took part (the schedule is shared, not owned by one).
    expect(new Set(w.calls.map((c) => c.worker))).toEqual(new Set(['A', 'B']));
    const stored = (await w.repo.get(inc.id))!;
    expect(stored.update_reminders).toBe(5);
    expect(stored.next_reminder_at).toBe(new Date(due + 5 * R).toISOString());
    expect(await w.score(inc.id)).toBe(due + 5 * R);
  });

  it('calls the notifier with reminders 1, 2, 3 in order, each with how overdue it is', async () => {
    const R = 10 * MIN;
    const w = world({ repeatMs: R, leaseMs: 10_000 });
    const inc = await w.dueIncident('5m');
    const due = T0 + 5 * MIN;
    const a = w.worker('A');
    for (const t of [due + 1_000, due + 2_000, due + R + 30_000, due + R + 31_000, due + 2 * R + 500]) {
      w.set(t);
      await a.runDue();
      await a.runDue();
    }
    expect(w.calls.map(({ incidentId, reminder, overdueMs }) => ({ incidentId, reminder, overdueMs }))).toEqual([
      { incidentId: inc.id, reminder: 1, overdueMs: 1_000 },
      { incidentId: inc.id, reminder: 2, overdueMs: R + 30_000 },
      { incidentId: inc.id, reminder: 3, overdueMs: 2 * R + 500 },
    ]);
    expect(await w.reminderNumbers(inc.id)).toEqual([1, 2, 3]);
  });

  it('a worker that dies after claiming: after its lease another records that reminder exactly once', async () => {
    const R = 15 * MIN;
    const L = 3_000;
    const w = world({ repeatMs: R, leaseMs: L });
    const inc = await w.dueIncident('15m');
    const due = T0 + 15 * MIN;
    w.set(due + 200);
    // The dead worker: claimed, then nothing (no notify, no record, no release).
    const claimed = await w.schedule.claimDue(w.now(), L, 50);
    expect(claimed).toEqual([{ incidentId: inc.id, lease: due + 200 + L }]);
    expect(await w.score(inc.id)).toBe(due + 200 + L);

    const b = w.worker('B');
    for (const t of [due + 200, due + 1_000, due + 200 + L - 1]) {
      w.set(t);
      expect(await b.runDue()).toBe(0);
    }
    expect(w.calls).toEqual([]);
    expect(await w.overdueEvents(inc.id)).toEqual([]);

    w.set(due + 200 + L);
    expect(await b.runDue()).toBe(1);
    for (let i = 0; i < 5; i++) expect(await b.runDue()).toBe(0);
    w.advance(L * 3);
    for (let i = 0; i < 5; i++) expect(await b.runDue()).toBe(0);
    expect(w.calls.map((c) => [c.worker, c.reminder])).toEqual([['B', 1]]);
    const evs = await w.overdueEvents(inc.id);
    expect(evs).toHaveLength(1);
    expect(evs[0]!.data).toEqual({
      due_at: new Date(due).toISOString(),
      overdue_ms: 200 + L,
      reminder: 1,
      last_executed_by: oncall,
    });
    expect(await w.score(inc.id)).toBe(due + R);
  });

  it('a slow worker whose lease lapsed does not record the reminder a second time when it wakes', async () => {
    const R = 15 * MIN;
    const L = 2_000;
    const w = world({ repeatMs: R, leaseMs: L });
    const inc = await w.dueIncident('15m');
    const due = T0 + 15 * MIN;
    const g = gate();
    const slow = w.worker('slow', async () => {
      g.entered();
      await g.opened;
    });
    w.set(due);
    const slowRun = slow.runDue();
    await g.reached;
    // The lease lapses while the slow worker is stuck in its notifier; B takes over and records it.
    w.set(due + L);
    expect(await w.worker('B').runDue()).toBe(1);
    g.open();
    expect(await slowRun).toBe(0);
    expect(await w.reminderNumbers(inc.id)).toEqual([1]);
    // The slow worker's late release did not disturb the schedule B's record set.
    expect(await w.score(inc.id)).toBe(due + R);
    expect(w.errors).toEqual([]);
  });

  it('a notifier that throws leaves the reminder unrecorded; it is retried after the lease', async () => {
    const R = 15 * MIN;
    const L = 4_000;
    const w = world({ repeatMs: R, leaseMs: L });
    const inc = await w.dueIncident('15m');
    const due = T0 + 15 * MIN;
    let failures = 1;
    const a = w.worker('A', () => {
      if (failures-- > 0) return Promise.reject(new Error('slack is down'));
      return Promise.resolve();
    });
    w.set(due + 100);
    expect(await a.runDue()).toBe(0);
    expect(w.errors).toHaveLength(1);
    expect(String(w.errors[0]!.err)).toContain('slack is down');
    expect(w.errors[0]!.what).toContain(inc.id);
    expect(await w.overdueEvents(inc.id)).toEqual([]);
    const stored = (await w.repo.get(inc.id))!;
    expect(stored.update_reminders ?? 0).toBe(0);
    expect(stored.next_reminder_at).toBe(new Date(due).toISOString());
    // Left leased: not retried before the lease lapses…
    expect(await w.score(inc.id)).toBe(due + 100 + L);
    w.set(due + 100 + L - 1);
    expect(await a.runDue()).toBe(0);
    expect(w.calls).toHaveLength(1);
    // …then retried, and recorded once.
    w.set(due + 100 + L);
    expect(await a.runDue()).toBe(1);
    expect(await a.runDue()).toBe(0);
    expect(w.calls.map((c) => c.reminder)).toEqual([1, 1]);
    expect(await w.reminderNumbers(inc.id)).toEqual([1]);
    expect(w.errors).toHaveLength(1);
  });

  it('a notifier that keeps failing holds a reminder back for three leases, then it is recorded without it', async () => {
    const R = 15 * MIN;
    const L = 4_000;
    const w = world({ repeatMs: R, leaseMs: L });
    const inc = await w.dueIncident('15m');
    const due = T0 + 15 * MIN;
    const a = w.worker('A', () => Promise.reject(new Error('slack is down')));
    // Tried at the due time and after each lease: held back while under three leases late.
    for (const at of [due, due + L, due + 2 * L]) {
      w.set(at);
      expect(await a.runDue()).toBe(0);
    }
    expect(await w.overdueEvents(inc.id)).toEqual([]);
    // Three leases late: recorded on the timeline all the same, and the failure reported.
    w.set(due + 3 * L);
    expect(await a.runDue()).toBe(1);
    expect(await w.reminderNumbers(inc.id)).toEqual([1]);
    expect(w.errors.at(-1)!.what).toContain('recorded without it');
    expect(w.calls.map((c) => c.reminder)).toEqual([1, 1, 1, 1]);
  });

  it('a new execute moving the due time forward wins over a lease held by a dead worker', async () => {
    const R = 15 * MIN;
    const L = 10_000;
    const w = world({ repeatMs: R, leaseMs: L });
    const inc = await w.dueIncident('15m');
    const due = T0 + 15 * MIN;
    w.set(due + 1_000);
    await w.schedule.claimDue(w.now(), L, 50);
    // The execute lands while the lease is held: the schedule follows the new due time.
    const after = await w.execute(inc.id, '30m');
    const newDue = due + 1_000 + 30 * MIN;
    expect(after.next_update_due_at).toBe(new Date(newDue).toISOString());
    expect(await w.score(inc.id)).toBe(newDue);
    // The old lease lapsing brings nothing back; the new due time does, once.
    const b = w.worker('B');
    for (const t of [due + 1_000 + L, due + 1_000 + 2 * L, newDue - 1]) {
      w.set(t);
      expect(await b.runDue()).toBe(0);
    }
    expect(await w.overdueEvents(inc.id)).toEqual([]);
    w.set(newDue);
    expect(await b.runDue()).toBe(1);
    expect(await b.runDue()).toBe(0);
    const evs = await w.overdueEvents(inc.id);
    expect(evs.map((e) => e.data)).toEqual([
      { due_at: new Date(newDue).toISOString(), overdue_ms: 0, reminder: 1, last_executed_by: oncall },
    ]);
  });

  it('a new execute landing while a worker is mid-reminder wins: that reminder is not recorded and the schedule keeps the new time', async () => {
    const R = 15 * MIN;
    const L = 10_000;
    const w = world({ repeatMs: R, leaseMs: L });
    const inc = await w.dueIncident('15m');
    const due = T0 + 15 * MIN;
    // Reminder 1 already recorded; reminder 2 is being sent when the execute lands.
    w.set(due);
    expect(await w.worker('A').runDue()).toBe(1);
    w.set(due + R + 500);
    let newDue = 0;
    const a = w.worker('A', async (incident, reminder) => {
      if (reminder !== 2) return;
      await w.execute(incident.id, '1h');
      newDue = w.now() + 60 * MIN;
    });
    expect(await a.runDue()).toBe(0);
    expect(w.errors).toEqual([]);
    expect(await w.reminderNumbers(inc.id)).toEqual([1]);
    const stored = (await w.repo.get(inc.id))!;
    expect(stored.next_update_due_at).toBe(new Date(newDue).toISOString());
    expect(stored.update_reminders ?? 0).toBe(0);
    expect(await w.score(inc.id)).toBe(newDue);
    // Counting starts afresh from the new due time.
    w.set(newDue + 10);
    expect(await a.runDue()).toBe(1);
    const evs = await w.overdueEvents(inc.id);
    expect(evs.map((e) => (e.data as { reminder: number; due_at: string }).reminder)).toEqual([1, 1]);
    expect((evs[1]!.data as { due_at: string }).due_at).toBe(new Date(newDue).toISOString());
  });

  it("a stale lease's release leaves alone the time an execute set meanwhile (store level)", async () => {
    const w = world({ repeatMs: 15 * MIN, leaseMs: 10_000 });
    const inc = await w.dueIncident('15m');
    const due = T0 + 15 * MIN;
    w.set(due);
    const [{ lease }] = (await w.schedule.claimDue(w.now(), 10_000, 50)) as [{ incidentId: string; lease: number }];
    await w.execute(inc.id, '1h');
    const newDue = due + 60 * MIN;
    await w.schedule.release(inc.id, lease, null);
    expect(await w.score(inc.id)).toBe(newDue);
    await w.schedule.release(inc.id, lease, due + 15 * MIN);
    expect(await w.score(inc.id)).toBe(newDue);
    // A release under the lease still held does move it.
    w.set(newDue);
    const [{ lease: mine }] = (await w.schedule.claimDue(w.now(), 10_000, 50)) as [
      { incidentId: string; lease: number },
    ];
    expect(mine).toBe(newDue + 10_000);
    await w.schedule.release(inc.id, mine, newDue + 5);
    expect(await w.score(inc.id)).toBe(newDue + 5);
    await w.schedule.release(inc.id, newDue + 5, null);
    expect(await w.score(inc.id)).toBeNull();
  });

  it('an execute without next_update_in clears the due time and drops the schedule entry', async () => {
    const w = world({ repeatMs: 15 * MIN, leaseMs: 10_000 });
    const inc = await w.dueIncident('15m');
    w.set(T0 + 5 * MIN);
    const after = await w.execute(inc.id, undefined);
    expect(after.next_update_due_at).toBeNull();
    expect(await w.score(inc.id)).toBeNull();
    w.set(T0 + 10 * 60 * MIN);
    expect(await w.worker('A').runDue()).toBe(0);
    expect(await w.overdueEvents(inc.id)).toEqual([]);
  });

  it('resolve stops the reminders and removes the schedule entry, also while a lease is held', async () => {
    const R = 15 * MIN;
    const L = 5_000;
    const w = world({ repeatMs: R, leaseMs: L });
    const a = w.worker('A');
    // One resolved after a reminder went out, one resolved while a (dead) worker held its lease.
    const reminded = await w.dueIncident('15m');
    const leased = await w.dueIncident('15m');
    const due = T0 + 15 * MIN;
    w.set(due);
    await w.schedule.claimDue(w.now(), L, 1);
    expect(await a.runDue()).toBe(1);
    const leaseHolder = (await w.score(reminded.id)) === due + R ? leased : reminded;
    const other = leaseHolder === leased ? reminded : leased;
    expect(await w.score(leaseHolder.id)).toBe(due + L);

    w.set(due + 1_000);
    for (const inc of [reminded, leased]) {
      const r = await w.incidents.update(inc.id, { status: 'resolved' }, oncall);
      expect(r.next_update_due_at).toBeNull();
      expect(await w.score(inc.id)).toBeNull();
    }
    // Past the lease, past several intervals: nothing more, and nothing put back.
    for (const t of [due + L, due + R, due + 5 * R]) {
      w.set(t);
      expect(await a.runDue()).toBe(0);
    }
    expect(await w.reminderNumbers(other.id)).toEqual([1]);
    expect(await w.reminderNumbers(leaseHolder.id)).toEqual([]);
    expect(await db.redis.zcard(w.keys.reminders())).toBe(0);
    expect(w.errors).toEqual([]);
  });

  it('resolve landing while a worker is mid-reminder: not recorded, the entry stays gone', async () => {
    const w = world({ repeatMs: 15 * MIN, leaseMs: 5_000 });
    const inc = await w.dueIncident('15m');
    w.set(T0 + 15 * MIN);
    const a = w.worker('A', async (incident) => {
      await w.incidents.update(incident.id, { status: 'resolved' }, oncall);
    });
    expect(await a.runDue()).toBe(0);
    expect(await w.overdueEvents(inc.id)).toEqual([]);
    expect(await w.score(inc.id)).toBeNull();
    w.advance(60 * MIN);
    expect(await a.runDue()).toBe(0);
    expect(await w.score(inc.id)).toBeNull();
  });

  it('close (from open) stops the reminders and removes the schedule entry', async () => {
    const R = 15 * MIN;
    const w = world({ repeatMs: R, leaseMs: 5_000 });
    const inc = await w.dueIncident('15m');
    const due = T0 + 15 * MIN;
    const a = w.worker('A');
    w.set(due);
    expect(await a.runDue()).toBe(1);
    w.set(due + 2_000);
    const closed = await w.incidents.close(inc.id, {}, oncall);
    expect(closed.status).toBe('closed');
    expect(closed.next_update_due_at).toBeNull();
    expect(await w.score(inc.id)).toBeNull();
    w.set(due + 10 * R);
    expect(await a.runDue()).toBe(0);
    expect(await w.reminderNumbers(inc.id)).toEqual([1]);
  });

  it('a worker down for 3 intervals sends ONE reminder, numbered by the intervals passed', async () => {
    const R = 15 * MIN;
    const w = world({ repeatMs: R, leaseMs: 10_000 });
    const inc = await w.dueIncident('15m');
    const due = T0 + 15 * MIN;
    const a = w.worker('A');
    w.set(due + 100);
    expect(await a.runDue()).toBe(1);
    // Down from here until 3 intervals later: reminders 2, 3 and 4 were due meanwhile.
    w.set(due + 3 * R + 20_000);
    const b = w.worker('B');
    let n = 0;
    for (let i = 0; i < 10; i++) n += (await a.runDue()) + (await b.runDue());
    expect(n).toBe(1);
    const evs = await w.overdueEvents(inc.id);
    expect(evs.map((e) => e.data)).toEqual([
      { due_at: new Date(due).toISOString(), overdue_ms: 100, reminder: 1, last_executed_by: oncall },
      { due_at: new Date(due).toISOString(), overdue_ms: 3 * R + 20_000, reminder: 4, last_executed_by: oncall },
    ]);
    expect(w.calls.map((c) => c.reminder)).toEqual([1, 4]);
    // The cadence carries on from there: reminder 5 one interval after 4's slot, not after its send.
    expect(await w.score(inc.id)).toBe(due + 4 * R);
    w.set(due + 4 * R);
    expect(await b.runDue()).toBe(1);
    expect(await w.reminderNumbers(inc.id)).toEqual([1, 4, 5]);
  });

  it('handles many due incidents in one run, each once, across two workers', async () => {
    const R = 15 * MIN;
    const w = world({ repeatMs: R, leaseMs: 10_000 });
    const incs = await Promise.all(Array.from({ length: 12 }, () => w.dueIncident('15m')));
    w.set(T0 + 15 * MIN + 1);
    const a = w.worker('A');
    const b = w.worker('B');
    const counts = await Promise.all([a.runDue(5), b.runDue(5), a.runDue(5), b.runDue(5)]);
    const more = (await a.runDue()) + (await b.runDue());
    expect(counts.reduce((x, y) => x + y, 0) + more).toBe(12);
    for (const inc of incs) expect(await w.reminderNumbers(inc.id)).toEqual([1]);
    expect(w.calls).toHaveLength(12);
  });
});
