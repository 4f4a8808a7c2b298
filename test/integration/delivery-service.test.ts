import { describe, expect, it } from 'vitest';
import { MAX_ATTEMPTS } from '../../src/domain/execution/delivery-policy.js';
import { newDelivery, type Delivery, type Execution } from '../../src/domain/execution/execution.js';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import { newIncident, type Incident } from '../../src/domain/incident/incident.js';
import type { IncidentEvent } from '../../src/domain/incident/incident-event.js';
import type { PacingRule } from '../../src/domain/execution/delivery-policy.js';
import type {
  ChannelSenders,
  DeliveryTarget,
  OutboundMessage,
  ProcessOutcome,
  QueuedJob,
  SendResult,
} from '../../src/ports/index.js';
import { DeliveryService, type DeliveryServiceDeps } from '../../src/services/deliveries.js';
import { RedisConversationRepo } from '../../src/store/conversations.js';
import { RedisExecutionRepo } from '../../src/store/executions.js';
import { RedisIncidentRepo } from '../../src/store/incidents.js';
import { RedisPacer } from '../../src/store/pacing.js';
import { sendPacerOver } from '../service/fakes.js';
import { targetOf } from '../support/delivery-targets.js';
import { useTestRedis } from '../support/redis.js';

/**
 * The delivery use case against the real Redis store, with a scripted sender, a scripted pacer
 * and a clock the test moves: the rules that hold whatever the queue does — a job run early
 * (a crash between recording an attempt and re-queueing, a duplicate job) still waits for its
 * Retry-After or its pacing slot; pacing is no attempt; redeliver gets a fresh budget; the retry
 * window; bookkeeping failures never change a delivery's outcome.
 */
const db = useTestRedis('dlvsvc');
const { keys } = db;

const delivered: SendResult = { outcome: 'delivered', httpStatus: 200, providerCode: null, latencyMs: 1 };
const retryable = (retryAfterMs: number | null = null, ambiguous = false): SendResult => ({
  outcome: 'retryable',
  httpStatus: 503,
  providerCode: null,
  latencyMs: 1,
  retryAfterMs,
  error: 'HTTP 503',
  ambiguous,
});

interface Rig {
  service: DeliveryService;
  repo: RedisExecutionRepo;
  incident: Incident;
  delivery: Delivery;
  sends: OutboundMessage[];
  reserves: PacingRule[];
  errors: string[];
  /** The scripted answer of the next sends (last one repeats). */
  script: SendResult[];
  /** What the pacer answers to the next reserve calls (0 when empty). */
  pacing: number[];
  /** What the pacer answers to the next take calls (0 when empty). */
  tokens: number[];
  takes: number;
  now: { ms: number };
  events(): Promise<IncidentEvent[]>;
  get(): Promise<Delivery>;
}

async function rig(over: Partial<DeliveryServiceDeps> = {}): Promise<Rig> {
  const now = { ms: Date.parse('2026-11-22T10:00:00.000Z') };
  const ids = createIdGenerator(() => now.ms);
  const incidents = new RedisIncidentRepo(db.redis, keys);
  const repo = new RedisExecutionRepo(db.redis, keys, () => now.ms);
  const actor = { type: 'system' as const, id: 't', name: 't' };
  const incident = newIncident(
    ids.next('incident'),
    { title: 'Search is slow', severity: 'minor', description: '', impact: '', template_ids: [] },
    actor,
    new Date(now.ms).toISOString(),
  );
  expect(await incidents.create(incident, [])).toBe(true);
  const target: DeliveryTarget = targetOf('webhook', {
    url: 'https://hooks.example.com/in',
    secret: 'whsec_dGVzdHRlc3R0ZXN0dGVzdA==',
  });
  const execution: Execution = {
    id: ids.next('execution'),
    incident_id: incident.id,
    variables: {},
    created_at: '',
    template_versions: {},
    delivery_ids: [],
  };
  const delivery = newDelivery({
    id: ids.next('delivery'),
    executionId: execution.id,
    incidentId: incident.id,
    connectionId: target.id,
    connectionType: 'webhook',
    templateId: null,
    templateVersion: null,
    content: { subject: 's', body: 'b' },
  });
  execution.delivery_ids = [delivery.id];
  expect(await repo.create(execution, [delivery], incident, { ...incident, rev: incident.rev + 1 }, [])).toBe(true);

  const r = {
    sends: [] as OutboundMessage[],
    reserves: [] as PacingRule[],
    errors: [] as string[],
    script: [delivered],
    pacing: [] as number[],
    tokens: [] as number[],
    takes: 0,
  };
  const sender = {
    send: (_t: DeliveryTarget, m: OutboundMessage) => {
      r.sends.push(m);
      return Promise.resolve(r.script.length > 1 ? r.script.shift()! : r.script[0]!);
    },
  };
  const service = new DeliveryService({
    repo,
    targets: {
      get: () => Promise.resolve(target),
      disable: () => Promise.resolve(),
      recordOutcome: () => Promise.resolve(),
    },
    senders: { webhook: sender } as unknown as ChannelSenders,
    pacer: sendPacerOver(
      {
        reserve: (_id, rule) => {
          r.reserves.push(rule);
          return Promise.resolve(r.pacing.shift() ?? 0);
        },
        take: () => {
          r.takes++;
          return Promise.resolve(r.tokens.shift() ?? 0);
        },
        reset: () => Promise.resolve(),
      },
      repo,
    ),
    queue: { enqueue: (_jobs: QueuedJob[]) => Promise.resolve(), remove: () => Promise.resolve() },
    clock: { now: () => new Date(now.ms) },
    ids,
    random: () => 1,
    getIncident: (id) => incidents.get(id),
    conversations: new RedisConversationRepo(db.redis, keys),
    publicUrl: null,
    onError: (what) => r.errors.push(what),
    ...over,
  });
  return Object.assign(r, {
    service,
    repo,
    incident,
    delivery,
    now,
    events: async () => (await incidents.listEvents(incident.id, { limit: 100, cursor: null })).data,
    get: async () => (await repo.getDelivery(delivery.id))!,
  });
}

/** Runs the job like the queue would, moving the clock over every delay, until it is done. */
async function runToEnd(r: Rig, maxRuns = 50): Promise<ProcessOutcome> {
  for (let i = 0; i < maxRuns; i++) {
    const outcome = await r.service.process(r.delivery.id);
    if (outcome.kind === 'done') return outcome;
    r.now.ms += outcome.ms;
  }
  throw new Error('the delivery never finished');
}

describe('the delivery use case', () => {
  it('a job run before its Retry-After (crash before re-queueing, duplicate job) waits again, sending nothing', async () => {
    const r = await rig();
    r.script = [retryable(30_000), delivered];
    expect(await r.service.process(r.delivery.id)).toEqual({ kind: 'delay', ms: 30_000, reason: 'retry' });
    expect((await r.get()).status).toBe('retrying');
    // The job comes back at once (its worker died before moving it to delayed): nothing is sent.
    r.now.ms += 1_000;
    expect(await r.service.process(r.delivery.id)).toEqual({ kind: 'delay', ms: 29_000, reason: 'retry' });
    expect(r.sends).toHaveLength(1);
    r.now.ms += 29_000;
    expect(await r.service.process(r.delivery.id)).toEqual({ kind: 'done', status: 'delivered' });
    const d = await r.get();
    expect(d.attempts.map((a) => a.outcome)).toEqual(['retryable_failure', 'delivered']);
    expect(Date.parse(d.attempts[1]!.at) - Date.parse(d.attempts[0]!.at)).toBeGreaterThanOrEqual(30_000);
  });

  it('pacing reserves one slot, is no attempt, and the job then goes without asking again', async () => {
    const r = await rig();
    r.pacing = [5_000];
    expect(await r.service.process(r.delivery.id)).toEqual({ kind: 'delay', ms: 5_000, reason: 'pacing' });
    let d = await r.get();
    expect(d.status).toBe('queued');
    expect(d.attempts).toEqual([]);
    // Woken early: still its slot, no new reservation.
    r.now.ms += 2_000;
    expect(await r.service.process(r.delivery.id)).toEqual({ kind: 'delay', ms: 3_000, reason: 'pacing' });
    r.now.ms += 3_000;
    expect(await r.service.process(r.delivery.id)).toEqual({ kind: 'done', status: 'delivered' });
    expect(r.reserves).toHaveLength(1);
    d = await r.get();
    expect(d.attempts).toHaveLength(1);
    expect(d.possible_duplicate).toBe(false);
  });

  it('slots falling due together still wait for a send token, without reserving again', async () => {
    const r = await rig();
    r.tokens = [300];
    expect(await r.service.process(r.delivery.id)).toEqual({ kind: 'delay', ms: 300, reason: 'pacing' });
    expect((await r.get()).attempts).toEqual([]);
    r.now.ms += 300;
    expect(await r.service.process(r.delivery.id)).toEqual({ kind: 'done', status: 'delivered' });
    expect(r.reserves).toHaveLength(1);
    expect(r.takes).toBe(2);
  });

  it("with Redis' pacer, pacing and the `sending` mark are one step: a cancel that won meanwhile sends nothing and takes no slot", async () => {
    const redisPacer = new RedisPacer(db.redis, keys);
    let cancelled = 0;
    const r = await rig({
      pacer: {
        reserve: (id, rule) => redisPacer.reserve(id, rule),
        take: (id, rule) => redisPacer.take(id, rule),
        reset: (id) => redisPacer.reset(id),
        paceSend: (id, rule, reserveFirst) => redisPacer.paceSend(id, rule, reserveFirst),
        // A cancel lands between the engine's read and its last step before the send.
        paceAndStart: async (prev, sending, rule, reserveFirst) => {
          if (cancelled++ === 0)
            await db.redis.set(
              keys.delivery(prev.id),
              JSON.stringify({ ...prev, status: 'cancelled', rev: prev.rev + 1 }),
            );
          return redisPacer.paceAndStart(prev, sending, rule, reserveFirst);
        },
      },
    });
    expect(await r.service.process(r.delivery.id)).toEqual({ kind: 'done', status: 'cancelled' });
    expect(r.sends).toEqual([]);
    expect((await r.get()).status).toBe('cancelled');
    // The connection's first slot and token are still free.
    expect(await redisPacer.paceSend(r.delivery.connection_id, { perSecond: 1, burst: 1 }, true)).toEqual({
      step: 'send',
    });
  });

  it("with Redis' pacer, a delivery that may go is stored as `sending` by that step before it is sent", async () => {
    const repo = new RedisExecutionRepo(db.redis, keys);
    const atSend: string[] = [];
    const changes: string[] = [];
    const r = await rig({
      pacer: new RedisPacer(db.redis, keys),
      senders: {
        webhook: {
          send: async (_t: DeliveryTarget, m: OutboundMessage) => {
            atSend.push((await repo.getDelivery(m.deliveryId))!.status);
            return delivered;
          },
        },
      } as unknown as ChannelSenders,
      onDeliveryChanged: (d) => changes.push(d.status),
    });
    expect(await r.service.process(r.delivery.id)).toEqual({ kind: 'done', status: 'delivered' });
    expect(atSend).toEqual(['sending']);
    expect(changes).toEqual(['sending', 'delivered']);
    expect((await r.get()).attempts.map((a) => a.outcome)).toEqual(['delivered']);
  });

  it(`gives up after ${MAX_ATTEMPTS} attempts with one delivery.failed event; redeliver gets a fresh budget`, async () => {
    const r = await rig();
    r.script = [retryable()];
    expect(await runToEnd(r)).toEqual({ kind: 'done', status: 'failed' });
    let d = await r.get();
    expect(d.attempts).toHaveLength(MAX_ATTEMPTS);
    let failed = (await r.events()).filter((e) => e.type === 'delivery.failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]!.data).toMatchObject({
      delivery_id: d.id,
      connection_id: d.connection_id,
      error: expect.stringContaining(`gave up after ${MAX_ATTEMPTS} attempts`),
    });

    expect(await r.service.requeueFailed([d], { type: 'system', id: 't', name: 't' })).toBe(1);
    expect(await runToEnd(r)).toEqual({ kind: 'done', status: 'failed' });
    d = await r.get();
    expect(d.attempts).toHaveLength(2 * MAX_ATTEMPTS);
    failed = (await r.events()).filter((e) => e.type === 'delivery.failed');
    expect(failed).toHaveLength(2);

    // A third round that succeeds on its second attempt.
    r.script = [retryable(), delivered];
    await r.service.requeueFailed([d], { type: 'system', id: 't', name: 't' });
    expect(await runToEnd(r)).toEqual({ kind: 'done', status: 'delivered' });
    expect((await r.get()).attempts).toHaveLength(2 * MAX_ATTEMPTS + 2);
  });

  it('stops retrying when the next attempt would be more than an hour after the first', async () => {
    const r = await rig();
    r.script = [retryable(40 * 60_000)];
    expect(await runToEnd(r)).toEqual({ kind: 'done', status: 'failed' });
    const d = await r.get();
    expect(d.attempts.map((a) => a.outcome)).toEqual(['retryable_failure', 'retryable_failure']);
    const failed = (await r.events()).find((e) => e.type === 'delivery.failed')!;
    expect(failed.data.error).toMatch(/more than an hour/);
  });

  it("a failing bookkeeping step (connection health) is reported and never changes the delivery's outcome", async () => {
    // A connection already degraded: both the failure and the success change its health.
    const degraded = {
      ...targetOf('webhook', { url: 'https://hooks.example.com/in', secret: 'whsec_dGVzdHRlc3R0ZXN0dGVzdA==' }),
      health: { state: 'degraded' as const, consecutive_failures: 1, last_error: 'HTTP 503', disabled_reason: null },
    };
    const r = await rig({
      targets: {
        get: () => Promise.resolve(degraded),
        disable: () => Promise.reject(new Error('redis down')),
        recordOutcome: () => Promise.reject(new Error('redis down')),
      },
    });
    r.script = [retryable(10_000), delivered];
    expect(await r.service.process(r.delivery.id)).toEqual({ kind: 'delay', ms: 10_000, reason: 'retry' });
    r.now.ms += 10_000;
    expect(await r.service.process(r.delivery.id)).toEqual({ kind: 'done', status: 'delivered' });
    expect(r.errors).toEqual(['recording connection health', 'recording connection health']);
  });

  it('records health only when the outcome changes it: a success on a healthy connection writes nothing', async () => {
    const healthy = targetOf('webhook', {
      url: 'https://hooks.example.com/in',
      secret: 'whsec_dGVzdHRlc3R0ZXN0dGVzdA==',
    });
    let seen = healthy;
    const recorded: boolean[] = [];
    const r = await rig({
      targets: {
        get: () => Promise.resolve(seen),
        disable: () => Promise.resolve(),
        recordOutcome: (_id, ok) => {
          recorded.push(ok);
          return Promise.resolve();
        },
      },
    });
    r.script = [retryable(10_000), delivered];
    // The failure moves a healthy connection's streak: recorded.
    expect(await r.service.process(r.delivery.id)).toEqual({ kind: 'delay', ms: 10_000, reason: 'retry' });
    expect(recorded).toEqual([false]);
    // The connection as the next send reads it: degraded, so the success that heals it is recorded.
    seen = {
      ...healthy,
      health: { state: 'degraded', consecutive_failures: 1, last_error: 'HTTP 503', disabled_reason: null },
    };
    r.now.ms += 10_000;
    expect(await r.service.process(r.delivery.id)).toEqual({ kind: 'done', status: 'delivered' });
    expect(recorded).toEqual([false, true]);

    // A second delivery to the (now healthy) connection: its success is not written at all.
    seen = healthy;
    const again = await rig({
      targets: {
        get: () => Promise.resolve(seen),
        disable: () => Promise.resolve(),
        recordOutcome: (_id, ok) => (recorded.push(ok), Promise.resolve()),
      },
    });
    again.script = [delivered];
    expect(await again.service.process(again.delivery.id)).toEqual({ kind: 'done', status: 'delivered' });
    expect(recorded).toEqual([false, true]);
  });

  it('a connection found dead is disabled before the failure is written: whoever sees the delivery failed sees it disabled', async () => {
    const steps: string[] = [];
    let readStatus: () => Promise<string> = () => Promise.resolve('');
    const r = await rig({
      targets: {
        get: () =>
          Promise.resolve(
            targetOf('webhook', { url: 'https://hooks.example.com/in', secret: 'whsec_dGVzdHRlc3R0ZXN0dGVzdA==' }),
          ),
        recordOutcome: async () => {
          steps.push(`health (delivery ${await readStatus()})`);
        },
        disable: async (_id, reason) => {
          steps.push(`disable: ${reason} (delivery ${await readStatus()})`);
        },
      },
    });
    readStatus = async () => (await r.get()).status;
    r.script = [
      {
        outcome: 'permanent',
        httpStatus: 404,
        providerCode: null,
        latencyMs: 1,
        error: 'HTTP 404',
        disable: 'HTTP 404 from the webhook URL',
      },
    ];
    expect(await r.service.process(r.delivery.id)).toEqual({ kind: 'done', status: 'failed' });
    expect(steps).toEqual(['health (delivery sending)', 'disable: HTTP 404 from the webhook URL (delivery sending)']);
    expect((await r.get()).status).toBe('failed');
  });

  it("with its job's hint, reads the connection and the incident beside the delivery; a wrong hint is not trusted", async () => {
    const incidents = new RedisIncidentRepo(db.redis, keys);
    /** A rig that notes the order of its reads, and which connections it asked for. */
    const tracked = async () => {
      const order: string[] = [];
      const asked: string[] = [];
      const r = await rig({
        targets: {
          get: (id) => {
            order.push('connection?');
            asked.push(id);
            return Promise.resolve(
              targetOf('webhook', { url: 'https://hooks.example.com/in', secret: 'whsec_dGVzdHRlc3R0ZXN0dGVzdA==' }),
            );
          },
          disable: () => Promise.resolve(),
          recordOutcome: () => Promise.resolve(),
        },
        getIncident: (id) => {
          order.push('incident?');
          return incidents.get(id);
        },
      });
      const getDelivery = r.repo.getDelivery.bind(r.repo);
      r.repo.getDelivery = async (id) => {
        order.push('delivery?');
        const d = await getDelivery(id);
        order.push('delivery!');
        return d;
      };
      const hint = { incidentId: r.delivery.incident_id, connectionId: r.delivery.connection_id, follows: false };
      return { r, order, asked, hint };
    };

    // Everything is asked before the delivery answers: one round trip.
    const a = await tracked();
    expect(await a.r.service.process(a.r.delivery.id, a.hint)).toEqual({ kind: 'done', status: 'delivered' });
    expect(a.order.slice(0, 4)).toEqual(['connection?', 'incident?', 'delivery?', 'delivery!']);

    // Without a hint (a job queued by an older version): the delivery first, then the rest.
    const b = await tracked();
    expect(await b.r.service.process(b.r.delivery.id)).toEqual({ kind: 'done', status: 'delivered' });
    expect(b.order.slice(0, 3)).toEqual(['delivery?', 'delivery!', 'connection?']);

    // A hint naming another connection is checked against the record: the record's is read and used.
    const c = await tracked();
    expect(await c.r.service.process(c.r.delivery.id, { ...c.hint, connectionId: a.r.delivery.connection_id })).toEqual(
      { kind: 'done', status: 'delivered' },
    );
    expect(c.asked).toEqual([a.r.delivery.connection_id, c.r.delivery.connection_id]);
  });

  it('a failure before sending (reading the incident) is not a cut-off attempt', async () => {
    const incidents = new RedisIncidentRepo(db.redis, keys);
    let failOnce = true;
    const r = await rig({
      getIncident: (id) => {
        if (failOnce) {
          failOnce = false;
          return Promise.reject(new Error('redis hiccup'));
        }
        return incidents.get(id);
      },
    });
    await expect(r.service.process(r.delivery.id)).rejects.toThrow('redis hiccup');
    expect(await r.service.process(r.delivery.id)).toEqual({ kind: 'done', status: 'delivered' });
    const d = await r.get();
    expect(d.attempts.map((a) => a.outcome)).toEqual(['delivered']);
    expect(d.possible_duplicate).toBe(false);
  });

  it('a send cut off by a dead worker is recorded as interrupted, flagged, and counts against the budget', async () => {
    const cuts = (n: number, at: number) =>
      Array.from({ length: n }, () => ({
        at: new Date(at).toISOString(),
        outcome: 'interrupted' as const,
        http_status: null,
        provider_code: null,
        latency_ms: null,
        retry_after_ms: null,
        error: 'cut',
      }));
    /** The delivery as a dead worker left it: `sending`, after `n` earlier cut-off attempts. */
    const leftSending = async (r: Rig, n: number) => {
      const d = await r.get();
      const sending: Delivery = {
        ...d,
        status: 'sending',
        attempts: cuts(n, r.now.ms),
        sending_since: new Date(r.now.ms).toISOString(),
        possible_duplicate: n > 0,
        rev: d.rev + 1,
      };
      expect(await r.repo.updateDelivery(d, sending)).toBe(true);
    };

    // The first cut: recorded, flagged, and the next attempt goes at once.
    const r = await rig();
    await leftSending(r, 0);
    expect(await r.service.process(r.delivery.id)).toEqual({ kind: 'done', status: 'delivered' });
    let d = await r.get();
    expect(d.attempts.map((a) => a.outcome)).toEqual(['interrupted', 'delivered']);
    expect(d.possible_duplicate).toBe(true);

    // The eighth cut spends the budget: failed, nothing sent a ninth time, one timeline event.
    const r2 = await rig();
    await leftSending(r2, MAX_ATTEMPTS - 1);
    expect(await r2.service.process(r2.delivery.id)).toEqual({ kind: 'done', status: 'failed' });
    d = await r2.get();
    expect(d.attempts).toHaveLength(MAX_ATTEMPTS);
    expect(r2.sends).toHaveLength(0);
    expect((await r2.events()).filter((x) => x.type === 'delivery.failed')).toHaveLength(1);
  });
});
