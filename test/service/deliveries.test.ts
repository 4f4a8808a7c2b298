/**
 * The delivery engine (DeliveryService.process), wired by buildServices over the in-memory fakes: every transition of a
 * delivery, pacing, corrections and retractions of a delivered message, and the wait of an update
 * for its conversation's first message while that one is still being sent.
 */
import { describe, expect, it } from 'vitest';
import { MAX_ATTEMPTS } from '../../src/domain/execution/delivery-policy.js';
import type { Delivery } from '../../src/domain/execution/execution.js';
import { buildServices } from '../../src/composition/services.js';
import type {
  ChannelSenders,
  DeliveryTarget,
  MessageRef,
  OutboundMessage,
  ProcessOutcome,
  SendResult,
} from '../../src/ports/index.js';
import { THREAD_WAIT_DEFAULT_MS, type DeliveryService } from '../../src/services/deliveries.js';
import {
  allowNone,
  apiActor,
  FakeClock,
  FakeQueue,
  FakeSecretBox,
  FakeSendPacer,
  FakeTester,
  FakeTokenCrypto,
  InMemoryAnnouncementRepo,
  InMemoryAudienceRepo,
  InMemoryApiKeyRepo,
  InMemoryConnectionRepo,
  InMemoryConversationRepo,
  InMemoryExecutionRepo,
  InMemoryIncidentRepo,
  InMemoryTemplateRepo,
  SeqIds,
  slackActor,
} from './fakes.js';
import { noReminders } from './world.js';

const delivered = (m: OutboundMessage): SendResult => ({
  outcome: 'delivered',
  httpStatus: 200,
  providerCode: null,
  latencyMs: 40,
  message: { id: `ts-${m.deliveryId}`, channel: 'C1', permalink: null },
});
const unavailable: SendResult = {
  outcome: 'retryable',
  httpStatus: 503,
  providerCode: null,
  latencyMs: 30,
  retryAfterMs: null,
  error: 'HTTP 503',
  ambiguous: false,
};
const gone: SendResult = {
  outcome: 'permanent',
  httpStatus: 404,
  providerCode: null,
  latencyMs: 20,
  error: 'HTTP 404',
  disable: 'the webhook URL answered 404 (it no longer exists)',
};
const refused: SendResult = {
  outcome: 'permanent',
  httpStatus: 400,
  providerCode: 'channel_not_found',
  latencyMs: 20,
  error: 'channel_not_found',
  disable: null,
};

interface Deferred {
  resolve(r: SendResult): void;
}

/** Connection bodies as an operator creates them. */
const SLACK_BOT = { name: 'Bot', type: 'slack', config: { bot_token: 'xoxb-test', channel: 'C1' } };
const WEBHOOK = { name: 'Hook', type: 'webhook', config: { url: 'https://hooks.example.com/herald' } };
const TEAMS = {
  name: 'Teams',
  type: 'teams',
  config: {
    webhook_url: 'https://prod-00.westeurope.logic.azure.com/workflows/abc/triggers/manual/paths/invoke?sig=x',
  },
};

/**
 * The services as production wires them (buildServices) over the in-memory fakes, with a pacer
 * that paces as Redis does and senders that answer what a test says — or hold a send until the
 * test answers it (a platform that takes its time). One connection, one incident.
 */
async function rig(opts: { threadWaitMs?: number; connection?: Record<string, unknown> } = {}) {
  const clock = new FakeClock();
  const ids = new SeqIds();
  const incidents = new InMemoryIncidentRepo();
  const conversations = new InMemoryConversationRepo();
  const repo = new InMemoryExecutionRepo(incidents, conversations);
  const connectionRepo = new InMemoryConnectionRepo();
  const pacer = new FakeSendPacer(clock, repo);
  const sends: OutboundMessage[] = [];
  /** Scripted answers of the next sends (then: delivered). */
  const script: SendResult[] = [];
  /** Deliveries whose send is held until the test answers it. */
  const held = new Map<string, Deferred>();
  const holdNext = new Set<string>();
  const changes: string[] = [];
  const send = (_t: DeliveryTarget, m: OutboundMessage): Promise<SendResult> => {
    sends.push(m);
    if (holdNext.delete(m.deliveryId)) return new Promise<SendResult>((resolve) => held.set(m.deliveryId, { resolve }));
    return Promise.resolve(script.shift() ?? delivered(m));
  };
  /** A new DeliveryService over the same store: what a restarted worker runs. */
  const build = () =>
    buildServices({
      clock,
      ids,
      random: () => 0.5,
      repos: {
        incidents,
        templates: new InMemoryTemplateRepo(),
        connections: connectionRepo,
        apiKeys: new InMemoryApiKeyRepo(),
        executions: repo,
        conversations,
        announcements: new InMemoryAnnouncementRepo(),
        audiences: new InMemoryAudienceRepo(),
      },
      exist: {
        templates: (tids) => Promise.resolve(tids.map(() => false)),
        connections: (cids) => Promise.resolve(cids.map((c) => connectionRepo.connections.has(c))),
      },
      box: new FakeSecretBox(),
      crypto: new FakeTokenCrypto(),
      allow: allowNone,
      tester: new FakeTester(() => {
        throw new Error('no connection test here');
      }),
      senders: { slack: { send }, webhook: { send }, teams: { send } } as unknown as ChannelSenders,
      pacer,
      queue: new FakeQueue(),
      publicUrl: 'https://herald.example.com',
      threadWaitMs: opts.threadWaitMs ?? THREAD_WAIT_DEFAULT_MS,
      slackAdmins: [],
      reminders: noReminders(),
      notices: { deliveryChanged: (d) => void changes.push(`${d.id}:${d.status}`) },
    });
  const services = build();
  const { connection } = await services.connections.create(opts.connection ?? SLACK_BOT);
  const newIncident = async (title = 'Checkout down') =>
    (await services.incidents.create({ title, severity: 'critical' }, apiActor)).id;
  const incidentId = await newIncident();
  /** An execute of the incident: its delivery to the connection, next in their conversation. */
  const execute = async (incident = incidentId): Promise<Delivery> => {
    const r = await services.executions.execute(incident, {}, slackActor, { dryRun: false });
    if (r.dryRun) throw new Error('expected a real execute');
    return r.deliveries.find((d) => d.connection_id === connection.id)!;
  };
  const get = (id: string): Delivery => structuredClone(repo.deliveries.get(id)!);
  return {
    clock,
    repo,
    incidents,
    incidentId,
    conversations,
    connectionRepo,
    connection,
    pacer,
    sends,
    script,
    held,
    holdNext,
    changes,
    service: () => build().deliveries,
    executions: services.executions,
    newIncident,
    execute,
    get,
  };
}

/** Runs a delivery's job until it is done, advancing the clock by each delay as the queue would. */
async function untilDone(s: DeliveryService, clock: FakeClock, id: string): Promise<ProcessOutcome[]> {
  const outcomes: ProcessOutcome[] = [];
  for (let i = 0; i < 100; i++) {
    const o = await s.process(id);
    outcomes.push(o);
    if (o.kind === 'done') return outcomes;
    clock.advance(o.ms);
  }
  throw new Error(`${id} was not done after 100 runs`);
}

/**
 * Runs a delivery's job through its pacing waits (the connection's rate: Slack's is 1 a second),
 * advancing the clock by each as the queue would; the first other outcome.
 */
async function paced(s: DeliveryService, clock: FakeClock, id: string): Promise<ProcessOutcome> {
  for (;;) {
    const o = await s.process(id);
    if (o.kind !== 'delay' || o.reason !== 'pacing') return o;
    clock.advance(o.ms);
  }
}

/** Lets the promises queued by a held send settle. */
const settle = () => new Promise((r) => setImmediate(r));

describe('DeliveryService.process: the transitions of a delivery', () => {
  it('queued → sending → delivered: the receipt, the message, and the conversation it starts', async () => {
    const r = await rig();
    const d = await r.execute();
    const service = r.service();
    r.holdNext.add(d.id);
    const run = service.process(d.id);
    await settle();
    // Marked `sending` before the send, by the pacer's one step.
    expect(r.get(d.id).status).toBe('sending');
    expect(r.get(d.id).sending_since).toBe(r.clock.now().toISOString());
    r.held.get(d.id)!.resolve(delivered(r.sends[0]!));
    expect(await run).toEqual({ kind: 'done', status: 'delivered' });
    const after = r.get(d.id);
    expect(after).toMatchObject({ status: 'delivered', action: 'post', reply_to: null, sending_since: null });
    expect(after.message).toEqual({ id: `ts-${d.id}`, channel: 'C1', permalink: null });
    expect(after.attempts.map((a) => [a.outcome, a.http_status])).toEqual([['delivered', 200]]);
    expect(after.waited_for).toBeUndefined();
    expect(r.changes).toEqual([`${d.id}:sending`, `${d.id}:delivered`]);
    expect(await r.conversations.root(r.incidentId, r.connection.id)).toEqual({ ref: after.message, deliveryId: d.id });
    // Run again (a job run twice): nothing is sent again.
    expect(await service.process(d.id)).toEqual({ kind: 'done', status: 'delivered' });
    expect(r.sends).toHaveLength(1);
  });

  it('retries with backoff, each attempt recorded, then fails for good with a delivery.failed event', async () => {
    const r = await rig();
    const d = await r.execute();
    r.script.push(...Array.from({ length: MAX_ATTEMPTS }, () => unavailable));
    const outcomes = await untilDone(r.service(), r.clock, d.id);
    const delays = outcomes.filter((o) => o.kind === 'delay');
    // Exponential backoff from 2 s, jittered to 75 % by random() = 0.5; Slack's pacing adds none.
    expect(delays.map((o) => o.kind === 'delay' && o.ms)).toEqual([1500, 3000, 6000, 12000, 24000, 48000, 96000]);
    expect(delays.every((o) => o.kind === 'delay' && o.reason === 'retry')).toBe(true);
    expect(outcomes.at(-1)).toEqual({ kind: 'done', status: 'failed' });
    const after = r.get(d.id);
    expect(after.status).toBe('failed');
    expect(after.attempts).toHaveLength(MAX_ATTEMPTS);
    expect(after.attempts.every((a) => a.outcome === 'retryable_failure')).toBe(true);
    expect(r.sends).toHaveLength(MAX_ATTEMPTS);
    const events = r.incidents.events.get(r.incidentId) ?? [];
    expect(events.map((e) => e.type)).toEqual(['incident.created', 'incident.executed', 'delivery.failed']);
    expect(JSON.stringify(events.at(-1))).toContain(`gave up after ${MAX_ATTEMPTS} attempts`);
  });

  it('a retry waits for its not_before even when its job runs early', async () => {
    const r = await rig();
    const d = await r.execute();
    r.script.push(unavailable);
    const service = r.service();
    expect(await service.process(d.id)).toEqual({ kind: 'delay', ms: 1500, reason: 'retry' });
    r.clock.advance(500);
    expect(await service.process(d.id)).toEqual({ kind: 'delay', ms: 1000, reason: 'retry' });
    expect(r.sends).toHaveLength(1);
    r.clock.advance(1000);
    expect(await service.process(d.id)).toEqual({ kind: 'done', status: 'delivered' });
  });

  it('a dead connection is disabled before the failure is written, and its other deliveries are cancelled', async () => {
    const r = await rig({ connection: WEBHOOK });
    const d = await r.execute();
    const other = await r.execute(await r.newIncident('Search down'));
    r.script.push(gone);
    // What the delivery's record says at the moment the connection is written disabled.
    const seen: string[] = [];
    r.connectionRepo.interfere = () => void seen.push(r.get(d.id).status);
    expect(await r.service().process(d.id)).toEqual({ kind: 'done', status: 'failed' });
    expect(seen[0]).toBe('sending');
    const after = r.connectionRepo.connections.get(r.connection.id)!;
    expect(after.enabled).toBe(false);
    expect(JSON.stringify(after)).toContain('the webhook URL answered 404 (it no longer exists)');
    expect(r.get(d.id).status).toBe('failed');
    expect(r.get(other.id).status).toBe('cancelled');
    expect(r.get(other.id).attempts.at(-1)).toMatchObject({ outcome: 'cancelled', error: 'connection disabled' });
  });

  it('a permanent failure that is no dead connection fails the delivery and disables nothing', async () => {
    const r = await rig();
    const d = await r.execute();
    r.script.push(refused);
    expect(await r.service().process(d.id)).toEqual({ kind: 'done', status: 'failed' });
    expect(r.connectionRepo.connections.get(r.connection.id)!.enabled).toBe(true);
    expect(r.get(d.id).attempts.map((a) => a.outcome)).toEqual(['permanent_failure']);
  });

  it('pacing delays, never drops: a delivery reserves its slot once, waits for it, then sends', async () => {
    const r = await rig({ connection: { ...WEBHOOK, rate_limit_per_minute: 60 } });
    const a = await r.execute();
    const b = await r.execute(await r.newIncident('Search down'));
    const service = r.service();
    expect(await service.process(a.id)).toEqual({ kind: 'done', status: 'delivered' });
    expect(await service.process(b.id)).toEqual({ kind: 'delay', ms: 1000, reason: 'pacing' });
    expect(r.get(b.id)).toMatchObject({ status: 'queued', paced: true });
    expect(r.get(b.id).not_before).toBe(new Date(r.clock.now().getTime() + 1000).toISOString());
    // Early: it only waits again, and reserves no second slot.
    r.clock.advance(400);
    expect(await service.process(b.id)).toEqual({ kind: 'delay', ms: 600, reason: 'pacing' });
    r.clock.advance(600);
    expect(await service.process(b.id)).toEqual({ kind: 'done', status: 'delivered' });
    expect(r.pacer.calls.filter((c) => c.step === 'reserve')).toHaveLength(2);
    expect(r.sends.map((m) => m.deliveryId)).toEqual([a.id, b.id]);
  });

  it('a correction edits the delivered message in place, a retraction deletes it and ends the conversation', async () => {
    const r = await rig();
    const first = await r.execute();
    const service = r.service();
    await service.process(first.id);
    const ref = r.get(first.id).message!;
    const corrected = await r.executions.correct(r.incidentId, first.execution_id, { note: 'wrong ETA' }, slackActor);
    const correction = corrected.deliveries[0]!;
    expect(await paced(service, r.clock, correction.id)).toEqual({ kind: 'done', status: 'delivered' });
    expect(r.sends[1]).toMatchObject({ action: 'edit', target: ref, thread: null });
    expect(r.get(correction.id).action).toBe('edit');
    const retracted = await r.executions.retract(r.incidentId, first.execution_id, { reason: 'wrong team' }, apiActor);
    const retraction = retracted.deliveries[0]!;
    expect(await paced(service, r.clock, retraction.id)).toEqual({ kind: 'done', status: 'delivered' });
    expect(r.sends[2]).toMatchObject({ action: 'delete', target: ref });
    expect(r.get(retraction.id)).toMatchObject({ action: 'delete', message: null });
    // Retracted: the next update starts a new conversation instead of replying under it.
    expect(await r.conversations.root(r.incidentId, r.connection.id)).toBeNull();
    const next = await r.execute();
    expect(await paced(service, r.clock, next.id)).toEqual({ kind: 'done', status: 'delivered' });
    expect(r.sends[3]).toMatchObject({ action: 'post', thread: null });
    expect(r.get(next.id).waited_for).toBeUndefined();
  });
});

describe('DeliveryService.process: an update waits for its conversation’s first message', () => {
  it('while the first is being sent, the update waits (no send, no worker held), then replies under it', async () => {
    const r = await rig();
    const first = await r.execute();
    const update = await r.execute();
    const service = r.service();
    r.holdNext.add(first.id);
    const sending = service.process(first.id);
    await settle();
    expect(r.get(first.id).status).toBe('sending');

    const start = r.clock.now().getTime();
    expect(await service.process(update.id)).toEqual({ kind: 'delay', ms: 250, reason: 'thread' });
    expect(r.get(update.id)).toMatchObject({
      status: 'queued',
      thread_wait: { delivery_id: first.id, since: new Date(start).toISOString() },
    });
    // Still in flight 4 s later: it looks again less often, and sends nothing meanwhile.
    r.clock.advance(4_000);
    expect(await service.process(update.id)).toEqual({ kind: 'delay', ms: 1_000, reason: 'thread' });
    expect(r.sends.map((m) => m.deliveryId)).toEqual([first.id]);

    r.clock.advance(800);
    r.held.get(first.id)!.resolve(delivered(r.sends[0]!));
    expect(await sending).toEqual({ kind: 'done', status: 'delivered' });
    expect(await service.process(update.id)).toEqual({ kind: 'done', status: 'delivered' });
    const root = r.get(first.id).message;
    expect(r.sends[1]).toMatchObject({ deliveryId: update.id, action: 'post', thread: root });
    const after = r.get(update.id);
    expect(after.reply_to).toEqual(root);
    expect(after.waited_for).toEqual({ delivery_id: first.id, ms: 4_800, outcome: 'delivered' });
    expect(after.thread_wait).toBeUndefined();
  });

  it('the first message failing for good makes the waiting update the first message', async () => {
    const r = await rig();
    const first = await r.execute();
    const update = await r.execute();
    const third = await r.execute();
    const service = r.service();
    r.holdNext.add(first.id);
    const sending = service.process(first.id);
    await settle();
    expect((await service.process(update.id)).kind).toBe('delay');
    // The third waits too: for the first, through the second.
    expect(await service.process(third.id)).toEqual({ kind: 'delay', ms: 250, reason: 'thread' });
    r.clock.advance(2_000);
    r.held.get(first.id)!.resolve(refused);
    expect(await sending).toEqual({ kind: 'done', status: 'failed' });

    expect(await service.process(update.id)).toEqual({ kind: 'done', status: 'delivered' });
    expect(r.sends[1]).toMatchObject({ deliveryId: update.id, action: 'post', thread: null });
    expect(r.get(update.id).waited_for).toEqual({ delivery_id: first.id, ms: 2_000, outcome: 'failed' });
    const root = await r.conversations.root(r.incidentId, r.connection.id);
    expect(root?.deliveryId).toBe(update.id);
    // The third replies under the update, which started the conversation.
    expect(await paced(service, r.clock, third.id)).toEqual({ kind: 'done', status: 'delivered' });
    expect(r.sends[2]).toMatchObject({ deliveryId: third.id, thread: root!.ref });
    // Its wait counts until its send started, after one pacing interval (Slack: 1 a second).
    expect(r.get(third.id).waited_for).toEqual({ delivery_id: update.id, ms: 3_000, outcome: 'delivered' });
  });

  it('waits no longer than the bound, then posts on its own and says so; a restarted worker keeps the bound', async () => {
    const r = await rig({ threadWaitMs: 5_000 });
    const first = await r.execute();
    const update = await r.execute();
    r.holdNext.add(first.id);
    void r.service().process(first.id);
    await settle();
    expect((await r.service().process(update.id)).kind).toBe('delay');
    // The worker restarts (a new service over the same store): the wait's start is on the record.
    const restarted = r.service();
    let outcome: ProcessOutcome = { kind: 'delay', ms: 0, reason: 'thread' };
    let looks = 0;
    while (outcome.kind === 'delay') {
      expect(outcome.reason).toBe('thread');
      r.clock.advance(outcome.ms);
      outcome = await restarted.process(update.id);
      looks++;
    }
    expect(outcome).toEqual({ kind: 'done', status: 'delivered' });
    expect(looks).toBeLessThan(15);
    expect(r.sends[1]).toMatchObject({ deliveryId: update.id, action: 'post', thread: null });
    expect(r.get(update.id).waited_for).toEqual({ delivery_id: first.id, ms: 5_000, outcome: 'timed_out' });
    // Its job ran no later than the bound: every look stayed within it.
    expect(r.clock.now().getTime() - Date.parse(r.get(update.id).attempts[0]!.at)).toBe(0);
  });

  it('does not wait where there is nothing to continue: HERALD_THREAD_WAIT_MS=0, or a connection that cannot thread', async () => {
    for (const r of [await rig({ threadWaitMs: 0 }), await rig({ connection: TEAMS })]) {
      const first = await r.execute();
      const update = await r.execute();
      r.holdNext.add(first.id);
      void r.service().process(first.id);
      await settle();
      expect(await paced(r.service(), r.clock, update.id)).toEqual({ kind: 'done', status: 'delivered' });
      expect(r.get(update.id).waited_for).toBeUndefined();
      expect(r.sends[1]).toMatchObject({ deliveryId: update.id, thread: null });
      r.held.get(first.id)!.resolve(delivered(r.sends[0]!));
    }
  });

  it('an update whose first message is delivered already replies at once, without waiting', async () => {
    const r = await rig();
    const first = await r.execute();
    const update = await r.execute();
    const service = r.service();
    await service.process(first.id);
    expect(await paced(service, r.clock, update.id)).toEqual({ kind: 'done', status: 'delivered' });
    expect(r.sends[1]!.thread).toEqual(r.get(first.id).message);
    expect(r.get(update.id).waited_for).toBeUndefined();
  });

  it('a first message delivered whose place in the conversation is not written yet is replied under', async () => {
    // The first delivery's worker writes its record and the conversation's first message side by
    // side; an update can read between the two (no root yet, the first already delivered).
    for (const threadWaitMs of [THREAD_WAIT_DEFAULT_MS, 0]) {
      const r = await rig({ threadWaitMs });
      const first = await r.execute();
      const update = await r.execute();
      const service = r.service();
      await service.process(first.id);
      r.conversations.roots.clear();
      expect(await paced(service, r.clock, update.id)).toEqual({ kind: 'done', status: 'delivered' });
      const ref = r.get(first.id).message!;
      expect(r.sends[1]).toMatchObject({ deliveryId: update.id, action: 'post', thread: ref });
      expect(r.get(update.id)).toMatchObject({ reply_to: ref });
      expect(r.get(update.id).waited_for).toBeUndefined();
      // The missing record is healed: later updates find it directly.
      expect(await r.conversations.root(r.incidentId, r.connection.id)).toEqual({ ref, deliveryId: first.id });
    }
  });

  it('a first message still queued (not picked up yet) is waited for too', async () => {
    const r = await rig();
    const first = await r.execute();
    const update = await r.execute();
    const service = r.service();
    expect(await service.process(update.id)).toEqual({ kind: 'delay', ms: 250, reason: 'thread' });
    r.clock.advance(250);
    await service.process(first.id);
    expect(await paced(service, r.clock, update.id)).toEqual({ kind: 'done', status: 'delivered' });
    expect(r.sends[1]).toMatchObject({ deliveryId: update.id, thread: r.get(first.id).message as MessageRef });
  });
});
