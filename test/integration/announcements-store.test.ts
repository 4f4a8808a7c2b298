import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeys } from '../../src/store/keys.js';
import { RedisAnnouncementRepo } from '../../src/store/announcements.js';
import { connectTestRedis, dropPrefix, uniquePrefix } from '../support/redis.js';

let redis: Redis;
const prefix = uniquePrefix('ann');
let repo: RedisAnnouncementRepo;

beforeAll(() => {
  redis = connectTestRedis();
  repo = new RedisAnnouncementRepo(redis, createKeys(prefix));
});

afterAll(async () => {
  await dropPrefix(redis, prefix);
  await redis.quit();
});

describe('RedisAnnouncementRepo', () => {
  it('keeps the first announcement of an incident', async () => {
    expect(await repo.get('inc_a')).toBeNull();
    expect(await repo.create('inc_a', { channel: 'C1', ts: '1.1', execution_id: null })).toBe(true);
    expect(await repo.create('inc_a', { channel: 'C2', ts: '2.2', execution_id: null })).toBe(false);
    expect(await repo.get('inc_a')).toEqual({ channel: 'C1', ts: '1.1', execution_id: null });
  });

  it('follows the newest execution only, even when updates race', async () => {
    expect(await repo.trackExecution('inc_none', 'exe_1')).toBeNull();
    await repo.create('inc_b', { channel: 'C1', ts: '1.1', execution_id: null });
    const ids = ['exe_01JA00000000000000000000A1', 'exe_01JA00000000000000000000A3', 'exe_01JA00000000000000000000A2'];
    await Promise.all(ids.map((id) => repo.trackExecution('inc_b', id)));
    expect((await repo.get('inc_b'))?.execution_id).toBe('exe_01JA00000000000000000000A3');
    expect((await repo.trackExecution('inc_b', 'exe_01JA00000000000000000000A0'))?.execution_id).toBe('exe_01JA00000000000000000000A3');
  });
});
