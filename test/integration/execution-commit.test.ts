import { afterAll, describe, expect, it } from 'vitest';
import { newDelivery } from '../../src/domain/execution/execution.js';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import { newIncident } from '../../src/domain/incident/incident.js';
import { DISPATCH_LEASE_MS, DISPATCHED_PER_SCRIPT, RedisExecutionRepo } from '../../src/store/executions.js';
import { RedisIncidentRepo } from '../../src/store/incidents.js';
import { RedisConversationRepo } from '../../src/store/conversations.js';
import { createKeys } from '../../src/store/keys.js';
import { BULK_COMMAND_TIMEOUT_MS, createRedis, whenReady } from '../../src/store/redis.js';
import { anExecution } from '../support/factories.js';
import { connectTestRedis, dropPrefix, notingCalls, testRedisUrl, uniquePrefix } from '../support/redis.js';

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

const now = Date.parse('2026-11-22T10:00:00.000Z');
const ids = createIdGenerator(() => now);
const actor = { type: 'system' as const, id: 't', name: 't' };

/**
 * A stored incident and an execute of `count` deliveries to it, not committed yet: to one
 * connection, or (`manyConnections`) to a connection each.
 */
async function fanOut(count: number, body: string, opts: { manyConnections?: boolean } = {}) {
  const incident = newIncident(
    ids.next('incident'),
    { title: 'Big fan-out', severity: 'major', description: '', impact: '', template_ids: [] },
    actor,
    new Date(now).toISOString(),
  );
  expect(await new RedisIncidentRepo(bulk, keys).create(incident, [])).toBe(true);
  const execution = anExecution(ids.next('execution'), incident.id, new Date(now).toISOString());
  const deliveries = Array.from({ length: count }, (_, i) =>
    newDelivery({
      id: ids.next('delivery'),
      executionId: execution.id,
      incidentId: incident.id,
      connectionId: opts.manyConnections ? `con_${String(i).padStart(26, '0')}` : 'con_01JH3ZK6X2B8V4N0Q7R5T9W1YC',
      connectionType: 'webhook',
      templateId: null,
      templateVersion: null,
      content: { subject: 's', body },
    }),
  );
  execution.delivery_ids = deliveries.map((d) => d.id);
  return { incident, execution, deliveries, next: { ...incident, rev: incident.rev + 1 } };
}

describe('the execute commit', () => {
  it('commits 5,000 deliveries through the bulk connection although the request connection’s bound is far shorter', async () => {
    await Promise.all([whenReady(tight, 30_000), whenReady(bulk, 30_000)]);
    (tight.options as { commandTimeout?: number }).commandTimeout = 1; // ioredis reads it at every command
    const fanOutOf5000 = () => fanOut(5000, 'b'.repeat(2000));

    // Over the tightly bounded connection alone, such a commit times out (Redis may still apply it).
    const a = await fanOutOf5000();
    await expect(
      new RedisExecutionRepo(tight, keys, () => now, tight).create(a.execution, a.deliveries, a.incident, a.next, []),
    ).rejects.toThrow(/timed out/i);

    const b = await fanOutOf5000();
    const repo = new RedisExecutionRepo(tight, keys, () => now, bulk);
    expect(await repo.create(b.execution, b.deliveries, b.incident, b.next, [])).toBe(true);
    expect(await admin.exists(keys.execution(b.execution.id), keys.delivery(b.deliveries[4999]!.id))).toBe(2);
  });

  /**
   * Redis serves no one else while a script runs: an execute's commit carrying every record held
   * every other client for all of them. From 500 deliveries the records are written ahead, and
   * the commit only checks they are there and keeps them.
   */
  describe('a large fan-out writes its records ahead of its commit', () => {
    const body = 'w'.repeat(2000);
    const noted = () => notingCalls(bulk, ['evalsha', 'eval', 'set']);
    const carriesRecord = (call: unknown[]) => call.some((a) => typeof a === 'string' && a.includes(body));
    const isScript = (call: unknown[]) => typeof call[0] === 'string' && /^[0-9a-f]{40}$|redis\.call/.test(call[0]);

    it('1,200 deliveries: written ahead, kept by the commit for good, no record inside the script', async () => {
      await whenReady(bulk, 30_000);
      const f = await fanOut(1200, body, { manyConnections: true });
      const { client, calls } = noted();
      const repo = new RedisExecutionRepo(bulk, keys, () => now, client);
      expect(await repo.create(f.execution, f.deliveries, f.incident, f.next, [])).toBe(true);
      expect(calls.filter((c) => isScript(c) && carriesRecord(c))).toEqual([]);
      expect(calls.filter((c) => !isScript(c) && carriesRecord(c))).toHaveLength(1200);
      const recordKeys = f.deliveries.map((d) => keys.delivery(d.id));
      expect(await admin.exists(recordKeys)).toBe(1200);
      const ttls = await Promise.all(recordKeys.map((key) => admin.pttl(key)));
      expect(ttls.filter((t) => t !== -1)).toEqual([]);
      expect(await admin.zmscore(keys.deliveryOutbox(), f.deliveries[0]!.id, f.deliveries[1199]!.id)).toEqual([
        String(now),
        String(now),
      ]);
      expect(
        await admin.sismember(keys.connectionActiveDeliveries(f.deliveries[7]!.connection_id), f.deliveries[7]!.id),
      ).toBe(1);
      expect(await admin.hlen(keys.executionTally(f.execution.id))).toBeGreaterThan(0);
    });

    it('a commit that loses to a concurrent change leaves none of the records written ahead', async () => {
      const f = await fanOut(600, body, { manyConnections: true });
      // The incident moved on since it was read: the commit's check fails.
      await admin.set(keys.incident(f.incident.id), JSON.stringify({ ...f.incident, rev: 99 }));
      const repo = new RedisExecutionRepo(bulk, keys, () => now, bulk);
      expect(await repo.create(f.execution, f.deliveries, f.incident, f.next, [])).toBe(false);
      expect(await admin.exists(f.deliveries.map((d) => keys.delivery(d.id)))).toBe(0);
      expect(await admin.exists(keys.execution(f.execution.id))).toBe(0);
    });

    it('a small fan-out still writes its records in the commit itself', async () => {
      const f = await fanOut(20, body, { manyConnections: true });
      const { client, calls } = noted();
      const repo = new RedisExecutionRepo(bulk, keys, () => now, client);
      expect(await repo.create(f.execution, f.deliveries, f.incident, f.next, [])).toBe(true);
      expect(calls.filter((c) => !isScript(c))).toEqual([]);
      expect(calls.filter((c) => isScript(c) && carriesRecord(c))).toHaveLength(1);
      expect(await admin.exists(f.deliveries.map((d) => keys.delivery(d.id)))).toBe(20);
    });
  });

  it('checks the incident’s conversations once, not once per connection, and moves their revision on', async () => {
    await whenReady(bulk, 30_000);
    const f = await fanOut(1200, 'b', { manyConnections: true });
    const conversations = new RedisConversationRepo(bulk, keys);
    const read = await conversations.threads(
      f.incident.id,
      f.deliveries.map((d) => d.connection_id),
    );
    expect(read.revision).toBeNull();
    const { client, calls } = notingCalls(bulk, ['evalsha', 'eval']);
    const repo = new RedisExecutionRepo(bulk, keys, () => now, client);
    expect(await repo.create(f.execution, f.deliveries, f.incident, f.next, [], read)).toBe(true);
    const commit = calls.find((c) => c.length > 1000)!;
    const checks = JSON.parse(String(commit[2 + Number(commit[1])])) as { op: string }[];
    expect(checks.filter((c) => c.op === 'hget')).toHaveLength(1);
    const after = await conversations.threads(f.incident.id, [f.deliveries[5]!.connection_id]);
    expect(after.revision).toBe('1');
    expect(after.get(f.deliveries[5]!.connection_id)).toMatchObject({
      sequence: 1,
      lastDeliveryId: f.deliveries[5]!.id,
    });
  });

  it('marks a large execute’s outbox entries dispatched a slice per script, so no one script holds Redis long', async () => {
    await whenReady(bulk, 30_000);
    const count = 2 * DISPATCHED_PER_SCRIPT + 500;
    const f = await fanOut(count, 'b');
    expect(
      await new RedisExecutionRepo(bulk, keys, () => now, bulk).create(
        f.execution,
        f.deliveries,
        f.incident,
        f.next,
        [],
      ),
    ).toBe(true);
    const ids = f.deliveries.map((d) => d.id);
    // The script loaded first: on a Redis that lacks it, the first slice would go as EVALSHA, then EVAL.
    await new RedisExecutionRepo(bulk, keys, () => now, bulk).markDispatched(['dlv_none'], now);
    const { client, calls } = notingCalls(bulk, ['evalsha', 'eval']);
    await new RedisExecutionRepo(client, keys, () => now, bulk).markDispatched(ids, now);
    // Each call: the claim, the dispatched score, then its slice of ids.
    expect(calls.map((c) => c.filter((a) => typeof a === 'string' && a.startsWith('dlv_')).length)).toEqual([
      DISPATCHED_PER_SCRIPT,
      DISPATCHED_PER_SCRIPT,
      500,
    ]);
    const scores = await admin.zmscore(keys.deliveryOutbox(), ids);
    expect(new Set(scores)).toEqual(new Set([String(now + DISPATCH_LEASE_MS + 0.5)]));
  });
});
