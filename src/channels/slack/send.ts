import type { SlackConfig } from './config.js';
import type {
  ChannelAdapter,
  FailureCause,
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
  parseRetryAfter,
  permanent,
  refused,
  retryable,
  stringOf,
} from '../common/http-outcome.js';
import { joinSubject, splitText, subjectOf, truncate, TRUNCATION_MARKER } from '../common/message-text.js';
import { byAction } from '../common/actions.js';

/**
 * Slack, in either mode of the connection:
 * - webhook mode: POST the message to the incoming-webhook URL; Slack answers in plain text
 *   (`ok`, `invalid_payload`, `no_text`, 404 `no_service`, 410 `channel_is_archived`);
 * - bot mode: the Web API (SLACK_API_URL) with the bot token; Slack answers HTTP 200
 *   `{ok: false, error}` for most failures, 429 + Retry-After when rate limited. Bot mode keeps an
 *   incident's conversation (docs/explanation/living-updates.md): a post is `chat.postMessage` (in the first
 *   message's thread via `thread_ts` when the message names one) and answers the message's
 *   `{id: ts, channel, permalink}`; an edit is `chat.update` and a delete `chat.delete` of the
 *   message a previous send answered.
 *
 * Both send Block Kit (a section with the subject in bold, the body in mrkdwn sections of at most
 * 3,000 characters) with `text` as the notification fallback. Slack refuses a message whose blocks
 * hold more than about 12,000 characters of text in all (`msg_too_long`, as users of bolt-js
 * report), so a longer body is cut on a grapheme boundary with a visible "… (truncated)" and a
 * link to the incident (HERALD_PUBLIC_URL) where one is known; `text` stays within the same
 * budget. A message that renders empty is never sent: Slack would refuse it (`no_text`), and no
 * retry can change that. Values were escaped for mrkdwn at render.
 */

export interface SlackSenderDeps {
  http: OutboundHttp;
  /** SLACK_API_URL, e.g. `https://slack.com/api/` (a trailing slash is added when missing). */
  apiUrl: string;
  /** Wall clock (ms), for HTTP-date Retry-After values. */
  now?: () => number;
  timeoutMs?: number;
}

export const SLACK_TEXT_LIMIT = 40_000;
const SECTION_LIMIT = 3_000;
const MAX_BLOCKS = 50;
/** Text across all blocks (and in `text`), kept under Slack's ~12,000-character `msg_too_long`. */
export const SLACK_BLOCKS_TEXT_BUDGET = 11_000;

/** Web API errors that mean the token is not (or no longer) good. */
const AUTH_ERRORS = new Set([
  'invalid_auth',
  'not_authed',
  'account_inactive',
  'token_revoked',
  'token_expired',
  'no_permission',
  'missing_scope',
  'team_access_not_granted',
  'ekm_access_denied',
]);
/** Web API errors that mean the channel is not there for this bot. */
const CHANNEL_ERRORS = new Set(['channel_not_found', 'not_in_channel', 'is_archived']);
/** Web API errors worth trying again later. */
const TRANSIENT_ERRORS = new Set([
  'internal_error',
  'fatal_error',
  'service_unavailable',
  'request_timeout',
  'ratelimited',
  'rate_limited',
]);

type Block = { type: 'section'; text: { type: 'mrkdwn'; text: string } };

export interface SlackPayload {
  text: string;
  blocks?: Block[];
  username?: string;
  icon_emoji?: string;
}

/** The message as Slack's Block Kit with a text fallback (shared by both modes); null when it is empty. */
export function slackPayload(
  message: OutboundMessage,
  config: Pick<SlackConfig, 'username' | 'icon_emoji'>,
): SlackPayload | null {
  const subject = truncate(subjectOf(message), SECTION_LIMIT - 2);
  const rawBody = message.content.body;
  if (subject.trim() === '' && rawBody.trim() === '') return null;
  const blocks: Block[] = [];
  if (subject.trim() !== '') blocks.push(section(`*${subject}*`));
  const budget = SLACK_BLOCKS_TEXT_BUDGET - (blocks[0]?.text.text.length ?? 0);
  const body = fitBody(rawBody, budget, message.incident.url);
  // Every piece but the last is over 1,500 characters (splitText breaks past the middle), so the
  // budget keeps this far below 50 blocks; the slice only states the rule.
  const pieces = splitText(body, SECTION_LIMIT).slice(0, MAX_BLOCKS - blocks.length);
  for (const p of pieces) blocks.push(section(p));
  return {
    text: joinSubject(subject, body),
    ...(blocks.length > 0 ? { blocks } : {}),
    ...(config.username !== undefined ? { username: config.username } : {}),
    ...(config.icon_emoji !== undefined ? { icon_emoji: config.icon_emoji } : {}),
  };
}

/**
 * The body within `budget` characters: as is, or cut (grapheme-safe, never inside an `&lt;`-style
 * entity) with "… (truncated)" and, when the incident has a public URL, a link to it.
 */
function fitBody(body: string, budget: number, url: string | null): string {
  if (body.length <= budget) return body;
  const tail = url ? `${TRUNCATION_MARKER} Full text: <${url}|the incident>` : TRUNCATION_MARKER;
  const cut = truncate(body, Math.max(0, budget - tail.length + TRUNCATION_MARKER.length));
  const kept = (cut.endsWith(TRUNCATION_MARKER) ? cut.slice(0, cut.length - TRUNCATION_MARKER.length) : cut)
    .replace(/&[a-z#0-9]{0,7}$/i, '')
    .trimEnd();
  return `${kept}${tail}`;
}

const section = (text: string): Block => ({ type: 'section', text: { type: 'mrkdwn', text } });

/** SLACK_API_URL + method. */
export function slackMethodUrl(apiUrl: string, method: string): string {
  return `${apiUrl.endsWith('/') ? apiUrl : `${apiUrl}/`}${method}`;
}

export function createSlackSender(deps: SlackSenderDeps) {
  const now = deps.now ?? Date.now;
  return {
    async send(target: { config: SlackConfig }, message: OutboundMessage): Promise<SendResult> {
      const config = target.config;
      if (config.webhook_url !== undefined) return sendToWebhook(deps, config.webhook_url, config, message, now);
      if (config.bot_token === undefined || config.channel === undefined)
        return refused('the Slack connection has neither webhook_url nor bot_token with channel');
      const bot: Bot = { deps, token: config.bot_token, channel: config.channel, now };
      return byAction(message, {
        post: () => post(bot, config, message),
        edit: () => edit(bot, message),
        delete: () => remove(bot, message),
      });
    },
  };
}

/** Bot mode's connection to the Web API: the token and the connection's default channel. */
interface Bot {
  deps: SlackSenderDeps;
  token: string;
  channel: string;
  now: () => number;
}

const emptyMessage = (): SendResult =>
  permanent(
    null,
    'empty_message',
    null,
    'the message renders empty (no subject and no body), and Slack refuses a message with no text; check the template',
    null,
  );

/**
 * Webhook mode only posts (./index.ts says so): a `thread` is ignored, and an edit or delete is a
 * caller's mistake, refused without sending. Slack's webhook answer never names the message.
 */
async function sendToWebhook(
  deps: SlackSenderDeps,
  url: string,
  config: SlackConfig,
  message: OutboundMessage,
  now: () => number,
): Promise<SendResult> {
  const action = message.action ?? 'post';
  if (action !== 'post')
    return refused(
      `a Slack incoming webhook cannot ${action} a message it posted (it never says which message it made); use bot_token mode to ${action} messages`,
    );
  const payload = slackPayload(message, config);
  if (payload === null) return emptyMessage();
  const result = await exchange(deps.http, postJson(url, payload, {}, deps.timeoutMs), (res) =>
    readWebhookAnswer(res, hostOf(url), now()),
  );
  return result.outcome === 'delivered' ? { ...result, message: null } : result;
}

/**
 * `chat.postMessage`, in the thread of `message.thread` when given (its channel wins: the
 * conversation stays where it began, even if the connection's channel changed since). Slack's
 * answer names the message (`channel`, `ts`); its permalink is asked for after, best effort.
 */
async function post(bot: Bot, config: SlackConfig, message: OutboundMessage): Promise<SendResult> {
  const payload = slackPayload(message, config);
  if (payload === null) return emptyMessage();
  const thread = message.thread ?? null;
  const channel = thread?.channel ?? bot.channel;
  const body = {
    channel,
    ...payload,
    ...(thread !== null
      ? { thread_ts: thread.id, ...(config.reply_broadcast === true ? { reply_broadcast: true } : {}) }
      : {}),
  };
  const { result, json } = await callWebApi(bot, 'chat.postMessage', body);
  if (result.outcome !== 'delivered') return result;
  const ts = stringOf(json?.ts);
  // Slack answers the channel's id even when it was addressed by #name: the id is what later calls need.
  const where = stringOf(json?.channel) ?? channel;
  const ref: MessageRef | null =
    ts === null ? null : { id: ts, channel: where, permalink: await permalinkOf(bot, where, ts) };
  return { ...result, message: ref };
}

/**
 * `chat.update` of `message.target` with the new text and blocks (no username or icon: Slack
 * ignores them on an update). The message stays the same one, so the target is answered back.
 */
async function edit(bot: Bot, message: OutboundMessage): Promise<SendResult> {
  const target = message.target ?? null;
  if (target === null) return refused('an edit needs the message to change (target), and none was given');
  const payload = slackPayload(message, {});
  if (payload === null) return emptyMessage();
  const { username: _u, icon_emoji: _i, ...content } = payload;
  const { result } = await callWebApi(bot, 'chat.update', {
    channel: target.channel ?? bot.channel,
    ts: target.id,
    ...content,
  });
  return result.outcome === 'delivered' ? { ...result, message: target } : explained(result, EDIT_ERRORS);
}

/**
 * `chat.delete` of `message.target`. A message Slack no longer has is gone either way: after an
 * ambiguous time-out the retry finds it deleted, and must not fail for that.
 */
async function remove(bot: Bot, message: OutboundMessage): Promise<SendResult> {
  const target = message.target ?? null;
  if (target === null) return refused('a delete needs the message to delete (target), and none was given');
  const { result } = await callWebApi(bot, 'chat.delete', { channel: target.channel ?? bot.channel, ts: target.id });
  if (result.outcome === 'delivered') return { ...result, message: null };
  if (result.outcome === 'permanent' && result.providerCode === 'message_not_found') {
    return {
      outcome: 'delivered',
      httpStatus: result.httpStatus,
      providerCode: 'message_not_found',
      latencyMs: result.latencyMs ?? 0,
      message: null,
    };
  }
  return explained(result, DELETE_ERRORS);
}

/**
 * What an edit's or delete's refusal means for the person reading the delivery. These are about
 * one message, not the channel or the token: permanent, with no cause, so nothing is disabled and
 * a connection test never reports them as a missing channel.
 */
const EDIT_ERRORS: Readonly<Record<string, string>> = {
  message_not_found: 'the message was deleted in Slack, so it cannot be corrected or updated',
  cant_update_message: 'Slack lets a bot edit only the messages it posted itself',
  edit_window_closed:
    'the message is older than the workspace lets messages be edited, so it cannot be corrected or updated',
  msg_too_long: 'the new text is longer than Slack takes in one message',
  no_text: 'the new message has no text',
};
const DELETE_ERRORS: Readonly<Record<string, string>> = {
  cant_delete_message: 'Slack lets a bot delete only the messages it posted itself',
  compliance_exports_prevent_deletion: "the workspace's compliance exports prevent deleting messages",
};

function explained(result: SendResult, meanings: Readonly<Record<string, string>>): SendResult {
  if (result.outcome !== 'permanent' || result.providerCode === null) return result;
  const meaning = meanings[result.providerCode];
  return meaning === undefined ? result : { ...result, error: `${result.error} (${meaning})` };
}

/** One Web API call with a JSON body; answers the SendResult and the JSON Slack answered, if any. */
async function callWebApi(
  bot: Bot,
  method: string,
  body: Record<string, unknown>,
): Promise<{ result: SendResult; json: Record<string, unknown> | null }> {
  // Filled by the reader: a holder, because TypeScript does not see a callback assign a local.
  const seen: { json: Record<string, unknown> | null } = { json: null };
  const req = postJson(
    slackMethodUrl(bot.deps.apiUrl, method),
    body,
    { authorization: `Bearer ${bot.token}` },
    bot.deps.timeoutMs,
  );
  const result = await exchange(bot.deps.http, req, (res) => {
    seen.json = jsonOf(res);
    return readWebApiAnswer(res, method, bot.now());
  });
  return { result, json: seen.json };
}

/**
 * `chat.getPermalink` of a message just posted (form-encoded: a read method). Best effort: the
 * message is already in Slack, so any failure only leaves the link out; turning it into a failed
 * attempt would make the delivery retry and post the message twice. Bounded by the same
 * per-request time-out as the post.
 */
async function permalinkOf(bot: Bot, channel: string, ts: string): Promise<string | null> {
  const req = {
    method: 'POST',
    url: slackMethodUrl(bot.deps.apiUrl, 'chat.getPermalink'),
    headers: { authorization: `Bearer ${bot.token}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ channel, message_ts: ts }).toString(),
    ...(bot.deps.timeoutMs ? { timeoutMs: bot.deps.timeoutMs } : {}),
  };
  try {
    const res = await bot.deps.http.request(req);
    const json = jsonOf(res);
    const link = res.status === 200 && json?.ok === true ? stringOf(json.permalink) : null;
    // Shown to people as a link: only a web address is kept.
    return link !== null && /^https?:\/\//i.test(link) && link.length <= 2048 ? link : null;
  } catch {
    return null;
  }
}

function postJson(url: string, body: unknown, headers: Record<string, string>, timeoutMs: number | undefined) {
  return {
    method: 'POST',
    url,
    headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
    body: JSON.stringify(body),
    ...(timeoutMs ? { timeoutMs } : {}),
  };
}

/** Incoming webhooks answer 200 `ok`, or a status with a short error word as text. */
function readWebhookAnswer(res: OutboundResponse, host: string, nowMs: number): SendResult {
  const word = res.body.trim();
  const code = res.status >= 300 && /^[a-z_]{1,64}$/.test(word) ? word : null;
  return fromHttpStatus(res, { urlAddressed: true, who: `Slack (${host})`, providerCode: code, nowMs });
}

/**
 * Web API answers: HTTP 200 with `{ok}`; `ok: false` carries the error string (our provider_code).
 * Non-200 statuses (429, 5xx) are read by status, with the error string when the body has one.
 */
export function readWebApiAnswer(res: OutboundResponse, method: string, nowMs: number): SendResult {
  const json = jsonOf(res);
  const error = stringOf(json?.error);
  if (res.status !== 200)
    return fromHttpStatus(res, {
      urlAddressed: false,
      who: `Slack ${method}`,
      providerCode: error,
      nowMs,
      ...(error && AUTH_ERRORS.has(error) ? { cause: 'auth' as const } : {}),
    });
  if (json === null) {
    // A 200 we cannot read may or may not have posted: try again, flagged as a possible duplicate.
    return retryable(200, null, res.latencyMs, `Slack ${method} answered 200 with an unreadable body`, {
      ambiguous: true,
    });
  }
  if (json.ok === true) return { outcome: 'delivered', httpStatus: 200, providerCode: null, latencyMs: res.latencyMs };
  const code = error ?? 'unknown_error';
  const what = `Slack ${method} failed: ${code}`;
  if (TRANSIENT_ERRORS.has(code)) {
    const rateLimited = code === 'ratelimited' || code === 'rate_limited';
    return retryable(200, code, res.latencyMs, what, {
      retryAfterMs: parseRetryAfter(res.headers['retry-after'], nowMs),
      ...(rateLimited ? { cause: 'rate_limited' as const } : {}),
    });
  }
  const cause: FailureCause | undefined = AUTH_ERRORS.has(code)
    ? 'auth'
    : CHANNEL_ERRORS.has(code)
      ? 'not_found'
      : undefined;
  const hint = AUTH_ERRORS.has(code)
    ? ' (the bot token is not valid for this workspace any more)'
    : CHANNEL_ERRORS.has(code)
      ? ' (invite the bot to the channel, or fix `channel`)'
      : '';
  return permanent(200, code, res.latencyMs, `${what}${hint}`, null, cause);
}

export const adapter: ChannelAdapter<SlackConfig> = {
  createSender: (deps) => createSlackSender({ ...deps, apiUrl: deps.slackApiUrl }),
  /** Bot mode: `auth.test` proves the token without posting; webhook mode has no read-only check. */
  async check(config, deps) {
    const token = config.bot_token;
    if (token === undefined) return null;
    const req = {
      method: 'POST',
      url: slackMethodUrl(deps.slackApiUrl, 'auth.test'),
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: '',
      ...(deps.timeoutMs ? { timeoutMs: deps.timeoutMs } : {}),
    };
    const nowMs = (deps.now ?? Date.now)();
    let who = '';
    const result = await exchange(deps.http, req, (res) => {
      const json = jsonOf(res);
      who = [stringOf(json?.user) && `as ${stringOf(json?.user)}`, stringOf(json?.team) && `in ${stringOf(json?.team)}`]
        .filter(Boolean)
        .join(' ');
      return readWebApiAnswer(res, 'auth.test', nowMs);
    });
    return {
      result,
      okDetail: `Slack accepted the bot token${who ? ` (${who})` : ''}; channel ${config.channel ?? ''} is not checked until a message is sent.`,
    };
  },
};
