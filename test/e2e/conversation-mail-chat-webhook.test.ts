import { describe, expect, it } from 'vitest';
import { OutboundAllow } from '../../src/domain/connection/address-policy.js';
import { createSmtpClient, messageIdOf } from '../../src/channels/email/send.js';
import { createChannelSenders, loadChannelAdapters } from '../../src/delivery/senders.js';
import { createOutboundHttp } from '../../src/delivery/outbound/http.js';
import type {
  ChannelSenders,
  ConversationContext,
  MessageKind,
  MessageRef,
  OutboundMessage,
  SendResult,
} from '../../src/ports/index.js';
import { messageOf, targetOf } from '../support/delivery-targets.js';
import { startGoogleChat } from '../support/peers/google-chat.js';
import { startMattermost } from '../support/peers/mattermost.js';
import { startSmtp } from '../support/peers/smtp.js';
import { startTeams } from '../support/peers/teams.js';
import { startWebhookReceiver } from '../support/peers/webhook-receiver.js';
import { trackPeers } from '../support/track.js';

/**
 * Living updates on the channels that can only post (e-mail, Google Chat, signed webhooks, Teams,
 * Mattermost), each sender against its local platform peer over real sockets: how a later
 * message of an incident joins the first one's conversation, which ref a delivered message
 * carries, and that an edit or delete is refused before anything is sent.
 */

const allow = OutboundAllow.parse(['127.0.0.1/32', 'localhost']);
const adapters = await loadChannelAdapters();
const track = trackPeers();

/** The senders as the worker builds them (test/e2e/channels.test.ts does the same). */
function senders(): ChannelSenders {
  const slackApiUrl = 'https://slack.invalid/api/';
  const telegramApiUrl = 'https://telegram.invalid';
  const http = createOutboundHttp(allow, { trustedBaseUrls: [slackApiUrl, telegramApiUrl], defaultTimeoutMs: 5_000 });
  return createChannelSenders(adapters, {
    http,
    slackApiUrl,
    telegramApiUrl,
    smtp: createSmtpClient({ guard: http.guard }),
  });
}

/** The conversation context the delivery service hands a sender for message `sequence`. */
function conversation(
  sequence: number,
  previousDeliveryId: string | null,
  over: { kind?: MessageKind; targetDeliveryId?: string | null; threaded?: boolean } = {},
): ConversationContext {
  return {
    sequence,
    previousDeliveryId,
    kind: over.kind ?? 'announcement',
    targetDeliveryId: over.targetDeliveryId ?? null,
    threaded: over.threaded ?? true,
  };
}

/** The ref of a delivered result (fails the test when it has none). */
function refOf(r: SendResult): MessageRef {
  expect(r.outcome).toBe('delivered');
  const ref = r.outcome === 'delivered' ? r.message : null;
  expect(ref).toBeTruthy();
  return ref!;
}

const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;

describe('e-mail', () => {
  const mailConfig = (port: number) => ({
    from: 'Herald <herald@example.com>',
    to: ['oncall@example.com'],
    host: '127.0.0.1',
    port,
    security: 'none' as const,
  });

  it('the 2nd and 3rd mail of an incident reply to the first (In-Reply-To, References, Re: subject), parts unchanged', async () => {
    const smtp = track(await startSmtp());
    const s = senders().email;
    const target = targetOf('email', mailConfig(smtp.port));
    const first = messageOf({
      subject: 'Database outage',
      body: 'down',
      html: '<p>down</p>',
      conversation: conversation(1, null),
    });
    const ref = refOf(await s.send(target, first));
    expect(ref).toEqual({ id: `<${first.deliveryId}.herald@example.com>`, channel: null, permalink: null });

    const second = messageOf({
      subject: 'Database outage',
      body: 'failing over',
      html: '<p>failing over</p>',
      thread: ref,
      conversation: conversation(2, first.deliveryId),
    });
    // A subject that already says Re: (any case) is not prefixed twice.
    const third = messageOf({
      subject: 'RE: Database outage',
      body: 'resolved',
      thread: ref,
      conversation: conversation(3, second.deliveryId),
    });
    expect(refOf(await s.send(target, second)).id).toBe(`<${second.deliveryId}.herald@example.com>`);
    expect(refOf(await s.send(target, third)).id).toBe(`<${third.deliveryId}.herald@example.com>`);

    const [a, b, c] = await smtp.waitForMessages(3);
    expect(a).toMatchObject({ subject: 'Database outage', messageId: ref.id, inReplyTo: null, references: [] });
    expect(b).toMatchObject({
      subject: 'Re: Database outage',
      messageId: `<${second.deliveryId}.herald@example.com>`,
      inReplyTo: a!.messageId,
      references: [a!.messageId],
      html: '<p>failing over</p>',
    });
    expect(b!.text.trim()).toBe('failing over');
    expect(c).toMatchObject({ subject: 'RE: Database outage', inReplyTo: a!.messageId, references: [a!.messageId] });
  });

  it('a retry of one delivery keeps its Message-ID (and ref); a From without a domain falls back to herald.invalid', async () => {
    const smtp = track(await startSmtp());
    const s = senders().email;
    const target = targetOf('email', mailConfig(smtp.port));
    const message = messageOf({ conversation: conversation(1, null) });
    const refs = [refOf(await s.send(target, message)), refOf(await s.send(target, message))];
    const [a, b] = await smtp.waitForMessages(2);
    expect(a!.messageId).toBe(`<${message.deliveryId}.herald@example.com>`);
    expect(b!.messageId).toBe(a!.messageId);
    expect(refs.map((r) => r.id)).toEqual([a!.messageId, a!.messageId]);
    expect(messageIdOf('dlv_1', 'herald@')).toBe('<dlv_1.herald@herald.invalid>');
  });
});

describe('google chat', () => {
  it('threaded: three messages of an incident share one thread keyed by the incident; an unthreaded one does not', async () => {
    const chat = track(await startGoogleChat());
    const s = senders().google_chat;
    const target = targetOf('google_chat', { webhook_url: chat.webhookUrl() });
    const first = messageOf({ conversation: conversation(1, null) });
    const a = refOf(await s.send(target, first));
    const second = messageOf({ thread: a, conversation: conversation(2, first.deliveryId) });
    const b = refOf(await s.send(target, second));
    const c = refOf(await s.send(target, messageOf({ thread: a, conversation: conversation(3, second.deliveryId) })));

    const key = `herald-${first.incident.id}`;
    // The key goes with the FIRST message too, so the later ones find its thread.
    for (const req of chat.requests)
      expect(req.query).toMatchObject({ threadKey: key, messageReplyOption: 'REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD' });
    expect(chat.threads().size).toBe(1);
    expect(a).toEqual({ id: chat.messages[0]!.name, channel: chat.messages[0]!.thread.name, permalink: null });
    expect(a.id).toMatch(/^spaces\/AAAAherald\/messages\//);
    expect([b.channel, c.channel]).toEqual([a.channel, a.channel]);
    expect(chat.threadMessages(a.channel!).map((m) => m.name)).toEqual([a.id, b.id, c.id]);
    expect(chat.messages[0]!.thread.threadKey).toBe(key);

    const alone = refOf(await s.send(target, messageOf({ conversation: conversation(4, null, { threaded: false }) })));
    expect(chat.requests[3]!.query.threadKey).toBeUndefined();
    expect(alone.channel).not.toBe(a.channel);
    expect(chat.threads().size).toBe(2);
    expect(chat.threadMessages(a.channel!)).toHaveLength(3);
  });

  it('a configured thread_key wins: two incidents share it when threaded, and it still threads unthreaded messages and tests', async () => {
    const chat = track(await startGoogleChat());
    const s = senders().google_chat;
    const target = targetOf('google_chat', { webhook_url: chat.webhookUrl(), thread_key: 'ops-incidents' });
    const one = messageOf({ conversation: conversation(1, null) });
    const other: OutboundMessage = {
      ...messageOf({ conversation: conversation(1, null) }),
      incident: { ...one.incident, id: 'inc_01J000000000000000000000ZZ' },
    };
    const refs = [
      refOf(await s.send(target, one)),
      refOf(await s.send(target, other)),
      refOf(await s.send(target, messageOf({ conversation: conversation(2, one.deliveryId, { threaded: false }) }))),
      refOf(await s.send(target, messageOf({ test: true }))),
    ];
    for (const req of chat.requests)
      expect(req.query).toMatchObject({
        threadKey: 'ops-incidents',
        messageReplyOption: 'REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD',
      });
    expect(new Set(refs.map((r) => r.channel)).size).toBe(1);
    expect(chat.threadMessages(refs[0]!.channel!)).toHaveLength(4);
  });

  it('the peer follows Google: a threadKey without messageReplyOption starts a new thread each time', async () => {
    const chat = track(await startGoogleChat());
    const http = createOutboundHttp(allow);
    const post = (query: string) =>
      http.request({
        method: 'POST',
        url: `${chat.webhookUrl()}&${query}`,
        headers: { 'content-type': 'application/json' },
        body: '{"text":"x"}',
      });
    await post('threadKey=k1');
    await post('threadKey=k1');
    await post('threadKey=k1&messageReplyOption=REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD');
    await post('threadKey=k1&messageReplyOption=REPLY_MESSAGE_OR_FAIL');
    expect((await post('threadKey=k1&messageReplyOption=SOMETIMES')).status).toBe(400);
    const names = chat.messages.map((m) => m.thread.name);
    expect(new Set(names).size).toBe(3);
    expect(names[2]).toBe(names[3]);
    expect(chat.messages[0]!.thread.threadKey).toBeUndefined();
  });
});

describe('signed webhook', () => {
  it('carries incident_id, sequence and previous_delivery_id; a correction and a retraction say so and name their target', async () => {
    const rx = track(await startWebhookReceiver({ secret }));
    const s = senders().webhook;
    const target = targetOf('webhook', { url: `${rx.url}/hooks/herald`, secret });
    const first = messageOf({ conversation: conversation(1, null) });
    const correction = messageOf({
      conversation: conversation(2, first.deliveryId, { kind: 'correction', targetDeliveryId: first.deliveryId }),
    });
    const retraction = messageOf({
      conversation: conversation(3, correction.deliveryId, { kind: 'retraction', targetDeliveryId: first.deliveryId }),
    });
    const refs: MessageRef[] = [];
    for (const m of [first, correction, retraction]) refs.push(refOf(await s.send(target, m)));
    expect(refs).toEqual(
      [first, correction, retraction].map((m) => ({ id: m.deliveryId, channel: null, permalink: null })),
    );

    const [a, b, c] = rx.requests;
    for (const req of [a, b, c]) expect(req).toMatchObject({ verified: true, duplicate: false });
    const incident_id = first.incident.id;
    expect(a!.body).toMatchObject({
      type: 'incident.executed',
      test: false,
      incident_id,
      sequence: 1,
      previous_delivery_id: null,
      target_delivery_id: null,
      delivery_id: first.deliveryId,
      incident: first.incident,
    });
    expect(b!.body).toMatchObject({
      type: 'execution.corrected',
      incident_id,
      sequence: 2,
      previous_delivery_id: first.deliveryId,
      target_delivery_id: first.deliveryId,
    });
    expect(c!.body).toMatchObject({
      type: 'execution.retracted',
      incident_id,
      sequence: 3,
      previous_delivery_id: correction.deliveryId,
      target_delivery_id: first.deliveryId,
    });
  });

  it('a connection test belongs to no conversation: connection.test, sequence and previous_delivery_id null', async () => {
    const rx = track(await startWebhookReceiver({ secret }));
    const message = messageOf({ test: true });
    await senders().webhook.send(targetOf('webhook', { url: rx.url, secret }), message);
    expect(rx.requests[0]).toMatchObject({ verified: true });
    expect(rx.requests[0]!.body).toMatchObject({
      type: 'connection.test',
      test: true,
      incident_id: message.incident.id,
      sequence: null,
      previous_delivery_id: null,
      target_delivery_id: null,
    });
  });
});

describe('posting-only channels', () => {
  it('Teams and Mattermost deliver without a ref (message: null)', async () => {
    const teams = track(await startTeams());
    const mm = track(await startMattermost());
    const s = senders();
    const message = messageOf({ conversation: conversation(1, null) });
    expect(await s.teams.send(targetOf('teams', { webhook_url: teams.webhookUrl() }), message)).toMatchObject({
      outcome: 'delivered',
      message: null,
    });
    expect(await s.mattermost.send(targetOf('mattermost', { webhook_url: mm.webhookUrl() }), message)).toMatchObject({
      outcome: 'delivered',
      message: null,
    });
  });

  it('every one of them refuses edit and delete for good, naming the platform, and sends nothing', async () => {
    const [teams, mm, chat, rx, smtp] = [
      track(await startTeams()),
      track(await startMattermost()),
      track(await startGoogleChat()),
      track(await startWebhookReceiver({ secret })),
      track(await startSmtp()),
    ];
    const s = senders();
    const target: MessageRef = { id: 'earlier', channel: null, permalink: null };
    for (const action of ['edit', 'delete'] as const) {
      const m = () =>
        messageOf({
          action,
          target,
          conversation: conversation(2, 'dlv_earlier', {
            kind: action === 'edit' ? 'correction' : 'retraction',
            targetDeliveryId: 'dlv_earlier',
          }),
        });
      const results: [string, SendResult][] = [
        ['Teams', await s.teams.send(targetOf('teams', { webhook_url: teams.webhookUrl() }), m())],
        ['Mattermost', await s.mattermost.send(targetOf('mattermost', { webhook_url: mm.webhookUrl() }), m())],
        ['Google Chat', await s.google_chat.send(targetOf('google_chat', { webhook_url: chat.webhookUrl() }), m())],
        ['webhook', await s.webhook.send(targetOf('webhook', { url: rx.url, secret }), m())],
        [
          'e-mail',
          await s.email.send(
            targetOf('email', {
              from: 'herald@example.com',
              to: ['oncall@example.com'],
              host: '127.0.0.1',
              port: smtp.port,
              security: 'none',
            }),
            m(),
          ),
        ],
      ];
      for (const [platform, r] of results) {
        expect(r).toMatchObject({ outcome: 'permanent', httpStatus: null, disable: null });
        expect(r.outcome === 'permanent' && r.error).toContain(`${platform} cannot ${action} a sent message`);
      }
    }
    expect([teams.requests, mm.requests, chat.requests, rx.requests, smtp.messages].map((x) => x.length)).toEqual([
      0, 0, 0, 0, 0,
    ]);
  });
});
