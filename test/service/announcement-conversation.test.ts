import { describe, expect, it } from 'vitest';
import type { Delivery } from '../../src/domain/execution/execution.js';
import type { Incident } from '../../src/domain/incident/incident.js';
import type { AnnouncementReceipts } from '../../src/ports/index.js';
import { routedAnnouncements } from './announcement-world.js';
import { apiActor, slackActor } from './fakes.js';
import { webhookBody, type World } from './world.js';

/**
 * The announcement as the incident's conversation (living updates): receipts that link to each
 * delivered message and say whether it is still correctable, the next update's due time and how
 * overdue it is, and the overdue reminders posted once per reminder number in its thread.
 */

const routed = () => routedAnnouncements({ defaultChannel: null });

/** Marks deliveries delivered as a worker would, with the message the platform answered. */
function deliver(w: World, deliveries: Delivery[], permalink: (d: Delivery) => string | null) {
  for (const d of deliveries) {
    const stored = w.repos.executions.deliveries.get(d.id)!;
    w.repos.executions.deliveries.set(d.id, {
      ...stored,
      status: 'delivered',
      delivered_at: w.clock.now().toISOString(),
      message: { id: `ts-${d.id}`, channel: 'C0OPS', permalink: permalink(d) },
    });
  }
}

async function executed(w: World, incidentId: string, body: Record<string, unknown> = {}) {
  const r = await w.services.executions.execute(incidentId, body, slackActor, { dryRun: false });
  if (r.dryRun) throw new Error('expected a real execute');
  return r;
}

async function lastUpdate(t: ReturnType<typeof routed>) {
  await t.router.idle();
  return t.chat.updates.at(-1)!.content;
}

/** The receipts once an update shows `executionId` and passes `check` (executed/deliveryChanged run in the background). */
async function receiptsOf(
  t: ReturnType<typeof routed>,
  executionId: string,
  check: (r: AnnouncementReceipts) => boolean = () => true,
): Promise<AnnouncementReceipts> {
  const deadline = Date.now() + 2000;
  for (;;) {
    await t.router.idle();
    const r = t.chat.updates.at(-1)?.content.receipts;
    if (r && r.executionId === executionId && check(r)) return r;
    if (Date.now() > deadline) throw new Error(`no update with the receipts of ${executionId}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

describe('announcement receipts', () => {
  it('link each delivered message where the platform gave a permalink, and offer Correct/Retract once one is delivered', async () => {
    const t = routed();
    const ops = (await t.w.services.connections.create(webhookBody('Ops'))).connection;
    await t.w.services.connections.create(webhookBody('Hook'));
    const i = await t.w.services.incidents.create({ title: 'T', severity: 'minor' }, slackActor);
    await t.router.announce(i.id, ['C1']);
    const r = await executed(t.w, i.id);
    t.router.executed(i.id, r.execution.id);
    let receipts = await receiptsOf(t, r.execution.id);
    expect(receipts).toMatchObject({
      executionId: r.execution.id,
      kind: 'announcement',
      targetExecutionId: null,
      correctableExecutionId: null,
    });

    deliver(t.w, r.deliveries, (d) =>
      d.connection_id === ops.id ? 'https://herald-test.slack.com/archives/C0OPS/p1?thread_ts=1.2&cid=C0OPS' : null,
    );
    t.router.deliveryChanged(r.deliveries[0]!);
    receipts = await receiptsOf(t, r.execution.id, (x) => x.correctableExecutionId === r.execution.id);
    expect(receipts.lines.map((l) => [l.connectionName, l.status, l.permalink]).sort()).toEqual([
      ['Hook', 'delivered', null],
      ['Ops', 'delivered', 'https://herald-test.slack.com/archives/C0OPS/p1?thread_ts=1.2&cid=C0OPS'],
    ]);
  });

  it('follow a correction once it is made, still offering the corrected execute; nothing after a retraction', async () => {
    const t = routed();
    await t.w.services.connections.create(webhookBody('Ops'));
    const i = await t.w.services.incidents.create({ title: 'T', severity: 'minor' }, slackActor);
    await t.router.announce(i.id, ['C1']);
    const r = await executed(t.w, i.id);
    deliver(t.w, r.deliveries, () => 'https://example.slack.com/archives/C0OPS/p1');
    const c = await t.w.services.executions.correct(i.id, r.execution.id, { note: 'Wrong ETA.' }, slackActor);
    t.router.executed(i.id, c.execution.id);
    const receipts = await receiptsOf(t, c.execution.id);
    expect(receipts).toMatchObject({
      executionId: c.execution.id,
      kind: 'correction',
      targetExecutionId: r.execution.id,
      correctableExecutionId: r.execution.id,
    });
    const x = await t.w.services.executions.retract(i.id, r.execution.id, { reason: 'Wrong incident.' }, slackActor);
    t.router.executed(i.id, x.execution.id);
    expect(await receiptsOf(t, x.execution.id)).toMatchObject({
      kind: 'retraction',
      targetExecutionId: r.execution.id,
      correctableExecutionId: null,
    });
  });
});

describe('next update due', () => {
  it('shows when the next update is due, and how overdue it is once that has passed (as of each render)', async () => {
    const t = routed();
    await t.w.services.connections.create(webhookBody('Ops'));
    const i = await t.w.services.incidents.create({ title: 'T', severity: 'minor' }, slackActor);
    await t.router.announce(i.id, ['C1']);
    await t.router.idle();
    expect(t.chat.posts[0]!.content.nextUpdate).toBeNull();
    // The fake clock starts at 10:00 UTC: due at 10:30.
    await executed(t.w, i.id, { next_update_in: '30m' });
    t.router.refresh(i.id);
    expect((await lastUpdate(t)).nextUpdate).toEqual({ due: '10:30 UTC', overdue: null });
    t.w.clock.advance(35 * 60_000);
    t.router.refresh(i.id);
    expect((await lastUpdate(t)).nextUpdate).toEqual({ due: '10:30 UTC', overdue: '5 min' });
    // An execute without next_update_in clears it.
    await executed(t.w, i.id);
    t.router.refresh(i.id);
    expect((await lastUpdate(t)).nextUpdate).toBeNull();
  });
});

describe('overdue reminders (ReminderNotifier)', () => {
  async function overdue(t: ReturnType<typeof routed>, actor = slackActor): Promise<Incident> {
    await t.w.services.connections.create(webhookBody('Ops'));
    const i = await t.w.services.incidents.create({ title: 'Checkout <down>', severity: 'major' }, slackActor);
    await t.router.announce(i.id, ['C1']);
    const r = await t.w.services.executions.execute(i.id, { next_update_in: '30m' }, actor, { dryRun: false });
    if (r.dryRun) throw new Error('expected a real execute');
    t.w.clock.advance(35 * 60_000);
    return t.w.services.incidents.get(i.id);
  }

  it('posts each reminder number once in the announcement thread, naming the last executor, then shows "overdue"', async () => {
    const t = routed();
    const incident = await overdue(t);
    expect(incident.last_executed_by).toEqual(slackActor);
    await t.router.remind(incident, 1, 5 * 60_000);
    // Asked again for the same number (a worker that died before recording it): nothing more.
    await t.router.remind(incident, 1, 5 * 60_000);
    expect(t.chat.reminders).toHaveLength(1);
    expect(t.chat.reminders[0]).toEqual({
      thread: { channel: 'C1', ts: '1.000001' },
      content: { incident, reminder: 1, due: '10:30 UTC', overdue: '5 min', executor: slackActor },
    });
    expect(t.repo.lastReminders.get(incident.id)).toBe(1);
    expect((await lastUpdate(t)).nextUpdate).toEqual({ due: '10:30 UTC', overdue: '5 min' });

    await t.router.remind(incident, 2, 20 * 60_000);
    expect(t.chat.reminders.map((r) => [r.content.reminder, r.content.overdue])).toEqual([
      [1, '5 min'],
      [2, '20 min'],
    ]);
    // An older number arriving late is not posted either.
    await t.router.remind(incident, 1, 5 * 60_000);
    expect(t.chat.reminders).toHaveLength(2);
    await t.router.idle();
  });

  it('names an API key executor too, and records nothing when the post fails (the worker asks again)', async () => {
    const t = routed();
    const incident = await overdue(t, apiActor);
    t.chat.refuse.add('C1');
    await expect(t.router.remind(incident, 1, 5 * 60_000)).rejects.toThrow('channel_not_found');
    expect(t.repo.lastReminders.get(incident.id)).toBeUndefined();
    t.chat.refuse.delete('C1');
    await t.router.remind(incident, 1, 5 * 60_000);
    expect(t.chat.reminders.at(-1)!.content.executor).toEqual(apiActor);
    expect(t.repo.lastReminders.get(incident.id)).toBe(1);
    await t.router.idle();
  });

  it('does nothing for an incident without an announcement', async () => {
    const t = routed();
    const i = await t.w.services.incidents.create({ title: 'T', severity: 'minor' }, apiActor);
    await t.w.services.connections.create(webhookBody('Ops'));
    await executed(t.w, i.id, { next_update_in: '15m' });
    t.w.clock.advance(20 * 60_000);
    await t.router.remind(await t.w.services.incidents.get(i.id), 1, 5 * 60_000);
    await t.router.idle();
    expect(t.chat.reminders).toEqual([]);
    expect(t.chat.updates).toEqual([]);
  });
});
