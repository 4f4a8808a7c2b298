import { describe, expect, it } from 'vitest';
import type { IdempotencyStore, StoredResponse } from '../../src/ports/index.js';
import { COMPRESS_FROM, IDEMPOTENCY_LEASE_MS, RedisIdempotencyStore } from '../../src/store/idempotency.js';
import { LIMITS } from '../../src/domain/common/limits.js';
import { FakeClock, FakeSecretBox, InMemoryIdempotencyStore } from '../service/fakes.js';
import { contractRedis, type Make } from './support.js';

/**
 * The idempotency store's contract, as the HTTP middleware and the Slack edge rely on it. `lapse`
 * lets time pass: the fake's clock moves, and in Redis every key of the store's prefix loses that
 * much of its TTL (the ones it would not outlive are dropped), as if Redis had waited.
 */
interface Harness {
  store: IdempotencyStore;
  lapse(ms: number): Promise<void>;
}

const db = contractRedis('c-idem');

function redisHarness(): Harness {
  const keys = db.keys();
  const redis = db.redis();
  return {
    store: new RedisIdempotencyStore(redis, keys, new FakeSecretBox()),
    async lapse(ms) {
      const found = await redis.keys(keys.idempotency('*', '*'));
      for (const k of found) {
        const left = await redis.pttl(k);
        if (left >= 0 && left <= ms) await redis.del(k);
        else if (left > ms) await redis.pexpire(k, left - ms);
      }
    },
  };
}

function fakeHarness(): Harness {
  const clock = new FakeClock();
  return {
    store: new InMemoryIdempotencyStore(clock),
    lapse: (ms) => Promise.resolve(clock.advance(ms)),
  };
}

const answer = (n: number): StoredResponse => ({
  status: 201,
  body: JSON.stringify({ id: `inc_${n}` }),
  headers: { 'content-type': 'application/json', location: `/v1/incidents/inc_${n}` },
});

/** An execute's answer to 2,000 connections, every receipt listed (with a multi-byte character). */
const longAnswer: StoredResponse = {
  status: 202,
  body: JSON.stringify({
    id: 'exe_1',
    note: 'Ünïcode — kept',
    deliveries: Array.from({ length: 2000 }, (_, i) => ({
      id: `dlv_${i}`,
      connection_id: `con_${i}`,
      status: 'queued',
    })),
  }),
  headers: { 'content-type': 'application/json; charset=utf-8', location: '/v1/incidents/inc_1/executions/exe_1' },
};

function contract(make: Make<Harness>) {
  it('claims a new key once: the next request with the same body finds it in flight', async () => {
    const { store } = make();
    const first = await store.begin('key_a', 'k1', 'fp-1');
    expect(first.state).toBe('new');
    if (first.state !== 'new') return;
    expect(first.claim).toMatchObject({ scope: 'key_a', key: 'k1', fingerprint: 'fp-1' });
    expect(first.claim.token).toMatch(/.+/);
    expect(await store.begin('key_a', 'k1', 'fp-1')).toEqual({ state: 'in_flight' });
    // Keys are scoped: the same key under another API key is a claim of its own.
    expect((await store.begin('key_b', 'k1', 'fp-1')).state).toBe('new');
  });

  it('replays the stored answer to the same request, and refuses a different body with the same key', async () => {
    const { store } = make();
    const begun = await store.begin('key_a', 'k2', 'fp-1');
    if (begun.state !== 'new') throw new Error(`expected new, got ${begun.state}`);
    expect(await store.begin('key_a', 'k2', 'fp-2')).toEqual({ state: 'mismatch' });
    await store.complete(begun.claim, answer(1));
    expect(await store.begin('key_a', 'k2', 'fp-1')).toEqual({ state: 'done', response: answer(1) });
    expect(await store.begin('key_a', 'k2', 'fp-1')).toEqual({ state: 'done', response: answer(1) });
    expect(await store.begin('key_a', 'k2', 'fp-2')).toEqual({ state: 'mismatch' });
    // Done is final for its holder: nothing renews, replaces or frees the stored answer.
    expect(await store.renew(begun.claim)).toBe(false);
    await store.complete(begun.claim, answer(2));
    await store.release(begun.claim);
    expect(await store.begin('key_a', 'k2', 'fp-1')).toEqual({ state: 'done', response: answer(1) });
  });

  it('frees a released claim for the next try, which may carry another body', async () => {
    const { store } = make();
    const begun = await store.begin('key_a', 'k3', 'fp-1');
    if (begun.state !== 'new') throw new Error(`expected new, got ${begun.state}`);
    await store.release(begun.claim);
    expect(await store.renew(begun.claim)).toBe(false);
    expect((await store.begin('key_a', 'k3', 'fp-2')).state).toBe('new');
  });

  it('lets an unrenewed lease lapse and be taken over; the old holder then holds nothing', async () => {
    const h = make();
    const begun = await h.store.begin('key_a', 'k4', 'fp-1');
    if (begun.state !== 'new') throw new Error(`expected new, got ${begun.state}`);
    // Renewed before it lapses, it holds past the first lease. Half a lease to spare: Redis' own
    // clock moves too while a busy machine runs the steps between.
    const spare = IDEMPOTENCY_LEASE_MS / 2;
    await h.lapse(IDEMPOTENCY_LEASE_MS - spare);
    expect(await h.store.renew(begun.claim)).toBe(true);
    await h.lapse(IDEMPOTENCY_LEASE_MS - spare);
    expect(await h.store.begin('key_a', 'k4', 'fp-1')).toEqual({ state: 'in_flight' });
    // Not renewed (its process died): the next try takes it over.
    await h.lapse(spare);
    const retry = await h.store.begin('key_a', 'k4', 'fp-1');
    if (retry.state !== 'new') throw new Error(`expected new, got ${retry.state}`);
    expect(retry.claim.token).not.toBe(begun.claim.token);
    expect(await h.store.renew(begun.claim)).toBe(false);
    await h.store.complete(begun.claim, answer(1));
    await h.store.release(begun.claim);
    expect(await h.store.begin('key_a', 'k4', 'fp-1')).toEqual({ state: 'in_flight' });
    await h.store.complete(retry.claim, answer(2));
    expect(await h.store.begin('key_a', 'k4', 'fp-1')).toEqual({ state: 'done', response: answer(2) });
  });

  it('keeps a stored answer for the idempotency TTL, then forgets the key', async () => {
    const h = make();
    const begun = await h.store.begin('key_a', 'k5', 'fp-1');
    if (begun.state !== 'new') throw new Error(`expected new, got ${begun.state}`);
    await h.store.complete(begun.claim, answer(1));
    await h.lapse(LIMITS.idempotencyTtlSeconds * 1000 - 60_000);
    expect(await h.store.begin('key_a', 'k5', 'fp-2')).toEqual({ state: 'mismatch' });
    await h.lapse(60_000);
    expect((await h.store.begin('key_a', 'k5', 'fp-2')).state).toBe('new');
  });

  it('replays a long answer byte for byte', async () => {
    const { store } = make();
    const begun = await store.begin('key_a', 'k7', 'fp-1');
    if (begun.state !== 'new') throw new Error(`expected new, got ${begun.state}`);
    await store.complete(begun.claim, longAnswer);
    expect(await store.begin('key_a', 'k7', 'fp-1')).toEqual({ state: 'done', response: longAnswer });
  });

  it('runs work within a request and hands back its result', async () => {
    const { store } = make();
    const begun = await store.begin('key_a', 'k6', 'fp-1');
    if (begun.state !== 'new') throw new Error(`expected new, got ${begun.state}`);
    const out = await store.within({ claim: begun.claim, respond: null, stored: false }, () => Promise.resolve(42));
    expect(out).toBe(42);
  });
}

describe.each<[string, Make<Harness>]>([
  ['in-memory', fakeHarness],
  ['redis', redisHarness],
])('IdempotencyStore contract: %s', (_name, make) => contract(make));

describe('IdempotencyStore in Redis', () => {
  it('stores a long answer compressed, a short one as it is', async () => {
    const keys = db.keys();
    const redis = db.redis();
    const store = new RedisIdempotencyStore(redis, keys, new FakeSecretBox());
    const stored = async (key: string, response: StoredResponse) => {
      const begun = await store.begin('key_a', key, 'fp-1');
      if (begun.state !== 'new') throw new Error(`expected new, got ${begun.state}`);
      await store.complete(begun.claim, response);
      const [k] = await redis.keys(keys.idempotency('key_a', '*'));
      const rec = JSON.parse((await redis.get(k!))!) as { r: string; z?: string };
      await redis.del(k!);
      return rec;
    };
    expect(longAnswer.body.length).toBeGreaterThan(COMPRESS_FROM);
    const packed = await stored('long', longAnswer);
    expect(packed.z).toBe('gzip');
    expect(packed.r.length).toBeLessThan(longAnswer.body.length / 5);
    expect((await stored('short', answer(1))).z).toBeUndefined();
  });
});
