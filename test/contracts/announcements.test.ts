import { describe, expect, it } from 'vitest';
import type { AnnouncementReminderLog, AnnouncementRepo } from '../../src/ports/index.js';
import { RedisAnnouncementRepo } from '../../src/store/announcements.js';
import { InMemoryAnnouncementRepo } from '../service/fakes.js';
import { waitFor } from '../support/wait.js';
import { contractRedis, ids } from './support.js';

/** The Slack announcement store's contract, as AnnouncementService and the reminder worker rely on it. */
const db = contractRedis('c-ann');
type Repo = AnnouncementRepo & AnnouncementReminderLog;

function contract(make: () => Repo) {
  it('keeps the first announcement of an incident, and none for another', async () => {
    const repo = make();
    const inc = ids.next('incident');
    expect(await repo.create(inc, { channel: 'C1', ts: '1.1', execution_id: null })).toBe(true);
    expect(await repo.create(inc, { channel: 'C2', ts: '2.2', execution_id: null })).toBe(false);
    expect(await repo.get(inc)).toEqual({ channel: 'C1', ts: '1.1', execution_id: null });
    expect(await repo.get(ids.next('incident'))).toBeNull();
  });

  it('follows only a newer execution, and answers null without an announcement', async () => {
    const repo = make();
    const inc = ids.next('incident');
    const older = ids.next('execution');
    const newer = ids.next('execution');
    expect(await repo.trackExecution(inc, newer)).toBeNull();
    expect(await repo.get(inc)).toBeNull();
    await repo.create(inc, { channel: 'C1', ts: '1.1', execution_id: null });
    expect(await repo.trackExecution(inc, older)).toEqual({ channel: 'C1', ts: '1.1', execution_id: older });
    expect(await repo.trackExecution(inc, newer)).toEqual({ channel: 'C1', ts: '1.1', execution_id: newer });
    expect(await repo.trackExecution(inc, older)).toEqual({ channel: 'C1', ts: '1.1', execution_id: newer });
    expect((await repo.get(inc))?.execution_id).toBe(newer);
  });

  it('records each reminder number once, never going back, and only under an announcement', async () => {
    const repo = make();
    const inc = ids.next('incident');
    await repo.recordReminder(inc, 1);
    expect(await repo.reminders(inc)).toBeNull();
    const a = { channel: 'C1', ts: '1.1', execution_id: null };
    await repo.create(inc, a);
    expect(await repo.reminders(inc)).toEqual({ announcement: a, lastReminder: 0 });
    await repo.recordReminder(inc, 2);
    await repo.recordReminder(inc, 1);
    expect(await repo.reminders(inc)).toEqual({ announcement: a, lastReminder: 2 });
    // The record itself is unchanged by the reminder log.
    expect(await repo.get(inc)).toEqual(a);
  });

  it('lets one refresher at a time hold the claim, and makes it render again after a change meanwhile', async () => {
    const repo = make();
    const inc = ids.next('incident');
    expect(await repo.claimRefresh(inc, 'a', 30_000)).toBe(true);
    // Another process is refused and marks the announcement changed.
    expect(await repo.claimRefresh(inc, 'b', 30_000)).toBe(false);
    expect(await repo.finishRefresh(inc, 'b', 30_000)).toBe(false);
    expect(await repo.finishRefresh(inc, 'a', 30_000)).toBe(true);
    // Nothing changed since: released, and the next one takes it.
    expect(await repo.finishRefresh(inc, 'a', 30_000)).toBe(false);
    expect(await repo.claimRefresh(inc, 'b', 30_000)).toBe(true);
    expect(await repo.finishRefresh(inc, 'b', 30_000)).toBe(false);
    // A claim is taken, not re-entered: the holder asking again counts as a change meanwhile.
    expect(await repo.claimRefresh(inc, 'c', 30_000)).toBe(true);
    expect(await repo.claimRefresh(inc, 'c', 30_000)).toBe(false);
    expect(await repo.finishRefresh(inc, 'c', 30_000)).toBe(true);
    expect(await repo.finishRefresh(inc, 'c', 30_000)).toBe(false);
  });

  it('gives up a claim whose holder died once its time is over', async () => {
    const repo = make();
    const inc = ids.next('incident');
    expect(await repo.claimRefresh(inc, 'dead', 150)).toBe(true);
    expect(await repo.claimRefresh(inc, 'next', 150)).toBe(false);
    await waitFor(() => repo.claimRefresh(inc, 'next', 30_000), { timeoutMs: 10_000, what: 'the claim to expire' });
    expect(await repo.claimRefresh(inc, 'dead', 30_000)).toBe(false);
  });
}

describe.each<[string, () => Repo]>([
  ['in-memory', () => new InMemoryAnnouncementRepo()],
  ['redis', () => new RedisAnnouncementRepo(db.redis(), db.keys())],
])('AnnouncementRepo contract: %s', (_name, make) => contract(make));
