import { randomBytes, randomInt } from 'node:crypto';
import { expect } from 'vitest';
import type { TestHerald } from './herald.js';
import type { AllPeers } from './peers/all.js';
import { waitFor } from './wait.js';

/**
 * Living updates end to end: one connection of each kind, every one pointed at its own place on
 * the shared peers (a Slack channel, a webhook path, a Discord webhook id, a mail address, …), so
 * a test sees only its own messages however many ran before it on the same peers.
 */

export const KINDS = [
  'slack_bot',
  'slack_webhook',
  'teams',
  'discord_forum',
  'discord',
  'email',
  'mattermost',
  'google_chat',
  'telegram',
  'webhook',
] as const;
export type Kind = (typeof KINDS)[number];

/** Continue the first message (thread, reply, mail thread, threadKey, sequence). */
export const THREADED: Kind[] = ['slack_bot', 'telegram', 'email', 'google_chat', 'discord_forum', 'webhook'];
/** Cannot reply: each update is a message of its own. */
export const SEPARATE: Kind[] = ['teams', 'mattermost', 'slack_webhook', 'discord'];
/** Can edit and delete a message they posted. */
export const IN_PLACE: Kind[] = ['slack_bot', 'discord_forum', 'discord', 'telegram'];

/** One signing secret for every webhook connection, so the shared receiver verifies them all. */
export const HOOK_SECRET = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;

export interface Ref {
  id: string;
  channel: string | null;
  permalink: string | null;
}
export interface DeliveryView {
  id: string;
  connection_id: string;
  status: string;
  attempts: { outcome: string }[];
  action: string;
  sequence: number;
  previous_delivery_id: string | null;
  target_delivery_id: string | null;
  message: Ref | null;
  reply_to: Ref | null;
}
export interface ExecutionView {
  id: string;
  kind: string;
  status: string;
  target_execution_id: string | null;
  note: string | null;
  deliveries: DeliveryView[];
}

const TERMINAL = ['delivered', 'failed', 'cancelled'];

/** Polls the execution until every delivery is terminal, then requires all of them delivered. */
export async function delivered(h: TestHerald, incidentId: string, executionId: string): Promise<ExecutionView> {
  const e = await waitFor(
    async () => {
      const r = (await h.api('GET', `/v1/incidents/${incidentId}/executions/${executionId}`)).body as ExecutionView;
      return r.deliveries.every((d) => TERMINAL.includes(d.status)) ? r : undefined;
    },
    { timeoutMs: 45_000, intervalMs: 100, what: `execution ${executionId} to settle` },
  );
  const bad = e.deliveries.filter((d) => d.status !== 'delivered');
  expect(bad, JSON.stringify(bad, null, 1)).toEqual([]);
  return e;
}

/** The connection ids of one test's set and what each of its peers received. */
export interface ConversationSet {
  /** This set's name in its destinations (the Mattermost hook key, the webhook path, …). */
  tag: string;
  ids: Record<Kind, string>;
  slackChannel: string;
  telegramChat: string;
  /** This set's delivery of `kind` in an execution. */
  of(e: ExecutionView, kind: Kind): DeliveryView;
  /** Messages as each peer holds them (only this set's). */
  slackWebhook(): Record<string, unknown>[];
  teams(): Record<string, unknown>[];
  mattermost(): Record<string, unknown>[];
  chat(): AllPeers['chat']['messages'];
  mails(): AllPeers['smtp']['messages'];
  hooks(): Record<string, unknown>[];
  discord(kind: 'discord' | 'discord_forum'): AllPeers['discord']['messages'];
  telegram(): AllPeers['telegram']['messages'];
}

/** Creates one connection of every kind in `only` (default all) on this set's own destinations. */
export async function conversationSet(
  h: TestHerald,
  peers: AllPeers,
  opts: { only?: Kind[]; over?: Partial<Record<Kind, Record<string, unknown>>> } = {},
): Promise<ConversationSet> {
  const tag = `t${randomBytes(5).toString('hex')}`;
  const snowflake = () => `1${String(randomInt(1e9)).padStart(9, '0')}${String(randomInt(1e8)).padStart(8, '0')}`;
  const forumHook = snowflake();
  const plainHook = snowflake();
  peers.discord.makeForum(forumHook);
  const slackChannel = `C${tag.toUpperCase()}`;
  const telegramChat = `@herald_${tag}`;
  const mail = `${tag}@example.com`;
  const bodies: Record<Kind, { type: string; config: Record<string, unknown> }> = {
    slack_bot: { type: 'slack', config: { bot_token: 'xoxb-living-updates', channel: slackChannel } },
    slack_webhook: { type: 'slack', config: { webhook_url: peers.slack.webhookUrl(`T1/B1/${tag}`) } },
    teams: { type: 'teams', config: { webhook_url: peers.teams.webhookUrl(tag) } },
    discord_forum: { type: 'discord', config: { webhook_url: peers.discord.webhookUrl(forumHook), forum: true } },
    discord: { type: 'discord', config: { webhook_url: peers.discord.webhookUrl(plainHook) } },
    email: {
      type: 'email',
      config: {
        host: peers.smtp.host,
        port: peers.smtp.port,
        security: 'none',
        from: 'herald@example.com',
        to: [mail],
      },
    },
    mattermost: { type: 'mattermost', config: { webhook_url: peers.mattermost.webhookUrl(tag) } },
    google_chat: { type: 'google_chat', config: { webhook_url: peers.chat.webhookUrl(tag) } },
    telegram: {
      type: 'telegram',
      config: { bot_token: '123456:AAliving-updates-token-0123456789', chat_id: telegramChat },
    },
    webhook: { type: 'webhook', config: { url: `${peers.hook.url}/${tag}`, secret: HOOK_SECRET } },
  };
  const ids = {} as Record<Kind, string>;
  for (const kind of opts.only ?? KINDS) {
    const r = await h.api('POST', '/v1/connections', {
      body: { name: `${kind} ${tag}`, ...bodies[kind], ...opts.over?.[kind] },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    ids[kind] = r.body.id;
  }
  const bodiesAt = (
    reqs: { path: string; answered: number | 'reset' | null; body: unknown }[],
    path: (p: string) => boolean,
    ok: number,
  ) => reqs.filter((r) => path(r.path) && r.answered === ok).map((r) => r.body as Record<string, unknown>);
  return {
    tag,
    ids,
    slackChannel,
    telegramChat,
    of(e, kind) {
      const d = e.deliveries.find((x) => x.connection_id === ids[kind]);
      expect(d, `${kind}'s delivery in ${e.id}`).toBeTruthy();
      return d!;
    },
    slackWebhook: () => peers.slack.webhookMessages.filter((m) => m.path.endsWith(`/${tag}`)).map((m) => m.payload),
    teams: () => bodiesAt(peers.teams.requests, (p) => p.includes(`/workflows/${tag}/`), 202),
    mattermost: () => bodiesAt(peers.mattermost.requests, (p) => p === `/hooks/${tag}`, 200),
    chat: () => peers.chat.messages.filter((m) => m.name.startsWith(`spaces/${tag}/`)),
    mails: () => peers.smtp.messages.filter((m) => m.to.includes(mail)),
    hooks: () =>
      peers.hook.requests
        .filter((r) => r.path === `/${tag}` && r.verified)
        .map((r) => r.body as Record<string, unknown>),
    discord: (kind) =>
      peers.discord.messages.filter((m) => m.webhookId === (kind === 'discord' ? plainHook : forumHook)),
    telegram: () => {
      const first = peers.telegram.messages.find((m) => m.chatId === telegramChat);
      return peers.telegram.messages.filter((m) => first !== undefined && m.chat === first.chat);
    },
  };
}
