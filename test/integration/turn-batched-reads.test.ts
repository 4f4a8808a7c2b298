import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import { RedisConnectionRepo } from '../../src/store/connections.js';
import { RedisConversationRepo } from '../../src/store/conversations.js';
import { createKeys } from '../../src/store/keys.js';
import { connectTestRedis, dropPrefix, notingCalls, uniquePrefix } from '../support/redis.js';

/**
 * The reads the worker makes once per delivery besides its record (store/turn-batch.ts): its
 * connection and its conversation's first message. Those of one turn go out together.
 */
let redis: Redis;
const prefix = uniquePrefix('turnreads');
const keys = createKeys(prefix);
const ids = createIdGenerator();

beforeAll(() => {
  redis = connectTestRedis();
});
afterAll(async () => {
  await dropPrefix(redis, prefix);
  await redis.quit();
});

describe('reads of one turn', () => {
  it('connections: one MGET; a record that does not decode fails only its own read', async () => {
    const { client, calls } = notingCalls(redis, ['mget']);
    const repo = new RedisConnectionRepo(client, keys);
    const [a, broken, gone] = [ids.next('connection'), ids.next('connection'), ids.next('connection')];
    await redis.set(keys.connection(a), JSON.stringify({ id: a, type: 'webhook' }));
    await redis.set(keys.connection(broken), '{"id":');
    const reads = await Promise.allSettled([repo.get(a), repo.get(broken), repo.get(gone)]);
    expect(calls).toHaveLength(1);
    expect(reads[0]).toEqual({ status: 'fulfilled', value: { id: a, type: 'webhook' } });
    expect(reads[1].status).toBe('rejected');
    expect(reads[2]).toEqual({ status: 'fulfilled', value: null });
  });

  it("conversations' first messages: one HMGET per incident, each answer to its own asker", async () => {
    const { client, calls } = notingCalls(redis, ['hmget', 'hget']);
    const repo = new RedisConversationRepo(client, keys);
    const [one, two] = [ids.next('incident'), ids.next('incident')];
    const [c1, c2] = [ids.next('connection'), ids.next('connection')];
    const root = (n: number) => ({
      ref: { id: `m${n}`, channel: null, permalink: null },
      deliveryId: ids.next('delivery'),
    });
    const [r1, r2, r3] = [root(1), root(2), root(3)];
    await repo.startIfNone(one, c1, r1);
    await repo.startIfNone(one, c2, r2);
    await repo.startIfNone(two, c1, r3);
    calls.length = 0;
    const answers = await Promise.all([repo.root(one, c1), repo.root(two, c1), repo.root(one, c2), repo.root(two, c2)]);
    expect(answers).toEqual([r1, r3, r2, null]);
    expect(calls).toHaveLength(2);
  });
});
