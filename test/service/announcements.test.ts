import { describe, expect, it } from 'vitest';
import { AnnouncementService } from '../../src/services/announcement-service.js';
import { routedAnnouncements } from './announcement-world.js';
import { apiActor, idOf, InMemoryAnnouncementRepo, slackActor } from './fakes.js';
import { webhookBody } from './world.js';

/** AnnouncementService (where announcements live) and AnnouncementRouter (what is posted where, when) over fakes. */

describe('AnnouncementService', () => {
  it('remembers the first announcement of an incident; a later one is refused', async () => {
    const svc = new AnnouncementService(new InMemoryAnnouncementRepo());
    expect(await svc.remember('inc_1', 'C1', '1.1')).toBe(true);
    expect(await svc.remember('inc_1', 'C2', '2.2')).toBe(false);
    expect(await svc.find('inc_1')).toEqual({ channel: 'C1', ts: '1.1', execution_id: null });
    expect(await svc.find('inc_2')).toBeNull();
  });

  it('makes the receipts follow the newest execution only; none without an announcement', async () => {
    const svc = new AnnouncementService(new InMemoryAnnouncementRepo());
    expect(await svc.trackExecution('inc_1', idOf('execution', 2))).toBeNull();
    await svc.remember('inc_1', 'C1', '1.1');
    await svc.trackExecution('inc_1', idOf('execution', 2));
    expect((await svc.trackExecution('inc_1', idOf('execution', 1)))!.execution_id).toBe(idOf('execution', 2));
    expect((await svc.trackExecution('inc_1', idOf('execution', 3)))!.execution_id).toBe(idOf('execution', 3));
  });

  it('refreshExclusively: another holder only marks a change, and the holder renders again before letting go', async () => {
    const repo = new InMemoryAnnouncementRepo();
    const svc = new AnnouncementService(repo);
    let renders = 0;
    let other: Promise<void> | null = null;
    await svc.refreshExclusively('inc_1', 'a', async () => {
      renders++;
      // A second process asks while this one renders: it does not render itself.
      if (!other) other = svc.refreshExclusively('inc_1', 'b', () => Promise.reject(new Error('must not render')));
      await other;
    });
    expect(renders).toBe(2);
    expect(repo.claims.size).toBe(0);
  });

  it('refreshExclusively releases the claim after a failed render and reports the failure', async () => {
    const repo = new InMemoryAnnouncementRepo();
    const svc = new AnnouncementService(repo);
    await expect(svc.refreshExclusively('inc_1', 'a', () => Promise.reject(new Error('slack down')))).rejects.toThrow(
      'slack down',
    );
    expect(repo.claims.size).toBe(0);
  });
});

/** A router over the real services of a world, a fake chat and in-memory announcements. */
const routed = routedAnnouncements;

describe('AnnouncementRouter.announce', () => {
  it('posts in the first channel that takes the message, skipping empty and repeated ones, and remembers it', async () => {
    const { w, chat, store, router, warnings } = routed();
    const i = await w.services.incidents.create({ title: 'Checkout down', severity: 'major' }, slackActor);
    chat.refuse.add('CPRIVATE');
    await router.announce(i.id, ['CPRIVATE', null, '', 'CPRIVATE', 'CDEFAULT', 'UALICE']);
    expect(chat.posts.map((p) => p.channel)).toEqual(['CPRIVATE', 'CDEFAULT']);
    expect(chat.posts[1]!.content).toEqual({ incident: i, receipts: null, nextUpdate: null });
    expect(await store.find(i.id)).toEqual({ channel: 'CDEFAULT', ts: '1.000001', execution_id: null });
    expect(warnings).toEqual(['could not post the incident announcement; trying the next channel']);
    await router.idle();
  });

  it('announces an incident declared in the chat where it was declared, else the default channel, else to its author', async () => {
    const { w, chat, store, router } = routed();
    const here = await w.services.incidents.create({ title: 'Here', severity: 'minor' }, slackActor);
    await router.announceDeclared(here.id, { channel: 'CHERE', user: 'UALICE' });
    expect((await store.find(here.id))!.channel).toBe('CHERE');
    const home = await w.services.incidents.create({ title: 'From the Home tab', severity: 'minor' }, slackActor);
    await router.announceDeclared(home.id, { channel: null, user: 'UALICE' });
    expect((await store.find(home.id))!.channel).toBe('CDEFAULT');
    chat.refuse.add('CDEFAULT');
    const dm = await w.services.incidents.create({ title: 'Nowhere else', severity: 'minor' }, slackActor);
    await router.announceDeclared(dm.id, { user: 'UALICE' });
    expect((await store.find(dm.id))!.channel).toBe('UALICE');
    const none = routed({ defaultChannel: null });
    const i = await none.w.services.incidents.create({ title: 'T', severity: 'minor' }, slackActor);
    await none.router.announceDeclared(i.id, { channel: null, user: 'UBOB' });
    expect(none.chat.posts.map((p) => p.channel)).toEqual(['UBOB']);
    await router.idle();
    await none.router.idle();
  });

  it('says so when no channel takes the message, remembering nothing', async () => {
    const { w, chat, store, router, warnings } = routed();
    const i = await w.services.incidents.create({ title: 'T', severity: 'minor' }, slackActor);
    chat.refuse.add('C1');
    await router.announce(i.id, ['C1', undefined]);
    expect(await store.find(i.id)).toBeNull();
    expect(warnings.at(-1)).toBe('incident not announced in Slack: no channel took the message');
  });
});

describe('AnnouncementRouter.incidentChanged', () => {
  it('announces incidents created outside Slack in the default channel, and leaves Slack-made ones to the Slack listener', async () => {
    const { w, chat, router } = routed();
    const slackMade = await w.services.incidents.create({ title: 'From Slack', severity: 'minor' }, slackActor);
    router.incidentChanged(slackMade, 'created');
    const apiMade = await w.services.incidents.create({ title: 'From the API', severity: 'minor' }, apiActor);
    router.incidentChanged(apiMade, 'created');
    await waitUntil(() => chat.posts.length === 1);
    await new Promise((r) => setTimeout(r, 10));
    expect(chat.posts.map((p) => [p.channel, p.content.incident.id])).toEqual([['CDEFAULT', apiMade.id]]);
  });

  it('announces nothing for an API-made incident without a default channel', async () => {
    const { w, chat, router } = routed({ defaultChannel: null });
    const i = await w.services.incidents.create({ title: 'T', severity: 'minor' }, apiActor);
    router.incidentChanged(i, 'created');
    await new Promise((r) => setTimeout(r, 10));
    expect(chat.posts).toEqual([]);
  });

  it('updates the announcement in place with the latest state on every later change', async () => {
    const { w, chat, router } = routed();
    const i = await w.services.incidents.create({ title: 'T', severity: 'minor' }, slackActor);
    await router.announce(i.id, ['C1']);
    await router.idle();
    chat.updates.length = 0;
    const resolved = await w.services.incidents.update(i.id, { status: 'resolved' }, slackActor);
    router.incidentChanged(resolved, 'updated');
    await router.idle();
    expect(chat.updates.map((u) => [u.message, u.content.incident.status])).toEqual([
      [{ channel: 'C1', ts: '1.000001' }, 'resolved'],
    ]);
  });

  it('has nothing to update for an incident never announced', async () => {
    const { w, chat, router } = routed();
    const i = await w.services.incidents.create({ title: 'T', severity: 'minor' }, slackActor);
    router.incidentChanged(i, 'updated');
    await router.idle();
    expect(chat.updates).toEqual([]);
  });
});

describe('AnnouncementRouter receipts', () => {
  it('shows the deliveries of the newest execution, named by connection (a deleted one by id)', async () => {
    const { w, chat, router } = routed();
    const a = (await w.services.connections.create(webhookBody('Ops hook'))).connection;
    const b = (await w.services.connections.create(webhookBody('Gone hook'))).connection;
    const i = await w.services.incidents.create({ title: 'T', severity: 'minor' }, slackActor);
    await router.announce(i.id, ['C1']);
    await router.idle();
    const r = await w.services.executions.execute(i.id, {}, slackActor, { dryRun: false });
    if (r.dryRun) throw new Error('expected a real execute');
    await w.services.connections.delete(b.id);
    router.executed(i.id, r.execution.id);
    await waitUntil(() => chat.updates.some((u) => u.content.receipts !== null));
    await router.idle();
    const receipts = chat.updates.at(-1)!.content.receipts!;
    expect(receipts.executionId).toBe(r.execution.id);
    expect(receipts.status).toBe('in_progress');
    // Deleting a connection cancels its queued deliveries (an attempt recorded as cancelled), as in production.
    expect(receipts.lines.map((l) => [l.connectionName, l.status, l.attempts])).toEqual([
      [b.id, 'cancelled', 1],
      ['Ops hook', 'queued', 0],
    ]);
    expect(a.id).not.toBe(b.id);
  });

  it('never lets an older execution take the receipts over', async () => {
    const { w, chat, router, store } = routed();
    await w.services.connections.create(webhookBody('Hook'));
    const i = await w.services.incidents.create({ title: 'T', severity: 'minor' }, slackActor);
    await router.announce(i.id, ['C1']);
    const first = await w.services.executions.execute(i.id, {}, slackActor, { dryRun: false });
    const second = await w.services.executions.execute(i.id, {}, slackActor, { dryRun: false });
    if (first.dryRun || second.dryRun) throw new Error('expected real executes');
    router.deliveryChanged({ incident_id: i.id, execution_id: second.execution.id });
    router.deliveryChanged({ incident_id: i.id, execution_id: first.execution.id });
    await new Promise((r) => setTimeout(r, 10));
    await router.idle();
    expect((await store.find(i.id))!.execution_id).toBe(second.execution.id);
    expect(chat.updates.at(-1)!.content.receipts!.executionId).toBe(second.execution.id);
  });
});

describe('AnnouncementRouter coalescing', () => {
  it('collapses a burst of refreshes into one more update showing the latest state', async () => {
    const { w, chat, router } = routed();
    const i = await w.services.incidents.create({ title: 'T', severity: 'minor' }, slackActor);
    await router.announce(i.id, ['C1']);
    await router.idle();
    chat.updates.length = 0;
    for (const status of ['identified', 'monitoring', 'resolved'] as const) {
      await w.services.incidents.update(i.id, { status }, slackActor);
      router.refresh(i.id);
    }
    await router.idle();
    expect(chat.updates.length).toBeLessThanOrEqual(2);
    expect(chat.updates.at(-1)!.content.incident.status).toBe('resolved');
  });
});

async function waitUntil(check: () => boolean): Promise<void> {
  const deadline = Date.now() + 2000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met');
    await new Promise((r) => setTimeout(r, 2));
  }
}
