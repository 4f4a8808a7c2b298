import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdGenerator, type IdGenerator } from '../../src/domain/common/ids.js';
import { newDelivery, type Execution } from '../../src/domain/execution/execution.js';
import { newIncident } from '../../src/domain/incident/incident.js';
import type { QueuedJob } from '../../src/ports/index.js';
import { DeliveryService } from '../../src/services/deliveries.js';
import { ExecutionService } from '../../src/services/executions.js';
import { RedisConversationRepo } from '../../src/store/conversations.js';
import { RedisExecutionRepo } from '../../src/store/executions.js';
import { RedisIncidentRepo } from '../../src/store/incidents.js';
import { createKeys } from '../../src/store/keys.js';
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
    targets: { get: () => Promise.resolve(null), disable: () => Promise.resolve(), recordOutcome: () => Promise.resolve() },
    senders: {} as never,
    pacer: { reserve: () => Promise.resolve(0), take: () => Promise.resolve(0), reset: () => Promise.resolve() },
    queue: { enqueue: (jobs) => Promise.resolve(void queued.push(...jobs)), remove: () => Promise.resolve() },
    clock: { now: () => new Date(now) },
    ids,
    random: () => 0.5,
    getIncident: () => Promise.resolve(null),
    conversations: new RedisConversationRepo(redis, keys),
    publicUrl: null,
  });
}

/** Repos over the test prefix and one stored incident to execute. */
async function withStoredIncident() {
  const ids = createIdGenerator();
  const incidents = new RedisIncidentRepo(redis, keys);
  const repo = new RedisExecutionRepo(redis, keys, () => now);
  const actor = { type: 'system' as const, id: 't', name: 't' };
  const incident = newIncident(ids.next('incident'), { title: 't', severity: 'low', description: '', impact: '', template_ids: [] }, actor, new Date(now).toISOString());
  expect(await incidents.create(incident, [])).toBe(true);
  return { ids, incidents, repo, incident, actor };
}

describe('the enqueue outbox', () => {
  it('re-queues deliveries committed but never queued, once they are older than the sweep age', async () => {
    const { ids, repo, incident } = await withStoredIncident();
    const execution: Execution = { id: ids.next('execution'), incident_id: incident.id, variables: {}, created_at: '', template_versions: {}, delivery_ids: [] };
    const deliveries = [1, 2, 3].map(() =>
      newDelivery({ id: ids.next('delivery'), executionId: execution.id, incidentId: incident.id, connectionId: 'con_x', connectionType: 'webhook', templateId: null, templateVersion: null, content: { subject: 's', body: 'b' } }),
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
    expect(await repo.pendingEnqueue(0)).toEqual([]);
  });

  it('an execute whose enqueue fails still answers with the execution: the outbox holds it for the sweep', async () => {
    const { ids, incidents, repo, incident, actor } = await withStoredIncident();
    const queued: QueuedJob[] = [];
    const deliveries = sweepOnlyService(repo, ids, queued);
    const errors: string[] = [];
    const executions = new ExecutionService({
      incidents,
      repo,
      deliveries,
      getTemplates: () => Promise.resolve([]),
      getTemplateVersion: () => Promise.resolve(null),
      conversations: new RedisConversationRepo(redis, keys),
      listConnections: () => Promise.resolve([{ id: ids.next('connection'), type: 'webhook', enabled: true, config: {} }]),
      enqueue: () => Promise.reject(new Error('queue connection lost')),
      clock: { now: () => new Date(now) },
      ids,
      publicUrl: undefined,
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
