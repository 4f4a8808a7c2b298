import { describe, expect, it } from 'vitest';
import { OutboundError } from '../../src/delivery/outbound/error.js';
import { connectionOptions, relayFailure, scrub, SlotChunks } from '../../src/subscribers/relay.js';
import { failureOf, outcomeOf } from '../../src/subscribers/webhook.js';

/**
 * The relay's pure parts: its settings from HERALD_SMTP_URL, how an SMTP failure becomes an
 * outcome (without the address in its text), and the pacing windows reserved for several mails
 * at once; and how a webhook's answer becomes one.
 */

const ADDRESS = 'Jane.Doe@Example.com';

describe('the relay', () => {
  it('takes its settings from HERALD_SMTP_URL: TLS for smtps, the login decoded', () => {
    expect(connectionOptions({ url: 'smtps://us%40er:p%3Ass@relay.example.com' })).toMatchObject({
      connection: { host: 'relay.example.com', port: 465, secure: true },
      auth: { user: 'us@er', pass: 'p:ss' },
    });
    const plain = connectionOptions({ url: 'smtp://127.0.0.1:2525', ca: 'PEM' });
    expect(plain).toMatchObject({ connection: { port: 2525, secure: false, tls: { ca: 'PEM' } }, auth: null });
    expect(connectionOptions({ url: 'smtp://[::1]' }).connection).toMatchObject({ host: '::1', port: 587 });
  });

  it('bounces on a 5xx to RCPT TO, fails on another 5xx, retries a 4xx, a login or a connection', () => {
    const rcpt = relayFailure(
      {
        code: 'EENVELOPE',
        command: `RCPT TO:<${ADDRESS}>`,
        responseCode: 550,
        response: `550 5.1.1 <${ADDRESS}>: Recipient address rejected: user unknown`,
        rejected: [ADDRESS],
      },
      ADDRESS,
    );
    expect(rcpt).toEqual({
      outcome: 'bounced',
      error: 'the relay answered 550 5.1.1 <recipient>: Recipient address rejected: user unknown (to RCPT)',
    });
    expect(
      relayFailure({ code: 'EMESSAGE', command: 'DATA', responseCode: 552, response: '552 too big' }, ADDRESS),
    ).toMatchObject({ outcome: 'failed' });
    expect(
      relayFailure({ code: 'EENVELOPE', command: 'RCPT TO', responseCode: 450, response: '450 busy' }, ADDRESS),
    ).toMatchObject({ outcome: 'retryable' });
    expect(relayFailure({ code: 'EAUTH', command: 'AUTH PLAIN', responseCode: 535 }, ADDRESS)).toMatchObject({
      outcome: 'retryable',
    });
    expect(relayFailure({ code: 'ECONNECTION' }, ADDRESS)).toEqual({
      outcome: 'retryable',
      error: 'the connection to the relay failed (ECONNECTION)',
    });
  });

  it('never keeps an address in what the relay said', () => {
    expect(scrub(`550 ${ADDRESS.toLowerCase()} and someone.else@example.org unknown`, ADDRESS)).toBe(
      '550 <recipient> and <recipient> unknown',
    );
    expect(scrub('x'.repeat(500), ADDRESS)).toHaveLength(200);
  });
});

describe('pacing windows', () => {
  /** A pacer that hands out back-to-back windows on its own schedule, and a clock the sleeps move. */
  function harness(rate: number) {
    let now = 1_000;
    let tat = 0;
    const reserves: number[] = [];
    const pacer = {
      reserve: (_key: string, rule: { perSecond: number }) => {
        const interval = 1000 / rule.perSecond;
        reserves.push(Math.round(interval / (1000 / rate)));
        const start = Math.max(tat, now);
        tat = start + interval;
        return Promise.resolve(start - now);
      },
    };
    const sent: number[] = [];
    const slots = new SlotChunks(
      pacer,
      rate,
      () => now,
      (ms) => {
        now += ms;
        return Promise.resolve();
      },
    );
    const take = async () => {
      await slots.take();
      sent.push(now);
    };
    return { take, reserves, sent, idle: (ms: number) => void (now += ms) };
  }

  it('reserves one window for the sends waiting together, never more than a tenth of a second of the rate', async () => {
    const h = harness(100);
    await Promise.all(Array.from({ length: 25 }, () => h.take()));
    expect(h.sent).toHaveLength(25);
    // 25 waiting at once: windows of at most 10 slots (100/s × 0.1 s), not one round trip per mail.
    expect(h.reserves.every((k) => k <= 10)).toBe(true);
    expect(h.reserves.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(25);
    expect(h.reserves.length).toBeLessThanOrEqual(4);
  });

  it('grows the window of a worker that keeps sending below the rate: a reservation per many mails, not per mail', async () => {
    const h = harness(100_000);
    // One send a millisecond, far below the rate: each takes its slot as it gets to it.
    for (let i = 0; i < 300; i++) {
      await h.take();
      h.idle(1);
    }
    expect(h.sent).toHaveLength(300);
    expect(h.reserves.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(300);
    expect(h.reserves.length).toBeLessThanOrEqual(20);
    // A slot is used within SLOT_LATE_MS of its window: the schedule is never far behind.
    expect(Math.max(...h.reserves)).toBeLessThanOrEqual(128);
  });

  it('keeps to the rate however large the windows grow: a worker faster than the rate is paced slot by slot', async () => {
    const h = harness(100);
    for (let i = 0; i < 150; i++) await h.take();
    // 150 sends at 100/s from the first: 1.49 s at the least.
    expect(h.sent.at(-1)! - h.sent[0]!).toBeGreaterThanOrEqual(1490);
    expect(Math.max(...h.reserves)).toBeLessThanOrEqual(10);
  });

  it('reserves only what a lone send needs, and drops a window whose time is over', async () => {
    const h = harness(100);
    await h.take();
    expect(h.reserves).toEqual([1]);
    h.idle(5_000);
    await h.take();
    expect(h.reserves).toEqual([1, 1]);
  });
});

describe('webhook answers', () => {
  const res = (status: number, headers: Record<string, string> = {}) => ({
    status,
    headers,
    body: '',
    truncated: false,
    latencyMs: 1,
  });

  it('2xx delivered, 410 bounced, 429 and 5xx retried, other 4xx failed; the guard’s refusals fail', () => {
    expect(outcomeOf(res(204))).toEqual({ outcome: 'delivered' });
    expect(outcomeOf(res(410))).toMatchObject({ outcome: 'bounced' });
    expect(outcomeOf(res(429, { 'retry-after': '30' }))).toEqual({
      outcome: 'retryable',
      error: 'the endpoint answered 429',
      retryAfterMs: 30_000,
    });
    expect(outcomeOf(res(503))).toMatchObject({ outcome: 'retryable' });
    expect(outcomeOf(res(404))).toMatchObject({ outcome: 'failed' });
    expect(failureOf(new OutboundError('blocked_by_policy', 'refused'))).toMatchObject({ outcome: 'failed' });
    expect(failureOf(new OutboundError('timeout', 'slow', { sent: true }))).toEqual({
      outcome: 'retryable',
      error: 'the request failed (timeout)',
    });
  });
});
