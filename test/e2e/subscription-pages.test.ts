import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OutboundAllow } from '../../src/domain/connection/address-policy.js';
import type { PublicPageConfig } from '../../src/domain/status/public.js';
import type { Subscriber, SubscriberTokens, SubscriptionMail } from '../../src/ports/subscribers.js';
import { SubscriptionService } from '../../src/services/subscriptions.js';
import { createStatusSite } from '../../src/status/site.js';
import { fixedSource } from '../../src/status/source.js';
import { createSubscriptionThrottle, subscriptionRouter } from '../../src/status/subscriptions/routes.js';
import { createSecretBox } from '../../src/store/crypto.js';
import { openSubscriberKey, type SubscriberIds } from '../../src/store/subscriber-key.js';
import { RedisSubscriberRepo, RedisSubscriptionMailQueue } from '../../src/store/subscribers.js';
import { component, fixtureSnapshot, PAGE } from '../support/status-fixtures.js';
import { useTestRedis } from '../support/redis.js';

/**
 * The public subscription routes over HTTP, on an Express app with the real Redis store: the
 * subscribe answer is the same bytes whatever the address's state, the throttles, the honeypot,
 * single-use confirmation, one-click unsubscribe, the manage form, hostile input, and the e-mail
 * form on the page's index.
 */
const t = useTestRedis('subs-pages');
const box = createSecretBox(randomBytes(32));
const DAY = 86_400_000;
let nowMs = Date.now();
const clock = { now: () => new Date(nowMs) };
const COMPONENTS = [
  component({ id: 'cmp_api', name: 'API', group: 'Core', position: 1 }),
  component({ id: 'cmp_web', name: 'Web <b>site</b>', group: 'Core', position: 2 }),
  component({ id: 'cmp_docs', name: 'Docs', position: 3 }),
];
const page: PublicPageConfig = { ...PAGE, title: 'Acme <Status>' };

let ids: SubscriberIds;
let tokens: SubscriberTokens;
let repo: RedisSubscriberRepo;
/** What the service queued (the real queue merges equal items: the tests count calls). */
const queued: SubscriptionMail[] = [];
const servers: Server[] = [];
let url = '';
let offUrl = '';
let noPageUrl = '';

async function listen(emailEnabled: boolean, pageConfig: PublicPageConfig | null = page): Promise<string> {
  const queue = new RedisSubscriptionMailQueue(t.redis, t.keys);
  const service = new SubscriptionService({
    repo,
    ids,
    tokens,
    mail: {
      enqueue: async (item, atMs) => {
        queued.push(item);
        await queue.enqueue(item, atMs);
      },
      claim: (n, l, k) => queue.claim(n, l, k),
      finish: (i) => queue.finish(i),
    },
    clock,
    throttle: createSubscriptionThrottle(t.redis, t.keys),
    emailEnabled,
    allow: OutboundAllow.none,
    componentIds: () => Promise.resolve(new Set(COMPONENTS.map((c) => c.id))),
    randomBytes,
    retentionMs: 7 * DAY,
  });
  const app = express();
  app.set('trust proxy', true);
  app.use(
    '/status/subscriptions',
    subscriptionRouter({
      service,
      page: () => Promise.resolve(pageConfig),
      components: () => Promise.resolve(COMPONENTS),
      log: pino({ level: 'silent' }),
      trustProxy: true,
    }),
  );
  const server = app.listen(0, '127.0.0.1');
  servers.push(server);
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  ({ ids, tokens } = await openSubscriberKey(t.redis, t.keys, box));
  repo = new RedisSubscriberRepo(t.redis, t.keys, box, ids, 7 * DAY);
  url = await listen(true);
  offUrl = await listen(false);
  noPageUrl = await listen(true, null);
});
afterAll(async () => {
  for (const s of servers) await new Promise((resolve) => s.close(resolve));
});

/** Each test speaks from IPs of its own (trust proxy: X-Forwarded-For), so the IP throttle is its own too. */
let ipSeq = 0;
const freshIp = () => `203.0.113.${++ipSeq}`;
const freshEmail = () => `Jane.${randomBytes(4).toString('hex')}@Example.COM`;
const normalized = (email: string) => email.replace(/@.*$/, (d) => d.toLowerCase());

interface Sent {
  status: number;
  headers: Headers;
  body: string;
}

async function send(
  path: string,
  o: { method?: string; form?: Record<string, string | string[]>; json?: unknown; ip?: string; accept?: string } = {},
): Promise<Sent> {
  const headers: Record<string, string> = { 'X-Forwarded-For': o.ip ?? freshIp() };
  let body: string | undefined;
  if (o.form) {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(o.form)) for (const one of [v].flat()) p.append(k, one);
    body = p.toString();
    headers['Content-Type'] = 'application/x-www-form-urlencoded';
  } else if (o.json !== undefined) {
    body = JSON.stringify(o.json);
    headers['Content-Type'] = 'application/json';
  }
  if (o.accept) headers.Accept = o.accept;
  const base = path.startsWith('http') ? '' : url;
  const r = await fetch(`${base}${path}`, { method: o.method ?? (body ? 'POST' : 'GET'), headers, body });
  return { status: r.status, headers: r.headers, body: await r.text() };
}

const subscribe = (form: Record<string, string | string[]>, ip?: string) => send('/status/subscriptions', { form, ip });
const subscribeJson = (json: unknown, ip?: string) => send('/status/subscriptions', { json, ip });

/** The headers that could tell one answer from another (Date aside). */
function sameHeaders(h: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  h.forEach((v, k) => {
    if (k !== 'date') out[k] = v;
  });
  return out;
}

function record(email: string): Promise<Subscriber | null> {
  return repo.get(ids.idOf('email', normalized(email)));
}

async function put(email: string, over: Partial<Subscriber>): Promise<Subscriber> {
  const address = normalized(email);
  const sub: Subscriber = {
    id: ids.idOf('email', address),
    kind: 'email',
    address,
    state: 'confirmed',
    components: [],
    locale: 'en',
    source: 'page',
    created_at: new Date(nowMs).toISOString(),
    confirmed_at: new Date(nowMs).toISOString(),
    unsubscribed_at: null,
    bounced_at: null,
    bounce_reason: null,
    token_version: 1,
    confirm: null,
    webhook_secret: null,
    rev: 1,
    ...over,
  };
  expect(await repo.put(sub, null)).toBe(true);
  return sub;
}

const confirmToken = (s: Subscriber) =>
  tokens.sign({
    purpose: 'confirm',
    subscriberId: s.id,
    version: s.token_version,
    nonce: s.confirm!.nonce,
    expiresMs: Date.parse(s.confirm!.expires_at),
  });
const linkToken = (s: Subscriber, purpose: 'manage' | 'unsubscribe') =>
  tokens.sign({ purpose, subscriberId: s.id, version: s.token_version });

const mailsFor = (id: string) => queued.filter((m) => m.subscriberId === id);

describe('subscribing', () => {
  it('a new address becomes pending and gets one confirmation mail; the page says to check the inbox', async () => {
    const email = freshEmail();
    const r = await subscribe({ email, website: '', components: ['cmp_api', 'cmp_docs'], locale: 'de' });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/html/);
    expect(r.body).toContain('Check your inbox');
    expect(r.body).not.toContain(email);
    const sub = await record(email);
    expect(sub).toMatchObject({ state: 'pending', components: ['cmp_api', 'cmp_docs'], locale: 'de', source: 'page' });
    expect(sub!.address).toBe(normalized(email));
    expect(mailsFor(sub!.id)).toEqual([{ kind: 'confirm', subscriberId: sub!.id, nonce: sub!.confirm!.nonce }]);
    expect(Date.parse(sub!.confirm!.expires_at) - nowMs).toBe(48 * 3_600_000);
  });

  it('answers the same bytes for new, pending, confirmed, unsubscribed and bounced addresses (HTML and JSON)', async () => {
    const states = {
      new: freshEmail(),
      pending: freshEmail(),
      confirmed: freshEmail(),
      unsubscribed: freshEmail(),
      bounced: freshEmail(),
    };
    await put(states.pending, {
      state: 'pending',
      confirmed_at: null,
      confirm: { nonce: 'old-nonce', expires_at: new Date(nowMs + DAY).toISOString() },
    });
    await put(states.confirmed, {});
    await put(states.unsubscribed, {
      state: 'unsubscribed',
      unsubscribed_at: new Date(nowMs).toISOString(),
      token_version: 2,
    });
    await put(states.bounced, { state: 'bounced', bounced_at: new Date(nowMs).toISOString(), bounce_reason: '550' });
    const html: Sent[] = [];
    const json: Sent[] = [];
    for (const email of Object.values(states)) html.push(await subscribe({ email, website: '' }));
    // The second round meets each address's throttle (one mail per 15 min): still the same answer.
    for (const email of Object.values(states)) json.push(await subscribeJson({ email }));
    for (const r of html) {
      expect(r.status).toBe(200);
      expect(r.body).toBe(html[0]!.body);
      expect(sameHeaders(r.headers)).toEqual(sameHeaders(html[0]!.headers));
    }
    for (const r of json) {
      expect(r.status).toBe(202);
      expect(r.body).toBe(json[0]!.body);
      expect(sameHeaders(r.headers)).toEqual(sameHeaders(json[0]!.headers));
    }
    expect(JSON.parse(json[0]!.body)).toMatchObject({ status: 'accepted' });
    expect(json[0]!.headers.get('content-type')).toMatch(/^application\/json/);

    const kinds = (email: string) => mailsFor(ids.idOf('email', normalized(email))).map((m) => m.kind);
    expect(kinds(states.new)).toEqual(['confirm']);
    expect(kinds(states.pending)).toEqual(['confirm']);
    expect(kinds(states.confirmed)).toEqual(['already_subscribed']);
    expect(kinds(states.unsubscribed)).toEqual(['confirm']);
    expect(kinds(states.bounced)).toEqual([]);
    expect((await record(states.pending))!.confirm!.nonce).not.toBe('old-nonce');
    expect((await record(states.unsubscribed))!).toMatchObject({ state: 'pending', token_version: 2 });
    expect((await record(states.confirmed))!.state).toBe('confirmed');
    expect((await record(states.bounced))!.state).toBe('bounced');
  });

  it('queues at most one mail per address per window, and keeps the pending link working meanwhile', async () => {
    const email = freshEmail();
    expect((await subscribe({ email })).status).toBe(200);
    const first = await record(email);
    expect((await subscribe({ email })).status).toBe(200);
    expect((await subscribeJson({ email })).status).toBe(202);
    expect(mailsFor(first!.id)).toHaveLength(1);
    expect((await record(email))!.confirm!.nonce).toBe(first!.confirm!.nonce);
  });

  it('answers 429 with Retry-After after 10 requests from one IP (HTML and JSON)', async () => {
    const ip = freshIp();
    for (let i = 0; i < 10; i++) expect((await subscribe({ email: freshEmail() }, ip)).status).toBe(200);
    const before = queued.length;
    const r = await subscribe({ email: freshEmail() }, ip);
    expect(r.status).toBe(429);
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(500);
    expect(r.body).toContain('Too many requests');
    const j = await subscribeJson({ email: freshEmail() }, ip);
    expect(j.status).toBe(429);
    expect(j.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(j.body)).toMatchObject({ code: 'rate_limited', status: 429 });
    expect(queued.length).toBe(before);
    // Another IP is not held back.
    expect((await subscribe({ email: freshEmail() })).status).toBe(200);
  });

  it('counts an IPv6 client by its /64 (a host may take any address of its network)', async () => {
    const net = `2001:db8:${(++ipSeq).toString(16)}:1`;
    for (let i = 0; i < 10; i++)
      expect((await subscribe({ email: freshEmail() }, `${net}::${i + 1}`)).status).toBe(200);
    expect((await subscribe({ email: freshEmail() }, `${net}:ffff::abcd`)).status).toBe(429);
    expect((await subscribe({ email: freshEmail() }, `2001:db8:${(++ipSeq).toString(16)}:2::1`)).status).toBe(200);
  });

  it('the honeypot: a filled `website` gets the same answer and nothing happens', async () => {
    const email = freshEmail();
    const human = await subscribe({ email: freshEmail(), website: '' });
    const bot = await subscribe({ email, website: 'https://spam.example' });
    expect(bot.status).toBe(200);
    expect(bot.body).toBe(human.body);
    expect(await record(email)).toBeNull();
    expect(mailsFor(ids.idOf('email', normalized(email)))).toEqual([]);
  });

  it('refuses bad input clearly: bad e-mail, unknown component, neither or both addresses', async () => {
    const bad = await subscribeJson({ email: 'not-an-address' });
    expect(bad.status).toBe(422);
    expect(JSON.parse(bad.body).errors[0]).toMatchObject({ field: 'email', code: 'invalid_email' });
    const unknown = await subscribeJson({ email: freshEmail(), components: ['cmp_nope'] });
    expect(unknown.status).toBe(422);
    expect(JSON.parse(unknown.body)).toMatchObject({ code: 'unknown_component' });
    expect((await subscribeJson({})).status).toBe(422);
    expect((await subscribeJson({ email: freshEmail(), url: 'https://hooks.example.com/x' })).status).toBe(422);
    const page = await subscribe({ email: 'nope' });
    expect(page.status).toBe(422);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.body).toContain('Enter a valid e-mail address.');
    const big = await subscribeJson({ email: freshEmail(), website: 'x'.repeat(20_000) });
    expect(big.status).toBe(413);
  });

  it('e-mail subscriptions off: a clear refusal, page and problem', async () => {
    const html = await send(`${offUrl}/status/subscriptions`, { form: { email: freshEmail() } });
    expect(html.status).toBe(422);
    expect(html.body).toContain('E-mail subscriptions are not available');
    const json = await send(`${offUrl}/status/subscriptions`, { json: { email: freshEmail() } });
    expect(json.status).toBe(422);
    expect(JSON.parse(json.body).errors[0]).toMatchObject({ field: 'email', code: 'email_subscriptions_off' });
  });

  it('a webhook: https only, pending with a fresh whsec_ secret, and a challenge queued', async () => {
    const hook = `https://hooks.example.com/${randomBytes(4).toString('hex')}`;
    const r = await subscribeJson({ url: hook, components: ['cmp_web'] });
    expect(r.status).toBe(202);
    const sub = await repo.get(ids.idOf('webhook', hook));
    expect(sub).toMatchObject({ kind: 'webhook', state: 'pending', components: ['cmp_web'] });
    expect(sub!.webhook_secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(mailsFor(sub!.id)).toEqual([
      { kind: 'webhook_challenge', subscriberId: sub!.id, nonce: sub!.confirm!.nonce },
    ]);
    for (const refused of [
      'http://hooks.example.com/x',
      'https://127.0.0.1/x',
      'https://localhost/x',
      'ftp://x.example',
    ]) {
      const no = await subscribeJson({ url: refused });
      expect(no.status, refused).toBe(422);
    }
  });
});

describe('confirming', () => {
  it('GET shows a button and changes nothing; POST confirms once; the used link then says subscribed', async () => {
    const email = freshEmail();
    await subscribe({ email });
    const pending = (await record(email))!;
    const token = confirmToken(pending);
    const get = await send(`/status/subscriptions/confirm?token=${encodeURIComponent(token)}`);
    expect(get.status).toBe(200);
    expect(get.body).toContain('<form method="post"');
    expect(get.body).toContain('Confirm subscription');
    expect((await record(email))!.state).toBe('pending');
    const post = await send(`/status/subscriptions/confirm`, { form: { token } });
    expect(post.status).toBe(200);
    expect(post.body).toContain('You are subscribed');
    expect(post.body).toMatch(/href="\/status\/subscriptions\/manage\?locale=en&amp;token=/);
    const confirmed = (await record(email))!;
    expect(confirmed).toMatchObject({ state: 'confirmed', confirm: null });
    const again = await send(`/status/subscriptions/confirm?token=${encodeURIComponent(token)}`, {
      method: 'POST',
      accept: 'application/json',
    });
    expect(again.status).toBe(200);
    expect(JSON.parse(again.body)).toEqual({ status: 'already_confirmed' });
    expect((await record(email))!.rev).toBe(confirmed.rev);
  });

  it('an expired link, or one a later request replaced, says so and confirms nothing', async () => {
    const email = freshEmail();
    await subscribe({ email });
    const pending = (await record(email))!;
    const old = confirmToken(pending);
    // A newer link (another request after the throttle's window): the old one stops working.
    const newer = { ...pending, confirm: { ...pending.confirm!, nonce: 'newer' }, rev: pending.rev + 1 };
    expect(await repo.put(newer, pending.rev)).toBe(true);
    const replaced = await send('/status/subscriptions/confirm', { form: { token: old } });
    expect(replaced.status).toBe(404);
    expect(replaced.body).toContain('This link has expired or was used');
    const token = confirmToken(newer);
    nowMs += 49 * 3_600_000;
    try {
      const expired = await send('/status/subscriptions/confirm', { form: { token } });
      expect(expired.status).toBe(404);
      expect(expired.body).toContain('Subscribe again');
      const j = await send('/status/subscriptions/confirm', { json: { token } });
      expect(j.status).toBe(404);
      expect(JSON.parse(j.body)).toMatchObject({ code: 'not_found' });
      const peek = await send(`/status/subscriptions/confirm?token=${encodeURIComponent(token)}`, {
        accept: 'application/json',
      });
      expect(peek.status).toBe(404);
    } finally {
      nowMs -= 49 * 3_600_000;
    }
    expect((await record(email))!.state).toBe('pending');
    // A different MAC: its first character changed. (Not its last ones: the last of 43 base64url
    // characters carries only 4 of the MAC's bits, so a changed one can decode to the same MAC.)
    const macAt = token.indexOf('.') + 1;
    const other = token[macAt] === 'A' ? 'B' : 'A';
    const forgedToken = `${token.slice(0, macAt)}${other}${token.slice(macAt + 1)}`;
    const forged = await send('/status/subscriptions/confirm', { form: { token: forgedToken } });
    expect(forged.status).toBe(404);
  });
});

describe('unsubscribing', () => {
  it('GET asks (masked address) and changes nothing; the one-click POST unsubscribes, and again answers the same', async () => {
    const email = freshEmail();
    const sub = await put(email, {});
    const token = linkToken(sub, 'unsubscribe');
    const link = `/status/subscriptions/unsubscribe?token=${encodeURIComponent(token)}`;
    const ask = await send(link);
    expect(ask.status).toBe(200);
    expect(ask.body).toContain('J•••@example.com');
    expect(ask.body).not.toContain(normalized(email));
    expect(ask.body).toContain('<form method="post"');
    expect((await record(email))!.state).toBe('confirmed');

    const oneClick = await send(link, { form: { 'List-Unsubscribe': 'One-Click' } });
    expect(oneClick.status).toBe(200);
    expect(oneClick.headers.get('set-cookie')).toBeNull();
    expect(oneClick.body).toContain('You are unsubscribed');
    const after = (await record(email))!;
    expect(after).toMatchObject({ state: 'unsubscribed', token_version: sub.token_version + 1 });
    const second = await send(link, { form: { 'List-Unsubscribe': 'One-Click' } });
    expect(second.status).toBe(200);
    expect(second.body).toBe(oneClick.body);
    expect((await record(email))!.rev).toBe(after.rev);
    // The manage link died with it.
    expect(
      (await send(`/status/subscriptions/manage?token=${encodeURIComponent(linkToken(sub, 'manage'))}`)).status,
    ).toBe(404);
  });

  it('an erased subscriber with a valid link answers "unsubscribed"; a forged link does not', async () => {
    const sub = await put(freshEmail(), {});
    const token = linkToken(sub, 'unsubscribe');
    expect(await repo.erase(sub.id)).toBe(true);
    const r = await send(`/status/subscriptions/unsubscribe?token=${encodeURIComponent(token)}`, {
      form: { 'List-Unsubscribe': 'One-Click' },
    });
    expect(r.status).toBe(200);
    expect(r.body).toContain('You are unsubscribed');
    const forged = await send(`/status/subscriptions/unsubscribe?token=${encodeURIComponent(`x${token}`)}`, {
      form: { 'List-Unsubscribe': 'One-Click' },
    });
    expect(forged.status).toBe(404);
  });
});

describe('links of an erased subscription', () => {
  it('stay dead when the address subscribes and confirms again', async () => {
    const email = freshEmail();
    await subscribe({ email });
    const first = (await record(email))!;
    await send(`/status/subscriptions/confirm`, { form: { token: confirmToken(first) } });
    const confirmed = (await record(email))!;
    expect(confirmed.state).toBe('confirmed');
    const oldManage = linkToken(confirmed, 'manage');
    const oldUnsubscribe = linkToken(confirmed, 'unsubscribe');
    // Erased (GDPR art. 17, or the retention after leaving): nothing of it is left.
    expect(await repo.erase(confirmed.id)).toBe(true);
    // Days later (the retention), past the address's mail window too.
    nowMs += 8 * DAY;
    await t.redis.del(`${t.keys.rateLimitPrefix('subscribe-address')}:${confirmed.id}`);
    await subscribe({ email }, freshIp());
    const again = (await record(email))!;
    expect(again.state).toBe('pending');
    expect(again.token_version).not.toBe(confirmed.token_version);
    await send(`/status/subscriptions/confirm`, { form: { token: confirmToken(again) } });
    expect((await record(email))!.state).toBe('confirmed');
    // The old links open nothing and change nothing of the new subscription.
    expect((await send(`/status/subscriptions/manage?token=${encodeURIComponent(oldManage)}`)).status).toBe(404);
    await send(`/status/subscriptions/unsubscribe?token=${encodeURIComponent(oldUnsubscribe)}`, {
      form: { 'List-Unsubscribe': 'One-Click' },
    });
    expect((await record(email))!.state).toBe('confirmed');
  });
});

describe('managing', () => {
  it('shows the components grouped as on the page, and saves components and language', async () => {
    const email = freshEmail();
    const sub = await put(email, { components: ['cmp_web'] });
    const token = linkToken(sub, 'manage');
    const page = await send(`/status/subscriptions/manage?token=${encodeURIComponent(token)}`);
    expect(page.status).toBe(200);
    expect(page.body).toContain('<legend>Core</legend>');
    expect(page.body).toMatch(/value="cmp_web" aria-describedby="components-hint" checked/);
    expect(page.body).toMatch(/value="cmp_api" aria-describedby="components-hint">/);
    expect(page.body).toContain('Web &lt;b&gt;site&lt;/b&gt;');
    expect(page.body).toContain('<label for="locale">');
    const saved = await send('/status/subscriptions/manage', {
      form: { token, components: ['cmp_api', 'cmp_docs'], locale: 'de' },
    });
    expect(saved.status).toBe(200);
    expect(saved.body).toContain('Your choices are saved.');
    expect(await record(email)).toMatchObject({
      components: ['cmp_api', 'cmp_docs'],
      locale: 'de',
      state: 'confirmed',
    });
    const json = await send('/status/subscriptions/manage', { json: { token, components: [], locale: 'en' } });
    expect(json.status).toBe(200);
    expect(JSON.parse(json.body)).toEqual({
      kind: 'email',
      address: 'J•••@example.com',
      state: 'confirmed',
      components: [],
      locale: 'en',
    });
    const unknown = await send('/status/subscriptions/manage', {
      json: { token, components: ['cmp_x'], locale: 'en' },
    });
    expect(unknown.status).toBe(422);
    expect(await record(email)).toMatchObject({ components: [], locale: 'en' });
  });
});

describe('the edge', () => {
  it('every answer: no-store, no referrer, the site CSP framed by nobody; locale by ?locale and Accept-Language', async () => {
    const answers = [
      await subscribe({ email: freshEmail() }),
      await send('/status/subscriptions/confirm?token=nope'),
      await send('/status/subscriptions/manage?token=nope'),
      await send('/status/subscriptions/unsubscribe?token=nope', { method: 'POST' }),
      await send('/status/subscriptions/elsewhere'),
    ];
    for (const r of answers) {
      expect(r.headers.get('cache-control')).toBe('no-store');
      expect(r.headers.get('referrer-policy')).toBe('no-referrer');
      expect(r.headers.get('x-content-type-options')).toBe('nosniff');
      expect(r.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
      expect(r.headers.get('content-security-policy')).toContain("default-src 'none'");
      expect(r.body).not.toContain('<script');
    }
    expect(answers[0]!.body).toContain('<html lang="en">');
    expect(answers[0]!.body).toMatch(/<link rel="stylesheet" href="\/status\/assets\/style-[0-9a-f]{12}\.css">/);
    expect(answers[0]!.body).toContain('Acme &lt;Status&gt;');
    const de = await fetch(`${url}/status/subscriptions/confirm?token=nope`, {
      headers: { 'Accept-Language': 'de-AT, en;q=0.5' },
    });
    expect(await de.text()).toContain('<html lang="de">');
    const en = await fetch(`${url}/status/subscriptions/confirm?token=nope&locale=en`, {
      headers: { 'Accept-Language': 'de' },
    });
    expect(await en.text()).toContain('<html lang="en">');
  });

  it('without a status page: 404, "not set up", as a page and as a problem', async () => {
    const html = await send(`${noPageUrl}/status/subscriptions`, { form: { email: freshEmail() } });
    expect(html.status).toBe(404);
    expect(html.body).toContain('The status page is not set up.');
    expect(html.body).not.toMatch(/<a [^>]*><\/a>|<a [^>]*><span><\/span><\/a>/);
    const json = await send(`${noPageUrl}/status/subscriptions`, { json: { email: freshEmail() } });
    expect(json.status).toBe(404);
    expect(JSON.parse(json.body)).toMatchObject({ code: 'not_found' });
  });

  it('hostile input is refused or escaped, never reflected as markup', async () => {
    const hostile = '<script>alert(1)</script>';
    const r = await subscribe({ email: `${hostile}@example.com`, components: [hostile], locale: hostile });
    expect(r.status).toBe(422);
    expect(r.body).not.toContain(hostile);
    const j = await subscribeJson({ email: `x@example.com${hostile}`, website: '' });
    expect(j.status).toBe(422);
    const m = await send(
      `/status/subscriptions/manage?token=${encodeURIComponent(hostile)}&locale=${encodeURIComponent(hostile)}`,
    );
    expect(m.status).toBe(404);
    expect(m.body).not.toContain(hostile);
    const arr = await subscribeJson([{ email: freshEmail() }]);
    expect(arr.status).toBe(422);
    const broken = await send('/status/subscriptions', {
      method: 'POST',
      json: undefined,
      form: undefined,
    });
    expect(broken.status).toBe(422);
    const malformed = await fetch(`${url}/status/subscriptions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Forwarded-For': freshIp() },
      body: '{"email":',
    });
    expect(malformed.status).toBe(400);
    expect(malformed.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const control = await subscribeJson({ email: 'a\u0000b@example.com' });
    expect(control.status).toBe(422);
  });
});

describe('the index page form', () => {
  it('shows the e-mail form (label, honeypot, component choices) only when e-mail subscriptions are on', async () => {
    const snap = fixtureSnapshot();
    const site = (emailSubscriptions: boolean) =>
      createStatusSite({
        source: fixedSource(snap),
        clock: { now: () => new Date(nowMs) },
        log: pino({ level: 'silent' }),
        emailSubscriptions,
      });
    const app = express();
    app.use('/on', site(true).handler('/on'));
    app.use('/off', site(false).handler('/off'));
    const server = app.listen(0, '127.0.0.1');
    servers.push(server);
    await new Promise<void>((resolve) => server.once('listening', () => resolve()));
    const at = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const on = await (await fetch(`${at}/on`)).text();
    expect(on).toContain('<form class="subscribe" method="post" action="/on/subscriptions">');
    expect(on).toContain('<label for="sub-email">E-mail address</label>');
    expect(on).toMatch(/<div class="vh" aria-hidden="true">.*name="website" type="text" tabindex="-1"/);
    expect(on).toContain('<input type="hidden" name="locale" value="en">');
    expect(on).toMatch(/<details class="feeds">\n<summary>Only some components<\/summary>/);
    expect(on).toContain('name="components" value="cmp_api"');
    const off = await (await fetch(`${at}/off`)).text();
    expect(off).not.toContain('<form');
    expect(off).toContain('<h2 id="h-subscribe">');
  });
});
