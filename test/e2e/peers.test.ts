import { WebClient } from '@slack/web-api';
import { randomBytes } from 'node:crypto';
import nodemailer from 'nodemailer';
import { describe, expect, it } from 'vitest';
import { OutboundAllow } from '../../src/domain/connection/address-policy.js';
import { resolveGuardedSmtpHost } from '../../src/delivery/outbound/guard.js';
import { createOutboundHttp } from '../../src/delivery/outbound/http.js';
import { startDiscord } from '../support/peers/discord.js';
import { startGoogleChat } from '../support/peers/google-chat.js';
import { startHttpSink } from '../support/peers/http-sink.js';
import { startMattermost } from '../support/peers/mattermost.js';
import { startSlack } from '../support/peers/slack.js';
import { OUTAGE_MAIL, receivedOutageMail, startSmtp } from '../support/peers/smtp.js';
import { startTeams } from '../support/peers/teams.js';
import { startTelegram } from '../support/peers/telegram.js';
import { signStandardWebhook, startWebhookReceiver } from '../support/peers/webhook-receiver.js';
import { trackPeers } from '../support/track.js';

/**
 * Smoke tests of the platform peers the delivery e2e tests talk to: each one answers like its
 * platform and records what it received. Requests go through Herald's own outbound client with
 * the test-suite allow list, as deliveries will.
 */

const http = createOutboundHttp(OutboundAllow.parse(['127.0.0.1/32', '::1/128', 'localhost']));
const json = (body: unknown) => ({ headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

const track = trackPeers();

describe('http sink', () => {
  it('records requests and plays its script in order: 429, 500, redirect, slow, reset, then 200', async () => {
    const sink = track(await startHttpSink());
    sink.script(
      { status: 429, headers: { 'retry-after': '3' } },
      { status: 500, body: { error: 'boom' } },
      { status: 301, headers: { location: 'https://elsewhere.example/' } },
      { delayMs: 200, body: 'slow' },
      { reset: true },
    );
    const send = () => fetch(`${sink.url}/hook`, { method: 'POST', ...json({ n: 1 }), redirect: 'manual' });
    const r1 = await send();
    expect([r1.status, r1.headers.get('retry-after')]).toEqual([429, '3']);
    expect((await send()).status).toBe(500);
    expect((await send()).status).toBe(301);
    const t = Date.now();
    expect(await (await send()).text()).toBe('slow');
    expect(Date.now() - t).toBeGreaterThanOrEqual(150);
    await expect(send()).rejects.toThrow();
    expect((await send()).status).toBe(200);
    expect(sink.requests).toHaveLength(6);
    expect(sink.requests[0]).toMatchObject({ method: 'POST', path: '/hook', body: { n: 1 }, answered: 429 });
    expect(sink.requests[4]!.answered).toBe('reset');
    expect(sink.pendingScript()).toBe(0);
  });

  it('matches scripted replies to paths', async () => {
    const sink = track(await startHttpSink());
    sink.script({ match: '/b', status: 404 });
    expect((await fetch(`${sink.url}/a`)).status).toBe(200);
    expect((await fetch(`${sink.url}/b`)).status).toBe(404);
  });
});

describe('slack', () => {
  it('incoming webhook: ok, no_text, archived and rate limited', async () => {
    const slack = track(await startSlack());
    const ok = await http.request({ method: 'POST', url: slack.webhookUrl(), ...json({ text: 'DB down' }) });
    expect([ok.status, ok.body]).toEqual([200, 'ok']);
    const empty = await http.request({ method: 'POST', url: slack.webhookUrl(), ...json({}) });
    expect([empty.status, empty.body]).toEqual([400, 'no_text']);
    slack.setWebhookState('T1/B1/gone', 'archived');
    const gone = await http.request({ method: 'POST', url: slack.webhookUrl('T1/B1/gone'), ...json({ text: 'x' }) });
    expect([gone.status, gone.body]).toEqual([410, 'channel_is_archived']);
    slack.rateLimitNext('webhook', 2);
    const limited = await http.request({ method: 'POST', url: slack.webhookUrl(), ...json({ text: 'x' }) });
    expect([limited.status, limited.headers['retry-after']]).toEqual([429, '2']);
    expect(slack.webhookMessages.map((m) => m.payload.text)).toEqual(['DB down']);
  });

  it('Web API through the real @slack/web-api client: postMessage, auth errors, recorded calls', async () => {
    const slack = track(await startSlack({ tokens: ['xoxb-good'] }));
    const client = new WebClient('xoxb-good', { slackApiUrl: slack.apiUrl, retryConfig: { retries: 0 } });
    const posted = await client.chat.postMessage({
      channel: 'C123',
      text: 'hello',
      blocks: [{ type: 'section', text: { type: 'mrkdwn', text: '*hi*' } }],
    });
    expect(posted).toMatchObject({ ok: true, channel: 'C123' });
    expect(posted.ts).toMatch(/^\d+\.\d{6}$/);
    await expect(client.auth.test()).resolves.toMatchObject({ ok: true, team_id: 'T0HERALD' });
    const bad = new WebClient('xoxb-bad', { slackApiUrl: slack.apiUrl, retryConfig: { retries: 0 } });
    await expect(bad.auth.test()).rejects.toMatchObject({ data: { ok: false, error: 'invalid_auth' } });
    const [call] = slack.callsTo('chat.postMessage');
    expect(call).toMatchObject({
      method: 'chat.postMessage',
      token: 'xoxb-good',
      args: { channel: 'C123', text: 'hello', blocks: [{ type: 'section' }] },
    });
    slack.failNext('views.open', 'expired_trigger_id');
    await expect(
      client.views.open({
        trigger_id: 't',
        view: { type: 'modal', title: { type: 'plain_text', text: 'x' }, blocks: [] },
      }),
    ).rejects.toMatchObject({ data: { error: 'expired_trigger_id' } });
    expect(slack.calls.map((c) => c.method)).toEqual(['chat.postMessage', 'auth.test', 'auth.test', 'views.open']);
  });

  it('Web API rate limit: 429 with Retry-After', async () => {
    const slack = track(await startSlack());
    slack.rateLimitNext('chat.postMessage', 1);
    const r = await http.request({
      method: 'POST',
      url: `${slack.apiUrl}chat.postMessage`,
      headers: { authorization: 'Bearer xoxb-1', 'content-type': 'application/json' },
      body: '{"channel":"C1","text":"x"}',
    });
    expect([r.status, r.headers['retry-after'], JSON.parse(r.body)]).toEqual([
      429,
      '1',
      { ok: false, error: 'ratelimited' },
    ]);
    expect(slack.callsTo('chat.postMessage')).toHaveLength(1);
  });
});

describe('discord', () => {
  it('executes with ?wait=true (200 message), without (204), GET webhook, 429 with retry_after', async () => {
    const discord = track(await startDiscord());
    const waited = await http.request({
      method: 'POST',
      url: `${discord.webhookUrl()}?wait=true`,
      ...json({ content: 'DB down' }),
    });
    expect(waited.status).toBe(200);
    expect(JSON.parse(waited.body)).toMatchObject({ content: 'DB down', webhook_id: '1234567890123456789' });
    expect(
      (await http.request({ method: 'POST', url: discord.webhookUrl(), ...json({ content: 'again' }) })).status,
    ).toBe(204);
    const info = await http.request({ method: 'GET', url: discord.webhookUrl() });
    expect(JSON.parse(info.body)).toMatchObject({ id: '1234567890123456789', type: 1 });
    discord.rateLimitNext(1.5);
    const limited = await http.request({ method: 'POST', url: discord.webhookUrl(), ...json({ content: 'x' }) });
    expect([limited.status, limited.headers['retry-after'], JSON.parse(limited.body)]).toEqual([
      429,
      '2',
      { message: 'You are being rate limited.', retry_after: 1.5, global: false },
    ]);
    discord.deleteWebhook('1234567890123456789');
    expect((await http.request({ method: 'POST', url: discord.webhookUrl(), ...json({ content: 'x' }) })).status).toBe(
      404,
    );
    expect(discord.messages.map((m) => m.payload.content)).toEqual(['DB down', 'again']);
  });
});

describe('teams, mattermost, google chat, telegram', () => {
  it('teams Workflows webhook answers 202 Accepted', async () => {
    const teams = track(await startTeams());
    const r = await http.request({
      method: 'POST',
      url: teams.webhookUrl(),
      ...json({ type: 'message', attachments: [] }),
    });
    expect([r.status, r.body]).toEqual([202, '']);
    expect(teams.messages).toHaveLength(1);
    expect(teams.requests[0]!.query['api-version']).toBe('2016-06-01');
  });

  it('mattermost answers 200 ok', async () => {
    const mm = track(await startMattermost());
    const r = await http.request({
      method: 'POST',
      url: mm.webhookUrl(),
      ...json({ text: 'DB down', username: 'herald' }),
    });
    expect([r.status, r.body]).toEqual([200, 'ok']);
    expect(mm.messages).toEqual([{ text: 'DB down', username: 'herald' }]);
  });

  it('google chat returns the message and dedupes by requestId', async () => {
    const chat = track(await startGoogleChat());
    const url = `${chat.webhookUrl()}&requestId=dlv_1`;
    const a = await http.request({ method: 'POST', url, ...json({ text: 'DB down' }) });
    const b = await http.request({ method: 'POST', url, ...json({ text: 'DB down' }) });
    expect(a.status).toBe(200);
    expect(JSON.parse(a.body).name).toBe(JSON.parse(b.body).name);
    expect(chat.messages).toHaveLength(1);
    expect(chat.requests).toHaveLength(2);
  });

  it('telegram sendMessage, getMe, 401 and 429 with parameters.retry_after', async () => {
    const tg = track(await startTelegram({ tokens: ['123456:ABCDEFGHIJKLMNOP'] }));
    const sent = await http.request({
      method: 'POST',
      url: `${tg.url}/bot123456:ABCDEFGHIJKLMNOP/sendMessage`,
      ...json({ chat_id: -100123, text: 'DB down' }),
    });
    expect(JSON.parse(sent.body)).toMatchObject({ ok: true, result: { message_id: 1, text: 'DB down' } });
    const me = await http.request({ method: 'GET', url: `${tg.url}/bot123456:ABCDEFGHIJKLMNOP/getMe` });
    expect(JSON.parse(me.body)).toMatchObject({ ok: true, result: { id: 123456, is_bot: true } });
    const bad = await http.request({ method: 'GET', url: `${tg.url}/bot999:WRONGWRONGWRONG/getMe` });
    expect([bad.status, JSON.parse(bad.body)]).toEqual([
      401,
      { ok: false, error_code: 401, description: 'Unauthorized' },
    ]);
    tg.rateLimitNext('sendMessage', 3);
    const limited = await http.request({
      method: 'POST',
      url: `${tg.url}/bot123456:ABCDEFGHIJKLMNOP/sendMessage`,
      ...json({ chat_id: 1, text: 'x' }),
    });
    expect(limited.status).toBe(429);
    expect(JSON.parse(limited.body).parameters).toEqual({ retry_after: 3 });
    expect(tg.messages).toHaveLength(1);
    expect(tg.calls.map((c) => c.method)).toEqual(['sendMessage', 'getMe', 'getMe', 'sendMessage']);
  });
});

describe('webhook receiver (Standard Webhooks)', () => {
  it('verifies a correctly signed request and rejects a wrong signature', async () => {
    const secret = `whsec_${randomBytes(24).toString('base64')}`;
    const receiver = track(await startWebhookReceiver({ secret }));
    const body = JSON.stringify({ type: 'incident.executed', data: { id: 'inc_1' } });
    const ts = Math.floor(Date.now() / 1000);
    const headers = (sig: string) => ({
      'content-type': 'application/json',
      'webhook-id': 'dlv_1',
      'webhook-timestamp': String(ts),
      'webhook-signature': sig,
    });
    const good = await http.request({
      method: 'POST',
      url: `${receiver.url}/hooks/herald`,
      headers: headers(signStandardWebhook(secret, 'dlv_1', ts, body)),
      body,
    });
    expect(good.status).toBe(200);
    const wrongKey = `whsec_${randomBytes(24).toString('base64')}`;
    const bad = await http.request({
      method: 'POST',
      url: `${receiver.url}/hooks/herald`,
      headers: headers(signStandardWebhook(wrongKey, 'dlv_1', ts, body)),
      body,
    });
    expect(bad.status).toBe(401);
    const retry = await http.request({
      method: 'POST',
      url: `${receiver.url}/hooks/herald`,
      headers: headers(`v1,bm90LWl0 ${signStandardWebhook(secret, 'dlv_1', ts, body)}`),
      body,
    });
    expect(retry.status).toBe(200);
    expect(receiver.requests.map((r) => [r.verified, r.verifyError, r.duplicate])).toEqual([
      [true, null, false],
      [false, 'bad_signature', false],
      [true, null, true],
    ]);
  });

  it('rejects stale timestamps and missing headers', async () => {
    const secret = `whsec_${randomBytes(24).toString('base64')}`;
    const receiver = track(await startWebhookReceiver({ secret }));
    const old = Math.floor(Date.now() / 1000) - 3600;
    await http.request({
      method: 'POST',
      url: receiver.url,
      headers: {
        'webhook-id': 'a',
        'webhook-timestamp': String(old),
        'webhook-signature': signStandardWebhook(secret, 'a', old, '{}'),
      },
      body: '{}',
    });
    await http.request({ method: 'POST', url: receiver.url, body: '{}' });
    expect(receiver.requests.map((r) => r.verifyError)).toEqual(['stale_timestamp', 'missing_headers']);
  });
});

describe('smtp', () => {
  it('receives a message sent by nodemailer over STARTTLS with auth, certificate verified', async () => {
    const smtp = track(await startSmtp({ auth: { username: 'herald', password: 's3cret' }, tls: 'starttls' }));
    const target = await resolveGuardedSmtpHost('localhost', OutboundAllow.parse(['localhost']));
    const transport = nodemailer.createTransport({
      host: target.address,
      port: smtp.port,
      secure: false,
      requireTLS: true,
      auth: { user: 'herald', pass: 's3cret' },
      tls: { servername: target.servername ?? undefined, ca: smtp.cert ?? undefined },
    });
    await transport.sendMail(OUTAGE_MAIL);
    transport.close();
    const [mail] = await smtp.waitForMessages(1);
    expect(mail).toMatchObject(receivedOutageMail('herald'));
    expect(mail!.text.trim()).toBe(OUTAGE_MAIL.text);
  });

  it('speaks implicit TLS (port-465 style) and refuses a certificate for another name', async () => {
    const smtp = track(await startSmtp({ tls: 'tls' }));
    const send = (servername: string) =>
      nodemailer
        .createTransport({
          host: smtp.host,
          port: smtp.port,
          secure: true,
          tls: { servername, ca: smtp.cert ?? undefined },
        })
        .sendMail({ from: 'a@example.com', to: 'b@example.com', subject: 's', text: 't' });
    await expect(send('mail.example.com')).rejects.toThrow(/altnames|hostname/i);
    await send('localhost');
    expect(smtp.messages.map((m) => m.secure)).toEqual([true]);
  });

  it('answers scripted 4xx/5xx and rejects a wrong password (plain SMTP)', async () => {
    const smtp = track(await startSmtp({ auth: { username: 'herald', password: 's3cret' } }));
    const send = (pass: string) =>
      nodemailer
        .createTransport({
          host: smtp.host,
          port: smtp.port,
          secure: false,
          ignoreTLS: true,
          auth: { user: 'herald', pass },
        })
        .sendMail({ from: 'a@example.com', to: 'b@example.com', subject: 's', text: 't' });
    smtp.script(
      { stage: 'rcpt', code: 450, message: 'Mailbox busy' },
      { stage: 'data', code: 554, message: 'Rejected' },
    );
    await expect(send('s3cret')).rejects.toMatchObject({ responseCode: 450 });
    await expect(send('s3cret')).rejects.toMatchObject({ responseCode: 554 });
    await expect(send('wrong')).rejects.toMatchObject({ responseCode: 535 });
    expect(smtp.authFailures).toBe(1);
    await send('s3cret');
    expect(smtp.messages).toHaveLength(1);
  });
});
