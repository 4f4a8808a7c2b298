import { describe, expect, it } from 'vitest';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import { newIncident } from '../../src/domain/incident/incident.js';
import type { DeliveryService } from '../../src/services/deliveries.js';
import { ExecutionService } from '../../src/services/executions.js';
import { RedisConversationRepo } from '../../src/store/conversations.js';
import { RedisExecutionRepo } from '../../src/store/executions.js';
import { RedisIncidentRepo } from '../../src/store/incidents.js';
import { useTestRedis } from '../support/redis.js';
import { Starvation } from '../support/starvation.js';

/**
 * Execute over a queue that hangs (BullMQ's connection never gives up a command, so a Redis that
 * went away right after the commit looks like this): the 202 must not wait for it. The execution
 * is committed with its outbox entries, so the sweep queues it later.
 */
const db = useTestRedis('enqueue-bound');
const { keys } = db;

describe('execute with a hanging queue', () => {
  it('answers within about a second, with the execution committed and left in the outbox', async () => {
    const ids = createIdGenerator();
    const incidents = new RedisIncidentRepo(db.redis, keys);
    const repo = new RedisExecutionRepo(db.redis, keys);
    const actor = { type: 'system' as const, id: 't', name: 't' };
    const incident = newIncident(
      ids.next('incident'),
      { title: 't', severity: 'low', description: '', impact: '', template_ids: [] },
      actor,
      new Date().toISOString(),
    );
    expect(await incidents.create(incident, [])).toBe(true);
    const errors: string[] = [];
    const executions = new ExecutionService({
      incidents,
      repo,
      deliveries: {} as DeliveryService,
      getTemplates: () => Promise.resolve([]),
      getTemplateVersion: () => Promise.resolve(null),
      conversations: new RedisConversationRepo(db.redis, keys),
      listConnections: () =>
        Promise.resolve([{ id: ids.next('connection'), type: 'webhook', enabled: true, config: {} }]),
      dispatch: () => new Promise<void>(() => undefined),
      clock: { now: () => new Date() },
      ids,
      publicUrl: undefined,
      onError: (what) => errors.push(what),
    });
    // Stretches in which this process could not run at all are left out (support/starvation.ts):
    // the queue wait is a timer, which runs on regardless.
    const starvation = new Starvation();
    const start = performance.now();
    const r = await executions.execute(incident.id, {}, actor, { dryRun: false }).finally(() => starvation.stop());
    const end = performance.now();
    const took = end - start;
    const ms = took - starvation.within(start, end);
    if (r.dryRun) throw new Error('expected an execution');
    expect(ms).toBeLessThan(1900);
    expect(took).toBeGreaterThanOrEqual(900); // it did wait for the queue, whole
    expect(errors).toEqual(['queueing an execution took too long (the outbox sweep will)']);
    expect(await repo.get(r.execution.id)).not.toBeNull();
    expect(await repo.takeOutbox(-60_000)).toEqual(r.deliveries.map((d) => d.id));
  });
});
