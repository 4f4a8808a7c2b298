import type { SlackConfig } from './config.js';
import type { OutboundMessage } from '../../ports/index.js';
import type { OutboundHttp, OutboundResponse } from '../../delivery/outbound/http.js';
import { exchange, fromHttpStatus, hostOf, jsonOf, parseRetryAfter, permanent, retryable, stringOf, type ChannelResult, type FailureCause } from '../common/http-outcome.js';
import { joinSubject, splitText, subjectOf, truncate, TRUNCATION_MARKER } from '../common/message-text.js';
import type { ChannelAdapter } from '../adapter.js';

/**
 * Slack, in either mode of the connection:
 * - webhook mode: POST the message to the incoming-webhook URL; Slack answers in plain text
 *   (`ok`, `invalid_payload`, `no_text`, 404 `no_service`, 410 `channel_is_archived`);
 * - bot mode: `chat.postMessage` on the Web API (SLACK_API_URL) with the bot token; Slack answers
 *   HTTP 200 `{ok: false, error}` for most failures, 429 + Retry-After when rate limited.
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
const AUTH_ERRORS = new Set(['invalid_auth', 'not_authed', 'account_inactive', 'token_revoked', 'token_expired', 'no_permission', 'missing_scope', 'team_access_not_granted', 'ekm_access_denied']);
/** Web API errors that mean the channel is not there for this bot. */
const CHANNEL_ERRORS = new Set(['channel_not_found', 'not_in_channel', 'is_archived']);
/** Web API errors worth trying again later. */
const TRANSIENT_ERRORS = new Set(['internal_error', 'fatal_error', 'service_unavailable', 'request_timeout', 'ratelimited', 'rate_limited']);

type Block = { type: 'section'; text: { type: 'mrkdwn'; text: string } };

export interface SlackPayload {
  text: string;
  blocks?: Block[];
  username?: string;
  icon_emoji?: string;
}

/** The message as Slack's Block Kit with a text fallback (shared by both modes); null when it is empty. */
export function slackPayload(message: OutboundMessage, config: Pick<SlackConfig, 'username' | 'icon_emoji'>): SlackPayload | null {
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
  const kept = (cut.endsWith(TRUNCATION_MARKER) ? cut.slice(0, cut.length - TRUNCATION_MARKER.length) : cut).replace(/&[a-z#0-9]{0,7}$/i, '').trimEnd();
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
    async send(target: { config: SlackConfig }, message: OutboundMessage): Promise<ChannelResult> {
      const config = target.config;
      const payload = slackPayload(message, config);
      if (payload === null) {
        return permanent(null, 'empty_message', null, 'the message renders empty (no subject and no body), and Slack refuses a message with no text; check the template', null);
      }
      if (config.webhook_url !== undefined) {
        const url = config.webhook_url;
        return exchange(deps.http, postJson(url, payload, {}, deps.timeoutMs), (res) => readWebhookAnswer(res, hostOf(url), now()));
      }
      if (config.bot_token === undefined || config.channel === undefined) return permanent(null, null, null, 'the Slack connection has neither webhook_url nor bot_token with channel', null);
      const body = { channel: config.channel, ...payload };
      const req = postJson(slackMethodUrl(deps.apiUrl, 'chat.postMessage'), body, { authorization: `Bearer ${config.bot_token}` }, deps.timeoutMs);
      return exchange(deps.http, req, (res) => readWebApiAnswer(res, 'chat.postMessage', now()));
    },
  };
}

function postJson(url: string, body: unknown, headers: Record<string, string>, timeoutMs: number | undefined) {
  return { method: 'POST', url, headers: { 'content-type': 'application/json; charset=utf-8', ...headers }, body: JSON.stringify(body), ...(timeoutMs ? { timeoutMs } : {}) };
}

/** Incoming webhooks answer 200 `ok`, or a status with a short error word as text. */
function readWebhookAnswer(res: OutboundResponse, host: string, nowMs: number): ChannelResult {
  const word = res.body.trim();
  const code = res.status >= 300 && /^[a-z_]{1,64}$/.test(word) ? word : null;
  return fromHttpStatus(res, { urlAddressed: true, who: `Slack (${host})`, providerCode: code, nowMs });
}

/**
 * Web API answers: HTTP 200 with `{ok}`; `ok: false` carries the error string (our provider_code).
 * Non-200 statuses (429, 5xx) are read by status, with the error string when the body has one.
 */
export function readWebApiAnswer(res: OutboundResponse, method: string, nowMs: number): ChannelResult {
  const json = jsonOf(res);
  const error = stringOf(json?.error);
  if (res.status !== 200) return fromHttpStatus(res, { urlAddressed: false, who: `Slack ${method}`, providerCode: error, nowMs, ...(error && AUTH_ERRORS.has(error) ? { cause: 'auth' as const } : {}) });
  if (json === null) {
    // A 200 we cannot read may or may not have posted: try again, flagged as a possible duplicate.
    return retryable(200, null, res.latencyMs, `Slack ${method} answered 200 with an unreadable body`, { ambiguous: true });
  }
  if (json.ok === true) return { outcome: 'delivered', httpStatus: 200, providerCode: null, latencyMs: res.latencyMs };
  const code = error ?? 'unknown_error';
  const what = `Slack ${method} failed: ${code}`;
  if (TRANSIENT_ERRORS.has(code)) {
    const rateLimited = code === 'ratelimited' || code === 'rate_limited';
    return retryable(200, code, res.latencyMs, what, { retryAfterMs: parseRetryAfter(res.headers['retry-after'], nowMs), ...(rateLimited ? { cause: 'rate_limited' as const } : {}) });
  }
  const cause: FailureCause | undefined = AUTH_ERRORS.has(code) ? 'auth' : CHANNEL_ERRORS.has(code) ? 'not_found' : undefined;
  const hint = AUTH_ERRORS.has(code) ? ' (the bot token is not valid for this workspace any more)' : CHANNEL_ERRORS.has(code) ? ' (invite the bot to the channel, or fix `channel`)' : '';
  return permanent(200, code, res.latencyMs, `${what}${hint}`, null, cause);
}

export const adapter: ChannelAdapter<SlackConfig> = {
  createSender: (deps) => createSlackSender({ ...deps, apiUrl: deps.slackApiUrl }),
  /** Bot mode: `auth.test` proves the token without posting; webhook mode has no read-only check. */
  async check(config, deps) {
    const token = config.bot_token;
    if (token === undefined) return null;
    const req = { method: 'POST', url: slackMethodUrl(deps.slackApiUrl, 'auth.test'), headers: { authorization: `Bearer ${token}`, 'content-type': 'application/x-www-form-urlencoded' }, body: '', ...(deps.timeoutMs ? { timeoutMs: deps.timeoutMs } : {}) };
    const nowMs = (deps.now ?? Date.now)();
    let who = '';
    const result = await exchange(deps.http, req, (res) => {
      const json = jsonOf(res);
      who = [stringOf(json?.user) && `as ${stringOf(json?.user)}`, stringOf(json?.team) && `in ${stringOf(json?.team)}`].filter(Boolean).join(' ');
      return readWebApiAnswer(res, 'auth.test', nowMs);
    });
    return { result, okDetail: `Slack accepted the bot token${who ? ` (${who})` : ''}; channel ${config.channel ?? ''} is not checked until a message is sent.` };
  },
};
