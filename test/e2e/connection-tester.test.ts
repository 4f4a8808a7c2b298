import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OutboundAllow } from '../../src/domain/connection/address-policy.js';
import { ConnectionTestResultSchema, type ConnectionTestResult } from '../../src/domain/connection/connection.js';
import { createSmtpClient } from '../../src/channels/email/send.js';
import { createChannelSenders, loadChannelAdapters } from '../../src/delivery/senders.js';
import { createConnectionTester } from '../../src/delivery/connection-tester.js';
import { createOutboundHttp } from '../../src/delivery/outbound/http.js';
import type { Resolver } from '../../src/delivery/outbound/guard.js';
import type { ConnectionTester } from '../../src/ports/index.js';
import { targetOf } from '../support/delivery-targets.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { startDiscord } from '../support/peers/discord.js';
import { startGoogleChat } from '../support/peers/google-chat.js';
import { startHttpSink } from '../support/peers/http-sink.js';
import { startMattermost } from '../support/peers/mattermost.js';
import { startSlack } from '../support/peers/slack.js';
import { startSmtp } from '../support/peers/smtp.js';
import { startTeams } from '../support/peers/teams.js';
import { startTelegram } from '../support/peers/telegram.js';
import { startWebhookReceiver } from '../support/peers/webhook-receiver.js';
import { trackPeers } from '../support/track.js';

/**
 * The connection tester against the platform peers: the read-only checks (Slack auth.test,
 * Discord GET webhook, Telegram getMe, SMTP verify), marked test messages, and the guard's
 * pre-flight. Then once through POST /v1/connections/{id}/test to prove the wiring.
 */

const allow = OutboundAllow.parse(['127.0.0.1/32', 'localhost']);
const fixedNow = new Date();

function testerFor(
  o: {
    slackApiUrl?: string;
    telegramApiUrl?: string;
    ca?: string | null;
    allowList?: OutboundAllow;
    resolver?: Resolver;
  } = {},
): ConnectionTester {
  const slackApiUrl = o.slackApiUrl ?? 'https://slack.invalid/api/';
  const telegramApiUrl = o.telegramApiUrl ?? 'https://telegram.invalid';
  const http = createOutboundHttp(o.allowList ?? allow, {
    trustedBaseUrls: [slackApiUrl, telegramApiUrl],
    ...(o.resolver ? { resolver: o.resolver } : {}),
  });
  const smtp = createSmtpClient({ guard: http.guard, ...(o.ca ? { ca: o.ca } : {}) });
  const deps = { http, slackApiUrl, telegramApiUrl };
  return createConnectionTester({
    ...deps,
    adapters,
    senders: createChannelSenders(adapters, { ...deps, smtp }),
    smtp,
    clock: { now: () => fixedNow },
  });
}

const track = trackPeers();
const adapters = await loadChannelAdapters();

/** Every result is a valid ConnectionTestResult, checked_at from the injected clock. */
function valid(r: ConnectionTestResult): ConnectionTestResult {
  expect(ConnectionTestResultSchema.parse(r)).toEqual(r);
  expect(r.checked_at).toBe(fixedNow.toISOString());
  return r;
}

describe('read-only checks', () => {
  it('slack bot mode: auth.test ok, a revoked token auth_failed, rate limited', async () => {
    const slack = track(await startSlack({ tokens: ['xoxb-good-token'] }));
    const tester = testerFor({ slackApiUrl: slack.apiUrl });
    const good = targetOf('slack', { bot_token: 'xoxb-good-token', channel: 'C1' });
    const ok = valid(await tester.test(good, { sendMessage: false }));
    expect(ok).toMatchObject({ ok: true, status: 'ok', method: 'auth.test', sent_message: false, http_status: 200 });
    expect(ok.latency_ms).toBeGreaterThanOrEqual(0);
    expect(slack.callsTo('auth.test')[0]!.token).toBe('xoxb-good-token');
    expect(slack.callsTo('chat.postMessage')).toHaveLength(0);

    const bad = valid(
      await tester.test(targetOf('slack', { bot_token: 'xoxb-revoked-token', channel: 'C1' }), { sendMessage: false }),
    );
    expect(bad).toMatchObject({ ok: false, status: 'auth_failed', method: 'auth.test', provider_code: 'invalid_auth' });
    expect(bad.detail).not.toContain('xoxb-revoked-token');

    slack.rateLimitNext('auth.test', 5);
    expect(await tester.test(good, { sendMessage: false })).toMatchObject({
      ok: false,
      status: 'rate_limited',
      http_status: 429,
    });
  });

  it('discord: GET the webhook; a deleted one is not_found, a bad token auth_failed', async () => {
    const discord = track(await startDiscord());
    const tester = testerFor();
    const target = targetOf('discord', { webhook_url: discord.webhookUrl('77') });
    expect(valid(await tester.test(target, { sendMessage: false }))).toMatchObject({
      ok: true,
      status: 'ok',
      method: 'get_webhook',
      http_status: 200,
    });
    expect(discord.requests[0]!.method).toBe('GET');
    expect(discord.messages).toHaveLength(0);

    discord.script({ status: 401, body: { message: 'Invalid Webhook Token', code: 50027 } });
    expect(await tester.test(target, { sendMessage: false })).toMatchObject({
      ok: false,
      status: 'auth_failed',
      http_status: 401,
      provider_code: '50027',
    });

    discord.deleteWebhook('77');
    const gone = valid(await tester.test(target, { sendMessage: false }));
    expect(gone).toMatchObject({ ok: false, status: 'not_found', http_status: 404, provider_code: '10015' });
    expect(gone.detail).not.toContain('/api/webhooks/');
  });

  it('telegram: getMe ok, an unknown token auth_failed (never named)', async () => {
    const token = '123456789:AAbbCCddEEffGGhhIIjjKKllMMnn';
    const tg = track(await startTelegram({ tokens: [token] }));
    const tester = testerFor({ telegramApiUrl: tg.url });
    const ok = valid(await tester.test(targetOf('telegram', { bot_token: token, chat_id: 5 }), { sendMessage: false }));
    expect(ok).toMatchObject({ ok: true, status: 'ok', method: 'getMe' });
    expect(ok.detail).toContain('@herald_test_bot');
    expect(tg.messages).toHaveLength(0);

    const other = '987654321:ZZyyXXwwVVuuTTssRRqqPPoo';
    const bad = valid(
      await tester.test(targetOf('telegram', { bot_token: other, chat_id: 5 }), { sendMessage: false }),
    );
    expect(bad).toMatchObject({ ok: false, status: 'auth_failed', http_status: 401 });
    expect(JSON.stringify(bad)).not.toContain(other);
  });

  it('email: SMTP verify (STARTTLS + login) ok, a wrong password auth_failed, a closed port unreachable', async () => {
    const smtp = track(await startSmtp({ auth: { username: 'herald', password: 's3cret-password' }, tls: 'starttls' }));
    const tester = testerFor({ ca: smtp.cert });
    const base = {
      from: 'herald@example.com',
      to: ['oncall@example.com'],
      host: 'localhost',
      port: smtp.port,
      security: 'starttls' as const,
      username: 'herald',
    };
    expect(
      valid(await tester.test(targetOf('email', { ...base, password: 's3cret-password' }), { sendMessage: false })),
    ).toMatchObject({ ok: true, status: 'ok', method: 'smtp_verify' });
    expect(smtp.messages).toHaveLength(0);

    const wrong = valid(
      await tester.test(targetOf('email', { ...base, password: 'not-the-password' }), { sendMessage: false }),
    );
    expect(wrong).toMatchObject({ ok: false, status: 'auth_failed', method: 'smtp_verify', provider_code: '535' });
    expect(wrong.detail).not.toContain('not-the-password');

    await smtp.close();
    expect(
      await tester.test(targetOf('email', { ...base, password: 's3cret-password' }), { sendMessage: false }),
    ).toMatchObject({ ok: false, status: 'unreachable' });
  });
});

describe('test messages', () => {
  it('teams answers 202: accepted_unverified, still ok', async () => {
    const teams = track(await startTeams());
    const r = valid(
      await testerFor().test(targetOf('teams', { webhook_url: teams.webhookUrl() }), { sendMessage: true }),
    );
    expect(r).toMatchObject({
      ok: true,
      status: 'accepted_unverified',
      method: 'send_message',
      sent_message: true,
      http_status: 202,
    });
    expect(JSON.stringify(teams.messages[0])).toContain('[Herald test] Connection test');
  });

  it('slack webhook, mattermost, google chat, discord, telegram, webhook and email deliver a marked message: ok', async () => {
    const slack = track(await startSlack());
    const mm = track(await startMattermost());
    const chat = track(await startGoogleChat());
    const discord = track(await startDiscord());
    const tg = track(await startTelegram());
    const secret = `whsec_${Buffer.alloc(32, 3).toString('base64')}`;
    const rx = track(await startWebhookReceiver({ secret }));
    const smtp = track(await startSmtp());
    const tester = testerFor({ telegramApiUrl: tg.url });
    const targets = [
      targetOf('slack', { webhook_url: slack.webhookUrl() }),
      targetOf('mattermost', { webhook_url: mm.webhookUrl() }),
      targetOf('google_chat', { webhook_url: chat.webhookUrl() }),
      targetOf('discord', { webhook_url: discord.webhookUrl() }),
      targetOf('telegram', { bot_token: '1:AAAAAAAAAAAAAAAAAAAAAAAA', chat_id: 9, parse_mode: 'MarkdownV2' }),
      targetOf('webhook', { url: rx.url, secret }),
      targetOf('email', {
        from: 'h@example.com',
        to: ['o@example.com'],
        host: '127.0.0.1',
        port: smtp.port,
        security: 'none',
      }),
    ];
    for (const t of targets) {
      const r = valid(await tester.test(t, { sendMessage: true }));
      expect(r, t.type).toMatchObject({ ok: true, status: 'ok', method: 'send_message', sent_message: true });
    }
    expect(slack.webhookMessages).toHaveLength(1);
    expect(mm.messages[0]!.text).toContain('[Herald test]');
    expect(chat.messages[0]!.requestId).toMatch(/^test_/);
    expect(discord.messages).toHaveLength(1);
    // MarkdownV2 reserves `[`, `]` and `.`: the marker and Herald's text are escaped for it.
    expect(tg.messages[0]!.text).toBe(
      '*\\[Herald test\\] Connection test*\n\nThis is a test message from Herald to check this connection\\. No action is needed\\.',
    );
    expect(rx.requests[0]).toMatchObject({ verified: true, body: { type: 'connection.test', test: true } });
    expect((await smtp.waitForMessages(1))[0]!.subject).toBe('[Herald test] Connection test');
  });

  it('reports a failed test message by what went wrong', async () => {
    const slack = track(await startSlack());
    const discord = track(await startDiscord());
    const sink = track(await startHttpSink());
    const tester = testerFor();
    slack.setWebhookState('T1/B1/gone', 'removed');
    expect(
      await tester.test(targetOf('slack', { webhook_url: slack.webhookUrl('T1/B1/gone') }), { sendMessage: true }),
    ).toMatchObject({
      ok: false,
      status: 'not_found',
      sent_message: false,
      http_status: 404,
      provider_code: 'no_service',
    });
    discord.rateLimitNext(2);
    expect(
      await tester.test(targetOf('discord', { webhook_url: discord.webhookUrl() }), { sendMessage: true }),
    ).toMatchObject({ ok: false, status: 'rate_limited', http_status: 429 });
    sink.script({ status: 503 }, { status: 308, headers: { location: 'https://elsewhere.example/' } });
    const secret = `whsec_${Buffer.alloc(32, 4).toString('base64')}`;
    expect(await tester.test(targetOf('webhook', { url: sink.url, secret }), { sendMessage: true })).toMatchObject({
      ok: false,
      status: 'unreachable',
      http_status: 503,
    });
    expect(await tester.test(targetOf('webhook', { url: sink.url, secret }), { sendMessage: true })).toMatchObject({
      ok: false,
      status: 'invalid_config',
      http_status: 308,
    });
  });
});

describe('the guard first', () => {
  it('a host name resolving to a refused address answers blocked_by_policy, contacting nobody', async () => {
    const sink = track(await startHttpSink());
    const resolver: Resolver = () => Promise.resolve([{ address: '127.0.0.1', family: 4 }]);
    const tester = testerFor({ allowList: OutboundAllow.none, resolver });
    const url = `https://hooks.example.test:${sink.port}/api/webhooks/1/abc`;
    for (const sendMessage of [false, true]) {
      const r = valid(await tester.test(targetOf('discord', { webhook_url: url }), { sendMessage }));
      expect(r).toMatchObject({
        ok: false,
        status: 'blocked_by_policy',
        sent_message: false,
        latency_ms: null,
        method: sendMessage ? 'send_message' : 'get_webhook',
      });
      expect(r.detail).toMatch(/loopback/);
      expect(r.detail).not.toContain('/api/webhooks/');
    }
    const smtp = valid(
      await tester.test(
        targetOf('email', {
          from: 'h@example.com',
          to: ['o@example.com'],
          host: 'mail.example.test',
          port: 25,
          security: 'none',
        }),
        { sendMessage: false },
      ),
    );
    expect(smtp).toMatchObject({ status: 'blocked_by_policy', method: 'smtp_verify' });
    expect(sink.requests).toHaveLength(0);
  });
});

describe('POST /v1/connections/{id}/test (wired in app.ts)', () => {
  let h: TestHerald;
  let slack: Awaited<ReturnType<typeof startSlack>>;
  beforeAll(async () => {
    slack = await startSlack({ tokens: ['xoxb-herald-test-token'] });
    h = await startHerald({ SLACK_API_URL: slack.apiUrl });
  });
  afterAll(async () => {
    await h?.close();
    await slack?.close();
  });

  it('runs auth.test for a bot connection and sends a marked message on request; stores last_test', async () => {
    const created = await h.api('POST', '/v1/connections', {
      body: { name: 'ops', type: 'slack', config: { bot_token: 'xoxb-herald-test-token', channel: 'C0OPS' } },
    });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const check = await h.api('POST', `/v1/connections/${id}/test`);
    expect(check.status).toBe(200);
    expect(check.body).toMatchObject({ ok: true, status: 'ok', method: 'auth.test', sent_message: false });

    const sent = await h.api('POST', `/v1/connections/${id}/test`, { body: { send_message: true } });
    expect(sent.body).toMatchObject({ ok: true, status: 'ok', method: 'send_message', sent_message: true });
    const [post] = slack.callsTo('chat.postMessage');
    expect(post!.args).toMatchObject({ channel: 'C0OPS' });
    expect(String(post!.args.text)).toMatch(/^\[Herald test\]/);
    expect((await h.api('GET', `/v1/connections/${id}`)).body.last_test).toEqual(sent.body);
  });
});
