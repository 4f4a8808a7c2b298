import { describe, expect, it } from 'vitest';
import { OutboundAllow } from '../../src/domain/connection/address-policy.js';
import { channelOf } from '../../src/channels/index.js';
import { createChannelSenders, loadChannelAdapters } from '../../src/delivery/senders.js';
import { createOutboundHttp } from '../../src/delivery/outbound/http.js';
import type { ChannelSenders, MessageRef, SendResult } from '../../src/ports/index.js';
import { messageOf, targetOf } from '../support/delivery-targets.js';
import { startSlack, type SlackPeer } from '../support/peers/slack.js';
import { trackPeers } from '../support/track.js';

/**
 * The Slack sender's part of "living updates", over real sockets against the Slack peer: a bot
 * post answers the message it made (ts, channel, permalink), later posts reply in its thread,
 * an edit is chat.update of it, a delete chat.delete; an incoming webhook only posts.
 */

const allow = OutboundAllow.parse(['127.0.0.1/32', 'localhost']);
const adapters = await loadChannelAdapters();
const track = trackPeers();

function slackSender(slack: SlackPeer, o: { timeoutMs?: number } = {}): ChannelSenders['slack'] {
  const http = createOutboundHttp(allow, { trustedBaseUrls: [slack.apiUrl], defaultTimeoutMs: 5_000 });
  return createChannelSenders(adapters, {
    http,
    slackApiUrl: slack.apiUrl,
    telegramApiUrl: 'https://telegram.invalid',
    ...(o.timeoutMs ? { timeoutMs: o.timeoutMs } : {}),
  }).slack;
}

const bot = (over: { channel?: string; reply_broadcast?: boolean; username?: string; icon_emoji?: string } = {}) =>
  targetOf('slack', { bot_token: 'xoxb-good-token', channel: 'C0INCIDENTS', ...over });

/** The message ref of a delivered result (fails the test otherwise). */
function refOf(r: SendResult): MessageRef {
  expect(r.outcome).toBe('delivered');
  const ref = r.outcome === 'delivered' ? r.message : undefined;
  expect(ref).toBeTruthy();
  return ref!;
}

const permalinkOf = (channel: string, ts: string) =>
  `https://herald-test.slack.com/archives/${channel}/p${ts.replace('.', '')}`;

describe('slack bot mode: the conversation', () => {
  it('a post answers the message as {id: ts, channel, permalink} (chat.getPermalink after chat.postMessage)', async () => {
    const slack = track(await startSlack({ tokens: ['xoxb-good-token'] }));
    const r = await slackSender(slack).send(bot(), messageOf({ subject: 'DB down', body: 'gone' }));
    const ref = refOf(r);
    expect(ref.id).toMatch(/^\d{10}\.\d{6}$/);
    expect(ref).toEqual({ id: ref.id, channel: 'C0INCIDENTS', permalink: permalinkOf('C0INCIDENTS', ref.id) });
    expect(slack.calls.map((c) => c.method)).toEqual(['chat.postMessage', 'chat.getPermalink']);
    expect(slack.callsTo('chat.getPermalink')[0]).toMatchObject({
      token: 'xoxb-good-token',
      args: { channel: 'C0INCIDENTS', message_ts: ref.id },
    });
    expect(slack.messagesIn('C0INCIDENTS')).toMatchObject([
      { ts: ref.id, text: 'DB down\n\ngone', thread_ts: null, edited: false, deleted: false },
    ]);
  });

  it("a post with `thread` replies under it (thread_ts) in the thread's channel, without reply_broadcast unless configured", async () => {
    const slack = track(await startSlack());
    const send = slackSender(slack);
    const root = refOf(await send.send(bot(), messageOf({ subject: 'DB down', body: 'investigating' })));
    // The connection's channel changed since: the conversation stays where it began.
    const reply = refOf(
      await send.send(
        bot({ channel: 'C0ELSEWHERE' }),
        messageOf({ subject: 'DB down', body: 'identified', thread: root }),
      ),
    );

    const [, post] = slack.callsTo('chat.postMessage');
    expect(post!.args).toMatchObject({ channel: 'C0INCIDENTS', thread_ts: root.id });
    expect(post!.args).not.toHaveProperty('reply_broadcast');
    expect(slack.threadOf('C0INCIDENTS', root.id)).toMatchObject([
      { ts: reply.id, text: 'DB down\n\nidentified', thread_ts: root.id, reply_broadcast: false },
    ]);
    expect(slack.messagesIn('C0ELSEWHERE')).toEqual([]);
    expect(reply).toEqual({
      id: reply.id,
      channel: 'C0INCIDENTS',
      permalink: `${permalinkOf('C0INCIDENTS', reply.id)}?thread_ts=${root.id}&cid=C0INCIDENTS`,
    });
    expect(reply.id > root.id).toBe(true);
  });

  it('reply_broadcast: true is sent with a threaded post (and only there) when the connection asks for it', async () => {
    const slack = track(await startSlack());
    const send = slackSender(slack);
    const target = bot({ reply_broadcast: true });
    const root = refOf(await send.send(target, messageOf({ body: 'investigating' })));
    const reply = refOf(await send.send(target, messageOf({ body: 'resolved', thread: root })));

    const [first, second] = slack.callsTo('chat.postMessage');
    expect(first!.args).not.toHaveProperty('reply_broadcast');
    expect(first!.args).not.toHaveProperty('thread_ts');
    expect(second!.args).toMatchObject({ thread_ts: root.id, reply_broadcast: true });
    expect(slack.threadOf('C0INCIDENTS', root.id)).toMatchObject([{ ts: reply.id, reply_broadcast: true }]);
  });

  it('reply_broadcast is a bot-mode field: a webhook config with it is refused', () => {
    const schema = channelOf('slack').configSchema;
    expect(schema.safeParse({ bot_token: 'xoxb-good-token', channel: 'C1', reply_broadcast: true }).success).toBe(true);
    const webhook = schema.safeParse({ webhook_url: 'https://hooks.slack.com/services/T/B/x', reply_broadcast: true });
    expect(webhook.success).toBe(false);
    expect(webhook.error?.issues.map((i) => i.path.join('.'))).toEqual(['reply_broadcast']);
  });

  it('edit is chat.update of the target with the new text and blocks (no username/icon), and answers the same ref', async () => {
    const slack = track(await startSlack());
    const send = slackSender(slack);
    const target = bot({ username: 'Herald', icon_emoji: ':rotating_light:' });
    const posted = refOf(await send.send(target, messageOf({ subject: 'DB down', body: 'ETA 30 min' })));

    const r = await send.send(
      target,
      messageOf({ subject: 'DB down', body: 'ETA 60 min', action: 'edit', target: posted }),
    );
    expect(r).toMatchObject({ outcome: 'delivered', httpStatus: 200, providerCode: null });
    expect(refOf(r)).toEqual(posted);
    const [update] = slack.callsTo('chat.update');
    expect(update!.args).toMatchObject({ channel: 'C0INCIDENTS', ts: posted.id, text: 'DB down\n\nETA 60 min' });
    expect(update!.args.blocks).toHaveLength(2);
    expect(update!.args).not.toHaveProperty('username');
    expect(update!.args).not.toHaveProperty('icon_emoji');
    expect(slack.messageAt('C0INCIDENTS', posted.id)).toMatchObject({
      text: 'DB down\n\nETA 60 min',
      edited: true,
      deleted: false,
    });
    expect(slack.callsTo('chat.postMessage')).toHaveLength(1);
  });

  it('edit of a message deleted in Slack is permanent, says so, and disables nothing', async () => {
    const slack = track(await startSlack());
    const send = slackSender(slack);
    const posted = refOf(await send.send(bot(), messageOf()));
    expect(await send.send(bot(), messageOf({ action: 'delete', target: posted }))).toMatchObject({
      outcome: 'delivered',
    });

    const r = await send.send(bot(), messageOf({ body: 'corrected', action: 'edit', target: posted }));
    expect(r).toMatchObject({
      outcome: 'permanent',
      httpStatus: 200,
      providerCode: 'message_not_found',
      disable: null,
    });
    expect(r.outcome === 'permanent' && r.error).toContain(
      'the message was deleted in Slack, so it cannot be corrected',
    );
    expect(r).not.toHaveProperty('cause');
    expect(slack.callsTo('chat.update')).toHaveLength(1);
    expect(slack.callsTo('chat.postMessage')).toHaveLength(1);
  });

  it('an edit or delete without a target is refused before anything is sent', async () => {
    const slack = track(await startSlack());
    const send = slackSender(slack);
    expect(await send.send(bot(), messageOf({ action: 'edit' }))).toMatchObject({
      outcome: 'permanent',
      httpStatus: null,
      disable: null,
    });
    expect(await send.send(bot(), messageOf({ action: 'delete', target: null }))).toMatchObject({
      outcome: 'permanent',
      httpStatus: null,
      disable: null,
    });
    expect(slack.calls).toEqual([]);
  });

  it('delete is chat.delete of the target and answers message null; deleting it again is still delivered (message_not_found)', async () => {
    const slack = track(await startSlack());
    const send = slackSender(slack);
    const posted = refOf(await send.send(bot(), messageOf()));

    const first = await send.send(bot(), messageOf({ action: 'delete', target: posted }));
    expect(first).toMatchObject({ outcome: 'delivered', httpStatus: 200, providerCode: null, message: null });
    expect(slack.callsTo('chat.delete')[0]!.args).toMatchObject({ channel: 'C0INCIDENTS', ts: posted.id });
    expect(slack.messageAt('C0INCIDENTS', posted.id)).toMatchObject({ deleted: true });

    // A retry after an ambiguous time-out finds the message gone: that is what it wanted.
    const again = await send.send(bot(), messageOf({ action: 'delete', target: posted }));
    expect(again).toMatchObject({
      outcome: 'delivered',
      httpStatus: 200,
      providerCode: 'message_not_found',
      message: null,
    });
    expect(slack.callsTo('chat.delete')).toHaveLength(2);
  });

  it('a failing chat.getPermalink leaves permalink null and the post delivered (ok:false, 500, a reset, a stall past the time-out)', async () => {
    const slack = track(await startSlack());
    const send = slackSender(slack, { timeoutMs: 1_000 });
    const postOnce = async () => {
      const r = await send.send(bot(), messageOf());
      expect(r).toMatchObject({ outcome: 'delivered', httpStatus: 200, providerCode: null });
      const ref = refOf(r);
      expect(ref).toEqual({ id: ref.id, channel: 'C0INCIDENTS', permalink: null });
    };

    slack.failNext('chat.getPermalink', 'internal_error');
    await postOnce();
    slack.script({ match: '/api/chat.getPermalink', status: 500, body: 'oops' });
    await postOnce();
    slack.script({ match: '/api/chat.getPermalink', reset: true });
    await postOnce();
    slack.script({
      match: '/api/chat.getPermalink',
      delayMs: 8_000,
      body: { ok: true, channel: 'C0INCIDENTS', permalink: 'https://late.example/' },
    });
    const started = Date.now();
    await postOnce();
    expect(Date.now() - started).toBeLessThan(6_000);

    expect(slack.callsTo('chat.getPermalink')).toHaveLength(4);
    expect(slack.callsTo('chat.postMessage')).toHaveLength(4);
  });
});

describe('slack webhook mode: posts only', () => {
  it('a post answers message null and ignores `thread`; edit and delete are refused without sending', async () => {
    const slack = track(await startSlack());
    const send = slackSender(slack);
    const target = targetOf('slack', { webhook_url: slack.webhookUrl() });
    const thread: MessageRef = { id: '1732500000.000100', channel: 'C0INCIDENTS', permalink: null };

    const r = await send.send(target, messageOf({ body: 'identified', thread }));
    expect(r).toMatchObject({ outcome: 'delivered', httpStatus: 200, message: null });
    expect(slack.webhookMessages).toHaveLength(1);
    expect(slack.webhookMessages[0]!.payload).not.toHaveProperty('thread_ts');

    for (const action of ['edit', 'delete'] as const) {
      const refusal = await send.send(target, messageOf({ body: 'corrected', action, target: thread }));
      expect(refusal).toMatchObject({ outcome: 'permanent', httpStatus: null, disable: null });
      expect(refusal.outcome === 'permanent' && refusal.error).toContain(`incoming webhook cannot ${action}`);
    }
    expect(slack.requests).toHaveLength(1);
  });
});
