import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/domain/common/errors.js';
import { OutboundAllow } from '../../src/domain/connection/address-policy.js';
import type { Subscriber, SubscriberRepo, SubscriptionMail } from '../../src/ports/subscribers.js';
import { SubscriptionService, type SubscriptionThrottle } from '../../src/services/subscriptions.js';
import { subscriberKeyMaterial } from '../../src/store/subscriber-key.js';

/**
 * The subscription service on an in-memory store whose compare-and-set can be made to lose: a
 * lost write is decided again on a fresh read, a throttled address changes nothing, links die
 * with the token version, and the webhook URL policy follows HERALD_OUTBOUND_ALLOW.
 */
const T0 = Date.parse('2026-12-01T12:00:00.000Z');

class MemoryRepo implements Pick<SubscriberRepo, 'get' | 'put'> {
  readonly rows = new Map<string, Subscriber>();
  /** Writes to lose before the next one wins (a concurrent writer got there first). */
  lose = 0;
  puts = 0;

  get(id: string): Promise<Subscriber | null> {
    const s = this.rows.get(id);
    return Promise.resolve(s ? structuredClone(s) : null);
  }

  put(next: Subscriber, expectRev: number | null): Promise<boolean> {
    this.puts++;
    if (this.lose > 0) {
      this.lose--;
      return Promise.resolve(false);
    }
    const cur = this.rows.get(next.id);
    if ((cur?.rev ?? null) !== expectRev) return Promise.resolve(false);
    this.rows.set(next.id, structuredClone(next));
    return Promise.resolve(true);
  }
}

function world(o: { addressAllowed?: boolean; allow?: OutboundAllow } = {}) {
  const { ids, tokens } = subscriberKeyMaterial(randomBytes(32));
  const repo = new MemoryRepo();
  const mails: SubscriptionMail[] = [];
  let now = T0;
  const throttle: SubscriptionThrottle = {
    ip: () => Promise.resolve({ ok: true }),
    address: () => Promise.resolve(o.addressAllowed ?? true),
  };
  const service = new SubscriptionService({
    repo: repo as unknown as SubscriberRepo,
    ids,
    tokens,
    mail: {
      enqueue: (m) => {
        mails.push(m);
        return Promise.resolve();
      },
      claim: () => Promise.resolve([]),
      finish: () => Promise.resolve(),
    },
    clock: { now: () => new Date(now) },
    throttle,
    emailEnabled: true,
    allow: o.allow ?? OutboundAllow.none,
    componentIds: () => Promise.resolve(new Set(['cmp_a', 'cmp_b'])),
    randomBytes,
    retentionMs: 7 * 86_400_000,
  });
  return { service, repo, mails, ids, tokens, advance: (ms: number) => (now += ms) };
}

const ctx = { ip: '203.0.113.9', locale: 'en' as const };

describe('SubscriptionService', () => {
  it('decides again on a fresh read when its write loses, and queues one mail', async () => {
    const w = world();
    w.repo.lose = 2;
    expect(await w.service.subscribe({ email: 'a@Example.com' }, ctx)).toBe('accepted');
    const id = w.ids.idOf('email', 'a@example.com');
    expect(w.repo.puts).toBe(3);
    expect(w.repo.rows.get(id)).toMatchObject({ state: 'pending', rev: 1, locale: 'en' });
    expect(w.mails).toEqual([{ kind: 'confirm', subscriberId: id, nonce: w.repo.rows.get(id)!.confirm!.nonce }]);
  });

  it('a throttled address: no write, no mail, the same outcome', async () => {
    const w = world({ addressAllowed: false });
    expect(await w.service.subscribe({ email: 'b@example.com', components: ['cmp_b', 'cmp_a', 'cmp_b'] }, ctx)).toBe(
      'accepted',
    );
    expect(w.repo.puts).toBe(0);
    expect(w.mails).toEqual([]);
  });

  it('keeps the components once each, sorted; refuses unknown ones by index', async () => {
    const w = world();
    await w.service.subscribe({ email: 'c@example.com', components: ['cmp_b', 'cmp_a', 'cmp_b'] }, ctx);
    expect(w.repo.rows.get(w.ids.idOf('email', 'c@example.com'))!.components).toEqual(['cmp_a', 'cmp_b']);
    const err = await w.service
      .subscribe({ email: 'd@example.com', components: ['cmp_a', 'cmp_zz'] }, ctx)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DomainError);
    expect(err).toMatchObject({ code: 'unknown_component', errors: [{ field: 'components.1' }] });
  });

  it('a link dies with the token version: confirm after unsubscribe is expired, manage is gone', async () => {
    const w = world();
    await w.service.subscribe({ email: 'e@example.com' }, ctx);
    const sub = w.repo.rows.get(w.ids.idOf('email', 'e@example.com'))!;
    const confirm = w.tokens.sign({
      purpose: 'confirm',
      subscriberId: sub.id,
      version: sub.token_version,
      nonce: sub.confirm!.nonce,
      expiresMs: Date.parse(sub.confirm!.expires_at),
    });
    const manage = w.tokens.sign({ purpose: 'manage', subscriberId: sub.id, version: sub.token_version });
    expect(await w.service.manage(manage)).toMatchObject({ state: 'pending', address: 'e•••@example.com' });
    expect(await w.service.unsubscribe(manage)).toBe('unsubscribed');
    expect(await w.service.confirm(confirm)).toEqual({ result: 'expired' });
    expect(await w.service.manage(manage)).toBeNull();
    expect(await w.service.update(manage, { components: [], locale: 'de' })).toBeNull();
    // A manage token is no confirm token, and the other way round.
    expect(await w.service.confirm(manage)).toEqual({ result: 'expired' });
    expect(await w.service.manage(confirm)).toBeNull();
  });

  it('webhooks: https, or http to a host HERALD_OUTBOUND_ALLOW names; a confirmed one is not challenged again', async () => {
    const w = world({ allow: OutboundAllow.parse(['hooks.internal']) });
    await w.service.subscribe({ url: 'http://hooks.internal/in' }, ctx);
    const id = w.ids.idOf('webhook', 'http://hooks.internal/in');
    const sub = w.repo.rows.get(id)!;
    expect(sub.webhook_secret).toMatch(/^whsec_/);
    expect(w.mails.map((m) => m.kind)).toEqual(['webhook_challenge']);
    await expect(w.service.subscribe({ url: 'http://elsewhere.example/in' }, ctx)).rejects.toMatchObject({
      code: 'destination_not_allowed',
    });
    w.repo.rows.set(id, { ...sub, state: 'confirmed', confirm: null, rev: sub.rev + 1 });
    await w.service.subscribe({ url: 'http://hooks.internal/in' }, ctx);
    expect(w.mails).toHaveLength(1);
    expect(w.repo.rows.get(id)!.webhook_secret).toBe(sub.webhook_secret);
  });

  it('a pending link past its 48 h is renewed by the next request', async () => {
    const w = world();
    await w.service.subscribe({ email: 'f@example.com' }, ctx);
    const id = w.ids.idOf('email', 'f@example.com');
    const first = w.repo.rows.get(id)!.confirm!;
    w.advance(49 * 3_600_000);
    await w.service.subscribe({ email: 'f@example.com' }, ctx);
    const next = w.repo.rows.get(id)!.confirm!;
    expect(next.nonce).not.toBe(first.nonce);
    expect(Date.parse(next.expires_at)).toBe(T0 + 49 * 3_600_000 + 48 * 3_600_000);
  });
});
