import { describe, expect, it } from 'vitest';
import type { ReminderSchedule } from '../../src/ports/index.js';
import { RedisReminderSchedule } from '../../src/store/reminders.js';
import { InMemoryReminderSchedule } from '../service/fakes.js';
import { contractRedis, ids, type Make } from './support.js';

/**
 * The reminder schedule's contract, as ReminderService relies on it. `schedule` puts an incident's
 * reminder at a time or drops it (null): what the incident commit mirrors from `next_reminder_at`
 * (mirrorReminder writes the same ZADD / ZREM in Redis).
 */
interface Harness {
  schedule: ReminderSchedule;
  at(incidentId: string, ms: number | null): Promise<void>;
}

const db = contractRedis('c-rem');

function redisHarness(): Harness {
  const keys = db.keys();
  const redis = db.redis();
  return {
    schedule: new RedisReminderSchedule(redis, keys),
    async at(incidentId, ms) {
      if (ms === null) await redis.zrem(keys.reminders(), incidentId);
      else await redis.zadd(keys.reminders(), ms, incidentId);
    },
  };
}

function fakeHarness(): Harness {
  const schedule = new InMemoryReminderSchedule();
  return { schedule, at: (id, ms) => Promise.resolve(schedule.schedule(id, ms)) };
}

const T = Date.parse('2026-11-22T10:00:00.000Z');
const LEASE = 60_000;

function contract(make: Make<Harness>) {
  it('claims only what is due, earliest first, up to the limit', async () => {
    const h = make();
    const [a, b, c, late] = [ids.next('incident'), ids.next('incident'), ids.next('incident'), ids.next('incident')];
    await h.at(c, T - 1000);
    await h.at(a, T - 3000);
    await h.at(b, T - 2000);
    await h.at(late, T + 1000);
    expect(await h.schedule.claimDue(T, LEASE, 2)).toEqual([
      { incidentId: a, lease: T + LEASE },
      { incidentId: b, lease: T + LEASE },
    ]);
    expect(await h.schedule.claimDue(T, LEASE, 10)).toEqual([{ incidentId: c, lease: T + LEASE }]);
    expect(await h.schedule.claimDue(T + 1000, LEASE, 10)).toEqual([{ incidentId: late, lease: T + 1000 + LEASE }]);
  });

  it('hands a due reminder to one claimer only, and again once the lease lapses unreleased', async () => {
    const h = make();
    const id = ids.next('incident');
    await h.at(id, T);
    const claims = await Promise.all([0, 1, 2, 3].map(() => h.schedule.claimDue(T, LEASE, 10)));
    expect(claims.flat()).toEqual([{ incidentId: id, lease: T + LEASE }]);
    expect(await h.schedule.claimDue(T + LEASE - 1, LEASE, 10)).toEqual([]);
    // The claimer died: at the lease's end another worker picks it up.
    expect(await h.schedule.claimDue(T + LEASE, LEASE, 10)).toEqual([{ incidentId: id, lease: T + 2 * LEASE }]);
  });

  it('releases a held lease to a new time, or drops the incident', async () => {
    const h = make();
    const [next, done] = [ids.next('incident'), ids.next('incident')];
    await h.at(next, T);
    await h.at(done, T);
    const claimed = await h.schedule.claimDue(T, LEASE, 10);
    expect(claimed).toHaveLength(2);
    await h.schedule.release(next, T + LEASE, T + 5000);
    await h.schedule.release(done, T + LEASE, null);
    expect(await h.schedule.claimDue(T + 4999, LEASE, 10)).toEqual([]);
    expect(await h.schedule.claimDue(T + 10 * LEASE, LEASE, 10)).toEqual([{ incidentId: next, lease: T + 11 * LEASE }]);
  });

  it('leaves a lease alone once a commit set a new time (an execute wins over the release)', async () => {
    const h = make();
    const id = ids.next('incident');
    await h.at(id, T);
    const [claim] = await h.schedule.claimDue(T, LEASE, 10);
    await h.at(id, T + 30 * LEASE);
    await h.schedule.release(id, claim!.lease, null);
    await h.schedule.release(id, claim!.lease, T + 1);
    expect(await h.schedule.claimDue(T + 30 * LEASE - 1, LEASE, 10)).toEqual([]);
    expect(await h.schedule.claimDue(T + 30 * LEASE, LEASE, 10)).toEqual([{ incidentId: id, lease: T + 31 * LEASE }]);
  });

  it('never claims a cancelled reminder, and a release of its old lease does not bring it back', async () => {
    const h = make();
    const [kept, cancelled] = [ids.next('incident'), ids.next('incident')];
    await h.at(kept, T);
    await h.at(cancelled, T);
    await h.at(cancelled, null);
    expect(await h.schedule.claimDue(T, LEASE, 10)).toEqual([{ incidentId: kept, lease: T + LEASE }]);
    await h.at(kept, null);
    await h.schedule.release(kept, T + LEASE, T + 1000);
    expect(await h.schedule.claimDue(T + 100 * LEASE, LEASE, 10)).toEqual([]);
  });
}

describe.each<[string, Make<Harness>]>([
  ['in-memory', fakeHarness],
  ['redis', redisHarness],
])('ReminderSchedule contract: %s', (_name, make) => contract(make));
