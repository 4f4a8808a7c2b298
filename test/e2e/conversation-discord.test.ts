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
import { DISCORD_PEER_CHANNEL_ID, DISCORD_PEER_GUILD_ID, startDiscord } from '../support/peers/discord.js';
import { trackPeers } from '../support/track.js';

/**
 * Living updates on Discord, over real sockets against the local Discord peer: the refs and jump
 * URLs a post answers, forum posts and configured threads, edits and deletes of what was posted,
 * and which refusals disable the connection (only a deleted webhook does).
 */

const allow = OutboundAllow.parse(['127.0.0.1/32', 'localhost']);
const adapters = await loadChannelAdapters();
const track = trackPeers();

/** A new Discord sender (with its own guild cache), as app.ts builds them. */
function sender(): ChannelSenders['discord'] {
  const http = createOutboundHttp(allow, { defaultTimeoutMs: 5_000 });
  return createChannelSenders(adapters, {
    http,
    slackApiUrl: 'https://slack.invalid/api/',
    telegramApiUrl: 'https://telegram.invalid',
  }).discord;
}

const jump = (channel: string, id: string) => `https://discord.com/channels/${DISCORD_PEER_GUILD_ID}/${channel}/${id}`;
const gets = (requests: { method: string }[]) => requests.filter((r) => r.method === 'GET').length;

describe('discord posts', () => {
  it('answers the message ref with a jump URL; the guild is asked once per webhook', async () => {
    const discord = track(await startDiscord());
    const s = sender();
    const target = targetOf('discord', { webhook_url: discord.webhookUrl() });
    const first = refOf(await s.send(target, messageOf({ conversation: conversation(1) })));
    const id = discord.messages[0]!.id;
    expect(first).toEqual({ id, channel: DISCORD_PEER_CHANNEL_ID, permalink: jump(DISCORD_PEER_CHANNEL_ID, id) });

    const second = refOf(await s.send(target, messageOf({ conversation: conversation(1) })));
    expect(second.id).toBe(discord.messages[1]!.id);
    expect(second.permalink).toBe(jump(DISCORD_PEER_CHANNEL_ID, second.id));
    expect(gets(discord.requests)).toBe(1);
    // The execute is the first request: the lookup never holds the message back.
    expect(discord.requests.map((r) => r.method)).toEqual(['POST', 'GET', 'POST']);
  });

  it('a failed guild lookup leaves the link out but the delivery stands', async () => {
    const discord = track(await startDiscord());
    discord.script({
      match: (r) => r.method === 'GET',
      status: 500,
      body: { message: '500: Internal Server Error', code: 0 },
    });
    const r = await sender().send(targetOf('discord', { webhook_url: discord.webhookUrl() }), messageOf());
    expect(r).toMatchObject({ outcome: 'delivered', httpStatus: 200 });
    expect(refOf(r)).toEqual({ id: discord.messages[0]!.id, channel: DISCORD_PEER_CHANNEL_ID, permalink: null });
  });

  it('a plain channel webhook ignores `thread`: a webhook cannot reply', async () => {
    const discord = track(await startDiscord());
    const s = sender();
    const target = targetOf('discord', { webhook_url: discord.webhookUrl() });
    const first = refOf(await s.send(target, messageOf({ conversation: conversation(1) })));
    await s.send(target, messageOf({ thread: first, conversation: conversation(2) }));
    expect(discord.requests.filter((r) => r.method === 'POST').map((r) => r.query)).toEqual([
      { wait: 'true' },
      { wait: 'true' },
    ]);
    expect(discord.messages.map((m) => m.threadId)).toEqual([null, null]);
  });
});

describe('discord threads', () => {
  it('forum: the first post opens a post named after the incident, later ones land in its thread', async () => {
    const discord = track(await startDiscord());
    discord.makeForum('77');
    const s = sender();
    const target = targetOf('discord', { webhook_url: discord.webhookUrl('77'), forum: true, username: 'Herald' });
    const first = refOf(await s.send(target, messageOf({ conversation: conversation(1) })));
    const opened = discord.message(first.id)!;
    expect(opened.threadName).toBe('Database outage');
    expect(opened.threadId).not.toBeNull();
    expect(first).toEqual({ id: opened.id, channel: opened.threadId, permalink: jump(opened.threadId!, opened.id) });

    const second = refOf(
      await s.send(
        target,
        messageOf({ subject: 'Update', body: 'Failover done.', thread: first, conversation: conversation(2) }),
      ),
    );
    expect(discord.requests.at(-1)!.query).toEqual({ wait: 'true', thread_id: first.channel });
    expect(discord.message(second.id)!.threadName).toBeNull();
    expect(second).toEqual({ id: second.id, channel: first.channel, permalink: jump(first.channel!, second.id) });
    expect(discord.threadMessages(first.channel!).map((m) => m.id)).toEqual([first.id, second.id]);
  });

  it('forum: a long title is cut to 100 characters; without a title the subject names the post', async () => {
    const discord = track(await startDiscord());
    discord.makeForum('78');
    const s = sender();
    const target = targetOf('discord', { webhook_url: discord.webhookUrl('78'), forum: true });
    const long = messageOf({ conversation: conversation(1) });
    long.incident = { ...long.incident, title: `Payments ${'🔥'.repeat(60)}` };
    expect(await s.send(target, long)).toMatchObject({ outcome: 'delivered' });
    const name = discord.messages[0]!.threadName!;
    expect(name.length).toBeLessThanOrEqual(100);
    expect(name.endsWith('🔥…')).toBe(true);

    const untitled = messageOf({ subject: 'API errors', conversation: conversation(1) });
    untitled.incident = { ...untitled.incident, title: '  ' };
    expect(await s.send(target, untitled)).toMatchObject({ outcome: 'delivered' });
    expect(discord.messages[1]!.threadName).toBe('API errors');
  });

  it('thread_id: every message, edit and delete goes to the configured thread', async () => {
    const discord = track(await startDiscord());
    const s = sender();
    const target = targetOf('discord', { webhook_url: discord.webhookUrl(), thread_id: '1200000000000000001' });
    const first = refOf(await s.send(target, messageOf({ conversation: conversation(1) })));
    expect(first).toEqual({
      id: first.id,
      channel: '1200000000000000001',
      permalink: jump('1200000000000000001', first.id),
    });
    await s.send(target, messageOf({ thread: first, conversation: conversation(2) }));
    expect(discord.threadMessages('1200000000000000001')).toHaveLength(2);

    expect(await s.send(target, messageOf({ action: 'edit', target: first, subject: 'Corrected' }))).toMatchObject({
      outcome: 'delivered',
      message: first,
    });
    expect(await s.send(target, messageOf({ action: 'delete', target: first }))).toMatchObject({
      outcome: 'delivered',
      httpStatus: 204,
      message: null,
    });
    const mutations = discord.requests.filter((r) => r.method === 'PATCH' || r.method === 'DELETE');
    expect(mutations.map((r) => r.query)).toEqual([
      { thread_id: '1200000000000000001' },
      { thread_id: '1200000000000000001' },
    ]);
    expect(discord.message(first.id)).toMatchObject({ edited: true, deleted: true });
  });

  it('a deleted forum post is a permanent failure that does not disable the connection', async () => {
    const discord = track(await startDiscord());
    discord.makeForum('79');
    const s = sender();
    const target = targetOf('discord', { webhook_url: discord.webhookUrl('79'), forum: true });
    const first = refOf(await s.send(target, messageOf({ conversation: conversation(1) })));
    discord.deleteThread(first.channel!);
    const r = await s.send(target, messageOf({ thread: first, conversation: conversation(2) }));
    expect(r).toMatchObject({ outcome: 'permanent', httpStatus: 404, providerCode: '10003', disable: null });
    expect(r.outcome === 'permanent' && r.error).toContain('the thread no longer exists in Discord');
  });
});

describe('discord edits and deletes', () => {
  it('edit PATCHes the message in place with the new embed, and answers the same ref', async () => {
    const discord = track(await startDiscord());
    const s = sender();
    const target = targetOf('discord', {
      webhook_url: discord.webhookUrl(),
      username: 'Herald',
      avatar_url: 'https://herald.example.com/a.png',
    });
    const first = refOf(await s.send(target, messageOf({ conversation: conversation(1) })));
    const r = await s.send(
      target,
      messageOf({
        action: 'edit',
        target: first,
        subject: 'Resolved',
        body: 'All good @everyone',
        conversation: conversation(2, { kind: 'correction' }),
      }),
    );
    expect(r).toMatchObject({ outcome: 'delivered', httpStatus: 200, message: first });
    const patch = discord.requests.find((q) => q.method === 'PATCH')!;
    expect(patch.path).toBe(
      `/api/webhooks/1234567890123456789/heraldTestWebhookToken_abcdefghijklmnop/messages/${first.id}`,
    );
    expect(patch.query).toEqual({});
    // Only what an edit may change: no username, avatar or thread name.
    expect(Object.keys(patch.body as object).sort()).toEqual(['allowed_mentions', 'embeds']);
    const msg = discord.message(first.id)!;
    expect(msg).toMatchObject({ edited: true, deleted: false });
    expect(msg.payload).toMatchObject({
      allowed_mentions: { parse: [] },
      embeds: [{ title: 'Resolved', description: 'All good @everyone' }],
    });
    expect(discord.messages).toHaveLength(1);
  });

  it('editing a message deleted in Discord is permanent, says so, and does not disable', async () => {
    const discord = track(await startDiscord());
    const s = sender();
    const target = targetOf('discord', { webhook_url: discord.webhookUrl() });
    const first = refOf(await s.send(target, messageOf()));
    discord.deleteMessage(first.id);
    const r = await s.send(target, messageOf({ action: 'edit', target: first }));
    expect(r).toMatchObject({ outcome: 'permanent', httpStatus: 404, providerCode: '10008', disable: null });
    expect(r.outcome === 'permanent' && r.error).toContain('the message was deleted in Discord');
  });

  it('delete answers 204 delivered; deleting it again (10008) is delivered too', async () => {
    const discord = track(await startDiscord());
    const s = sender();
    const target = targetOf('discord', { webhook_url: discord.webhookUrl() });
    const first = refOf(await s.send(target, messageOf()));
    expect(await s.send(target, messageOf({ action: 'delete', target: first }))).toEqual({
      outcome: 'delivered',
      httpStatus: 204,
      providerCode: null,
      latencyMs: expect.any(Number),
      message: null,
    });
    expect(discord.message(first.id)!.deleted).toBe(true);
    expect(await s.send(target, messageOf({ action: 'delete', target: first }))).toMatchObject({
      outcome: 'delivered',
      httpStatus: 404,
      providerCode: '10008',
      message: null,
    });
    expect(discord.requests.filter((r) => r.method === 'DELETE')).toHaveLength(2);
  });

  it('a deleted webhook still disables on edit and delete; a missing target is refused unsent', async () => {
    const discord = track(await startDiscord());
    const s = sender();
    const target = targetOf('discord', { webhook_url: discord.webhookUrl('66') });
    const first = refOf(await s.send(target, messageOf()));
    discord.deleteWebhook('66');
    for (const action of ['edit', 'delete'] as const) {
      const r = await s.send(target, messageOf({ action, target: first }));
      expect(r, action).toMatchObject({ outcome: 'permanent', httpStatus: 404, providerCode: '10015' });
      expect(r.outcome === 'permanent' && r.disable, action).toBeTruthy();
    }
    const before = discord.requests.length;
    expect(await s.send(target, messageOf({ action: 'edit' }))).toMatchObject({
      outcome: 'permanent',
      httpStatus: null,
      disable: null,
    });
    expect(discord.requests).toHaveLength(before);
  });
});
