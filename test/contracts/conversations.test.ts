import { describe, expect, it } from 'vitest';
import type { ConversationRepo, ThreadRoot } from '../../src/ports/index.js';
import { RedisConversationRepo } from '../../src/store/conversations.js';
import { InMemoryConversationRepo } from '../service/fakes.js';
import { contractRedis, ids } from './support.js';

/** The conversation store's contract, as the delivery worker and corrections rely on it. */
const db = contractRedis('c-conv');

const root = (deliveryId: string, ts: string): ThreadRoot => ({
  ref: { id: ts, channel: 'C0123', permalink: `https://example.slack.com/archives/C0123/p${ts}` },
  deliveryId,
});

function contract(make: () => ConversationRepo) {
  it('starts every conversation empty', async () => {
    const repo = make();
    const inc = ids.next('incident');
    const [a, b] = [ids.next('connection'), ids.next('connection')];
    const threads = await repo.threads(inc, [a, b]);
    expect([...threads.keys()]).toEqual([a, b]);
    expect(threads.get(a)).toEqual({ sequence: 0, lastDeliveryId: null, raw: null });
    expect(threads.revision).toBeNull();
    expect((await repo.threads(inc, [])).size).toBe(0);
    expect(await repo.root(inc, a)).toBeNull();
  });

  it('keeps the first message recorded as the root, per incident and connection', async () => {
    const repo = make();
    const inc = ids.next('incident');
    const con = ids.next('connection');
    const first = root(ids.next('delivery'), '1700000000.000100');
    await repo.startIfNone(inc, con, first);
    await repo.startIfNone(inc, con, root(ids.next('delivery'), '1700000000.000200'));
    expect(await repo.root(inc, con)).toEqual(first);
    expect(await repo.root(inc, ids.next('connection'))).toBeNull();
    expect(await repo.root(ids.next('incident'), con)).toBeNull();
  });

  it('forgets the root only when it is the retracted delivery, after which a new one may start', async () => {
    const repo = make();
    const inc = ids.next('incident');
    const con = ids.next('connection');
    const first = root(ids.next('delivery'), '1700000000.000100');
    await repo.startIfNone(inc, con, first);
    await repo.forget(inc, con, ids.next('delivery'));
    expect(await repo.root(inc, con)).toEqual(first);
    await repo.forget(inc, con, first.deliveryId);
    expect(await repo.root(inc, con)).toBeNull();
    await repo.forget(inc, con, first.deliveryId);
    const again = root(ids.next('delivery'), '1700000000.000300');
    await repo.startIfNone(inc, con, again);
    expect(await repo.root(inc, con)).toEqual(again);
  });
}

describe.each<[string, () => ConversationRepo]>([
  ['in-memory', () => new InMemoryConversationRepo()],
  ['redis', () => new RedisConversationRepo(db.redis(), db.keys())],
])('ConversationRepo contract: %s', (_name, make) => contract(make));
