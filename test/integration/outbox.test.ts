import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdGenerator, type IdGenerator } from '../../src/domain/common/ids.js';
import { newDelivery } from '../../src/domain/execution/execution.js';
import { newIncident } from '../../src/domain/incident/incident.js';
import type { DispatchBatch, QueuedJob } from '../../src/ports/index.js';
import { DeliveryService } from '../../src/services/deliveries.js';
import { DISPATCH_CHUNK, ExecutionService } from '../../src/services/executions.js';
import { RedisConversationRepo } from '../../src/store/conversations.js';
import { DISPATCH_LEASE_MS, RedisExecutionRepo } from '../../src/store/executions.js';
import { RedisIncidentRepo } from '../../src/store/incidents.js';
import { createKeys } from '../../src/store/keys.js';
import { sendPacerOver } from '../service/fakes.js';
import { anExecution } from '../support/factories.js';
import { connectTestRedis, dropPrefix, uniquePrefix } from '../support/redis.js';

/**
 * The crash window of execute: the execution and its deliveries are committed, and the process
 * dies before the queue has them. The outbox (written in the same atomic step) lets the sweep that
 * every worker runs at start and on a timer queue them; stable job ids make a double enqueue moot.
 */
let redis: Redis;
const prefix = uniquePrefix('outbox');
const keys = createKeys(prefix);
let now = 1_000_000;

beforeAll(() => {
  redis = connectTestRedis();
});
afterAll(async () => {
  await dropPrefix(redis, prefix);
  await redis.quit();
});

/** A DeliveryService whose only live parts are the repo and a queue that records what it gets. */
function sweepOnlyService(repo: RedisExecutionRepo, ids: IdGenerator, queued: QueuedJob[]): DeliveryService {
  return new DeliveryService({
    repo,
    targets: {
      get: () => Promise.resolve(null),
      disable: () => Promise.resolve(),
      recordOutcome: () => Promise.resolve(),
    },
    senders: {} as never,
    pacer: sendPacerOver(
      { reserve: () => Promise.resolve(0), take: () => Promise.resolve(0), reset: () => Promise.resolve() },
      repo,
    ),
    queue: { enqueue: (jobs) => Promise.resolve(void queued.push(...jobs)), remove: () => Promise.resolve() },
    clock: { now: () => new Date(now) },
    ids,
    random: () => 0.5,
    getIncident: () => Promise.resolve(null),
    conversations: new RedisConversationRepo(redis, keys),
    publicUrl: null,
  });
}

/** An ExecutionService over the real repos, fanning out to `connections` webhooks. */
function executionService(o: {
  ids: IdGenerator;
  incidents: RedisIncidentRepo;
  repo: RedisExecutionRepo;
  deliveries: DeliveryService;
  connections: number;
  dispatch?: (batches: DispatchBatch[]) => Promise<void>;
  onError?: (what: string) => void;
}): ExecutionService {
  const connections = Array.from({ length: o.connections }, () => ({
    id: o.ids.next('connection'),
    type: 'webhook' as const,
    enabled: true,
    config: {},
  }));
  return new ExecutionService({
    incidents: o.incidents,
    repo: o.repo,
    deliveries: o.deliveries,
    getTemplates: () => Promise.resolve([]),
    getTemplateVersion: () => Promise.resolve(null),
    conversations: new RedisConversationRepo(redis, keys),
    listConnections: () => Promise.resolve(connections),
    dispatch: o.dispatch ?? (() => Promise.resolve()),
    clock: { now: () => new Date(now) },
    ids: o.ids,
    publicUrl: undefined,
    ...(o.onError ? { onError: o.onError } : {}),
  });
}

/** Repos over the test prefix and one stored incident to execute. */
async function withStoredIncident(k = keys) {
  const ids = createIdGenerator();
  const incidents = new RedisIncidentRepo(redis, k);
  const repo = new RedisExecutionRepo(redis, k, () => now);
  const actor = { type: 'system' as const, id: 't', name: 't' };
  const incident = newIncident(
    ids.next('incident'),
    { title: 't', severity: 'low', description: '', impact: '', template_ids: [] },
    actor,
    new Date(now).toISOString(),
  );
  expect(await incidents.create(incident, [])).toBe(true);
  return { ids, incidents, repo, incident, actor };
}

describe('the enqueue outbox', () => {
  it('re-queues deliveries committed but never queued, once they are older than the sweep age', async () => {
    const { ids, repo, incident } = await withStoredIncident();
    const execution = anExecution(ids.next('execution'), incident.id, new Date(now).toISOString());
    const deliveries = [1, 2, 3].map(() =>
      newDelivery({
        id: ids.next('delivery'),
        executionId: execution.id,
        incidentId: incident.id,
        connectionId: 'con_x',
        connectionType: 'webhook',
        templateId: null,
        templateVersion: null,
        content: { subject: 's', body: 'b' },
      }),
    );
    execution.delivery_ids = deliveries.map((d) => d.id);
    expect(await repo.create(execution, deliveries, incident, { ...incident, rev: incident.rev + 1 }, [])).toBe(true);
    // …and the process dies here, before the queue hears of them.

    const queued: QueuedJob[] = [];
    const service = sweepOnlyService(repo, ids, queued);

    // A request still between commit and enqueue is left alone (it will enqueue itself)…
    expect(await service.sweepOutbox(5000)).toBe(0);
    // …but past the sweep age the deliveries are queued, with their stable job ids.
    now += 6000;
    expect(await service.sweepOutbox(5000)).toBe(3);
    expect(queued.map((j) => j.jobId).sort()).toEqual(deliveries.map((d) => d.id).sort());
    expect(await repo.takeOutbox(0)).toEqual([]);
  });

  it('an execute whose dispatch fails still answers with the execution: the outbox holds it for the sweep', async () => {
    const { ids, incidents, repo, incident, actor } = await withStoredIncident();
    const queued: QueuedJob[] = [];
    const deliveries = sweepOnlyService(repo, ids, queued);
    const errors: string[] = [];
    const executions = executionService({
      ids,
      incidents,
      repo,
      deliveries,
      connections: 1,
      dispatch: () => Promise.reject(new Error('queue connection lost')),
      onError: (what) => errors.push(what),
    });
    // A 5xx here would invite a client retry that sends everything twice; the commit stands.
    const r = await executions.execute(incident.id, {}, actor, { dryRun: false });
    if (r.dryRun) throw new Error('expected an execution');
    expect(r.deliveries).toHaveLength(1);
    expect(errors).toHaveLength(1);
    now += 6000;
    expect(await deliveries.sweepOutbox(5000)).toBe(1);
    expect(queued.map((j) => j.deliveryId)).toEqual([r.deliveries[0]!.id]);
  });
});

/**
 * Dispatch jobs (docs/explanation/delivery-semantics.md): an execute's deliveries go on the queue in jobs of
 * DISPATCH_CHUNK, and the worker that runs one sends only what it takes from the outbox. What the
 * sweep took, or an earlier run of the same job, is handed on as a job per delivery: no delivery
 * is ever sent by two at once, and none is left behind.
 */
describe('dispatch jobs and the outbox', () => {
  let outboxes = 0;
  afterAll(async () => {
    for (let i = 1; i <= outboxes; i++) await dropPrefix(redis, `${prefix}-${i}`);
  });
  /** An execute of `n` webhooks with dispatch on; its batches and what the plain queue got. */
  async function dispatchedExecute(n: number) {
    // An outbox of its own: the sweep takes whatever is old enough.
    const k = createKeys(`${prefix}-${++outboxes}`);
    const { ids, incidents, repo, incident, actor } = await withStoredIncident(k);
    const queued: QueuedJob[] = [];
    const batches: DispatchBatch[] = [];
    const deliveries = sweepOnlyService(repo, ids, queued);
    const executions = executionService({
      ids,
      incidents,
      repo,
      deliveries,
      connections: n,
      dispatch: (b) => Promise.resolve(void batches.push(...b)),
    });
    const r = await executions.execute(incident.id, {}, actor, { dryRun: false });
    if (r.dryRun) throw new Error('expected an execution');
    return { repo, deliveries, queued, batches, r, k };
  }

  it('an execute is queued as dispatch jobs of at most DISPATCH_CHUNK, each with its claim', async () => {
    const { batches, queued, r } = await dispatchedExecute(DISPATCH_CHUNK * 2 + 3);
    expect(queued).toEqual([]);
    expect(batches.map((b) => b.deliveries.length)).toEqual([DISPATCH_CHUNK, DISPATCH_CHUNK, 3]);
    expect(batches.flatMap((b) => b.deliveries.map((x) => x.deliveryId))).toEqual(r.deliveries.map((d) => d.id));
    for (const b of batches) {
      expect(b.claim).toBe(Date.parse(r.execution.created_at));
      expect(b.jobId).toBe(`dsp-${b.deliveries[0]!.deliveryId}`);
      expect(b.jobId).not.toContain(':');
      expect(b.incidentId).toBe(r.execution.incident_id);
    }
  });

  it('the worker takes every delivery of its job; a second run of the job takes none and hands on what is not final', async () => {
    const { repo, deliveries, batches, r } = await dispatchedExecute(3);
    const first = await deliveries.claimDispatch(batches[0]!);
    expect(first.mine.map((j) => j.deliveryId)).toEqual(r.deliveries.map((d) => d.id));
    expect(first.mine[0]!.hint).toEqual({
      incidentId: r.execution.incident_id,
      connectionId: r.deliveries[0]!.connection_id,
      follows: false,
    });
    expect(first.theirs).toEqual([]);
    // Taken: the sweep no longer sees them, however late it runs.
    now += DISPATCH_LEASE_MS * 2;
    expect(await repo.takeOutbox(0)).toEqual([]);
    // The worker died after sending the first: the job runs again and hands the other two on.
    const [sent, ...rest] = r.deliveries;
    expect(await repo.updateDelivery(sent!, { ...sent!, status: 'delivered' })).toBe(true);
    const again = await deliveries.claimDispatch(batches[0]!);
    expect(again.mine).toEqual([]);
    expect(again.theirs.map((j) => j.jobId)).toEqual(rest.map((d) => d.id));
  });

  it('what the sweep took first is handed on, not sent by the dispatch job as well', async () => {
    const { repo, deliveries, queued, batches, r, k } = await dispatchedExecute(3);
    // The process died before marking them dispatched, and the job waited past the sweep's age.
    for (const d of r.deliveries)
      await redis.zadd(k.deliveryOutbox(), String(Date.parse(r.execution.created_at)), d.id);
    now += 6000;
    expect(await deliveries.sweepOutbox(5000)).toBe(3);
    expect(queued.map((j) => j.jobId).sort()).toEqual(r.deliveries.map((d) => d.id).sort());
    const late = await deliveries.claimDispatch(batches[0]!);
    expect(late.mine).toEqual([]);
    expect(late.theirs.map((j) => j.jobId)).toEqual(r.deliveries.map((d) => d.id));
    // Swept and queued: nothing is left in the outbox.
    expect(await repo.takeOutbox(-DISPATCH_LEASE_MS * 2)).toEqual([]);
  });

  it('marked dispatched, the deliveries are left to their jobs for the lease, then swept', async () => {
    const { deliveries, queued, batches, r } = await dispatchedExecute(2);
    now += 6000;
    // A backlog in the queue: the sweep's age has passed, the lease has not.
    expect(await deliveries.sweepOutbox(5000)).toBe(0);
    now += DISPATCH_LEASE_MS;
    expect(await deliveries.sweepOutbox(5000)).toBe(2);
    expect(queued.map((j) => j.jobId).sort()).toEqual(r.deliveries.map((d) => d.id).sort());
    // The dispatch job that finally runs takes nothing: the sweep's jobs have them.
    expect((await deliveries.claimDispatch(batches[0]!)).mine).toEqual([]);
  });

  it('a sweep that took deliveries and died before queueing them leaves them for the next sweep, never to the dispatch job', async () => {
    const { repo, deliveries, queued, batches, r } = await dispatchedExecute(2);
    now += DISPATCH_LEASE_MS + 6000;
    expect((await repo.takeOutbox(5000)).sort()).toEqual(r.deliveries.map((d) => d.id).sort());
    // …the sweeping worker dies here. The dispatch job cannot take them…
    expect((await deliveries.claimDispatch(batches[0]!)).mine).toEqual([]);
    // …and the next sweep, one period later, queues them.
    expect(await deliveries.sweepOutbox(5000)).toBe(0);
    now += 6000;
    expect(await deliveries.sweepOutbox(5000)).toBe(2);
    expect(queued).toHaveLength(2);
  });
});
