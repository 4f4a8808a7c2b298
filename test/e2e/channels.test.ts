import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { OutboundAllow } from '../../src/domain/connection/address-policy.js';
import { createSmtpClient } from '../../src/channels/email/send.js';
import { createChannelSenders, loadChannelAdapters } from '../../src/delivery/senders.js';
import { createOutboundHttp } from '../../src/delivery/outbound/http.js';
import type { ChannelSenders, SendResult } from '../../src/ports/index.js';
import { messageOf, targetOf } from '../support/delivery-targets.js';
import { startDiscord } from '../support/peers/discord.js';
import { startGoogleChat } from '../support/peers/google-chat.js';
import { startHttpSink } from '../support/peers/http-sink.js';
import { startMattermost } from '../support/peers/mattermost.js';
import { startSlack } from '../support/peers/slack.js';
import { OUTAGE_MAIL, receivedOutageMail, startSmtp } from '../support/peers/smtp.js';
import { startTeams } from '../support/peers/teams.js';
import { startTelegram } from '../support/peers/telegram.js';
import { startWebhookReceiver } from '../support/peers/webhook-receiver.js';
import { trackPeers } from '../support/track.js';

/**
 * Every channel sender against its local platform peer, over real sockets and Herald's guarded
 * outbound client: the payload each platform gets, and how each answer maps to a SendResult.
 */

const allow = OutboundAllow.parse(['127.0.0.1/32', 'localhost']);
const adapters = await loadChannelAdapters();

function senders(
  o: {
    slackApiUrl?: string;
    telegramApiUrl?: string;
    ca?: string | null;
    socketTimeoutMs?: number;
    allowList?: OutboundAllow;
  } = {},
): ChannelSenders {
  const slackApiUrl = o.slackApiUrl ?? 'https://slack.invalid/api/';
  const telegramApiUrl = o.telegramApiUrl ?? 'https://telegram.invalid';
  const http = createOutboundHttp(o.allowList ?? allow, {
    trustedBaseUrls: [slackApiUrl, telegramApiUrl],
    defaultTimeoutMs: 5_000,
  });
  const smtp = createSmtpClient({
    guard: http.guard,
    ...(o.ca ? { ca: o.ca } : {}),
    ...(o.socketTimeoutMs ? { socketTimeoutMs: o.socketTimeoutMs } : {}),
  });
  const built = createChannelSenders(adapters, { http, slackApiUrl, telegramApiUrl, smtp });
  // What app.ts does: the set is the ChannelSenders port.
  const port: ChannelSenders = built;
  expect(port).toBe(built);
  return built;
}

const track = trackPeers();

function expectPermanent(r: SendResult, disable: boolean) {
  expect(r.outcome).toBe('permanent');
  if (r.outcome === 'permanent') expect(r.disable !== null).toBe(disable);
}

describe('slack', () => {
  it('webhook mode posts Block Kit with a text fallback, username and icon', async () => {
    const slack = track(await startSlack());
    const target = targetOf('slack', {
      webhook_url: slack.webhookUrl(),
      username: 'Herald',
      icon_emoji: ':rotating_light:',
    });
    const r = await senders().slack.send(target, messageOf({ subject: 'DB down', body: 'primary is *gone*' }));
    expect(r).toMatchObject({ outcome: 'delivered', httpStatus: 200 });
    expect(slack.webhookMessages).toHaveLength(1);
    expect(slack.webhookMessages[0]!.payload).toEqual({
      text: 'DB down\n\nprimary is *gone*',
      blocks: [
        { type: 'section', text: { type: 'mrkdwn', text: '*DB down*' } },
        { type: 'section', text: { type: 'mrkdwn', text: 'primary is *gone*' } },
      ],
      username: 'Herald',
      icon_emoji: ':rotating_light:',
    });
  });

  it('bot mode calls chat.postMessage with the bearer token and the channel', async () => {
    const slack = track(await startSlack({ tokens: ['xoxb-good-token'] }));
    const target = targetOf('slack', { bot_token: 'xoxb-good-token', channel: 'C0INCIDENTS' });
    const r = await senders({ slackApiUrl: slack.apiUrl }).slack.send(
      target,
      messageOf({ subject: 'DB down', body: 'gone' }),
    );
    expect(r).toMatchObject({ outcome: 'delivered', httpStatus: 200, providerCode: null });
    const [call] = slack.callsTo('chat.postMessage');
    expect(call).toMatchObject({ token: 'xoxb-good-token', args: { channel: 'C0INCIDENTS', text: 'DB down\n\ngone' } });
    expect(call!.args.blocks).toHaveLength(2);
  });

  it('splits a long body into sections of at most 3,000 characters and cuts it within Slack’s ~12,000 with a marker and a link', async () => {
    const slack = track(await startSlack());
    const paragraph = `${'word '.repeat(199)}end.`; // 1,000 characters
    const body = Array.from({ length: 45 }, () => paragraph).join('\n\n'); // ~45,090
    const message = messageOf({ subject: 'Long', body });
    const url = 'https://herald.example.com/v1/incidents/inc_1';
    const r = await senders().slack.send(targetOf('slack', { webhook_url: slack.webhookUrl() }), {
      ...message,
      incident: { ...message.incident, url },
    });
    expect(r.outcome).toBe('delivered');
    const p = slack.webhookMessages[0]!.payload as { text: string; blocks: { text: { text: string } }[] };
    const blocksText = p.blocks.reduce((n, b) => n + b.text.text.length, 0);
    expect(blocksText).toBeLessThanOrEqual(12_000);
    expect(blocksText).toBeGreaterThan(10_000);
    expect(p.text.length).toBeLessThanOrEqual(12_000);
    expect(p.blocks.length).toBeGreaterThan(3);
    for (const b of p.blocks) expect(b.text.text.length).toBeLessThanOrEqual(3000);
    expect(p.blocks.at(-1)!.text.text.endsWith(`… (truncated) Full text: <${url}|the incident>`)).toBe(true);
    expect(p.text.endsWith(`<${url}|the incident>`)).toBe(true);
  });

  it('two 10,000-character fields of emoji stay within Slack’s limits, cut between whole characters', async () => {
    const slack = track(await startSlack());
    const field = '👩‍💻 <&> '.repeat(1000).slice(0, 10_000);
    const r = await senders().slack.send(
      targetOf('slack', { webhook_url: slack.webhookUrl() }),
      messageOf({ subject: '🇺🇦'.repeat(100), body: `${field}\n\n${field}` }),
    );
    expect(r.outcome).toBe('delivered');
    // The fake refuses (and records) anything over Slack's limits; nothing was.
    expect(slack.violations).toEqual([]);
    const p = slack.webhookMessages[0]!.payload as { text: string; blocks: { text: { text: string } }[] };
    expect(p.blocks.at(-1)!.text.text).toContain('… (truncated)');
    expect(JSON.stringify(p)).not.toMatch(/\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])/i);
  });

  it('an empty message fails for good before anything is sent', async () => {
    const slack = track(await startSlack());
    const r = await senders().slack.send(
      targetOf('slack', { webhook_url: slack.webhookUrl() }),
      messageOf({ subject: '', body: ' \n ' }),
    );
    expect(r).toMatchObject({ outcome: 'permanent', httpStatus: null, providerCode: 'empty_message' });
    if (r.outcome === 'permanent') expect(r.error).toMatch(/renders empty/);
    expect(slack.requests).toHaveLength(0);
  });

  it('webhook answers: 429 retry-after, 500, 400 no_text, 404 no_service and 410 channel_is_archived', async () => {
    const slack = track(await startSlack());
    const s = senders().slack;
    const target = (path?: string) => targetOf('slack', { webhook_url: slack.webhookUrl(path) });

    slack.rateLimitNext('webhook', 7);
    expect(await s.send(target(), messageOf())).toMatchObject({
      outcome: 'retryable',
      httpStatus: 429,
      retryAfterMs: 7000,
      ambiguous: false,
      cause: 'rate_limited',
    });

    slack.script({ status: 500, body: 'rollup_error', headers: { 'content-type': 'text/html' } });
    expect(await s.send(target(), messageOf())).toMatchObject({
      outcome: 'retryable',
      httpStatus: 500,
      providerCode: 'rollup_error',
      retryAfterMs: null,
    });

    slack.script({ status: 400, body: 'no_text', headers: { 'content-type': 'text/html' } });
    const empty = await s.send(target(), messageOf());
    expect(empty).toMatchObject({ outcome: 'permanent', httpStatus: 400, providerCode: 'no_text' });
    expectPermanent(empty, false);

    slack.setWebhookState('T1/B1/removed', 'removed');
    const removed = await s.send(target('T1/B1/removed'), messageOf());
    expect(removed).toMatchObject({ outcome: 'permanent', httpStatus: 404, providerCode: 'no_service' });
    expectPermanent(removed, true);

    slack.setWebhookState('T1/B1/archived', 'archived');
    const archived = await s.send(target('T1/B1/archived'), messageOf());
    expect(archived).toMatchObject({ outcome: 'permanent', httpStatus: 410, providerCode: 'channel_is_archived' });
    expectPermanent(archived, true);
    // The secret URL never appears in what is recorded; the host does.
    const error = archived.outcome === 'permanent' ? `${archived.error} ${archived.disable}` : '';
    expect(error).not.toContain('/services/');
    expect(error).toContain('127.0.0.1');
  });

  it('Web API answers: invalid_auth and channel_not_found are permanent, ratelimited and internal_error retryable, 404 never disables', async () => {
    const slack = track(await startSlack({ tokens: ['xoxb-good-token'] }));
    const s = senders({ slackApiUrl: slack.apiUrl }).slack;
    const good = targetOf('slack', { bot_token: 'xoxb-good-token', channel: 'C1' });

    const badToken = await s.send(targetOf('slack', { bot_token: 'xoxb-revoked-token', channel: 'C1' }), messageOf());
    expect(badToken).toMatchObject({
      outcome: 'permanent',
      httpStatus: 200,
      providerCode: 'invalid_auth',
      cause: 'auth',
    });
    expect(badToken.outcome === 'permanent' && badToken.error).not.toContain('xoxb-revoked-token');

    slack.failNext('chat.postMessage', 'channel_not_found');
    expect(await s.send(good, messageOf())).toMatchObject({
      outcome: 'permanent',
      providerCode: 'channel_not_found',
      disable: null,
      cause: 'not_found',
    });

    slack.rateLimitNext('chat.postMessage', 3);
    expect(await s.send(good, messageOf())).toMatchObject({
      outcome: 'retryable',
      httpStatus: 429,
      providerCode: 'ratelimited',
      retryAfterMs: 3000,
    });

    slack.failNext('chat.postMessage', 'internal_error');
    expect(await s.send(good, messageOf())).toMatchObject({ outcome: 'retryable', providerCode: 'internal_error' });

    slack.script({ match: '/api/chat.postMessage', status: 404, body: 'not found' });
    expect(await s.send(good, messageOf())).toMatchObject({ outcome: 'permanent', httpStatus: 404, disable: null });
  });
});

describe('teams', () => {
  it('posts an Adaptive Card 1.4 in the message envelope; 202 is delivered', async () => {
    const teams = track(await startTeams());
    const r = await senders().teams.send(
      targetOf('teams', { webhook_url: teams.webhookUrl() }),
      messageOf({ subject: 'DB down', body: 'primary is gone' }),
    );
    expect(r).toMatchObject({ outcome: 'delivered', httpStatus: 202 });
    expect(teams.messages[0]).toEqual({
      type: 'message',
      attachments: [
        {
          contentType: 'application/vnd.microsoft.card.adaptive',
          contentUrl: null,
          content: {
            $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
            type: 'AdaptiveCard',
            version: '1.4',
            body: [
              { type: 'TextBlock', text: 'DB down', weight: 'Bolder', size: 'Medium', wrap: true },
              { type: 'TextBlock', text: 'primary is gone', wrap: true },
            ],
            msteams: { width: 'Full' },
          },
        },
      ],
    });
  });

  it('fails a card over 28 KB before sending, and a 404 workflow disables', async () => {
    const teams = track(await startTeams());
    const s = senders().teams;
    const big = await s.send(
      targetOf('teams', { webhook_url: teams.webhookUrl() }),
      messageOf({ body: 'x'.repeat(29 * 1024) }),
    );
    expect(big).toMatchObject({ outcome: 'permanent', httpStatus: null, disable: null });
    expect(big.outcome === 'permanent' && big.error).toContain('payload too large for Teams (28 KB)');
    expect(teams.requests).toHaveLength(0);

    const gone = await s.send(
      targetOf('teams', { webhook_url: `${teams.url}/workflows/x/triggers/other` }),
      messageOf(),
    );
    expect(gone).toMatchObject({ outcome: 'permanent', httpStatus: 404, providerCode: 'WorkflowNotFound' });
    expectPermanent(gone, true);
  });
});

describe('discord', () => {
  it('executes with wait=true and thread_id: one embed, no mentions parsed', async () => {
    const discord = track(await startDiscord());
    const target = targetOf('discord', {
      webhook_url: discord.webhookUrl(),
      username: 'Herald',
      avatar_url: 'https://herald.example.com/a.png',
      thread_id: '1200000000000000001',
    });
    const r = await senders().discord.send(
      target,
      messageOf({ subject: 'DB down', body: 'primary is gone @everyone' }),
    );
    expect(r).toMatchObject({ outcome: 'delivered', httpStatus: 200 });
    expect(discord.requests[0]!.query).toEqual({ wait: 'true', thread_id: '1200000000000000001' });
    const [msg] = discord.messages;
    expect(msg!.threadId).toBe('1200000000000000001');
    expect(msg!.payload).toMatchObject({
      username: 'Herald',
      avatar_url: 'https://herald.example.com/a.png',
      allowed_mentions: { parse: [] },
      embeds: [
        {
          title: 'DB down',
          description: 'primary is gone @everyone',
          color: 0xd92d20,
          url: 'https://herald.example.com/v1/incidents/inc_01J000000000000000000000IN',
        },
      ],
    });
    expect((msg!.payload.embeds as { timestamp: string }[])[0]!.timestamp).toMatch(/^\d{4}-\d\d-\d\dT.*Z$/);
  });

  it("cuts title and description to Discord's limits with a visible marker", async () => {
    const discord = track(await startDiscord());
    await senders().discord.send(
      targetOf('discord', { webhook_url: discord.webhookUrl() }),
      messageOf({ subject: 'S'.repeat(300), body: 'B'.repeat(5000) }),
    );
    const embed = (discord.messages[0]!.payload.embeds as { title: string; description: string }[])[0]!;
    expect(embed.title).toHaveLength(256);
    expect(embed.title.endsWith('… (truncated)')).toBe(true);
    expect(embed.description).toHaveLength(4096);
    expect(embed.description.endsWith('… (truncated)')).toBe(true);
  });

  it('429 uses the JSON retry_after (seconds, float); a deleted webhook disables; a redirect is permanent', async () => {
    const discord = track(await startDiscord());
    const s = senders().discord;
    const target = targetOf('discord', { webhook_url: discord.webhookUrl('55') });
    discord.rateLimitNext(1.5);
    expect(await s.send(target, messageOf())).toMatchObject({
      outcome: 'retryable',
      httpStatus: 429,
      retryAfterMs: 1500,
    });

    discord.script({ status: 502, body: { message: 'bad gateway' } });
    expect(await s.send(target, messageOf())).toMatchObject({ outcome: 'retryable', httpStatus: 502 });

    discord.script({ status: 301, headers: { location: 'https://elsewhere.example/hook' } });
    const moved = await s.send(target, messageOf());
    expect(moved).toMatchObject({ outcome: 'permanent', httpStatus: 301, disable: null });

    discord.deleteWebhook('55');
    const gone = await s.send(target, messageOf());
    expect(gone).toMatchObject({ outcome: 'permanent', httpStatus: 404, providerCode: '10015' });
    expectPermanent(gone, true);
  });
});

describe('mattermost', () => {
  it('posts **subject** and body with channel and username; cuts at 16,383 with a marker', async () => {
    const mm = track(await startMattermost());
    const s = senders().mattermost;
    const target = targetOf('mattermost', { webhook_url: mm.webhookUrl(), channel: 'incidents', username: 'herald' });
    expect(await s.send(target, messageOf({ subject: 'DB down', body: 'gone' }))).toMatchObject({
      outcome: 'delivered',
      httpStatus: 200,
    });
    expect(mm.messages[0]).toEqual({ text: '**DB down**\n\ngone', channel: 'incidents', username: 'herald' });

    await s.send(target, messageOf({ body: 'y'.repeat(20_000) }));
    const text = mm.messages[1]!.text as string;
    expect(text).toHaveLength(16_383);
    expect(text.endsWith('… (truncated)')).toBe(true);
  });

  it('400 is permanent and 404 disables', async () => {
    const mm = track(await startMattermost());
    const s = senders().mattermost;
    const empty = await s.send(
      targetOf('mattermost', { webhook_url: mm.webhookUrl() }),
      messageOf({ subject: '', body: '' }),
    );
    expect(empty).toMatchObject({
      outcome: 'permanent',
      httpStatus: 400,
      providerCode: 'web.incoming_webhook.text.app_error',
    });
    expectPermanent(empty, false);
    mm.script({ status: 404, body: { id: 'web.incoming_webhook.invalid.app_error', message: 'Invalid webhook.' } });
    expectPermanent(await s.send(targetOf('mattermost', { webhook_url: mm.webhookUrl() }), messageOf()), true);
  });
});

describe('google chat', () => {
  it('sends requestId = delivery id (a retry creates nothing new) and threads by thread_key', async () => {
    const chat = track(await startGoogleChat());
    const s = senders().google_chat;
    const target = targetOf('google_chat', { webhook_url: chat.webhookUrl(), thread_key: 'inc-42' });
    const message = messageOf({ subject: 'DB down', body: 'gone' });
    expect(await s.send(target, message)).toMatchObject({ outcome: 'delivered', httpStatus: 200 });
    expect(await s.send(target, message)).toMatchObject({ outcome: 'delivered' });
    expect(chat.requests).toHaveLength(2);
    expect(chat.requests[0]!.query).toEqual({
      key: 'heraldTestKey',
      token: 'heraldTestToken',
      requestId: message.deliveryId,
      threadKey: 'inc-42',
      messageReplyOption: 'REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD',
    });
    expect(chat.messages).toHaveLength(1);
    expect(chat.messages[0]).toMatchObject({
      text: '*DB down*\n\ngone',
      requestId: message.deliveryId,
      thread: { threadKey: 'inc-42' },
    });
  });

  it('cuts at 4,096 with a marker; 429 is retryable; a missing space disables', async () => {
    const chat = track(await startGoogleChat());
    const s = senders().google_chat;
    const target = targetOf('google_chat', { webhook_url: chat.webhookUrl() });
    await s.send(target, messageOf({ body: 'z'.repeat(5000) }));
    expect(chat.messages[0]!.text).toHaveLength(4096);
    expect(chat.messages[0]!.text.endsWith('… (truncated)')).toBe(true);
    expect(chat.requests[0]!.query.threadKey).toBeUndefined();

    chat.rateLimitNext();
    expect(await s.send(target, messageOf())).toMatchObject({
      outcome: 'retryable',
      httpStatus: 429,
      providerCode: 'RESOURCE_EXHAUSTED',
    });

    const gone = await s.send(
      targetOf('google_chat', { webhook_url: `${chat.url}/v1/spaces/X/gone?key=k&token=t` }),
      messageOf(),
    );
    expect(gone).toMatchObject({ outcome: 'permanent', httpStatus: 404, providerCode: 'NOT_FOUND' });
    expectPermanent(gone, true);
  });
});

describe('telegram', () => {
  const token = '123456789:AAbbCCddEEffGGhhIIjjKKllMMnn';

  it('calls sendMessage with chat_id, text, parse_mode and no link previews', async () => {
    const tg = track(await startTelegram());
    const s = senders({ telegramApiUrl: tg.url }).telegram;
    const r = await s.send(
      targetOf('telegram', { bot_token: token, chat_id: -1001234, parse_mode: 'HTML' }),
      messageOf({ subject: 'DB down', body: 'primary &lt;db1&gt; gone' }),
    );
    expect(r).toMatchObject({ outcome: 'delivered', httpStatus: 200 });
    expect(tg.calls[0]).toMatchObject({ token, method: 'sendMessage' });
    expect(tg.calls[0]!.args).toEqual({
      chat_id: -1001234,
      text: '<b>DB down</b>\n\nprimary &lt;db1&gt; gone',
      parse_mode: 'HTML',
      disable_web_page_preview: true,
    });
  });

  it('cuts plain text at 4,096 with a marker, but fails formatted text over the limit before sending', async () => {
    const tg = track(await startTelegram());
    const s = senders({ telegramApiUrl: tg.url }).telegram;
    expect(
      await s.send(
        targetOf('telegram', { bot_token: token, chat_id: '@incidents' }),
        messageOf({ body: 'q'.repeat(5000) }),
      ),
    ).toMatchObject({ outcome: 'delivered' });
    expect(tg.messages[0]!.text).toHaveLength(4096);
    expect(tg.messages[0]!.text.endsWith('… (truncated)')).toBe(true);

    const formatted = await s.send(
      targetOf('telegram', { bot_token: token, chat_id: '@incidents', parse_mode: 'MarkdownV2' }),
      messageOf({ body: 'q'.repeat(5000) }),
    );
    expect(formatted).toMatchObject({ outcome: 'permanent', httpStatus: null });
    expect(tg.requests).toHaveLength(1);
  });

  it('429 reads parameters.retry_after; a refused token is permanent and never named in the error', async () => {
    const tg = track(await startTelegram({ tokens: [token] }));
    const s = senders({ telegramApiUrl: tg.url }).telegram;
    tg.rateLimitNext('sendMessage', 3);
    expect(await s.send(targetOf('telegram', { bot_token: token, chat_id: 1 }), messageOf())).toMatchObject({
      outcome: 'retryable',
      httpStatus: 429,
      retryAfterMs: 3000,
      providerCode: '429',
    });

    const other = '987654321:ZZyyXXwwVVuuTTssRRqqPPoo';
    const bad = await s.send(targetOf('telegram', { bot_token: other, chat_id: 1 }), messageOf());
    expect(bad).toMatchObject({
      outcome: 'permanent',
      httpStatus: 401,
      providerCode: '401',
      disable: null,
      cause: 'auth',
    });
    expect(JSON.stringify(bad)).not.toContain(other);

    tg.script({ status: 400, body: { ok: false, error_code: 400, description: 'Bad Request: chat not found' } });
    expect(await s.send(targetOf('telegram', { bot_token: token, chat_id: 1 }), messageOf())).toMatchObject({
      outcome: 'permanent',
      httpStatus: 400,
      disable: null,
    });

    tg.script({ status: 500, body: { ok: false, error_code: 500, description: 'Internal Server Error' } });
    expect(await s.send(targetOf('telegram', { bot_token: token, chat_id: 1 }), messageOf())).toMatchObject({
      outcome: 'retryable',
      httpStatus: 500,
    });
  });
});

describe('webhook', () => {
  const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;

  it('signs per Standard Webhooks (verified by the receiver) with a webhook-id stable across retries', async () => {
    const rx = track(await startWebhookReceiver({ secret }));
    const s = senders().webhook;
    const target = targetOf('webhook', {
      url: `${rx.url}/hooks/herald`,
      secret,
      headers: { 'X-Api-Key': 'k-123456789' },
    });
    const message = messageOf({ subject: 'DB down', body: 'gone' });
    expect(await s.send(target, message)).toMatchObject({ outcome: 'delivered', httpStatus: 200 });
    expect(await s.send(target, message)).toMatchObject({ outcome: 'delivered' });
    const [first, second] = rx.requests;
    expect(first).toMatchObject({ verified: true, webhookId: message.deliveryId, duplicate: false });
    expect(second).toMatchObject({ verified: true, webhookId: message.deliveryId, duplicate: true });
    expect(first!.headers['x-api-key']).toBe('k-123456789');
    expect(first!.headers['content-type']).toBe('application/json');
    expect(first!.headers['webhook-timestamp']).toMatch(/^\d{10}$/);
    expect(first!.body).toEqual({
      type: 'incident.executed',
      test: false,
      delivery_id: message.deliveryId,
      execution_id: message.executionId,
      incident_id: message.incident.id,
      sequence: null,
      previous_delivery_id: null,
      target_delivery_id: null,
      incident: message.incident,
      subject: 'DB down',
      body: 'gone',
      timestamp: expect.stringMatching(/Z$/),
    });
  });

  it('a wrong secret is refused by the receiver (401, permanent, no disable); 410 disables; oversize never leaves', async () => {
    const rx = track(await startWebhookReceiver({ secret }));
    const s = senders().webhook;
    const wrong = await s.send(
      targetOf('webhook', { url: rx.url, secret: `whsec_${Buffer.alloc(32, 9).toString('base64')}` }),
      messageOf(),
    );
    expect(wrong).toMatchObject({ outcome: 'permanent', httpStatus: 401, disable: null });
    expect(rx.requests[0]!.verifyError).toBe('bad_signature');

    const target = targetOf('webhook', { url: rx.url, secret });
    rx.script({ status: 410 });
    expectPermanent(await s.send(target, messageOf()), true);

    const big = await s.send(target, messageOf({ body: 'w'.repeat(300 * 1024) }));
    expect(big).toMatchObject({ outcome: 'permanent', httpStatus: null, disable: null });
    expect(rx.requests).toHaveLength(2);
  });

  it('a 500 and a reset after the request are retryable, the reset ambiguous; a redirect is permanent', async () => {
    const sink = track(await startHttpSink());
    const s = senders().webhook;
    const target = targetOf('webhook', { url: `${sink.url}/in`, secret });
    sink.script(
      { status: 500 },
      { reset: true },
      { status: 302, headers: { location: 'https://elsewhere.example/' } },
      { status: 429, headers: { 'retry-after': new Date(Date.now() + 60_000).toUTCString() } },
    );
    expect(await s.send(target, messageOf())).toMatchObject({
      outcome: 'retryable',
      httpStatus: 500,
      ambiguous: false,
    });
    expect(await s.send(target, messageOf())).toMatchObject({
      outcome: 'retryable',
      httpStatus: null,
      ambiguous: true,
    });
    expect(await s.send(target, messageOf())).toMatchObject({ outcome: 'permanent', httpStatus: 302, disable: null });
    const dated = await s.send(target, messageOf());
    expect(dated.outcome === 'retryable' && dated.retryAfterMs).toBeGreaterThan(50_000);
  });

  it('the guard refuses a destination outside the allow list before connecting', async () => {
    const sink = track(await startHttpSink());
    const s = senders({ allowList: OutboundAllow.none }).webhook;
    const plain = await s.send(targetOf('webhook', { url: `${sink.url}/in`, secret }), messageOf());
    expect(plain).toMatchObject({ outcome: 'permanent', httpStatus: null, disable: null, cause: 'policy' });
    const tls = await s.send(targetOf('webhook', { url: `https://127.0.0.1:${sink.port}/in`, secret }), messageOf());
    expect(tls).toMatchObject({ outcome: 'permanent', cause: 'policy' });
    expect(tls.outcome === 'permanent' && tls.error).toMatch(/loopback/i);
    expect(sink.requests).toHaveLength(0);
  });
});

describe('email', () => {
  const base = { from: 'Herald <herald@example.com>', to: ['oncall@example.com'], cc: ['boss@example.com'] };

  it('sends multipart text+html over STARTTLS with auth (certificate verified), with a stable Message-ID', async () => {
    const smtp = track(await startSmtp({ auth: { username: 'herald', password: 's3cret-password' }, tls: 'starttls' }));
    const s = senders({ ca: smtp.cert }).email;
    const target = targetOf('email', {
      ...base,
      host: 'localhost',
      port: smtp.port,
      security: 'starttls',
      username: 'herald',
      password: 's3cret-password',
    });
    const message = messageOf({ subject: OUTAGE_MAIL.subject, body: OUTAGE_MAIL.text, html: OUTAGE_MAIL.html });
    expect(await s.send(target, message)).toMatchObject({ outcome: 'delivered', providerCode: '250' });
    expect(await s.send(target, message)).toMatchObject({ outcome: 'delivered' });
    const [a, b] = await smtp.waitForMessages(2);
    expect(a).toMatchObject(receivedOutageMail('herald'));
    expect(a!.text.trim()).toBe(OUTAGE_MAIL.text);
    expect(a!.headers.get('x-herald-delivery')).toBe(message.deliveryId);
    expect(a!.messageId).toBe(`<${message.deliveryId}.herald@example.com>`);
    expect(b!.messageId).toBe(a!.messageId);
  });

  it('implicit TLS verifies the certificate against the configured name', async () => {
    const smtp = track(await startSmtp({ tls: 'tls' }));
    expect(
      await senders({ ca: smtp.cert }).email.send(
        targetOf('email', { ...base, host: 'localhost', port: smtp.port, security: 'tls' }),
        messageOf(),
      ),
    ).toMatchObject({ outcome: 'delivered' });
    expect(smtp.messages[0]!.secure).toBe(true);
    // Without the test CA the self-signed certificate is refused (verification is never off).
    const untrusted = await senders().email.send(
      targetOf('email', { ...base, host: 'localhost', port: smtp.port, security: 'tls' }),
      messageOf(),
    );
    expect(untrusted).toMatchObject({ outcome: 'retryable', ambiguous: false });
    expect(smtp.messages).toHaveLength(1);
  });

  it('maps SMTP codes: 4xx retryable, 5xx permanent, a refused login permanent', async () => {
    const smtp = track(await startSmtp({ auth: { username: 'herald', password: 's3cret-password' } }));
    const s = senders().email;
    const target = (password: string) =>
      targetOf('email', {
        ...base,
        host: '127.0.0.1',
        port: smtp.port,
        security: 'none',
        username: 'herald',
        password,
      });

    smtp.script({ stage: 'mail', code: 451, message: 'Try again later' });
    expect(await s.send(target('s3cret-password'), messageOf())).toMatchObject({
      outcome: 'retryable',
      providerCode: '451',
      ambiguous: false,
    });

    // One recipient refused, the other accepted: the message went out, so it is delivered (a
    // retry would send it again to the recipient who has it).
    smtp.script({ stage: 'rcpt', code: 550, message: 'No such user' });
    expect(await s.send(target('s3cret-password'), messageOf())).toMatchObject({ outcome: 'delivered' });
    expect((await smtp.waitForMessages(1))[0]!.envelope.to).toEqual(['boss@example.com']);
    smtp.clear();

    smtp.script({ stage: 'data', code: 554, message: 'Message rejected' });
    expect(await s.send(target('s3cret-password'), messageOf())).toMatchObject({
      outcome: 'permanent',
      providerCode: '554',
      disable: null,
    });

    const login = await s.send(target('wrong-password'), messageOf());
    expect(login).toMatchObject({ outcome: 'permanent', providerCode: '535', cause: 'auth' });
    expect(JSON.stringify(login)).not.toContain('wrong-password');
    expect(smtp.messages).toHaveLength(0);
  });

  it('a refused connection is retryable; a time-out after the message was sent is ambiguous', async () => {
    const closed = await freePort();
    const refused = await senders().email.send(
      targetOf('email', { ...base, host: '127.0.0.1', port: closed, security: 'none' }),
      messageOf(),
    );
    expect(refused).toMatchObject({ outcome: 'retryable', ambiguous: false });

    const smtp = track(await startSmtp());
    smtp.script({ stage: 'data', delayMs: 3_000 });
    const slow = await senders({ socketTimeoutMs: 500 }).email.send(
      targetOf('email', { ...base, host: '127.0.0.1', port: smtp.port, security: 'none' }),
      messageOf(),
    );
    expect(slow).toMatchObject({ outcome: 'retryable', ambiguous: true });
  });

  it('a message over 256 KiB fails permanently before connecting', async () => {
    const smtp = track(await startSmtp());
    const r = await senders().email.send(
      targetOf('email', { ...base, host: '127.0.0.1', port: smtp.port, security: 'none' }),
      messageOf({ body: 'x'.repeat(200 * 1024), html: 'y'.repeat(100 * 1024) }),
    );
    expect(r).toMatchObject({ outcome: 'permanent', httpStatus: null, disable: null });
    expect(r.outcome === 'permanent' && r.error).toMatch(/256 KiB/);
    expect(smtp.messages).toHaveLength(0);
  });

  it('the guard refuses an SMTP host outside the allow list', async () => {
    const smtp = track(await startSmtp());
    const r = await senders({ allowList: OutboundAllow.none }).email.send(
      targetOf('email', { ...base, host: '127.0.0.1', port: smtp.port, security: 'none' }),
      messageOf(),
    );
    expect(r).toMatchObject({ outcome: 'permanent', cause: 'policy' });
    expect(smtp.messages).toHaveLength(0);
  });
});

describe('test messages', () => {
  it('are marked "[Herald test]" on every platform', async () => {
    const slack = track(await startSlack());
    const teams = track(await startTeams());
    const discord = track(await startDiscord());
    const mm = track(await startMattermost());
    const chat = track(await startGoogleChat());
    const tg = track(await startTelegram());
    const rx = track(await startWebhookReceiver({ acceptUnverified: true }));
    const smtp = track(await startSmtp());
    const s = senders({ telegramApiUrl: tg.url });
    const m = () => messageOf({ subject: 'Connection test', body: 'hello', test: true });
    await s.slack.send(targetOf('slack', { webhook_url: slack.webhookUrl() }), m());
    await s.teams.send(targetOf('teams', { webhook_url: teams.webhookUrl() }), m());
    await s.discord.send(targetOf('discord', { webhook_url: discord.webhookUrl() }), m());
    await s.mattermost.send(targetOf('mattermost', { webhook_url: mm.webhookUrl() }), m());
    await s.google_chat.send(targetOf('google_chat', { webhook_url: chat.webhookUrl() }), m());
    await s.telegram.send(
      targetOf('telegram', { bot_token: '1:AAAAAAAAAAAAAAAAAAAAAAAA', chat_id: 1, parse_mode: 'MarkdownV2' }),
      m(),
    );
    await s.webhook.send(
      targetOf('webhook', { url: rx.url, secret: `whsec_${Buffer.alloc(32, 1).toString('base64')}` }),
      m(),
    );
    await s.email.send(
      targetOf('email', {
        from: 'h@example.com',
        to: ['o@example.com'],
        host: '127.0.0.1',
        port: smtp.port,
        security: 'none',
      }),
      m(),
    );

    expect((slack.webhookMessages[0]!.payload as { text: string }).text).toMatch(/^\[Herald test\] Connection test/);
    expect(JSON.stringify(teams.messages[0])).toContain('[Herald test] Connection test');
    expect((discord.messages[0]!.payload.embeds as { title: string }[])[0]!.title).toBe(
      '[Herald test] Connection test',
    );
    expect(mm.messages[0]!.text).toMatch(/^\*\*\[Herald test\] Connection test\*\*/);
    expect(chat.messages[0]!.text).toMatch(/^\*\[Herald test\] Connection test\*/);
    expect(tg.messages[0]!.text).toBe('*\\[Herald test\\] Connection test*\n\nhello');
    expect(rx.requests[0]!.body).toMatchObject({
      type: 'connection.test',
      test: true,
      subject: '[Herald test] Connection test',
    });
    expect((await smtp.waitForMessages(1))[0]!.subject).toBe('[Herald test] Connection test');
  });
});

/** A port nothing listens on (bound, then released). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
