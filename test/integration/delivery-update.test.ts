import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import { newDelivery, type Delivery } from '../../src/domain/execution/execution.js';
import { newEvent } from '../../src/domain/incident/incident-event.js';
import { SYSTEM_ACTOR } from '../../src/domain/common/actor.js';
import { startSending } from '../../src/domain/execution/delivery-state.js';
import { RedisExecutionRepo } from '../../src/store/executions.js';
import { createKeys } from '../../src/store/keys.js';
import { connectTestRedis, dropPrefix, notingCalls, uniquePrefix } from '../support/redis.js';

/**
 * updateDelivery's own script (delivery_update): the compare-and-set on the stored text, the
 * active index, the outbox and the timeline, in one step — what the general commit did before.
 */
let redis: Redis;
const prefix = uniquePrefix('dlvupd');
const keys = createKeys(prefix);
const ids = createIdGenerator();
const now = 1_700_000_000_000;

beforeAll(() => {
  redis = connectTestRedis();
});
afterAll(async () => {
  await dropPrefix(redis, prefix);
  await redis.quit();
});

function aDelivery(): Delivery {
  return newDelivery({
    id: ids.next('delivery'),
    executionId: ids.next('execution'),
    incidentId: ids.next('incident'),
    connectionId: ids.next('connection'),
    connectionType: 'webhook',
    templateId: null,
    templateVersion: null,
    content: { subject: 'S', body: 'B "quoted" ünïcode' },
  });
}

async function stored(d: Delivery): Promise<Delivery> {
  await redis.set(keys.delivery(d.id), JSON.stringify(d));
  await redis.sadd(keys.connectionActiveDeliveries(d.connection_id), d.id);
  return d;
}

describe('RedisExecutionRepo.updateDelivery', () => {
  it('sends the record as read only as its SHA-1, never the whole record again', async () => {
    const { client: noting, calls: sent } = notingCalls(redis, ['evalsha', 'eval']);
    const repo = new RedisExecutionRepo(noting, keys, () => now);
    const d = await stored(aDelivery());
    const [read] = await repo.getDeliveries([d.id]);
    const next = { ...read!, rev: read!.rev + 1 };
    expect(await repo.updateDelivery(read!, next)).toBe(true);
    const args = sent.find((a) => a.includes(keys.delivery(d.id)))!.map(String);
    expect(args).toContain(createHash('sha1').update(JSON.stringify(d)).digest('hex'));
    // One record crosses the wire: the new one.
    expect(args.filter((a) => a.startsWith('{"'))).toEqual([JSON.stringify(next)]);
  });

  it('writes only over the record as read, keeping the active index in step', async () => {
    const repo = new RedisExecutionRepo(redis, keys, () => now);
    const d = await stored(aDelivery());
    const [read] = await repo.getDeliveries([d.id]);
    const sending = startSending(read!, new Date(now)) as Delivery;
    expect(await repo.updateDelivery(read!, sending)).toBe(true);
    expect(JSON.parse((await redis.get(keys.delivery(d.id)))!)).toEqual(sending);
    // A stale writer (it read the record before that write) changes nothing.
    const stale = { ...sending, status: 'cancelled' as const };
    expect(await repo.updateDelivery(d, stale)).toBe(false);
    expect(JSON.parse((await redis.get(keys.delivery(d.id)))!)).toEqual(sending);
    expect(await redis.sismember(keys.connectionActiveDeliveries(d.connection_id), d.id)).toBe(1);
    // The text just written is what the next write compares with: a terminal one leaves the index.
    const delivered: Delivery = { ...sending, status: 'delivered', rev: sending.rev + 1 };
    expect(await repo.updateDelivery(sending, delivered)).toBe(true);
    expect(await redis.sismember(keys.connectionActiveDeliveries(d.connection_id), d.id)).toBe(0);
  });

  it('records the outbox entry and the timeline events in the same step', async () => {
    const repo = new RedisExecutionRepo(redis, keys, () => now);
    const d = await stored(aDelivery());
    const next: Delivery = { ...d, rev: d.rev + 1 };
    const events = [1, 2].map((n) =>
      newEvent(ids.next('event'), 'delivery.failed', new Date(now).toISOString(), SYSTEM_ACTOR, {
        delivery_id: d.id,
        n,
      }),
    );
    expect(await repo.updateDelivery(d, next, { outbox: true, events })).toBe(true);
    expect(await redis.zscore(keys.deliveryOutbox(), d.id)).toBe(String(now));
    expect(
      (await redis.lrange(keys.incidentEvents(d.incident_id), 0, -1)).map((e) => JSON.parse(e) as unknown),
    ).toEqual(events);
    // Without them, neither is touched.
    const again: Delivery = { ...next, rev: next.rev + 1 };
    await redis.zrem(keys.deliveryOutbox(), d.id);
    expect(await repo.updateDelivery(next, again)).toBe(true);
    expect(await redis.zscore(keys.deliveryOutbox(), d.id)).toBeNull();
    expect(await redis.llen(keys.incidentEvents(d.incident_id))).toBe(2);
  });

  it('writes the deliveries of one turn in one script, each answered as if written alone', async () => {
    const { client: counting, calls: scripts } = notingCalls(redis, ['evalsha', 'eval']);
    const repo = new RedisExecutionRepo(counting, keys, () => now);
    const [a, b, c] = await Promise.all([aDelivery(), aDelivery(), aDelivery()].map(stored));
    // b was changed by someone else after it was read: its write must lose, and only its write.
    await redis.set(keys.delivery(b!.id), JSON.stringify({ ...b!, rev: b!.rev + 5 }));
    const sending = [a!, b!, c!].map((d) => startSending(d, new Date(now)) as Delivery);
    const answers = await Promise.all([a!, b!, c!].map((d, i) => repo.updateDelivery(d, sending[i]!)));
    expect(answers).toEqual([true, false, true]);
    expect(scripts).toHaveLength(1);
    expect(JSON.parse((await redis.get(keys.delivery(a!.id)))!)).toEqual(sending[0]);
    expect((JSON.parse((await redis.get(keys.delivery(b!.id)))!) as Delivery).rev).toBe(b!.rev + 5);
    expect(JSON.parse((await redis.get(keys.delivery(c!.id)))!)).toEqual(sending[2]);
    // Each text written is what that delivery's next compare-and-set expects.
    const delivered = (d: Delivery): Delivery => ({ ...d, status: 'delivered', rev: d.rev + 1 });
    expect(await repo.updateDelivery(sending[0]!, delivered(sending[0]!))).toBe(true);
  });

  it('a write Redis refuses (a key of the wrong type) fails alone; the others in its script are written', async () => {
    const repo = new RedisExecutionRepo(redis, keys, () => now);
    const [a, poisoned, c] = await Promise.all([aDelivery(), aDelivery(), aDelivery()].map(stored));
    await redis.del(keys.connectionActiveDeliveries(poisoned!.connection_id));
    await redis.set(keys.connectionActiveDeliveries(poisoned!.connection_id), 'not a set');
    const next = [a!, poisoned!, c!].map((d): Delivery => ({ ...d, rev: d.rev + 1 }));
    const answers = await Promise.allSettled([a!, poisoned!, c!].map((d, i) => repo.updateDelivery(d, next[i]!)));
    expect(answers[0]).toEqual({ status: 'fulfilled', value: true });
    expect(answers[1]!.status === 'rejected' && String(answers[1]!.reason)).toMatch(/WRONGTYPE/);
    expect(answers[2]).toEqual({ status: 'fulfilled', value: true });
    expect(JSON.parse((await redis.get(keys.delivery(c!.id)))!)).toEqual(next[2]);
  });

  it('emits execution.completed once when one batch makes the last open deliveries final', async () => {
    const repo = new RedisExecutionRepo(redis, keys, () => now);
    const executionId = ids.next('execution');
    const ds = await Promise.all(
      [1, 2, 3].map(() => stored({ ...aDelivery(), execution_id: executionId, status: 'sending' })),
    );
    await redis.hset(keys.executionTally(executionId), { open: 3, delivered: 0, failed: 0, cancelled: 0 });
    const streamBefore = await redis.xlen(keys.eventStream());
    const final = ds.map((d, i): Delivery => ({ ...d, status: i === 1 ? 'failed' : 'delivered', rev: d.rev + 1 }));
    expect(await Promise.all(ds.map((d, i) => repo.updateDelivery(d, final[i]!)))).toEqual([true, true, true]);
    expect(await redis.hgetall(keys.executionTally(executionId))).toMatchObject({
      open: '0',
      delivered: '2',
      failed: '1',
      completions: '1',
    });
    const added = await redis.xrange(keys.eventStream(), '-', '+');
    const completed = added
      .slice(streamBefore)
      .map(([, fields]) => fields)
      .filter((f) => f[3] === 'execution.completed');
    expect(completed).toHaveLength(1);
    expect(JSON.parse(completed[0]![7]!)).toMatchObject({
      type: 'execution.completed',
      data: { execution_id: executionId, delivered: 2, failed: 1, cancelled: 0 },
    });
  });

  it('reads the deliveries of one turn in one MGET; a record that does not decode fails only its own read', async () => {
    const { client: counting, calls: mgets } = notingCalls(redis, ['mget']);
    const repo = new RedisExecutionRepo(counting, keys, () => now);
    const [a, b] = await Promise.all([aDelivery(), aDelivery()].map(stored));
    const broken = ids.next('delivery');
    await redis.set(keys.delivery(broken), '{"id": "cut off');
    const reads = await Promise.allSettled(
      [a!.id, broken, b!.id, ids.next('delivery')].map((id) => repo.getDelivery(id)),
    );
    expect(mgets).toHaveLength(1);
    expect(reads[0]).toEqual({ status: 'fulfilled', value: a });
    expect(reads[1]!.status).toBe('rejected');
    expect(reads[2]).toEqual({ status: 'fulfilled', value: b });
    expect(reads[3]).toEqual({ status: 'fulfilled', value: null });
  });
});
