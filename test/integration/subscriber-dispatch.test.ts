import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/domain/common/clock.js';
import { parseOutboundAllow } from '../../src/domain/connection/address-policy.js';
import { createOutboundHttp } from '../../src/delivery/outbound/http.js';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import { MaintenanceService } from '../../src/services/maintenances.js';
import { RedisComponentRepo } from '../../src/store/components.js';
import { RedisMaintenanceRepo } from '../../src/store/maintenances.js';
import { RedisPublicIncidentStore } from '../../src/store/public-incidents.js';
import { RedisSubscriptionMailQueue } from '../../src/store/subscribers.js';
import { wrapStatusPage } from '../../src/subscribers/notifying-status-page.js';
import { SubscriberNoticeOpener } from '../../src/subscribers/opener.js';
import { SubscriptionMailSender } from '../../src/subscribers/tx-mail.js';
import { challengePayload } from '../../src/subscribers/payload.js';
import { renderAlreadySubscribedMail, renderConfirmMail } from '../../src/subscribers/mail.js';
import { startHttpSink, type HttpSink } from '../support/peers/http-sink.js';
import type {
  Recipient,
  Subscriber,
  SubscriberNotice,
  SubscriberRepo,
  SubscriberState,
} from '../../src/ports/subscribers.js';
import { createSecretBox } from '../../src/store/crypto.js';
import { createKeys, type Keys } from '../../src/store/keys.js';
import { loadConfig } from '../../src/config.js';
import { composeSubscribers } from '../../src/composition/subscribers.js';
import { systemClock } from '../../src/domain/common/clock.js';
import { waitFor } from '../support/wait.js';
import { RedisPacer } from '../../src/store/pacing.js';
import { openSubscriberKey } from '../../src/store/subscriber-key.js';
import { RedisNoticeRepo, RedisSubscriberRepo } from '../../src/store/subscribers.js';
import {
  BUCKET_PAGE,
  NoticeDispatcher,
  noticeMessageId,
  type NoticeDispatcherDeps,
} from '../../src/subscribers/dispatcher.js';
import { noticeMailRenderer, subscriberLinks } from '../../src/subscribers/mail.js';
import { webhookPayload } from '../../src/subscribers/payload.js';
import { createRelay, type Relay } from '../../src/subscribers/relay.js';
import { createSubscriberWebhook } from '../../src/subscribers/webhook.js';
import { startSmtp, type SmtpPeer } from '../support/peers/smtp.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/peers/webhook-receiver.js';
import { dropPrefix, testRedisUrl, uniquePrefix, useTestRedis } from '../support/redis.js';

/**
 * The notifier against a real Redis (H1's store), a real SMTP server and a real webhook receiver:
 * a notice reaches only confirmed subscribers it concerns, once each, with its headers; a 4xx is
 * retried, a 5xx on RCPT bounces the subscriber; a recipient a crash left `sending` is sent again
 * with the same Message-ID and flagged; two dispatchers never double a mail; webhooks are signed
 * (checked with the standardwebhooks package) and a 410 bounces.
 */
const t = useTestRedis('subs-dispatch');
const box = createSecretBox(randomBytes(32));
const log = pino({ level: 'silent' });
const RETENTION = 7 * 86_400_000;
const PUBLIC_URL = 'https://status.acme.test/status';
const FROM = 'Acme Status <status@acme.test>';

let smtp: SmtpPeer;
let hook: WebhookReceiver;
const HOOK_SECRET = `whsec_${randomBytes(24).toString('base64')}`;
const prefixes: string[] = [];
const relays: Relay[] = [];

beforeAll(async () => {
  smtp = await startSmtp();
  hook = await startWebhookReceiver({ secret: HOOK_SECRET });
});
afterAll(async () => {
  for (const r of relays) r.close();
  await smtp.close();
  await hook.close();
  for (const p of prefixes) await dropPrefix(t.redis, p);
});

/** A clock the test can move forward (a retry's backoff passes at once). */
function movableClock(): Clock & { skip(ms: number): void } {
  let skew = 0;
  return { now: () => new Date(Date.now() + skew), skip: (ms) => void (skew += ms) };
}

/** A key space, its store, and a dispatcher factory over the real relay and webhook client. */
async function world() {
  const prefix = uniquePrefix('d');
  prefixes.push(prefix);
  const keys: Keys = createKeys(prefix);
  const { ids, tokens } = await openSubscriberKey(t.redis, keys, box);
  const subscribers = new RedisSubscriberRepo(t.redis, keys, box, ids, RETENTION);
  const notices = new RedisNoticeRepo(t.redis, keys, RETENTION);
  const clock = movableClock();
  const http = createOutboundHttp(parseOutboundAllow(['127.0.0.1/32']));
  const dispatcher = (over: Partial<NoticeDispatcherDeps> = {}) => {
    const relay = createRelay({
      url: `smtp://${smtp.host}:${smtp.port}`,
      pool: 2,
      rate: 2000,
      pacer: new RedisPacer(t.redis, keys),
    });
    relays.push(relay);
    return new NoticeDispatcher({
      subscribers,
      notices,
      tokens,
      relay,
      from: FROM,
      webhook: createSubscriberWebhook({ http }),
      content: { links: subscriberLinks, noticeMail: noticeMailRenderer, webhookPayload },
      templates: () => Promise.resolve(null),
      clock,
      // The longest first backoff (2 s): the first drain ends well before the retry is due.
      random: () => 1,
      log,
      inFlight: 4,
      ...over,
    });
  };
  let n = 0;
  const add = async (over: Partial<Subscriber> & { address: string }): Promise<Subscriber> => {
    const kind = over.kind ?? 'email';
    const state: SubscriberState = over.state ?? 'confirmed';
    const s: Subscriber = {
      id: ids.idOf(kind, over.address),
      kind,
      state,
      components: [],
      locale: 'en',
      source: 'page',
      created_at: new Date().toISOString(),
      confirmed_at: state === 'confirmed' ? new Date().toISOString() : null,
      unsubscribed_at: state === 'unsubscribed' ? new Date().toISOString() : null,
      bounced_at: state === 'bounced' ? new Date().toISOString() : null,
      bounce_reason: null,
      token_version: 1,
      confirm: state === 'pending' ? { nonce: 'n', expires_at: new Date(Date.now() + 3_600_000).toISOString() } : null,
      webhook_secret: null,
      rev: 1,
      ...over,
    };
    expect(await subscribers.put(s, null)).toBe(true);
    return s;
  };
  const open = async (componentIds: string[] = []): Promise<SubscriberNotice> => {
    const notice = noticeOf(`ntc_dlv_${prefix.replace(/[^A-Za-z0-9]/g, '')}_${++n}`, componentIds);
    expect(await notices.open(notice)).toBe(true);
    return notice;
  };
  /** Claims the page: a status_page connection with this title and public_url. */
  const claimPage = async () => {
    await t.redis.set(keys.statusPage(), 'con_status');
    await t.redis.set(
      keys.connection('con_status'),
      JSON.stringify({
        id: 'con_status',
        name: 'Status page',
        type: 'status_page',
        enabled: true,
        config: { title: 'Acme Status', public_url: PUBLIC_URL, locale: 'en' },
        secrets: {},
        rate_limit_per_minute: null,
        health: { state: 'ok', consecutive_failures: 0, last_error: null, disabled_reason: null },
        last_test: null,
        created_at: '2026-11-27T10:00:00.000Z',
        updated_at: '2026-11-27T10:00:00.000Z',
        rev: 1,
      }),
    );
  };
  const opener = new SubscriberNoticeOpener({ redis: t.redis, keys, notices, clock });
  const txMail = (webhookHttp = http) => {
    const relay = createRelay({
      url: `smtp://${smtp.host}:${smtp.port}`,
      pool: 1,
      rate: 100,
      pacer: new RedisPacer(t.redis, keys),
    });
    relays.push(relay);
    return new SubscriptionMailSender({
      queue: new RedisSubscriptionMailQueue(t.redis, keys),
      subscribers,
      tokens,
      relay,
      from: FROM,
      webhook: createSubscriberWebhook({ http: webhookHttp }),
      content: {
        links: subscriberLinks,
        confirmMail: renderConfirmMail,
        alreadySubscribedMail: renderAlreadySubscribedMail,
        challengePayload,
      },
      page: () => Promise.resolve({ title: 'Acme Status', public_url: PUBLIC_URL } as never),
      clock,
      randomBytes,
      log,
    });
  };
  return { keys, ids, tokens, subscribers, notices, clock, dispatcher, add, open, claimPage, opener, txMail };
}

function noticeOf(id: string, componentIds: string[]): SubscriberNotice {
  const now = new Date().toISOString();
  return {
    id,
    kind: 'incident_update',
    created_at: now,
    execution_id: 'exe_01JH3ZK6X2B8V4N0Q7R5T9W1YC',
    page: { title: 'Acme Status', public_url: PUBLIC_URL },
    component_ids: componentIds,
    components: componentIds.map((c) => ({ id: c, name: `Component ${c}`, status: 'partial_outage' as const })),
    incident: {
      id: 'inc_01JH3ZK6X2B8V4N0Q7R5T9W1YC',
      name: 'API errors',
      impact: 'major',
      status: 'investigating',
      url: `${PUBLIC_URL}/incidents/inc_01JH3ZK6X2B8V4N0Q7R5T9W1YC`,
      created_at: now,
    },
    maintenance: null,
    update: {
      id: 'dlv_1',
      status: 'investigating',
      body: 'We are looking into it.',
      created_at: now,
      updated_at: null,
    },
  };
}

/** Runs steps until nothing is due (retries scheduled later are left). */
async function drain(d: NoticeDispatcher): Promise<void> {
  for (let i = 0; i < 2000 && (await d.step()) > 0; i++);
}

const to = (addr: string) => smtp.messages.filter((m) => m.envelope.to.includes(addr));

describe('the notice dispatcher', () => {
  it('tells only confirmed subscribers the notice concerns, once each, with the headers', async () => {
    const w = await world();
    const tag = randomBytes(4).toString('hex');
    const a = await w.add({ address: `all-${tag}@example.com` });
    const b = await w.add({ address: `api-${tag}@example.com`, components: ['cmp_api', 'cmp_x'] });
    await w.add({ address: `web-${tag}@example.com`, components: ['cmp_web'] });
    await w.add({ address: `pending-${tag}@example.com`, state: 'pending' });
    await w.add({ address: `left-${tag}@example.com`, state: 'unsubscribed' });
    await w.add({ address: `dead-${tag}@example.com`, state: 'bounced' });
    const notice = await w.open(['cmp_api']);
    const d = w.dispatcher();
    await drain(d);

    const got = smtp.messages.filter((m) => m.envelope.to.some((x) => x.includes(tag)));
    expect(got.map((m) => m.envelope.to[0]).sort()).toEqual([a.address, b.address].sort());
    const mail = to(a.address)[0]!;
    expect(mail.messageId).toBe(noticeMessageId(notice.id, a.id));
    expect(mail.from).toBe('status@acme.test');
    expect(mail.headers.get('x-herald-notice')).toBe(notice.id);
    expect(mail.headers.get('auto-submitted')).toBe('auto-generated');
    // mailparser folds the List-* headers into one object: the raw lines are what a client reads.
    const raw = mail.raw.replace(/\r?\n[ \t]+/g, ' ');
    expect(raw).toMatch(/^List-Unsubscribe-Post: List-Unsubscribe=One-Click\r?$/m);
    expect(raw).toMatch(
      /^List-Unsubscribe: <https:\/\/status\.acme\.test\/status\/subscriptions\/unsubscribe\?token=[^>]+>\r?$/m,
    );
    expect(await w.notices.tally(notice.id)).toMatchObject({
      total: 2,
      delivered: 2,
      pending: 0,
      complete: true,
    });

    // Run again: nothing is due, nothing is sent twice.
    await drain(d);
    expect(smtp.messages.filter((m) => m.envelope.to.some((x) => x.includes(tag)))).toHaveLength(2);
  });

  it('retries a 4xx at the backoff, then delivers', async () => {
    const w = await world();
    const s = await w.add({ address: `slow-${randomBytes(4).toString('hex')}@example.com` });
    const notice = await w.open();
    const d = w.dispatcher();
    smtp.script({ stage: 'data', code: 451, message: 'Try again later' });
    await drain(d);
    const [first] = await w.notices.recipients(notice.id, [s.id]);
    expect(first).toMatchObject({ state: 'retrying', attempts: 1 });
    expect(first!.error).toContain('451');
    expect(to(s.address)).toHaveLength(0);
    expect((await w.notices.tally(notice.id)).complete).toBe(false);

    w.clock.skip(10 * 60_000);
    await drain(d);
    const [second] = await w.notices.recipients(notice.id, [s.id]);
    expect(second).toMatchObject({ state: 'delivered', attempts: 2, possible_duplicate: false });
    expect(to(s.address)).toHaveLength(1);
    expect(await w.notices.tally(notice.id)).toMatchObject({ total: 1, delivered: 1, complete: true });
  });

  it('bounces a subscriber on a 5xx to RCPT TO, and the next notice skips it', async () => {
    const w = await world();
    const s = await w.add({ address: `gone-${randomBytes(4).toString('hex')}@example.com` });
    const first = await w.open();
    const d = w.dispatcher();
    smtp.script({ stage: 'rcpt', code: 550, message: `5.1.1 <${s.address}>: Recipient address rejected` });
    await drain(d);
    const [r] = await w.notices.recipients(first.id, [s.id]);
    expect(r).toMatchObject({ state: 'bounced', attempts: 1 });
    expect(r!.error).toContain('550');
    expect(r!.error).not.toContain(s.address);
    const after = await w.subscribers.get(s.id);
    expect(after).toMatchObject({ state: 'bounced', rev: 2 });
    expect(after!.bounce_reason).not.toContain(s.address);
    expect(await w.notices.tally(first.id)).toMatchObject({ total: 1, bounced: 1, complete: true });

    const second = await w.open();
    await drain(d);
    expect(await w.notices.recipients(second.id, [s.id])).toEqual([null]);
    expect(await w.notices.tally(second.id)).toMatchObject({ total: 0, complete: true });
    expect(to(s.address)).toHaveLength(0);
  });

  it('sends a recipient a crash left `sending` once more, with the same Message-ID, flagged', async () => {
    const w = await world();
    const s = await w.add({ address: `cut-${randomBytes(4).toString('hex')}@example.com` });
    const notice = await w.open();
    // The first attempt: recorded `sending`, the mail handed to the server, then the worker died.
    const cut: Recipient = {
      subscriber_id: s.id,
      state: 'sending',
      attempts: 1,
      at: new Date().toISOString(),
      error: null,
      possible_duplicate: false,
    };
    await w.notices.record(notice.id, cut);
    const relay = createRelay({
      url: `smtp://${smtp.host}:${smtp.port}`,
      pool: 1,
      rate: 100,
      pacer: { reserve: () => Promise.resolve(0) },
    });
    relays.push(relay);
    expect(
      await relay.send({
        from: FROM,
        to: s.address,
        subject: 'first attempt',
        text: 'x',
        html: '<p>x</p>',
        headers: {},
        messageId: noticeMessageId(notice.id, s.id),
      }),
    ).toEqual({ outcome: 'delivered' });

    await drain(w.dispatcher());
    const got = to(s.address);
    expect(got).toHaveLength(2);
    expect(new Set(got.map((m) => m.messageId))).toEqual(new Set([noticeMessageId(notice.id, s.id)]));
    const [r] = await w.notices.recipients(notice.id, [s.id]);
    expect(r).toMatchObject({ state: 'delivered', attempts: 2, possible_duplicate: true });
    expect(await w.notices.tally(notice.id)).toMatchObject({
      total: 1,
      delivered: 1,
      possible_duplicates: 1,
      complete: true,
    });
  });

  it('never doubles a mail when two dispatchers work the same notice', async () => {
    const w = await world();
    const tag = randomBytes(4).toString('hex');
    const subs = await Promise.all(
      Array.from({ length: 60 }, (_, i) => w.add({ address: `many-${i}-${tag}@example.com` })),
    );
    const notice = await w.open();
    const [one, two] = [w.dispatcher(), w.dispatcher()];
    const started = performance.now();
    await Promise.all([drain(one), drain(two)]);
    const seconds = (performance.now() - started) / 1000;
    const got = smtp.messages.filter((m) => m.envelope.to.some((x) => x.includes(tag)));
    expect(got).toHaveLength(60);
    expect(new Set(got.map((m) => m.envelope.to[0])).size).toBe(60);
    expect(new Set(got.map((m) => m.messageId)).size).toBe(60);
    expect(got.map((m) => m.envelope.to[0]).sort()).toEqual(subs.map((s) => s.address).sort());
    expect(await w.notices.tally(notice.id)).toMatchObject({ total: 60, delivered: 60, complete: true });
    console.info(
      `subscriber-dispatch: 60 mails by 2 dispatchers in ${seconds.toFixed(2)} s (${Math.round(60 / seconds)}/s)`,
    );
  });

  /** A notice to six subscribers of one bucket (one work item). */
  async function sixInOneBucket(w: Awaited<ReturnType<typeof world>>, name: string) {
    const tag = randomBytes(4).toString('hex');
    const first = await w.add({ address: `${name}-0-${tag}@example.com` });
    const bucket = w.subscribers.bucketOf(first.id);
    for (let i = 1, found = 1; found < 6; i++) {
      const address = `${name}-${i}-${tag}@example.com`;
      if (w.subscribers.bucketOf(w.ids.idOf('email', address)) !== bucket) continue;
      await w.add({ address });
      found++;
    }
    return w.open();
  }

  /** A relay that records who sent what, its n-th send taking `ms(n)`, or until `wait(n)` settles. */
  function timedRelay(
    who: string,
    log: string[],
    ms: (n: number) => number,
    wait: (n: number) => Promise<void> | null = () => null,
  ): Relay {
    let n = 0;
    return {
      send: async (m) => {
        log.push(`${who} ${m.to}`);
        const i = n++;
        await (wait(i) ?? new Promise((r) => setTimeout(r, ms(i))));
        return { outcome: 'delivered' };
      },
      close: () => undefined,
    };
  }
  const recipientsOf = (log: string[]) => log.map((l) => l.split(' ')[1]);

  it('keeps the lease of a bucket that outlasts it: no other worker takes it meanwhile', async () => {
    const w = await world();
    const notice = await sixInOneBucket(w, 'long');
    const log: string[] = [];
    // 450 ms a mail, one at a time, against a lease of 2 s: the bucket takes longer than its
    // lease (with room for a busy machine's late timers between extensions). The first worker
    // claims every item of the notice at once.
    // The other worker starts looking once the first is sending (it has claimed every item then).
    let sending: () => void = () => undefined;
    const firstSend = new Promise<void>((r) => (sending = r));
    const d = w.dispatcher({
      relay: timedRelay(
        'a',
        log,
        () => 450,
        () => (sending(), null),
      ),
      inFlight: 1,
      leaseMs: 2_000,
      claimLimit: 256,
    });
    const other = w.dispatcher({ relay: timedRelay('b', log, () => 5), inFlight: 1, leaseMs: 2_000 });
    let running = true;
    const watcher = (async () => {
      await firstSend;
      while (running) {
        await other.step();
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    await d.step();
    running = false;
    await watcher;
    expect(log.filter((l) => l.startsWith('a '))).toHaveLength(6);
    expect(log.filter((l) => l.startsWith('b '))).toEqual([]);
    expect(await w.notices.tally(notice.id)).toMatchObject({ total: 6, delivered: 6, complete: true });
  });

  it('a worker that lost its lease (stalled past it) starts no more sends; the one that took the item finishes', async () => {
    const w = await world();
    const notice = await sixInOneBucket(w, 'stall');
    const log: string[] = [];
    // The stalled worker's first send lasts until the other worker has taken the item over and
    // sent (a paused process, past its lease). Its lease runs out only once it is stalled: the
    // clock is moved past the lease then, so a slow machine's claim-to-first-send cannot.
    const LEASE_MS = 60_000;
    let tookOver: () => void = () => undefined;
    const over = new Promise<void>((r) => (tookOver = r));
    let stalling: () => void = () => undefined;
    const stalledNow = new Promise<void>((r) => (stalling = r));
    const stalled = w.dispatcher({
      relay: timedRelay(
        'a',
        log,
        () => 5,
        (n) => (n === 0 ? (stalling(), over) : null),
      ),
      inFlight: 1,
      leaseMs: LEASE_MS,
      claimLimit: 256,
    });
    const other = w.dispatcher({
      relay: timedRelay(
        'b',
        log,
        () => 5,
        () => (tookOver(), null),
      ),
      inFlight: 1,
      leaseMs: LEASE_MS,
    });
    const first = stalled.step();
    await stalledNow;
    w.clock.skip(LEASE_MS + 1_000);
    await waitFor(
      async () => {
        await drain(other);
        return (await w.notices.tally(notice.id)).delivered >= 5;
      },
      { what: 'the other worker took the item once its lease ran out' },
    );
    await first;
    await drain(other);
    // The stalled worker sent one mail and no more; the other sent the rest and, since that one
    // was in flight when the item moved, it again, flagged.
    expect(log.filter((l) => l.startsWith('a '))).toHaveLength(1);
    expect(new Set(recipientsOf(log)).size).toBe(6);
    expect(log).toHaveLength(7);
    expect(await w.notices.tally(notice.id)).toMatchObject({
      total: 6,
      delivered: 6,
      possible_duplicates: 1,
      complete: true,
    });
  });

  it('reads a large bucket a page at a time as its sends go, and tells each subscriber once', async () => {
    const w = await world();
    const tag = randomBytes(4).toString('hex');
    const subs = await Promise.all(
      Array.from({ length: 5 * BUCKET_PAGE + 7 }, (_, i) => w.add({ address: `paged-${i}-${tag}@example.com` })),
    );
    const all = subs.map((x) => x.id).sort();
    // One bucket holding them all (a notice to a million subscribers has thousands a bucket).
    const reads: { size: number; sentBefore: number }[] = [];
    const log: string[] = [];
    const oneBucket: SubscriberRepo = {
      buckets: w.subscribers.buckets,
      idOf: (kind, address) => w.subscribers.idOf(kind, address),
      bucketOf: (id) => w.subscribers.bucketOf(id),
      get: (id) => w.subscribers.get(id),
      put: (next, rev) => w.subscribers.put(next, rev),
      erase: (id) => w.subscribers.erase(id),
      bucket: () => Promise.reject(new Error('a notice reads no bucket whole')),
      bucketIds: (b) => Promise.resolve(b === 0 ? all : []),
      many: (ids) => {
        reads.push({ size: ids.length, sentBefore: log.length });
        return w.subscribers.many(ids);
      },
      counts: () => w.subscribers.counts(),
      eraseExpired: (now, limit) => w.subscribers.eraseExpired(now, limit),
    };
    const notice = await w.open();
    await drain(w.dispatcher({ subscribers: oneBucket, relay: timedRelay('a', log, () => 1), inFlight: 4 }));
    expect(recipientsOf(log).sort()).toEqual(subs.map((x) => x.address).sort());
    expect(reads.map((r) => r.size)).toEqual([...Array<number>(5).fill(BUCKET_PAGE), 7]);
    // The last page is read once the ones before it are being sent, not all of them up front.
    expect(reads.at(-1)!.sentBefore).toBeGreaterThanOrEqual(4 * BUCKET_PAGE - 4);
    expect(await w.notices.tally(notice.id)).toMatchObject({
      total: all.length,
      delivered: all.length,
      complete: true,
    });
  });

  it('signs a webhook subscriber’s payload, and a 410 bounces it', async () => {
    const w = await world();
    const s = await w.add({
      kind: 'webhook',
      address: `${hook.url}/hooks/${randomBytes(4).toString('hex')}`,
      webhook_secret: HOOK_SECRET,
    });
    const notice = await w.open();
    const d = w.dispatcher();
    const before = hook.requests.length;
    await drain(d);
    const req = hook.requests.slice(before).find((r) => r.webhookId === `${notice.id}.${s.id}`);
    expect(req).toBeDefined();
    expect(req!.verified).toBe(true);
    const headers = Object.fromEntries(
      ['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((h) => [h, String(req!.headers[h])]),
    );
    const payload = new Webhook(HOOK_SECRET).verify(req!.rawBody, headers) as {
      herald: { notice_id: string; kind: string };
      meta: { unsubscribe: string };
    };
    expect(payload.herald).toEqual({ notice_id: notice.id, kind: 'incident_update' });
    expect(payload.meta.unsubscribe).toContain(`${PUBLIC_URL}/subscriptions/unsubscribe?token=`);
    expect(await w.notices.tally(notice.id)).toMatchObject({ total: 1, delivered: 1, complete: true });

    hook.script({ status: 410 });
    const gone = await w.open();
    await drain(d);
    const [r] = await w.notices.recipients(gone.id, [s.id]);
    expect(r).toMatchObject({ state: 'bounced', error: 'the endpoint answered 410 Gone' });
    expect(await w.subscribers.get(s.id)).toMatchObject({ state: 'bounced' });
  });
});

describe('opening notices', () => {
  const incident = { id: 'inc_01JH3ZK6X2B8V4N0Q7R5T9W1YD', title: 'API errors', severity: 'major' };
  const origin = (deliveryId: string, kind: 'announcement' | 'correction' | 'retraction') => ({
    executionId: 'exe_01JH3ZK6X2B8V4N0Q7R5T9W1YE',
    kind,
    deliveryId,
  });

  it('opens one notice per status page write with an origin, and subscribers hear of each', async () => {
    const w = await world();
    await w.claimPage();
    const s = await w.add({ address: `reader-${randomBytes(4).toString('hex')}@example.com` });
    const page = wrapStatusPage(new RedisPublicIncidentStore(t.redis, w.keys), w.opener);

    await page.publish({
      incident,
      origin: origin('dlv_first', 'announcement'),
      deliveryId: 'dlv_first',
      status: 'investigating',
      subject: 'API errors',
      body: 'We are looking into it.',
    });
    // A retried delivery rewrites the same update and opens nothing new.
    await page.publish({
      incident,
      origin: origin('dlv_first', 'announcement'),
      deliveryId: 'dlv_first',
      status: 'investigating',
      subject: 'API errors',
      body: 'We are looking into it.',
    });
    // Without an origin (not a delivery's write), nobody is told.
    await page.publish({ incident, deliveryId: 'dlv_quiet', status: 'identified', subject: '', body: 'Quiet.' });
    await page.edit({
      incident,
      origin: origin('dlv_fix', 'correction'),
      updateId: 'dlv_first',
      subject: 'API errors',
      body: 'We are looking into failing logins.',
    });
    await page.remove({ incidentId: incident.id, origin: origin('dlv_retract', 'retraction'), updateId: 'dlv_first' });

    const opened = await t.redis.zrange(w.keys.subscriberNotices(), '0', '-1');
    expect(opened.sort()).toEqual(['ntc_dlv_first', 'ntc_dlv_fix', 'ntc_dlv_retract']);
    expect(await w.notices.get('ntc_dlv_first')).toMatchObject({
      kind: 'incident_update',
      execution_id: 'exe_01JH3ZK6X2B8V4N0Q7R5T9W1YE',
      page: { title: 'Acme Status', public_url: PUBLIC_URL },
      incident: { id: incident.id, name: 'API errors', impact: 'major', status: 'investigating' },
      update: { id: 'dlv_first', body: 'We are looking into it.' },
    });
    expect(await w.notices.get('ntc_dlv_fix')).toMatchObject({
      kind: 'incident_correction',
      update: { id: 'dlv_first', body: 'We are looking into failing logins.' },
    });
    // The retraction tells what was removed, in its last words, though the store no longer has it.
    expect(await w.notices.get('ntc_dlv_retract')).toMatchObject({
      kind: 'incident_retraction',
      update: { id: 'dlv_first', body: 'We are looking into failing logins.' },
    });
    const left = await new RedisPublicIncidentStore(t.redis, w.keys).read(incident.id);
    expect(left.record?.updates.map((u) => u.id)).toEqual(['dlv_quiet']);

    await drain(w.dispatcher());
    const got = to(s.address);
    expect(got.map((m) => m.messageId).sort()).toEqual(
      ['ntc_dlv_first', 'ntc_dlv_fix', 'ntc_dlv_retract'].map((id) => noticeMessageId(id, s.id)).sort(),
    );
    expect(got.every((m) => m.subject.includes('Acme Status'))).toBe(true);
  });

  it('opens a notice for each published maintenance update, and a failure to open does not fail the write', async () => {
    const w = await world();
    await w.claimPage();
    const repo = new RedisMaintenanceRepo(t.redis, w.keys);
    const base = {
      repo,
      components: new RedisComponentRepo(t.redis, w.keys),
      clock: w.clock,
      ids: createIdGenerator(),
    };
    const service = new MaintenanceService({ ...base, notices: w.opener });
    const actor = { type: 'api_key' as const, id: 'key_01JH3ZK6X2B8V4N0Q7R5T9W1YD', name: 'ops' };
    const m = await service.create(
      {
        title: 'Database upgrade',
        body: 'The API may answer slowly.',
        scheduled_for: new Date(Date.now() + 3_600_000).toISOString(),
        scheduled_until: new Date(Date.now() + 7_200_000).toISOString(),
      },
      actor,
    );
    const updated = await service.addUpdate(m.id, { status: 'in_progress', body: 'Started.' }, actor);
    const u = updated.updates[0]!;
    expect(await w.notices.get(`ntc_${m.id}_${m.id}`)).toMatchObject({
      kind: 'maintenance',
      execution_id: null,
      incident: null,
      maintenance: {
        id: m.id,
        name: 'Database upgrade',
        status: 'scheduled',
        url: `${PUBLIC_URL}/maintenances/${m.id}`,
      },
      update: { id: m.id, body: 'The API may answer slowly.' },
    });
    expect(await w.notices.get(`ntc_${m.id}_${u.id}`)).toMatchObject({
      maintenance: { status: 'in_progress' },
      update: { id: u.id, body: 'Started.', status: 'in_progress' },
    });

    const troubles: string[] = [];
    const failing = new MaintenanceService({
      ...base,
      notices: {
        incidentWritten: () => Promise.reject(new Error('not used')),
        maintenanceNotice: () => Promise.reject(new Error('Redis is away')),
      },
      onError: (what) => void troubles.push(what),
    });
    const again = await failing.addUpdate(m.id, { body: 'Half way.' }, actor);
    expect(again.updates).toHaveLength(2);
    expect((await repo.get(m.id))?.updates).toHaveLength(2);
    expect(troubles).toEqual([`subscriber notice of maintenance ${m.id}`]);
  });
});

describe('subscription mail', () => {
  let echo: HttpSink;
  beforeAll(async () => {
    // A webhook endpoint that answers its challenge (echoing the string), and one that does not.
    echo = await startHttpSink({
      respond: (req) =>
        req.path.startsWith('/good')
          ? { status: 200, body: { challenge: (req.body as { challenge?: string }).challenge } }
          : { status: 200, body: 'ok' },
    });
  });
  afterAll(() => echo.close());

  it('mails a confirmation link only while the record is pending with that nonce', async () => {
    const w = await world();
    const s = await w.add({
      address: `new-${randomBytes(4).toString('hex')}@example.com`,
      state: 'pending',
      confirm: { nonce: 'nonce-2', expires_at: new Date(Date.now() + 3_600_000).toISOString() },
    });
    const queue = new RedisSubscriptionMailQueue(t.redis, w.keys);
    await queue.enqueue({ kind: 'confirm', subscriberId: s.id, nonce: 'nonce-1' }, Date.now());
    await queue.enqueue({ kind: 'confirm', subscriberId: s.id, nonce: 'nonce-2' }, Date.now());
    await queue.enqueue({ kind: 'already_subscribed', subscriberId: s.id, nonce: null }, Date.now());
    const sender = w.txMail();
    while ((await sender.runDue()) > 0);

    const got = to(s.address);
    expect(got).toHaveLength(1);
    const link = /https:\/\/status\.acme\.test\/status\/subscriptions\/confirm\?token=([^\s"<>]+)/.exec(got[0]!.text);
    expect(link).not.toBeNull();
    expect(w.tokens.verify(decodeURIComponent(link![1]!), Date.now())).toMatchObject({
      purpose: 'confirm',
      subscriberId: s.id,
      nonce: 'nonce-2',
    });
  });

  it('confirms a webhook that echoes its challenge, and leaves one that does not pending', async () => {
    const w = await world();
    const http = createOutboundHttp(parseOutboundAllow(['127.0.0.1/32']));
    const pending = { state: 'pending' as const, webhook_secret: HOOK_SECRET };
    const confirm = (nonce: string) => ({ nonce, expires_at: new Date(Date.now() + 3_600_000).toISOString() });
    const good = await w.add({ kind: 'webhook', address: `${echo.url}/good`, ...pending, confirm: confirm('g') });
    const mute = await w.add({ kind: 'webhook', address: `${echo.url}/mute`, ...pending, confirm: confirm('m') });
    const queue = new RedisSubscriptionMailQueue(t.redis, w.keys);
    await queue.enqueue({ kind: 'webhook_challenge', subscriberId: good.id, nonce: 'g' }, Date.now());
    await queue.enqueue({ kind: 'webhook_challenge', subscriberId: mute.id, nonce: 'm' }, Date.now());
    const sender = w.txMail(http);
    while ((await sender.runDue()) > 0);

    expect(await w.subscribers.get(good.id)).toMatchObject({ state: 'confirmed', confirm: null, rev: 2 });
    expect(await w.subscribers.get(mute.id)).toMatchObject({ state: 'pending', rev: 1 });
    const req = echo.requests.find((r) => r.path === '/good')!;
    expect((req.body as { type: string }).type).toBe('subscription.challenge');
    const headers = Object.fromEntries(
      ['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((h) => [h, String(req.headers[h])]),
    );
    expect(() => new Webhook(HOOK_SECRET).verify(req.rawBody, headers)).not.toThrow();
  });
});

describe('composeSubscribers', () => {
  it('wires the worker: a status page write reaches a confirmed subscriber through HERALD_SMTP_URL', async () => {
    const w = await world();
    await w.claimPage();
    const s = await w.add({ address: `wired-${randomBytes(4).toString('hex')}@example.com` });
    const config = loadConfig({
      HERALD_SECRET_KEY: randomBytes(32).toString('base64'),
      HERALD_SMTP_URL: `smtp://${smtp.host}:${smtp.port}`,
      HERALD_SMTP_FROM: FROM,
      HERALD_SMTP_POOL: '2',
    });
    const parts = await composeSubscribers({
      config,
      redis: t.redis,
      redisUrl: testRedisUrl(),
      keys: w.keys,
      log,
      clock: systemClock,
      box,
      allow: parseOutboundAllow(['127.0.0.1/32']),
    });
    try {
      parts.start();
      const page = parts.wrapStatusPage(new RedisPublicIncidentStore(t.redis, w.keys));
      await page.publish({
        incident: { id: 'inc_01JH3ZK6X2B8V4N0Q7R5T9W1YF', title: 'Slow pages', severity: 'minor' },
        origin: { executionId: 'exe_01JH3ZK6X2B8V4N0Q7R5T9W1YG', kind: 'announcement', deliveryId: 'dlv_wired' },
        deliveryId: 'dlv_wired',
        status: 'investigating',
        subject: 'Slow pages',
        body: 'Pages load slowly.',
      });
      const [mail] = await waitFor(() => to(s.address).length > 0 && to(s.address), { what: 'the wired mail' });
      expect(mail!.messageId).toBe(noticeMessageId('ntc_dlv_wired', s.id));
      expect(mail!.subject).toContain('Slow pages');
      await waitFor(async () => (await w.notices.tally('ntc_dlv_wired')).complete, { what: 'the tally' });
    } finally {
      await parts.close();
    }
  });
});
