import type { SlackConfig } from '../../domain/connection-types/index.js';
import type { OutboundMessage } from '../../ports.js';
import type { OutboundHttp, OutboundResponse } from '../outbound-http.js';
import { exchange, fromHttpStatus, hostOf, jsonOf, parseRetryAfter, permanent, retryable, stringOf, type ChannelResult, type FailureCause } from './http-outcome.js';
import { joinSubject, splitText, subjectOf, truncate } from './message-text.js';

/**
 * Slack, in either mode of the connection:
 * - webhook mode: POST the message to the incoming-webhook URL; Slack answers in plain text
 *   (`ok`, `invalid_payload`, `no_text`, 404 `no_service`, 410 `channel_is_archived`);
 * - bot mode: `chat.postMessage` on the Web API (SLACK_API_URL) with the bot token; Slack answers
 *   HTTP 200 `{ok: false, error}` for most failures, 429 + Retry-After when rate limited.
 *
 * Both send Block Kit (a section with the subject in bold, the body in mrkdwn sections of at most
 * 3,000 characters) with `text` as the notification fallback. Slack's limits are met by cutting,
 * as Slack itself does: `text` at 40,000 characters and the body at the same length, with a
 * visible "… (truncated)", and never more than 50 blocks. Values were escaped for mrkdwn at render.
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

/** The message as Slack's Block Kit with a text fallback (shared by both modes). */
export function slackPayload(message: OutboundMessage, config: Pick<SlackConfig, 'username' | 'icon_emoji'>): SlackPayload {
  const subject = truncate(subjectOf(message), SECTION_LIMIT - 2);
  const body = truncate(message.content.body, SLACK_TEXT_LIMIT);
  const blocks: Block[] = [];
  if (subject.trim() !== '') blocks.push(section(`*${subject}*`));
  // The body is at most 40,000 characters and every piece but the last is over 1,500 (splitText
  // breaks past the middle), so this stays far below 50 blocks; the slice only states the rule.
  const pieces = splitText(body, SECTION_LIMIT).slice(0, MAX_BLOCKS - blocks.length);
  for (const p of pieces) blocks.push(section(p));
  return {
    text: truncate(joinSubject(subject, message.content.body), SLACK_TEXT_LIMIT),
    // An empty list is left out, so an empty message gets Slack's own `no_text`.
    ...(blocks.length > 0 ? { blocks } : {}),
    ...(config.username !== undefined ? { username: config.username } : {}),
    ...(config.icon_emoji !== undefined ? { icon_emoji: config.icon_emoji } : {}),
  };
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
  return fromHttpStatus(res, { type: 'slack', slackWebhookMode: true, who: `Slack (${host})`, providerCode: code, nowMs });
}

/**
 * Web API answers: HTTP 200 with `{ok}`; `ok: false` carries the error string (our provider_code).
 * Non-200 statuses (429, 5xx) are read by status, with the error string when the body has one.
 */
export function readWebApiAnswer(res: OutboundResponse, method: string, nowMs: number): ChannelResult {
  const json = jsonOf(res);
  const error = stringOf(json?.error);
  if (res.status !== 200) return fromHttpStatus(res, { type: 'slack', who: `Slack ${method}`, providerCode: error, nowMs, ...(error && AUTH_ERRORS.has(error) ? { cause: 'auth' as const } : {}) });
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
