import { describe, expect, it } from 'vitest';
import { OutboundAllow } from '../../src/domain/connection/address-policy.js';
import { createChannelSenders, loadChannelAdapters } from '../../src/delivery/senders.js';
import { createOutboundHttp } from '../../src/delivery/outbound/http.js';
import type { ChannelSenders } from '../../src/ports/index.js';
import {
  conversationContext as conversation,
  deliveredRef as refOf,
  messageOf,
  targetOf,
} from '../support/delivery-targets.js';
import { startTelegram, type TelegramPeer } from '../support/peers/telegram.js';
import { trackPeers } from '../support/track.js';

/**
 * Living updates on Telegram, over real sockets against the local Bot API peer: the refs and t.me
 * links a send answers, the reply chain of an incident's messages, editMessageText and
 * deleteMessage with Telegram's own refusals.
 */

const allow = OutboundAllow.parse(['127.0.0.1/32', 'localhost']);
const adapters = await loadChannelAdapters();
const track = trackPeers();
const token = '123456789:AAbbCCddEEffGGhhIIjjKKllMMnn';

function sender(tg: TelegramPeer): ChannelSenders['telegram'] {
  const http = createOutboundHttp(allow, { trustedBaseUrls: [tg.url], defaultTimeoutMs: 5_000 });
  return createChannelSenders(adapters, { http, slackApiUrl: 'https://slack.invalid/api/', telegramApiUrl: tg.url })
    .telegram;
}

const argsOf = (tg: TelegramPeer, method: string) => tg.calls.filter((c) => c.method === method).map((c) => c.args);

describe('telegram posts', () => {
  it('answers {message_id, chat id} and a t.me/c link in a private supergroup', async () => {
    const tg = track(await startTelegram());
    const s = sender(tg);
    const ref = refOf(
      await s.send(
        targetOf('telegram', { bot_token: token, chat_id: -1001234567890 }),
        messageOf({ conversation: conversation(1) }),
      ),
    );
    expect(ref).toEqual({ id: '1', channel: '-1001234567890', permalink: 'https://t.me/c/1234567890/1' });
  });

  it('a public channel (@name) links by its username; a private chat or basic group has no link', async () => {
    const tg = track(await startTelegram());
    const s = sender(tg);
    const pub = refOf(
      await s.send(targetOf('telegram', { bot_token: token, chat_id: '@herald_incidents' }), messageOf()),
    );
    const chatId = String(tg.messages[0]!.chat);
    expect(chatId).toMatch(/^-100\d+$/);
    expect(pub).toEqual({ id: '1', channel: chatId, permalink: 'https://t.me/herald_incidents/1' });

    expect(refOf(await s.send(targetOf('telegram', { bot_token: token, chat_id: 42 }), messageOf()))).toEqual({
      id: '2',
      channel: '42',
      permalink: null,
    });
    expect(refOf(await s.send(targetOf('telegram', { bot_token: token, chat_id: '-4242' }), messageOf()))).toEqual({
      id: '3',
      channel: '-4242',
      permalink: null,
    });
  });

  it('later messages of an incident reply to its first (reply_parameters); a missing first message does not stop them', async () => {
    const tg = track(await startTelegram());
    const s = sender(tg);
    const target = targetOf('telegram', { bot_token: token, chat_id: -1001234567890 });
    const first = refOf(await s.send(target, messageOf({ conversation: conversation(1) })));
    const second = refOf(
      await s.send(target, messageOf({ subject: 'Update', thread: first, conversation: conversation(2) })),
    );
    expect(argsOf(tg, 'sendMessage')[0]).not.toHaveProperty('reply_parameters');
    expect(argsOf(tg, 'sendMessage')[1]!.reply_parameters).toEqual({
      message_id: 1,
      allow_sending_without_reply: true,
    });
    expect(tg.message(Number(second.id))!.replyTo).toBe(1);
    expect(second.permalink).toBe('https://t.me/c/1234567890/2');

    tg.deleteMessage(1);
    const third = refOf(
      await s.send(target, messageOf({ subject: 'Update 2', thread: first, conversation: conversation(3) })),
    );
    expect(tg.message(Number(third.id))).toMatchObject({ replyTo: null, deleted: false });
  });

  it('a conversation begun in another chat is not replied to in the new one (ids count per chat)', async () => {
    const tg = track(await startTelegram());
    const s = sender(tg);
    const first = refOf(
      await s.send(
        targetOf('telegram', { bot_token: token, chat_id: -1001111111111 }),
        messageOf({ conversation: conversation(1) }),
      ),
    );
    await s.send(
      targetOf('telegram', { bot_token: token, chat_id: -1002222222222 }),
      messageOf({ thread: first, conversation: conversation(2) }),
    );
    expect(argsOf(tg, 'sendMessage')[1]).not.toHaveProperty('reply_parameters');
    expect(tg.messages[1]).toMatchObject({ chat: -1002222222222, replyTo: null });
  });
});

describe('telegram edits and deletes', () => {
  it('editMessageText changes the message in place with the same parse mode and no previews', async () => {
    const tg = track(await startTelegram());
    const s = sender(tg);
    const target = targetOf('telegram', { bot_token: token, chat_id: '@herald_incidents', parse_mode: 'HTML' });
    const first = refOf(await s.send(target, messageOf({ subject: 'DB down', body: 'investigating' })));
    const r = await s.send(
      target,
      messageOf({
        action: 'edit',
        target: first,
        subject: 'DB down',
        body: 'resolved',
        conversation: conversation(2, { kind: 'correction' }),
      }),
    );
    expect(r).toMatchObject({ outcome: 'delivered', httpStatus: 200, message: first });
    expect(argsOf(tg, 'editMessageText')).toEqual([
      {
        chat_id: first.channel,
        message_id: 1,
        text: '<b>DB down</b>\n\nresolved',
        parse_mode: 'HTML',
        disable_web_page_preview: true,
      },
    ]);
    expect(tg.message(1)).toMatchObject({ text: '<b>DB down</b>\n\nresolved', edits: ['<b>DB down</b>\n\nresolved'] });
    expect(tg.messages).toHaveLength(1);
  });

  it('an edit that changes nothing ("message is not modified") is delivered', async () => {
    const tg = track(await startTelegram());
    const s = sender(tg);
    const target = targetOf('telegram', { bot_token: token, chat_id: -1001234567890 });
    const first = refOf(await s.send(target, messageOf({ subject: 'Same', body: 'text' })));
    const r = await s.send(target, messageOf({ action: 'edit', target: first, subject: 'Same', body: 'text' }));
    expect(r).toMatchObject({ outcome: 'delivered', httpStatus: 400, message: first });
    expect(tg.message(1)!.edits).toEqual([]);
  });

  it('editing a message deleted in Telegram is permanent and says so', async () => {
    const tg = track(await startTelegram());
    const s = sender(tg);
    const target = targetOf('telegram', { bot_token: token, chat_id: -1001234567890 });
    const first = refOf(await s.send(target, messageOf()));
    tg.deleteMessage(1);
    const r = await s.send(target, messageOf({ action: 'edit', target: first, body: 'corrected' }));
    expect(r).toMatchObject({ outcome: 'permanent', httpStatus: 400, providerCode: '400', disable: null });
    expect(r.outcome === 'permanent' && r.error).toContain('message to edit not found');
    expect(r.outcome === 'permanent' && r.error).toContain('the message was deleted in Telegram');
  });

  it('deleteMessage is delivered; deleting it again ("not found") is delivered too', async () => {
    const tg = track(await startTelegram());
    const s = sender(tg);
    const target = targetOf('telegram', { bot_token: token, chat_id: -1001234567890 });
    const first = refOf(await s.send(target, messageOf()));
    expect(await s.send(target, messageOf({ action: 'delete', target: first }))).toMatchObject({
      outcome: 'delivered',
      httpStatus: 200,
      message: null,
    });
    expect(argsOf(tg, 'deleteMessage')[0]).toEqual({ chat_id: '-1001234567890', message_id: 1 });
    expect(tg.message(1)!.deleted).toBe(true);
    expect(await s.send(target, messageOf({ action: 'delete', target: first }))).toMatchObject({
      outcome: 'delivered',
      httpStatus: 400,
      message: null,
    });
    expect(argsOf(tg, 'deleteMessage')).toHaveLength(2);
  });

  it('a message past the 48 hours a bot may delete it in is permanent, with the rule explained', async () => {
    const tg = track(await startTelegram());
    const s = sender(tg);
    const target = targetOf('telegram', { bot_token: token, chat_id: -1001234567890 });
    const first = refOf(await s.send(target, messageOf()));
    tg.expire(1);
    const r = await s.send(target, messageOf({ action: 'delete', target: first }));
    expect(r).toMatchObject({ outcome: 'permanent', httpStatus: 400, disable: null });
    expect(r.outcome === 'permanent' && r.error).toContain('48 hours');
    expect(tg.message(1)!.deleted).toBe(false);
  });

  it('an edit or delete without a target is refused unsent', async () => {
    const tg = track(await startTelegram());
    const s = sender(tg);
    const target = targetOf('telegram', { bot_token: token, chat_id: 1 });
    for (const action of ['edit', 'delete'] as const)
      expect(await s.send(target, messageOf({ action })), action).toMatchObject({
        outcome: 'permanent',
        httpStatus: null,
      });
    expect(tg.requests).toHaveLength(0);
  });
});
