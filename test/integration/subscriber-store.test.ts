import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import type { Recipient, Subscriber, SubscriberNotice } from '../../src/ports/index.js';
import { createSecretBox } from '../../src/store/crypto.js';
import { createKeys, type Keys } from '../../src/store/keys.js';
import { openSubscriberKey, type SubscriberIds } from '../../src/store/subscriber-key.js';
import {
  RedisNoticeRepo,
  RedisSubscriberRepo,
  RedisSubscriptionMailQueue,
  resealSubscribers,
  SUBSCRIBER_BUCKETS,
} from '../../src/store/subscribers.js';
import { connectTestRedis, dropPrefix, uniquePrefix, useTestRedis } from '../support/redis.js';

/**
 * The subscriber store against Redis: compare-and-set writes that keep the counts and the erase
 * schedule in step, the retention's erase (which leaves a record confirmed meanwhile alone), the
 * bytes a subscriber costs, sealed addresses; notices opened once, leased work, the tally moved by
 * each recipient's result, paging recipients; the subscription mail queue's leases.
 */
const t = useTestRedis('subs-store');
const box = createSecretBox(randomBytes(32));
const DAY = 86_400_000;
const RETENTION = 7 * DAY;
const T0 = Date.parse('2026-12-01T12:00:00.000Z');
const at = (ms: number) => new Date(ms).toISOString();

const extra: string[] = [];
afterAll(async () => {
  for (const p of extra) await dropPrefix(t.redis, p);
});

/** A key space of its own (a test that counts keys or bytes must see only its own). */
async function space(): Promise<{ keys: Keys; ids: SubscriberIds; repo: RedisSubscriberRepo }> {
  const prefix = uniquePrefix('subs');
  extra.push(prefix);
  const keys = createKeys(prefix);
  const { ids } = await openSubscriberKey(t.redis, keys, box);
  return { keys, ids, repo: new RedisSubscriberRepo(t.redis, keys, box, ids, RETENTION) };
}

function subscriber(ids: SubscriberIds, address: string, over: Partial<Subscriber> = {}): Subscriber {
  const kind = over.kind ?? 'email';
  return {
    id: ids.idOf(kind, address),
    kind,
    address,
    state: 'pending',
    components: [],
    locale: 'en',
    source: 'page',
    created_at: at(T0),
    confirmed_at: null,
    unsubscribed_at: null,
    bounced_at: null,
    bounce_reason: null,
    token_version: 1,
    confirm: { nonce: 'n-1', expires_at: at(T0 + 2 * DAY) },
    webhook_secret: null,
    rev: 1,
    ...over,
  };
}

const confirmed = (s: Subscriber): Subscriber => ({
  ...s,
  state: 'confirmed',
  confirmed_at: at(T0 + 1000),
  confirm: null,
  rev: s.rev + 1,
});

describe('subscriber records', () => {
  it('round-trip every field, e-mail and webhook alike', async () => {
    const { ids, repo } = await space();
    const mail = subscriber(ids, 'Jane@example.com', {
      state: 'bounced',
      components: ['cmp_a', 'cmp_b'],
      locale: 'de',
      source: 'import:legacy',
      confirmed_at: at(T0 + 1),
      bounced_at: at(T0 + 2),
      bounce_reason: '550 5.1.1 mailbox unknown',
      token_version: 4,
      confirm: null,
    });
    const hook = subscriber(ids, 'https://hooks.example.com/in/abc', {
      kind: 'webhook',
      webhook_secret: 'whsec_x',
      token_version: 0,
    });
    expect(await repo.put(mail, null)).toBe(true);
    expect(await repo.put(hook, null)).toBe(true);
    expect(await repo.get(mail.id)).toEqual(mail);
    expect(await repo.get(hook.id)).toEqual(hook);
    expect(await repo.get(ids.idOf('email', 'nobody@example.com'))).toBeNull();
  });

  it('compare-and-set on rev: a create over an existing record and a stale write both lose', async () => {
    const { ids, repo } = await space();
    const s = subscriber(ids, 'cas@example.com');
    expect(await repo.put(s, null)).toBe(true);
    expect(await repo.put(s, null)).toBe(false);
    const next = confirmed(s);
    // Two writers that read rev 1: exactly one wins.
    const racing = await Promise.all([repo.put(next, 1), repo.put({ ...next, locale: 'de' }, 1)]);
    expect(racing.filter(Boolean)).toHaveLength(1);
    // A third writer that also read rev 1, after the winner wrote rev 2.
    expect(await repo.put(next, 1)).toBe(false);
    expect((await repo.get(s.id))!.rev).toBe(2);
    expect(await repo.put({ ...next, rev: 3 }, 2)).toBe(true);
    await expect(repo.put({ ...next, rev: 3 }, 3)).rejects.toThrow(/does not follow/);
  });

  it('keeps the counts per state and the erase schedule in step with each write and the erase', async () => {
    const { keys, ids, repo } = await space();
    const score = (id: string) => t.redis.zscore(keys.subscribersExpiring(), id);
    const s = subscriber(ids, 'counts@example.com');
    await repo.put(s, null);
    expect(await repo.counts()).toEqual({ pending: 1, confirmed: 0, unsubscribed: 0, bounced: 0 });
    expect(Number(await score(s.id))).toBe(T0 + 2 * DAY + RETENTION);

    const c = confirmed(s);
    await repo.put(c, 1);
    expect(await repo.counts()).toEqual({ pending: 0, confirmed: 1, unsubscribed: 0, bounced: 0 });
    expect(await score(s.id)).toBeNull();

    const u: Subscriber = { ...c, state: 'unsubscribed', unsubscribed_at: at(T0 + DAY), token_version: 2, rev: 3 };
    await repo.put(u, 2);
    expect(await repo.counts()).toEqual({ pending: 0, confirmed: 0, unsubscribed: 1, bounced: 0 });
    expect(Number(await score(s.id))).toBe(T0 + DAY + RETENTION);

    expect(await repo.erase(s.id)).toBe(true);
    expect(await repo.erase(s.id)).toBe(false);
    expect(await repo.get(s.id)).toBeNull();
    expect(await score(s.id)).toBeNull();
    expect(await repo.counts()).toEqual({ pending: 0, confirmed: 0, unsubscribed: 0, bounced: 0 });
  });

  it('eraseExpired erases due pending and unsubscribed records, leaving one confirmed meanwhile alone', async () => {
    const { keys, ids, repo } = await space();
    const pending = subscriber(ids, 'pending@example.com');
    const left = subscriber(ids, 'left@example.com', {
      state: 'unsubscribed',
      unsubscribed_at: at(T0),
      confirm: null,
    });
    const later = subscriber(ids, 'later@example.com', { confirm: { nonce: 'n', expires_at: at(T0 + 30 * DAY) } });
    const reconfirmed = subscriber(ids, 'back@example.com');
    for (const s of [pending, left, later, reconfirmed]) expect(await repo.put(s, null)).toBe(true);
    // The sweep read the schedule just before this record was confirmed: its entry is stale.
    await repo.put(confirmed(reconfirmed), 1);
    await t.redis.zadd(keys.subscribersExpiring(), T0, reconfirmed.id);

    const now = T0 + 2 * DAY + RETENTION;
    expect(await repo.eraseExpired(now, 100)).toBe(2);
    expect(await repo.get(pending.id)).toBeNull();
    expect(await repo.get(left.id)).toBeNull();
    expect((await repo.get(reconfirmed.id))!.state).toBe('confirmed');
    expect((await repo.get(later.id))!.state).toBe('pending');
    expect(await t.redis.zrange(keys.subscribersExpiring(), '0', '-1')).toEqual([later.id]);
    expect(await repo.counts()).toEqual({ pending: 1, confirmed: 1, unsubscribed: 0, bounced: 0 });
    expect(await repo.eraseExpired(now, 100)).toBe(0);
  });

  it('bucket(n) returns that bucket whole, in id order', async () => {
    const { ids, repo } = await space();
    const all = Array.from({ length: 600 }, (_, i) => confirmed(subscriber(ids, `b${i}@example.com`)));
    await Promise.all(all.map((s) => repo.put({ ...s, rev: 1 }, null)));
    const seen: string[] = [];
    for (let b = 0; b < repo.buckets; b++) {
      const got = await repo.bucket(b);
      expect(got.map((s) => s.id)).toEqual(got.map((s) => s.id).sort());
      expect(got.every((s) => repo.bucketOf(s.id) === b && s.state === 'confirmed')).toBe(true);
      seen.push(...got.map((s) => s.address));
    }
    expect(seen.sort()).toEqual(all.map((s) => s.address).sort());
    expect(await repo.bucket(SUBSCRIBER_BUCKETS)).toEqual([]);
  });

  it('stores the address and webhook secret sealed: Redis never holds them in plain text', async () => {
    const { keys, ids, repo } = await space();
    const mail = subscriber(ids, 'private.person@secret-domain.example');
    const hook = subscriber(ids, 'https://hooks.private-host.example/p/TOKEN123', {
      kind: 'webhook',
      webhook_secret: 'whsec_TOPSECRETVALUE',
    });
    await repo.put(mail, null);
    await repo.put(hook, null);
    let raw = '';
    for (let b = 0; b < SUBSCRIBER_BUCKETS; b++) {
      for (const [f, v] of Object.entries(await t.redis.hgetall(keys.subscriberBucket(b)))) raw += `${f}=${v}\n`;
    }
    expect(raw).toContain(mail.id);
    for (const plain of ['private.person', 'secret-domain', 'private-host', 'TOKEN123', 'TOPSECRETVALUE']) {
      expect(raw).not.toContain(plain);
    }
  });

  it('costs at most 300 bytes of Redis memory per confirmed e-mail subscriber', async () => {
    const { keys, ids, repo } = await space();
    const n = 2000;
    for (let i = 0; i < n; i += 200) {
      await Promise.all(
        Array.from({ length: 200 }, (_, j) => {
          const s = confirmed(subscriber(ids, `firstname.lastname${i + j}@example.com`));
          return repo.put({ ...s, rev: 1 }, null);
        }),
      );
    }
    let bytes = 0;
    for (let b = 0; b < SUBSCRIBER_BUCKETS; b++) {
      bytes += Number(await t.redis.call('MEMORY', 'USAGE', keys.subscriberBucket(b), 'SAMPLES', '0'));
    }
    const perSubscriber = bytes / n;
    console.log(`subscriber store: ${perSubscriber.toFixed(1)} bytes of Redis memory per confirmed e-mail subscriber`);
    expect((await repo.counts()).confirmed).toBe(n);
    expect(perSubscriber).toBeLessThanOrEqual(300);
  });
});

describe('the subscriber key', () => {
  it('is made once: concurrent and later opens derive the same ids, and it is stored sealed', async () => {
    const keys = createKeys(uniquePrefix('subkey'));
    extra.push(keys.tag.slice(1, -1));
    const [a, b] = await Promise.all([openSubscriberKey(t.redis, keys, box), openSubscriberKey(t.redis, keys, box)]);
    const c = await openSubscriberKey(t.redis, keys, box);
    const id = a.ids.idOf('email', 'jane@example.com');
    expect(b.ids.idOf('email', 'jane@example.com')).toBe(id);
    expect(c.ids.idOf('email', 'jane@example.com')).toBe(id);
    const token = a.tokens.sign({ purpose: 'unsubscribe', subscriberId: id, version: 0 });
    expect(c.tokens.verify(token, T0)).not.toBeNull();
    const stored = (await t.redis.get(keys.subscriberKey()))!;
    expect(stored).toMatch(/^v1\./);
    await expect(openSubscriberKey(t.redis, keys, createSecretBox(randomBytes(32)))).rejects.toThrow(
      /could not be opened/,
    );
  });
});

function notice(id: string, executionId: string | null = 'exe_01TEST'): SubscriberNotice {
  return {
    id,
    kind: 'incident_update',
    created_at: at(T0),
    execution_id: executionId,
    page: { title: 'Acme status', public_url: 'https://status.example.com' },
    component_ids: [],
    components: [],
    incident: null,
    maintenance: null,
    update: { id: 'upd_1', status: 'investigating', body: 'Looking into it.', created_at: at(T0), updated_at: null },
  };
}

const recipient = (id: string, state: Recipient['state'], over: Partial<Recipient> = {}): Recipient => ({
  subscriber_id: id,
  state,
  attempts: 1,
  at: at(T0),
  error: null,
  possible_duplicate: false,
  ...over,
});

function noticeSpace(): { keys: Keys; repo: RedisNoticeRepo } {
  const prefix = uniquePrefix('ntc');
  extra.push(prefix);
  const keys = createKeys(prefix);
  return { keys, repo: new RedisNoticeRepo(t.redis, keys, RETENTION) };
}

describe('notices', () => {
  it('open() writes the notice, a zero tally and one work item per bucket, once', async () => {
    const { keys, repo } = noticeSpace();
    const n = notice('ntc_dlv_01OPEN');
    // Two deliveries of the same write racing (a retried status page delivery): one opens it.
    const opened = await Promise.all([repo.open(n), repo.open(n)]);
    expect(opened.filter(Boolean)).toHaveLength(1);
    expect(await repo.open({ ...n, kind: 'incident_retraction' })).toBe(false);
    expect(await t.redis.hget(keys.subscriberNoticeTally(n.id), 'work')).toBe(String(SUBSCRIBER_BUCKETS));
    expect(await repo.get(n.id)).toEqual(n);
    expect(await t.redis.zcard(keys.subscriberWork())).toBe(SUBSCRIBER_BUCKETS);
    expect(await repo.tally(n.id)).toEqual({
      total: 0,
      delivered: 0,
      failed: 0,
      pending: 0,
      bounced: 0,
      possible_duplicates: 0,
      complete: false,
    });
    expect(await repo.ofExecution('exe_01TEST')).toEqual([n.id]);
    expect(await repo.ofExecution('exe_OTHER')).toEqual([]);
    expect(await t.redis.zrange(keys.subscriberNotices(), '0', '-1')).toEqual([n.id]);
  });

  it('claim leases due work; an expired lease is claimed again, and finish with the old lease is a no-op', async () => {
    const { keys } = noticeSpace();
    const now = T0 - DAY;
    const repo = new RedisNoticeRepo(t.redis, keys, RETENTION, () => now);
    const n = notice('ntc_dlv_01LEASE', null);
    await repo.open(n);
    expect(await repo.claim(now - 1, 60_000, 1000)).toEqual([]);
    const first = await repo.claim(now, 60_000, 1000);
    expect(first).toHaveLength(SUBSCRIBER_BUCKETS);
    expect(first.every((w) => w.noticeId === n.id && w.lease === now + 60_000)).toBe(true);
    expect(new Set(first.map((w) => ('bucket' in w ? w.bucket : -1)))).toEqual(
      new Set(Array.from({ length: SUBSCRIBER_BUCKETS }, (_, i) => i)),
    );
    expect(await repo.claim(now + 59_999, 60_000, 1000)).toEqual([]);

    // The holder died: once the lease passed, another worker takes the items.
    const again = await repo.claim(now + 60_000, 60_000, 10);
    expect(again).toHaveLength(10);
    expect(again[0]!.lease).toBe(now + 120_000);
    const stale = first.find((w) => 'bucket' in w && 'bucket' in again[0]! && w.bucket === again[0].bucket)!;
    await repo.finish(stale);
    expect(await t.redis.zscore(keys.subscriberWork(), `${n.id}|${(again[0] as { bucket: number }).bucket}`)).toBe(
      String(now + 120_000),
    );
    await repo.finish(again[0]!);
    expect(await t.redis.zcard(keys.subscriberWork())).toBe(SUBSCRIBER_BUCKETS - 1);
    expect(await t.redis.hget(keys.subscriberNoticeTally(n.id), 'work')).toBe(String(SUBSCRIBER_BUCKETS - 1));
  });

  it('record() moves the tally; a resend after a crash is counted as a possible duplicate; finishing completes', async () => {
    const { keys, repo } = noticeSpace();
    const n = notice('ntc_dlv_01TALLY');
    await repo.open(n);
    const work = await repo.claim(Date.now(), 60_000, 1000);
    for (const id of ['sub_A', 'sub_B', 'sub_C', 'sub_D']) await repo.record(n.id, recipient(id, 'sending'));
    await repo.record(n.id, recipient('sub_A', 'delivered'));
    await repo.record(n.id, recipient('sub_B', 'retrying', { error: '451 4.3.0 try later' }));
    await repo.retryAt(n.id, 'sub_B', T0 + 60_000);
    await repo.record(n.id, recipient('sub_C', 'bounced', { error: '550 5.1.1 no such user' }));
    expect(await repo.tally(n.id)).toMatchObject({ total: 4, delivered: 1, bounced: 1, failed: 0, pending: 2 });
    for (const w of work) await repo.finish(w);
    expect((await repo.tally(n.id)).complete).toBe(false);

    // sub_D was found `sending` by the next worker: sent again, flagged; the flag sticks.
    await repo.record(n.id, recipient('sub_D', 'sending', { attempts: 2, possible_duplicate: true }));
    await repo.record(n.id, recipient('sub_D', 'delivered', { attempts: 2 }));
    const [d] = await repo.recipients(n.id, ['sub_D']);
    expect(d).toEqual(recipient('sub_D', 'delivered', { attempts: 2, possible_duplicate: true }));
    expect(await repo.tally(n.id)).toMatchObject({ total: 4, delivered: 2, possible_duplicates: 1, pending: 1 });

    const [retry] = await repo.claim(T0 + 60_000, 60_000, 10);
    expect(retry).toEqual({ noticeId: n.id, subscriberId: 'sub_B', lease: T0 + 120_000 });
    await repo.record(n.id, recipient('sub_B', 'failed', { attempts: 2, error: '451 4.3.0 try later' }));
    await repo.finish(retry!);
    expect(await repo.tally(n.id)).toEqual({
      total: 4,
      delivered: 2,
      failed: 1,
      pending: 0,
      bounced: 1,
      possible_duplicates: 1,
      complete: true,
    });
    expect(await repo.recipients(n.id, ['sub_C', 'sub_X'])).toEqual([
      recipient('sub_C', 'bounced', { error: '550 5.1.1 no such user' }),
      null,
    ]);
    // Complete: it leaves the open notices, and its keys expire after the retention.
    expect(await t.redis.zscore(keys.subscriberNotices(), n.id)).toBeNull();
    for (const key of [
      keys.subscriberNotice(n.id),
      keys.subscriberNoticeTally(n.id),
      keys.subscriberNoticeRecipients(n.id),
    ]) {
      const ttl = await t.redis.pttl(key);
      expect(ttl).toBeGreaterThan(RETENTION - 60_000);
      expect(ttl).toBeLessThanOrEqual(RETENTION);
    }
  });

  it('record() of many at once counts each as recorded one by one, a recipient twice in one call included', async () => {
    const { repo } = noticeSpace();
    const n = notice('ntc_dlv_01BATCH');
    await repo.open(n);
    await repo.record(
      n.id,
      ['sub_A', 'sub_B', 'sub_C', 'sub_D'].map((id) => recipient(id, 'sending')),
    );
    await repo.record(n.id, [
      recipient('sub_A', 'delivered'),
      recipient('sub_B', 'bounced', { error: '550 5.1.1 no such user' }),
      recipient('sub_C', 'failed', { error: '554 rejected' }),
      // A later state of the same recipient in the same call wins, and is counted once.
      recipient('sub_C', 'delivered'),
      recipient('sub_D', 'sending', { attempts: 2, possible_duplicate: true }),
    ]);
    expect(await repo.tally(n.id)).toMatchObject({
      total: 4,
      delivered: 2,
      bounced: 1,
      failed: 0,
      pending: 1,
      possible_duplicates: 1,
    });
    expect(await repo.recipients(n.id, ['sub_C', 'sub_D'])).toEqual([
      recipient('sub_C', 'delivered'),
      recipient('sub_D', 'sending', { attempts: 2, possible_duplicate: true }),
    ]);
    await repo.record(n.id, []);
    expect((await repo.tally(n.id)).total).toBe(4);
  });

  it('record() from two connections at once keeps the tally exact', async () => {
    const { keys, repo } = noticeSpace();
    const other = connectTestRedis();
    try {
      const repo2 = new RedisNoticeRepo(other, keys, RETENTION);
      const n = notice('ntc_dlv_01RACE');
      await repo.open(n);
      const ids = Array.from({ length: 300 }, (_, i) => `sub_${i}`);
      await Promise.all(ids.map((id, i) => (i % 2 ? repo : repo2).record(n.id, recipient(id, 'sending'))));
      await Promise.all(
        ids.map((id, i) => (i % 2 ? repo2 : repo).record(n.id, recipient(id, i % 3 ? 'delivered' : 'failed'))),
      );
      expect(await repo.tally(n.id)).toMatchObject({
        total: 300,
        delivered: 200,
        failed: 100,
        pending: 0,
        complete: false,
      });
    } finally {
      await other.quit();
    }
  });

  it('listRecipients pages through every recipient once, optionally of one state', async () => {
    const { repo } = noticeSpace();
    for (const [id, size] of [
      ['ntc_dlv_01SMALL', 10],
      ['ntc_dlv_01LARGE', 700],
    ] as const) {
      await repo.open(notice(id));
      const states = ['delivered', 'failed', 'retrying'] as const;
      const all = Array.from({ length: size }, (_, i) =>
        recipient(`sub_${String(i).padStart(4, '0')}`, states[i % 3]!),
      );
      for (const r of all) await repo.record(id, r);
      for (const state of [undefined, 'failed'] as const) {
        const got: Recipient[] = [];
        let cursor: string | null = null;
        let pages = 0;
        do {
          const page: { items: Recipient[]; next: string | null } = await repo.listRecipients(id, {
            state,
            cursor,
            limit: 7,
          });
          expect(page.items.length).toBeLessThanOrEqual(7);
          got.push(...page.items);
          cursor = page.next;
          pages++;
        } while (cursor !== null && pages < 1000);
        const want = all.filter((r) => state === undefined || r.state === state);
        expect(got.map((r) => r.subscriber_id).sort(), `${id} ${state}`).toEqual(want.map((r) => r.subscriber_id));
        expect(got.every((r) => state === undefined || r.state === state)).toBe(true);
      }
    }
    await expect(repo.listRecipients('ntc_dlv_01SMALL', { cursor: 'garbage', limit: 5 })).rejects.toMatchObject({
      code: 'invalid_cursor',
    });
  });
});

describe('the subscription mail queue', () => {
  it('leases items, gives an expired lease to the next claim, and finishes only the current lease', async () => {
    const prefix = uniquePrefix('tx');
    extra.push(prefix);
    const keys = createKeys(prefix);
    const q = new RedisSubscriptionMailQueue(t.redis, keys);
    const item = { kind: 'confirm', subscriberId: 'sub_A', nonce: 'n1' } as const;
    await q.enqueue(item, T0);
    await q.enqueue(item, T0);
    await q.enqueue({ kind: 'already_subscribed', subscriberId: 'sub_B', nonce: null }, T0 + 10_000);
    // Not an item this queue wrote: dropped at its first claim instead of coming back at every lease's end.
    await t.redis.zadd(keys.subscriberTx(), T0, '{"kind":"unknown"}');
    const first = await q.claim(T0, 30_000, 10);
    expect(first).toEqual([{ ...item, lease: T0 + 30_000 }]);
    expect(await q.claim(T0 + 1000, 30_000, 10)).toEqual([]);
    const second = await q.claim(T0 + 30_000, 30_000, 10);
    expect(second.map((m) => m.subscriberId).sort()).toEqual(['sub_A', 'sub_B']);
    await q.finish(first[0]!);
    expect(await t.redis.zcard(keys.subscriberTx())).toBe(2);
    for (const m of second) await q.finish(m);
    expect(await t.redis.zcard(keys.subscriberTx())).toBe(0);
  });
});

describe('key rotation', () => {
  it('resealSubscribers moves the subscriber key, addresses and webhook secrets to the new key', async () => {
    const oldKey = randomBytes(32);
    const oldBox = createSecretBox(oldKey);
    const newKey = randomBytes(32);
    const prefix = uniquePrefix('reseal');
    extra.push(prefix);
    const keys = createKeys(prefix);
    const { ids } = await openSubscriberKey(t.redis, keys, oldBox);
    const before = new RedisSubscriberRepo(t.redis, keys, oldBox, ids, RETENTION);
    const mail = subscriber(ids, 'rotate@example.com');
    const hook = subscriber(ids, 'https://hooks.example.com/r', { kind: 'webhook', webhook_secret: 'whsec_r' });
    await before.put(mail, null);
    await before.put(hook, null);

    const rotating = createSecretBox(newKey, [randomBytes(32)]);
    // A box without the old key cannot read anything: every record is reported, none changed.
    const failed = await resealSubscribers(t.redis, keys, rotating);
    expect(failed.resealed).toBe(0);
    expect(failed.unreadable).toHaveLength(3);

    const report = await resealSubscribers(t.redis, keys, createSecretBox(newKey, [oldKey]));
    expect(report).toEqual({ checked: 3, resealed: 3, unreadable: [] });
    const onlyNew = createSecretBox(newKey);
    const after = await openSubscriberKey(t.redis, keys, onlyNew);
    expect(after.ids.idOf('email', 'rotate@example.com')).toBe(mail.id);
    const repo = new RedisSubscriberRepo(t.redis, keys, onlyNew, after.ids, RETENTION);
    expect(await repo.get(mail.id)).toEqual(mail);
    expect(await repo.get(hook.id)).toEqual(hook);
    expect(await resealSubscribers(t.redis, keys, createSecretBox(newKey, [oldKey]))).toMatchObject({
      resealed: 0,
    });
  });
});
