import { describe, expect, it } from 'vitest';
import type { ChannelType } from '../../src/contracts/channel.js';
import { HEALTHY, type ConnectionRecord } from '../../src/domain/connection/connection.js';
import type { ConnectionRepo } from '../../src/ports/index.js';
import { RedisConnectionRepo } from '../../src/store/connections.js';
import { InMemoryConnectionRepo } from '../service/fakes.js';
import { allPages, contractRedis, ids, plain, type Make } from './support.js';

/** The connection repository's contract, as ConnectionService and the delivery engine rely on it. */
const db = contractRedis('c-con');

function connection(type: ChannelType = 'webhook', enabled = true): ConnectionRecord {
  return {
    id: ids.next('connection'),
    name: `${type} hook`,
    type,
    enabled,
    config: { url: 'https://hooks.example.com/herald' },
    secrets: {},
    rate_limit_per_minute: null,
    update_mode: 'thread',
    health: HEALTHY,
    last_test: null,
    created_at: '2026-11-22T10:00:00.000Z',
    updated_at: '2026-11-22T10:00:00.000Z',
    rev: 1,
  };
}

function contract(make: Make<ConnectionRepo>) {
  it('reads back what it created; an id is created once; unknown ids read as null', async () => {
    const repo = make();
    const c = connection();
    expect(await repo.create(c, 'whsec_shown_once')).toBe(true);
    expect(plain(await repo.get(c.id))).toEqual(c);
    expect(await repo.create({ ...c, name: 'again' })).toBe(false);
    expect((await repo.get(c.id))?.name).toBe(c.name);
    expect(await repo.get(ids.next('connection'))).toBeNull();
    const other = connection('slack');
    expect(await repo.create(other)).toBe(true);
    expect(plain(await repo.getMany([other.id, ids.next('connection'), c.id]))).toEqual([other, null, c]);
  });

  it('updates and deletes by compare-and-set: a stale `prev` loses and changes nothing', async () => {
    const repo = make();
    const c = connection();
    await repo.create(c);
    const disabled: ConnectionRecord = { ...c, enabled: false, rev: 2 };
    expect(await repo.update(c, disabled)).toBe(true);
    expect(await repo.update(c, { ...c, name: 'stale', rev: 2 })).toBe(false);
    expect(await repo.delete(c)).toBe(false);
    expect(plain(await repo.get(c.id))).toEqual(disabled);
    expect(await repo.delete(disabled)).toBe(true);
    expect(await repo.get(c.id)).toBeNull();
    expect(await repo.delete(disabled)).toBe(false);
    expect(await repo.update(disabled, { ...disabled, rev: 3 })).toBe(false);
    expect(await repo.get(c.id)).toBeNull();
    expect((await repo.list({}, { limit: 10, cursor: null })).data).toEqual([]);
  });

  it('lists newest first, pages with the cursor, and filters by type and enabled', async () => {
    const repo = make();
    const made = [
      connection('webhook'),
      connection('slack'),
      connection('webhook', false),
      connection('teams'),
      connection('slack', false),
    ];
    for (const c of made) await repo.create(c);
    const listed = async (f: Parameters<ConnectionRepo['list']>[0]) =>
      (await allPages((p) => repo.list(f, p), 2)).flat().map((c) => c.id);
    const newestFirst = made.map((c) => c.id).reverse();
    const pages = await allPages((p) => repo.list({}, p), 2);
    expect(pages.map((p) => p.length)).toEqual([2, 2, 1]);
    expect(pages.flat().map((c) => c.id)).toEqual(newestFirst);
    expect(await listed({ type: ['slack'] })).toEqual([made[4]!.id, made[1]!.id]);
    expect(await listed({ type: ['slack', 'teams'], enabled: true })).toEqual([made[3]!.id, made[1]!.id]);
    expect(await listed({ enabled: false })).toEqual([made[4]!.id, made[2]!.id]);
    // An empty list of types filters nothing.
    expect(await listed({ type: [] })).toEqual(newestFirst);
  });
}

describe.each<[string, Make<ConnectionRepo>]>([
  ['in-memory', () => new InMemoryConnectionRepo()],
  ['redis', () => new RedisConnectionRepo(db.redis(), db.keys())],
])('ConnectionRepo contract: %s', (_name, make) => contract(make));
