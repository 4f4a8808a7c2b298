import { randomBytes } from 'node:crypto';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { axeViolations, launchBrowser, screenshot, type AxeViolation, type TestBrowser } from '../support/browser.js';
import { startSmtp, type ReceivedMail, type SmtpPeer } from '../support/peers/smtp.js';
import {
  PUBLIC_URL,
  SMTP_AUTH,
  SMTP_FROM,
  rawHeader,
  smtpEnv,
  startWorld,
  type World,
} from '../support/subscriber-world.js';
import { waitFor } from '../support/wait.js';

/**
 * Subscribing to the status page by e-mail, in a real browser (Debian's Chromium), as a customer
 * does it (docs/subscribers.md): the form on the page, one component chosen, "check your inbox";
 * the confirmation mail at a real SMTP server (the relay HERALD_SMTP_URL names); its link opened
 * and confirmed with the button (a GET alone confirms nothing: mail scanners follow links). Then
 * the incident's life as the subscriber hears it: an update naming the component (one mail,
 * with List-Unsubscribe and one-click unsubscribe headers), its correction ("Updated:"), its
 * retraction ("Withdrawn:"), an incident of another component (no mail to this subscriber, but
 * one to a subscriber of everything), then RFC 8058's one-click unsubscribe as a mail provider
 * sends it (a POST with no cookie) and no more mail after it. The subscribe answer is the same,
 * byte for byte, whatever state the address is in, and the per-IP throttle answers 429 past its
 * limit. Every page passes axe-core (no serious or critical violation) and is screenshotted under
 * test-output/subscribers/ for a person to look at.
 */

let smtp: SmtpPeer;
let w: World;
let b: TestBrowser;

const tag = randomBytes(4).toString('hex');
/** Subscribes in the browser to one component. */
const alice = `alice-${tag}@example.com`;
/** Imported, confirmed, every component. */
const bob = `bob-${tag}@example.com`;
const API = 'Public API';
const CHECKOUT = 'Checkout';
const TITLE = 'Acme Cloud';
/** Subscribe requests from this test's IP (127.0.0.1), against the per-IP limit of 10. */
let subscribePosts = 0;
const IP_LIMIT = 10;

beforeAll(async () => {
  smtp = await startSmtp({ auth: { ...SMTP_AUTH } });
  w = await startWorld({ env: smtpEnv(smtp, { rate: 1000 }), worker: true, components: [API, CHECKOUT], title: TITLE });
  const imported = await w.importEmails([bob]);
  expect(imported.created + imported.confirmed).toBe(1);
  b = await launchBrowser();
}, 180_000);

afterAll(async () => {
  await b?.close();
  await w?.close();
  await smtp?.close();
});

// ---------------------------------------------------------------------------------------------

const serious = (v: AxeViolation[]) => v.filter((x) => x.impact === 'serious' || x.impact === 'critical');

/** axe-core on the page as it is (none serious or critical), then a screenshot under test-output/subscribers/. */
async function check(page: Page, name: string): Promise<void> {
  const violations = await axeViolations(page);
  const minor = violations.filter((v) => !serious([v]).length);
  if (minor.length > 0) console.info(`${name}: minor axe findings: ${minor.map((v) => v.id).join(', ')}`);
  expect(serious(violations), `${name}: serious or critical axe violations`).toEqual([]);
  await screenshot(page, `subscribers/${name}.png`);
}

const visibleText = async (page: Page) => (await page.locator('body').innerText()).replace(/\s+/g, ' ');

/** Mails to `to` that tell of a notice (X-Herald-Notice), optionally of one notice. */
const noticeMails = (to: string, notice?: string): ReceivedMail[] =>
  smtp.messages.filter((m) => {
    const n = rawHeader(m.raw, 'X-Herald-Notice');
    return m.envelope.to.includes(to) && n !== null && (notice === undefined || n === notice);
  });

/** The notice an execution's status page write opened: `ntc_<delivery id>`. */
async function noticeOf(incidentId: string, executionId: string): Promise<string> {
  const e = await w.execution(incidentId, executionId);
  const d = e.deliveries.find((x) => x.connection_id === w.pageId);
  expect(d, 'the status page delivery').toBeDefined();
  return `ntc_${d!.id}`;
}

/** The first link in a mail's text that starts with `prefix` (a page link with its token). */
function linkIn(mail: ReceivedMail, path: string): string {
  const re = new RegExp(`${PUBLIC_URL.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}${path}\\?token=[^\\s"'<>)\\]]+`);
  const m = re.exec(mail.text);
  if (!m) throw new Error(`no ${path} link in the mail "${mail.subject}":\n${mail.text}`);
  return m[0];
}

/** POST /status/subscriptions as the form sends it; every call counts against the IP's limit. */
async function postSubscribe(
  fields: Record<string, string>,
): Promise<{ status: number; type: string; body: string; retryAfter: string | null }> {
  subscribePosts++;
  const r = await fetch(`${w.h.url}/status/subscriptions`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html', 'accept-language': 'en' },
    body: new URLSearchParams(fields).toString(),
    redirect: 'manual',
  });
  return {
    status: r.status,
    type: r.headers.get('content-type') ?? '',
    body: await r.text(),
    retryAfter: r.headers.get('retry-after'),
  };
}

async function subscriberState(email: string): Promise<{ state: string; components: string[] }> {
  const r = await w.h.api('GET', `/v1/subscribers?email=${encodeURIComponent(email)}`);
  expect(r.status, r.text).toBe(200);
  const list = (r.body.data ?? r.body.items ?? []) as { state: string; components: string[] }[];
  expect(list, `one subscriber for the address`).toHaveLength(1);
  return list[0]!;
}

// ---------------------------------------------------------------------------------------------

describe('an e-mail subscriber of one component, in Chromium', () => {
  let confirmLink = '';
  let incident = '';
  let firstUpdate = '';
  let lastNoticeMail: ReceivedMail | null = null;
  const words = {
    first: `Checkout API errors are being investigated (${tag}).`,
    fixed: `The API errors affect EU customers only (${tag}).`,
    other: `Card payments are slow (${tag}).`,
    after: `The API is back to normal (${tag}).`,
  };

  it('subscribes with the form on the page: "check your inbox"', async () => {
    const phone = await b.page({ width: 320, locale: 'en' });
    expect((await phone.goto(`${w.h.url}/status`))?.status()).toBe(200);
    await check(phone, '01-page-with-form-320');
    await phone.context().close();

    const page = await b.page({ width: 1280, locale: 'en' });
    expect((await page.goto(`${w.h.url}/status`))?.status()).toBe(200);
    const form = page.locator('form').filter({ has: page.locator('input[type="email"]') });
    await expect.poll(() => form.count(), { message: 'the subscribe form on the page' }).toBe(1);
    // The honeypot is there for bots, out of reach of people and of assistive technology.
    const honeypot = form.locator('input[name="website"]');
    if ((await honeypot.count()) > 0) {
      expect(await honeypot.getAttribute('tabindex')).toBe('-1');
    }
    await form.locator('input[type="email"]').fill(alice);
    // The component choice is folded away (most subscribe to everything): open it, pick one.
    await form.locator('details > summary').first().click();
    await form.getByRole('checkbox', { name: API }).check();
    await check(page, '01-page-with-form-1280');
    subscribePosts++;
    await Promise.all([page.waitForURL(/\/status\/subscriptions/), form.locator('[type="submit"]').first().click()]);
    expect(await visibleText(page)).toMatch(/check your inbox/i);
    expect(await visibleText(page), 'the address is not shown back').not.toContain(alice);
    await check(page, '02-check-your-inbox');
    await page.context().close();

    const mail = await waitFor(() => smtp.messages.find((m) => m.envelope.to.includes(alice)), {
      timeoutMs: 30_000,
      what: 'the confirmation mail',
    });
    expect(mail.from).toBe(SMTP_FROM);
    expect(mail.to).toEqual([alice]);
    expect(mail.authUser).toBe(SMTP_AUTH.username);
    confirmLink = linkIn(mail, '/subscriptions/confirm');
    expect(confirmLink.startsWith('https://')).toBe(true);
    expect((await subscriberState(alice)).state).toBe('pending');
  });

  it('confirms with the button behind the mail’s link (the link alone confirms nothing)', async () => {
    const page = await b.page({ width: 1280, locale: 'en' });
    expect((await page.goto(w.local(confirmLink)))?.status()).toBe(200);
    expect(await visibleText(page)).toMatch(/confirm your subscription/i);
    await check(page, '03-confirm');
    // A mail scanner's GET: still pending.
    expect((await subscriberState(alice)).state).toBe('pending');
    await Promise.all([page.waitForLoadState('load'), page.getByRole('button', { name: /confirm/i }).click()]);
    await expect.poll(async () => (await subscriberState(alice)).state, { timeout: 10_000 }).toBe('confirmed');
    await check(page, '04-confirmed');
    await page.context().close();
    expect((await subscriberState(alice)).components).toEqual([w.components[API]]);
  });

  it('an update naming the component: exactly one mail, with one-click unsubscribe headers', async () => {
    incident = await w.incident('API errors', [w.components[API]!]);
    firstUpdate = await w.publish(incident, words.first, 'investigating');
    const tally = await w.subscribersDone(incident, firstUpdate);
    expect(tally).toMatchObject({ total: 2, delivered: 2, failed: 0, bounced: 0, pending: 0 });
    const notice = await noticeOf(incident, firstUpdate);

    const mails = noticeMails(alice, notice);
    expect(mails).toHaveLength(1);
    const m = mails[0]!;
    lastNoticeMail = m;
    expect(m.subject.startsWith(`[${TITLE}] API errors`), m.subject).toBe(true);
    expect(m.text).toContain(words.first);
    expect(m.html ?? '').toContain(words.first);
    const unsubscribe = rawHeader(m.raw, 'List-Unsubscribe') ?? '';
    expect(unsubscribe).toMatch(/^<https:\/\/status\.acme\.test\/status\/subscriptions\/unsubscribe\?token=[^>\s]+>$/);
    expect(rawHeader(m.raw, 'List-Unsubscribe-Post')).toBe('List-Unsubscribe=One-Click');
    expect(rawHeader(m.raw, 'Auto-Submitted')).toBe('auto-generated');
    expect(m.messageId).toMatch(new RegExp(`^<${notice}\\.sub_[0-9A-Z]{26}@herald>$`));
    // The subscriber of everything hears of it too, under its own Message-ID.
    const bobs = noticeMails(bob, notice);
    expect(bobs).toHaveLength(1);
    expect(bobs[0]!.messageId).not.toBe(m.messageId);
  });

  it('its correction: one mail "[page] Updated: …" with the corrected words', async () => {
    const correction = await w.correct(incident, firstUpdate, words.fixed);
    await w.subscribersDone(incident, correction);
    const mails = noticeMails(alice, await noticeOf(incident, correction));
    expect(mails).toHaveLength(1);
    const m = mails[0]!;
    expect(m.subject.startsWith(`[${TITLE}]`), m.subject).toBe(true);
    expect(m.subject).toContain('Updated:');
    expect(m.text).toContain(words.fixed);
    lastNoticeMail = m;
  });

  it('its retraction: one mail "[page] Withdrawn: …"', async () => {
    const retraction = await w.retract(incident, firstUpdate, 'posted too early');
    await w.subscribersDone(incident, retraction);
    const mails = noticeMails(alice, await noticeOf(incident, retraction));
    expect(mails).toHaveLength(1);
    expect(mails[0]!.subject.startsWith(`[${TITLE}]`), mails[0]!.subject).toBe(true);
    expect(mails[0]!.subject).toContain('Withdrawn:');
    lastNoticeMail = mails[0]!;
  });

  it('an incident of another component: no mail to this subscriber, one to the subscriber of all', async () => {
    const other = await w.incident('Slow payments', [w.components[CHECKOUT]!]);
    const exe = await w.publish(other, words.other, 'identified');
    const tally = await w.subscribersDone(other, exe);
    expect(tally).toMatchObject({ total: 1, delivered: 1 });
    const notice = await noticeOf(other, exe);
    expect(noticeMails(bob, notice)).toHaveLength(1);
    expect(noticeMails(alice, notice)).toHaveLength(0);
    expect(smtp.messages.filter((m) => m.envelope.to.includes(alice) && m.text.includes(words.other))).toEqual([]);
  });

  it('the manage and unsubscribe pages behind the mail’s links', async () => {
    const mail = lastNoticeMail!;
    const page = await b.page({ width: 1280, locale: 'en' });
    expect((await page.goto(w.local(linkIn(mail, '/subscriptions/manage'))))?.status()).toBe(200);
    expect(await visibleText(page)).toContain(API);
    await check(page, '05-manage');
    expect((await page.goto(w.local(linkIn(mail, '/subscriptions/unsubscribe'))))?.status()).toBe(200);
    const text = await visibleText(page);
    expect(text).toMatch(/unsubscribe/i);
    // The address, masked: whoever holds a forwarded mail does not learn it.
    expect(text).toContain('@example.com');
    expect(text).not.toContain(alice);
    await check(page, '06-unsubscribe');
    await page.context().close();
    expect((await subscriberState(alice)).state).toBe('confirmed');
  });

  it('one-click unsubscribe (RFC 8058, no cookie, as a mail provider posts it): 200, then no more mail', async () => {
    const header = rawHeader(lastNoticeMail!.raw, 'List-Unsubscribe')!;
    const url = header.slice(1, -1);
    const r = await fetch(w.local(url), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'List-Unsubscribe=One-Click',
      redirect: 'manual',
    });
    expect(r.status).toBe(200);
    expect((await subscriberState(alice)).state).toBe('unsubscribed');

    const next = await w.publish(incident, words.after, 'monitoring');
    const tally = await w.subscribersDone(incident, next);
    expect(tally).toMatchObject({ total: 1, delivered: 1 });
    const notice = await noticeOf(incident, next);
    expect(noticeMails(bob, notice)).toHaveLength(1);
    expect(noticeMails(alice, notice)).toHaveLength(0);
    expect(smtp.messages.filter((m) => m.envelope.to.includes(alice) && m.text.includes(words.after))).toEqual([]);
  });
});

describe('the subscribe answer tells nothing about the address', () => {
  it('is byte-identical for a new, a pending, a confirmed and an unsubscribed address', async () => {
    const fresh = `carol-${tag}@example.com`;
    const answers = {
      new: await postSubscribe({ email: fresh }),
      pending: await postSubscribe({ email: fresh }),
      confirmed: await postSubscribe({ email: bob }),
      unsubscribed: await postSubscribe({ email: alice }),
    };
    for (const [state, a] of Object.entries(answers)) {
      expect(a.status, state).toBe(answers.new.status);
      expect(a.type, state).toBe(answers.new.type);
      expect(a.body, `the answer for the ${state} address`).toBe(answers.new.body);
    }
    expect(answers.new.status).toBe(200);
    expect(answers.new.body).toMatch(/check your inbox/i);
    for (const e of [fresh, bob, alice]) expect(answers.new.body).not.toContain(e);
  });

  it('the per-IP throttle answers 429 past its limit, with Retry-After', async () => {
    let first429 = 0;
    let last = await postSubscribe({ email: `dave-${tag}-0@example.com` });
    for (let i = 1; last.status !== 429 && i <= IP_LIMIT + 2; i++)
      last = await postSubscribe({ email: `dave-${tag}-${i}@example.com` });
    if (last.status === 429) first429 = subscribePosts;
    expect(last.status, `subscribe request ${subscribePosts}: ${last.body.slice(0, 200)}`).toBe(429);
    expect(first429, 'the first refused request').toBe(IP_LIMIT + 1);
    expect(Number(last.retryAfter)).toBeGreaterThan(0);

    // The refusal as a person meets it: the form once more, in the browser.
    const page = await b.page({ width: 1280, locale: 'en' });
    await page.goto(`${w.h.url}/status`);
    const form = page.locator('form').filter({ has: page.locator('input[type="email"]') });
    await form.locator('input[type="email"]').fill(`erin-${tag}@example.com`);
    const [response] = await Promise.all([
      page.waitForResponse((res) => res.request().method() === 'POST'),
      form.locator('[type="submit"]').first().click(),
    ]);
    expect(response.status()).toBe(429);
    await page.waitForLoadState('load');
    await check(page, '07-throttled');
    await page.context().close();

    // A JSON client is told the same, as a problem.
    const json = await fetch(`${w.h.url}/status/subscriptions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ email: `frank-${tag}@example.com` }),
    });
    expect(json.status).toBe(429);
    expect(json.headers.get('content-type') ?? '').toMatch(/^application\/problem\+json/);
    expect(Number(json.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});
