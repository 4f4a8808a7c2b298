import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/domain/common/clock.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { startHttpSink, type HttpSink } from '../support/peers/http-sink.js';
import { startSlack, type SlackPeer } from '../support/peers/slack.js';
import { waitFor } from '../support/wait.js';

/**
 * An event endpoint Herald disables (410 Gone, or failing for 3 days) is told to the Slack admins:
 * a direct message to each of HERALD_SLACK_ADMINS and a post in HERALD_SLACK_CHANNEL, once per
 * disable although two workers send events (docs/events.md). Through real Heralds (API and two
 * workers on the same keys) and the Slack fake; the clock moves only when the test says so.
 */
const ADMINS = ['UALICE', 'UBOB'];
const CHANNEL = 'COPS';
let offsetMs = 0;
const clock: Clock = { now: () => new Date(Date.now() + offsetMs) };

let slack: SlackPeer;
let sink: HttpSink;
let h: TestHerald;
let second: TestHerald;
beforeAll(async () => {
  slack = await startSlack();
  sink = await startHttpSink({ respond: (r) => ({ status: r.path === '/gone' ? 410 : r.path === '/ok' ? 200 : 500 }) });
  const env = {
    SLACK_SIGNING_SECRET: 'slack-signing-secret-for-admin-notices',
    SLACK_BOT_TOKEN: 'xoxb-test',
    SLACK_API_URL: slack.apiUrl,
    HERALD_SLACK_ADMINS: ADMINS.join(','),
    HERALD_SLACK_CHANNEL: CHANNEL,
    HERALD_RATE_LIMIT: '100000',
  };
  h = await startHerald(env, { worker: true, clock });
  // A second worker on the same keys: both dispatch events, and either may disable an endpoint.
  second = await startHerald(
    { ...env, HERALD_KEY_PREFIX: h.prefix, HERALD_SECRET_KEY: h.secretKey },
    { worker: true, clock },
  );
}, 60_000);
afterAll(async () => {
  await second?.close({ keepData: true });
  await h?.close();
  await sink?.close();
  await slack?.close();
});

/** The admin notices about `endpointId`: where each went. */
const noticesOf = (endpointId: string): string[] =>
  slack
    .callsTo('chat.postMessage')
    .filter((c) => typeof c.args.text === 'string' && c.args.text.includes(endpointId))
    .map((c) => String(c.args.channel))
    .sort();

const everyone = [...ADMINS.map((u) => `D${u}`), CHANNEL].sort();

async function endpoint(path: string): Promise<string> {
  const r = await h.api('POST', '/v1/event-endpoints', {
    body: { url: `${sink.url}${path}`, event_types: ['incident.created'] },
  });
  expect(r.status, r.text).toBe(201);
  return r.body.id as string;
}

async function declare(): Promise<void> {
  const r = await h.api('POST', '/v1/incidents', { body: { title: 'Checkout errors', severity: 'minor' } });
  expect(r.status, r.text).toBe(201);
}

describe('admins are told of a disabled event endpoint', () => {
  it('410 Gone: each admin by direct message and the channel, once', { timeout: 60_000 }, async () => {
    const id = await endpoint('/gone');
    await declare();
    await waitFor(async () => (await h.api('GET', `/v1/event-endpoints/${id}`)).body.enabled === false, {
      timeoutMs: 20_000,
      intervalMs: 100,
      what: 'the endpoint disabled',
    });
    await waitFor(() => noticesOf(id).length >= everyone.length, {
      timeoutMs: 20_000,
      intervalMs: 100,
      what: 'the notices',
    });
    expect(noticesOf(id)).toEqual(everyone);
    const text = String(
      slack.callsTo('chat.postMessage').find((c) => c.args.channel === CHANNEL && String(c.args.text).includes(id))!
        .args.text,
    );
    expect(text).toContain('410 Gone');
    // The host is named, never the URL (a path or query may hold a token).
    expect(text).not.toContain('/gone');
    // More events come and go (the endpoint is disabled; another one sees them): no second notice.
    await endpoint('/ok');
    await declare();
    await declare();
    await waitFor(() => sink.requests.filter((r) => r.path === '/ok').length >= 2, {
      timeoutMs: 20_000,
      intervalMs: 100,
      what: 'the later events',
    });
    expect(noticesOf(id)).toEqual(everyone);
  });

  it('failing for 3 days: disabled at the first failure after 3 days, told once', { timeout: 60_000 }, async () => {
    const id = await endpoint('/failing');
    await declare();
    await waitFor(
      async () => (await h.api('GET', `/v1/event-endpoints/${id}/deliveries`)).body.data[0]?.attempts.length >= 1,
      {
        timeoutMs: 20_000,
        intervalMs: 100,
        what: 'the first failed attempt',
      },
    );
    expect((await h.api('GET', `/v1/event-endpoints/${id}`)).body.enabled).toBe(true);
    offsetMs += 3 * 86_400_000 + 60_000;
    await declare();
    await waitFor(async () => (await h.api('GET', `/v1/event-endpoints/${id}`)).body.disabled_reason === 'failing', {
      timeoutMs: 20_000,
      intervalMs: 100,
      what: 'the endpoint disabled as failing',
    });
    await waitFor(() => noticesOf(id).length >= everyone.length, {
      timeoutMs: 20_000,
      intervalMs: 100,
      what: 'the notices',
    });
    expect(noticesOf(id)).toEqual(everyone);
    expect(
      String(slack.callsTo('chat.postMessage').find((c) => String(c.args.text).includes(id))!.args.text),
    ).toContain('failed for 3 days');
  });
});
