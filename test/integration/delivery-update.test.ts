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
import { connectTestRedis, dropPrefix, uniquePrefix } from '../support/redis.js';

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
    // The client as the repository sees it, noting the arguments of every script it runs.
    const sent: unknown[][] = [];
    const noting = new Proxy(redis, {
      get(target, prop, receiver) {
        const value: unknown = Reflect.get(target, prop, receiver);
        if (typeof value !== 'function') return value;
        const fn = value as (...a: unknown[]) => unknown;
        return (...args: unknown[]) => {
          // Flattened: the store passes a script's keys and arguments as one array (scripts.ts).
          if (prop === 'evalsha' || prop === 'eval') sent.push(args.flat());
          return fn.apply(target, args);
        };
      },
    });
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
});
