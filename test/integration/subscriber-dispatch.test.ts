import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/domain/common/clock.js';
import { parseOutboundAllow } from '../../src/domain/connection/address-policy.js';
import { createOutboundHttp } from '../../src/delivery/outbound/http.js';
import type { Recipient, Subscriber, SubscriberNotice, SubscriberState } from '../../src/ports/subscribers.js';
import { createSecretBox } from '../../src/store/crypto.js';
import { createKeys, type Keys } from '../../src/store/keys.js';
import { RedisPacer } from '../../src/store/pacing.js';
import { openSubscriberKey } from '../../src/store/subscriber-key.js';
import { RedisNoticeRepo, RedisSubscriberRepo } from '../../src/store/subscribers.js';
import { NoticeDispatcher, noticeMessageId } from '../../src/subscribers/dispatcher.js';
import { renderNoticeMail, subscriberLinks } from '../../src/subscribers/mail.js';
import { webhookPayload } from '../../src/subscribers/payload.js';
import { createRelay, type Relay } from '../../src/subscribers/relay.js';
import { createSubscriberWebhook } from '../../src/subscribers/webhook.js';
import { startSmtp, type SmtpPeer } from '../support/peers/smtp.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/peers/webhook-receiver.js';
import { dropPrefix, uniquePrefix, useTestRedis } from '../support/redis.js';

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
  const dispatcher = () => {
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
      content: { links: subscriberLinks, noticeMail: renderNoticeMail, webhookPayload },
      templates: () => Promise.resolve(null),
      clock,
      // The longest first backoff (2 s): the first drain ends well before the retry is due.
      random: () => 1,
      log,
      inFlight: 4,
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
  return { keys, ids, tokens, subscribers, notices, clock, dispatcher, add, open };
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
