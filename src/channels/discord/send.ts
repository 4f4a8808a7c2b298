import type { DiscordConfig } from './config.js';
import type {
  ChannelAdapter,
  MessageRef,
  OutboundHttp,
  OutboundMessage,
  OutboundResponse,
  SendResult,
} from '../../contracts/channel.js';
import {
  exchange,
  fromHttpStatus,
  hostOf,
  jsonOf,
  refused,
  secondsToMs,
  stringOf,
  withQuery,
} from '../common/http-outcome.js';
import { subjectOf, TEST_MARKER, truncate } from '../common/message-text.js';
import { byAction } from '../common/actions.js';

/**
 * Discord through a channel webhook, executed with `?wait=true` so a 200 carries the created
 * message (proof of delivery, and its id) — and `thread_id` when the connection posts into a
 * thread. One embed: the subject as its title, the body as its description (values were escaped as
 * Markdown at render), coloured by severity, linking the incident when Herald has a public URL.
 * `allowed_mentions: {parse: []}` makes Discord ping nobody, whatever the text says.
 *
 * Conversations (docs/explanation/living-updates.md): a webhook cannot reply to a message, so it threads only
 * in a thread — the one `thread_id` names (every message goes there), or in a forum webhook
 * (`forum`) the post an incident's first message opens with `thread_name`; later posts go to that
 * post's thread. It edits (`PATCH …/messages/<id>`) and deletes (`DELETE …/messages/<id>`) the
 * messages it posted.
 *
 * A posted message's ref is `{id, channel: <channel or thread id>, permalink: <jump URL>}`. The
 * jump URL needs the guild id, which the execute answer does not reliably carry: a GET on the
 * webhook answers it, asked once per webhook and remembered (best effort: without it the link is
 * null, the delivery stands).
 *
 * Discord's limits (title 256, description 4,096, 6,000 per message, thread name 100) are met by
 * cutting with a visible marker: an incident message half-shown beats none. With one embed of at
 * most 256 + 4,096 characters the 6,000 total cannot be exceeded.
 * A 429 carries `retry_after` in seconds (a float) in the JSON body, used over the header.
 */

export interface DiscordSenderDeps {
  http: OutboundHttp;
  /** Wall clock: the embed's timestamp and HTTP-date Retry-After values. */
  now?: () => number;
  timeoutMs?: number;
}

export const DISCORD_TITLE_LIMIT = 256;
export const DISCORD_DESCRIPTION_LIMIT = 4096;
export const DISCORD_THREAD_NAME_LIMIT = 100;

/** Discord's JSON error codes Herald reads. */
export const DISCORD_UNKNOWN_WEBHOOK = '10015';
export const DISCORD_UNKNOWN_MESSAGE = '10008';
const UNKNOWN_CHANNEL = '10003';

/** Webhooks whose guild id is remembered, per sender (oldest forgotten first). */
const GUILD_CACHE_SIZE = 1_000;
/** The guild lookup runs after the message is posted: kept short, it must not eat the attempt's deadline. */
const GUILD_LOOKUP_TIMEOUT_MS = 5_000;
/** A failed lookup is not asked again for this long (not before every message to a webhook whose GET fails). */
const FAILED_LOOKUP_RETRY_MS = 60_000;

const SNOWFLAKE = /^\d{1,20}$/;

/** Severity → embed colour (red, orange, yellow, blue; grey for anything else). */
const SEVERITY_COLOURS: Record<string, number> = {
  critical: 0xd92d20,
  major: 0xf79009,
  minor: 0xfdb022,
  low: 0x2e90fa,
};
const DEFAULT_COLOUR = 0x98a2b3;

export function discordPayload(
  message: OutboundMessage,
  config: Pick<DiscordConfig, 'username' | 'avatar_url'>,
  nowMs: number,
): Record<string, unknown> {
  const title = truncate(subjectOf(message), DISCORD_TITLE_LIMIT);
  const description = truncate(message.content.body, DISCORD_DESCRIPTION_LIMIT);
  const embed: Record<string, unknown> = {
    ...(title !== '' ? { title } : {}),
    ...(description !== '' ? { description } : {}),
    color: SEVERITY_COLOURS[message.incident.severity] ?? DEFAULT_COLOUR,
    timestamp: new Date(nowMs).toISOString(),
    ...(message.incident.url !== null && /^https?:\/\//.test(message.incident.url)
      ? { url: message.incident.url }
      : {}),
  };
  return {
    ...(config.username !== undefined ? { username: config.username } : {}),
    ...(config.avatar_url !== undefined ? { avatar_url: config.avatar_url } : {}),
    embeds: [embed],
    allowed_mentions: { parse: [] },
  };
}

/**
 * The name of the forum post an incident's first message opens: the incident's title (raw — a
 * thread name is not Markdown), else the subject, else "Incident <id>"; one line, at most 100
 * characters cut on a grapheme boundary. A connection test's post is marked like its subject.
 */
export function discordThreadName(message: OutboundMessage): string {
  const named =
    [message.incident.title, message.content.subject].map((s) => s.replace(/\s+/g, ' ').trim()).find((s) => s !== '') ??
    `Incident ${message.incident.id}`.trim();
  return truncate(message.test ? `${TEST_MARKER} ${named}` : named, DISCORD_THREAD_NAME_LIMIT, '…');
}

/** The webhook URL with `wait=true` (and `thread_id`), keeping whatever query it had. */
export function discordExecuteUrl(
  config: Pick<DiscordConfig, 'webhook_url' | 'thread_id'>,
  threadId: string | null = config.thread_id ?? null,
): string {
  return withQuery(config.webhook_url, { wait: 'true', ...(threadId !== null ? { thread_id: threadId } : {}) });
}

/** `<webhook URL>/messages/<id>` (and `thread_id`), keeping the URL's own query; null for an id that is not a snowflake. */
export function discordMessageUrl(webhookUrl: string, messageId: string, threadId: string | null): string | null {
  if (!SNOWFLAKE.test(messageId)) return null;
  let u: URL;
  try {
    u = new URL(webhookUrl);
  } catch {
    return webhookUrl; // the HTTP client refuses it as invalid_url, as it does a post
  }
  u.pathname = `${u.pathname.replace(/\/+$/, '')}/messages/${messageId}`;
  return threadId !== null ? withQuery(u.toString(), { thread_id: threadId }) : u.toString();
}

/** `https://discord.com/channels/<guild>/<channel or thread>/<message>`; null unless all three are snowflakes. */
export function discordJumpUrl(guildId: string, channelId: string, messageId: string): string | null {
  return [guildId, channelId, messageId].every((s) => SNOWFLAKE.test(s))
    ? `https://discord.com/channels/${guildId}/${channelId}/${messageId}`
    : null;
}

/** What one sender keeps: its deps, clock and the guild ids of the webhooks it posted to. */
interface Sender {
  deps: DiscordSenderDeps;
  now: () => number;
  guilds: GuildCache;
}

export function createDiscordSender(deps: DiscordSenderDeps) {
  const now = deps.now ?? Date.now;
  const s: Sender = { deps, now, guilds: createGuildCache(deps, now) };
  return {
    send(target: { config: DiscordConfig }, message: OutboundMessage): Promise<SendResult> {
      return byAction(message, {
        post: () => post(s, target.config, message),
        edit: () => edit(s, target.config, message),
        delete: () => remove(s, target.config, message),
      });
    },
  };
}

/**
 * Where a post goes: the configured thread for every message; in a forum, the incident's post
 * (the thread its first message opened — in a forum the thread's id) or, for a first message, a
 * new post named after the incident. A channel webhook cannot reply, so `thread` is ignored there.
 */
function postPlace(
  config: DiscordConfig,
  message: OutboundMessage,
): { threadId: string | null; threadName: string | null } {
  if (config.thread_id !== undefined) return { threadId: config.thread_id, threadName: null };
  if (config.forum !== true) return { threadId: null, threadName: null };
  const thread = message.thread ?? null;
  // A forum post's starter message has the thread's id: `id` stands in if `channel` was not kept.
  if (thread !== null) return { threadId: thread.channel ?? thread.id, threadName: null };
  return { threadId: null, threadName: discordThreadName(message) };
}

async function post(s: Sender, config: DiscordConfig, message: OutboundMessage): Promise<SendResult> {
  const place = postPlace(config, message);
  const body = {
    ...discordPayload(message, config, s.now()),
    ...(place.threadName !== null ? { thread_name: place.threadName } : {}),
  };
  const { result, json } = await call(s, 'POST', discordExecuteUrl(config, place.threadId), body);
  if (result.outcome !== 'delivered') return result;
  return { ...result, message: await postedRef(s, config.webhook_url, json) };
}

/** The posted message from the execute answer: its id, where it is (the thread's id in a thread), and its jump URL. */
async function postedRef(
  s: Sender,
  webhookUrl: string,
  json: Record<string, unknown> | null,
): Promise<MessageRef | null> {
  const id = stringOf(json?.id);
  if (id === null) return null;
  const channel = stringOf(json?.channel_id);
  if (channel === null) return { id, channel: null, permalink: null };
  const guild = stringOf(json?.guild_id) ?? (await s.guilds.lookup(webhookUrl));
  return { id, channel, permalink: guild !== null ? discordJumpUrl(guild, channel, id) : null };
}

/**
 * The thread an edit or delete must name: Discord finds a message in a thread only with
 * `thread_id`. The target's channel is where its post answered it was (the thread, when the
 * connection posts into threads), which stays right if the connection's thread_id changed since.
 */
function targetThread(config: DiscordConfig, target: MessageRef): string | null {
  if (config.thread_id === undefined && config.forum !== true) return null;
  return target.channel ?? config.thread_id ?? null;
}

/** `PATCH` the target with the new embeds (no username, avatar or thread name: they are not editable). */
async function edit(s: Sender, config: DiscordConfig, message: OutboundMessage): Promise<SendResult> {
  const target = message.target ?? null;
  if (target === null) return refused('an edit needs the message to change (target), and none was given');
  const url = discordMessageUrl(config.webhook_url, target.id, targetThread(config, target));
  if (url === null) return refused(`"${target.id}" is not a Discord message id, so it cannot be edited`);
  const { result } = await call(s, 'PATCH', url, discordPayload(message, {}, s.now()));
  if (result.outcome === 'delivered') return { ...result, message: target };
  if (isUnknownMessage(result))
    return {
      ...result,
      error: `${result.error} (the message was deleted in Discord, so it cannot be corrected or updated)`,
    };
  return result;
}

/**
 * `DELETE` the target. A message Discord no longer has (10008) is gone either way — deleted by a
 * person, or by an earlier attempt whose answer was lost — so that is delivered too.
 */
async function remove(s: Sender, config: DiscordConfig, message: OutboundMessage): Promise<SendResult> {
  const target = message.target ?? null;
  if (target === null) return refused('a delete needs the message to delete (target), and none was given');
  const url = discordMessageUrl(config.webhook_url, target.id, targetThread(config, target));
  if (url === null) return refused(`"${target.id}" is not a Discord message id, so it cannot be deleted`);
  const { result } = await call(s, 'DELETE', url, null);
  if (result.outcome === 'delivered') return { ...result, message: null };
  if (isUnknownMessage(result))
    return {
      outcome: 'delivered',
      httpStatus: result.httpStatus,
      providerCode: DISCORD_UNKNOWN_MESSAGE,
      latencyMs: result.latencyMs ?? 0,
      message: null,
    };
  return result;
}

const isUnknownMessage = (r: SendResult): r is Extract<SendResult, { outcome: 'permanent' }> =>
  r.outcome === 'permanent' && r.providerCode === DISCORD_UNKNOWN_MESSAGE;

/** One request to the webhook; answers the SendResult and Discord's JSON, if any. */
async function call(
  s: Sender,
  method: string,
  url: string,
  body: Record<string, unknown> | null,
): Promise<{ result: SendResult; json: Record<string, unknown> | null }> {
  // Filled by the reader: a holder, because TypeScript does not see a callback assign a local.
  const seen: { json: Record<string, unknown> | null } = { json: null };
  const req = {
    method,
    url,
    ...(body !== null ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) } : {}),
    ...(s.deps.timeoutMs ? { timeoutMs: s.deps.timeoutMs } : {}),
  };
  const result = await exchange(s.deps.http, req, (res) => {
    seen.json = jsonOf(res);
    return readDiscordAnswer(res, hostOf(url), s.now());
  });
  return { result, json: seen.json };
}

/**
 * Discord errors: `{message, code}`; 429: `{retry_after, global}`. A 404 disables the connection
 * only when the webhook itself is gone — Unknown Webhook (10015), or a 404 without Discord's code
 * (the URL is not a webhook). Unknown Message (10008) and Unknown Channel (10003, a thread that no
 * longer exists) are about one message or thread: the webhook still works for the others.
 */
export function readDiscordAnswer(res: OutboundResponse, host: string, nowMs: number): SendResult {
  const json = res.status >= 400 ? jsonOf(res) : null;
  const code = stringOf(json?.code);
  const message = stringOf(json?.message);
  return fromHttpStatus(res, {
    urlAddressed: code === null || code === '0' || code === DISCORD_UNKNOWN_WEBHOOK,
    who: `Discord (${host})`,
    providerCode: code,
    detail:
      code === UNKNOWN_CHANNEL ? `${message ?? 'Unknown Channel'} (the thread no longer exists in Discord)` : message,
    retryAfterMs: res.status === 429 ? secondsToMs(json?.retry_after) : null,
    nowMs,
  });
}

// ── the guild of a webhook, for jump URLs ─────────────────────────────────────────────────────

interface GuildCache {
  /** The guild id of the webhook at `webhookUrl`, or null when Discord would not say. Never throws. */
  lookup(webhookUrl: string): Promise<string | null>;
}

interface GuildEntry {
  guild: Promise<string | null>;
  /** When the lookup answered null (asked again after FAILED_LOOKUP_RETRY_MS); null while pending or found. */
  failedAt: number | null;
}

/**
 * Guild ids by webhook id. A webhook never changes guild, so a found id is kept for the sender's
 * life; the promise is kept, so concurrent posts to one webhook share one GET. Bounded: the
 * oldest entries go first.
 */
function createGuildCache(deps: DiscordSenderDeps, now: () => number, max = GUILD_CACHE_SIZE): GuildCache {
  const entries = new Map<string, GuildEntry>();
  return {
    lookup(webhookUrl) {
      const key = webhookKey(webhookUrl);
      const hit = entries.get(key);
      if (hit !== undefined && (hit.failedAt === null || now() - hit.failedAt < FAILED_LOOKUP_RETRY_MS))
        return hit.guild;
      const entry: GuildEntry = { guild: Promise.resolve(null), failedAt: null };
      entry.guild = fetchGuild(deps, webhookUrl).then((guild) => {
        if (guild === null) entry.failedAt = now();
        return guild;
      });
      entries.delete(key);
      entries.set(key, entry);
      for (const oldest of entries.keys()) {
        if (entries.size <= max) break;
        entries.delete(oldest);
      }
      return entry.guild;
    },
  };
}

/** The webhook's id from its URL; the URL itself for an allow-listed stand-in with another path. */
function webhookKey(webhookUrl: string): string {
  return /\/webhooks\/(\d{1,20})(?:\/|$)/.exec(webhookUrl)?.[1] ?? webhookUrl;
}

/**
 * GET on the webhook URL answers the webhook object, `guild_id` included. Best effort: the message
 * is already posted, so any failure only leaves the link out — a failed attempt would make the
 * delivery retry and post the message twice.
 */
async function fetchGuild(deps: DiscordSenderDeps, webhookUrl: string): Promise<string | null> {
  try {
    const res = await deps.http.request({
      method: 'GET',
      url: webhookUrl,
      timeoutMs: Math.min(deps.timeoutMs ?? GUILD_LOOKUP_TIMEOUT_MS, GUILD_LOOKUP_TIMEOUT_MS),
    });
    const guild = res.status === 200 ? stringOf(jsonOf(res)?.guild_id) : null;
    return guild !== null && SNOWFLAKE.test(guild) ? guild : null;
  } catch {
    return null;
  }
}

export const adapter: ChannelAdapter<DiscordConfig> = {
  createSender: (deps) => createDiscordSender(deps),
  /** GET on the webhook URL answers its name without posting. */
  async check(config, deps) {
    const req = { method: 'GET', url: config.webhook_url, ...(deps.timeoutMs ? { timeoutMs: deps.timeoutMs } : {}) };
    const nowMs = (deps.now ?? Date.now)();
    let name = '';
    const result = await exchange(deps.http, req, (res) => {
      name = stringOf(jsonOf(res)?.name) ?? '';
      return readDiscordAnswer(res, 'Discord', nowMs);
    });
    return { result, okDetail: `The Discord webhook exists${name ? ` ("${name}")` : ''}.` };
  },
};
