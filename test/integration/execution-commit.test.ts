import { afterAll, describe, expect, it } from 'vitest';
import { newDelivery, type Execution } from '../../src/domain/execution/execution.js';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import { newIncident } from '../../src/domain/incident/incident.js';
import { RedisExecutionRepo } from '../../src/store/executions.js';
import { RedisIncidentRepo } from '../../src/store/incidents.js';
import { createKeys } from '../../src/store/keys.js';
import { BULK_COMMAND_TIMEOUT_MS, createRedis, whenReady } from '../../src/store/redis.js';
import { connectTestRedis, dropPrefix, testRedisUrl, uniquePrefix } from '../support/redis.js';

/**
 * An execute is one atomic commit of every delivery. On the request connections' 1.2 s bound, a
 * large one on a busy machine was answered 503 although Redis applied it; the commit goes over a
 * connection with its own, longer bound. Here the request connection's bound is made tiny so any
 * large commit over it fails: the repo must still commit through its bulk connection.
 */
const prefix = uniquePrefix('bulk');
const keys = createKeys(prefix);
const admin = connectTestRedis();
// Connected with a normal bound, tightened once ready: with a 1 ms bound from the start, its own
// ready check (INFO) timed out on a busy machine and it never became ready.
const tight = createRedis(testRedisUrl(), { name: 'tight', commandTimeoutMs: BULK_COMMAND_TIMEOUT_MS });
const bulk = createRedis(testRedisUrl(), { name: 'bulk', commandTimeoutMs: BULK_COMMAND_TIMEOUT_MS });
afterAll(async () => {
  await dropPrefix(admin, prefix);
  admin.disconnect();
  tight.disconnect();
  bulk.disconnect();
});

describe('the execute commit', () => {
  it('commits 5,000 deliveries through the bulk connection although the request connection’s bound is far shorter', async () => {
    await Promise.all([whenReady(tight, 30_000), whenReady(bulk, 30_000)]);
    (tight.options as { commandTimeout?: number }).commandTimeout = 1; // ioredis reads it at every command
    const now = Date.parse('2026-11-22T10:00:00.000Z');
    const ids = createIdGenerator(() => now);
    const actor = { type: 'system' as const, id: 't', name: 't' };
    const fanOut = async () => {
      const incident = newIncident(
        ids.next('incident'),
        { title: 'Big fan-out', severity: 'major', description: '', impact: '', template_ids: [] },
        actor,
        new Date(now).toISOString(),
      );
      expect(await new RedisIncidentRepo(bulk, keys).create(incident, [])).toBe(true);
      const execution: Execution = {
        id: ids.next('execution'),
        incident_id: incident.id,
        variables: {},
        created_at: '',
        template_versions: {},
        delivery_ids: [],
      };
      const deliveries = Array.from({ length: 5000 }, () =>
        newDelivery({
          id: ids.next('delivery'),
          executionId: execution.id,
          incidentId: incident.id,
          connectionId: 'con_01JH3ZK6X2B8V4N0Q7R5T9W1YC',
          connectionType: 'webhook',
          templateId: null,
          templateVersion: null,
          content: { subject: 's', body: 'b'.repeat(2000) },
        }),
      );
      execution.delivery_ids = deliveries.map((d) => d.id);
      return { incident, execution, deliveries, next: { ...incident, rev: incident.rev + 1 } };
    };

    // Over the tightly bounded connection alone, such a commit times out (Redis may still apply it).
    const a = await fanOut();
    await expect(
      new RedisExecutionRepo(tight, keys, () => now, tight).create(a.execution, a.deliveries, a.incident, a.next, []),
    ).rejects.toThrow(/timed out/i);

    const b = await fanOut();
    const repo = new RedisExecutionRepo(tight, keys, () => now, bulk);
    expect(await repo.create(b.execution, b.deliveries, b.incident, b.next, [])).toBe(true);
    expect(await admin.exists(keys.execution(b.execution.id), keys.delivery(b.deliveries[4999]!.id))).toBe(2);
  });
});
