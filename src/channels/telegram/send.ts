import type { TelegramConfig } from './config.js';
import { escapeTelegram } from './escape.js';
import type { OutboundMessage } from '../../ports/index.js';
import type { OutboundHttp, OutboundResponse } from '../../delivery/outbound/http.js';
import { exchange, fromHttpStatus, jsonOf, permanent, refused, retryable, secondsToMs, stringOf, type ChannelResult, type FailureCause } from '../common/http-outcome.js';
import { joinSubject, subjectOf, TEST_MARKER, truncate } from '../common/message-text.js';
import type { ChannelAdapter } from '../adapter.js';

/**
 * Telegram Bot API `sendMessage` on TELEGRAM_API_URL (the operator's, trusted). The subject is
 * bold in the connection's parse mode (`<b>` for HTML, `*` for MarkdownV2), plain otherwise; link
 * previews are off. Telegram answers `{ok: true, result}` or `{ok: false, error_code,
 * description, parameters: {retry_after}}` — the retry delay is in the body only.
 *
 * Limit: 4,096 characters. Plain text is cut with a visible "… (truncated)". With a parse mode a
 * cut could leave an open tag or escape, which Telegram rejects, so such a message fails
 * permanently before sending instead (Herald does not rewrite formatted text).
 *
 * The bot token is in the request path: it never appears in an error (outbound errors name the
 * host only, and Telegram's descriptions do not repeat it).
 */

export interface TelegramSenderDeps {
  http: OutboundHttp;
  /** TELEGRAM_API_URL, e.g. `https://api.telegram.org`. */
  apiUrl: string;
  now?: () => number;
  timeoutMs?: number;
}

export const TELEGRAM_TEXT_LIMIT = 4096;

export function telegramText(message: OutboundMessage, parseMode: TelegramConfig['parse_mode']): string {
  // The marker is text Herald adds, so it is escaped for the parse mode like a value.
  const subject = subjectOf(message, escapeTelegram(TEST_MARKER, parseMode ?? null));
  const bold = subject === '' ? '' : parseMode === 'HTML' ? `<b>${subject}</b>` : parseMode === 'MarkdownV2' ? `*${subject}*` : subject;
  return joinSubject(bold, message.content.body);
}

/** `${TELEGRAM_API_URL}/bot<token>/<method>`. */
export function telegramMethodUrl(apiUrl: string, token: string, method: string): string {
  return `${apiUrl.replace(/\/+$/, '')}/bot${token}/${method}`;
}

export function createTelegramSender(deps: TelegramSenderDeps) {
  const now = deps.now ?? Date.now;
  return {
    send(target: { config: TelegramConfig }, message: OutboundMessage): Promise<ChannelResult> {
      const config = target.config;
      let text = telegramText(message, config.parse_mode);
      if (text.length > TELEGRAM_TEXT_LIMIT) {
        if (config.parse_mode !== undefined) {
          return Promise.resolve(
            refused(`the message is ${text.length} characters, over Telegram's ${TELEGRAM_TEXT_LIMIT}; with parse_mode ${config.parse_mode} Herald does not cut formatted text (shorten the template)`),
          );
        }
        text = truncate(text, TELEGRAM_TEXT_LIMIT);
      }
      const body = JSON.stringify({
        chat_id: config.chat_id,
        text,
        ...(config.parse_mode !== undefined ? { parse_mode: config.parse_mode } : {}),
        disable_web_page_preview: true,
      });
      const req = {
        method: 'POST',
        url: telegramMethodUrl(deps.apiUrl, config.bot_token, 'sendMessage'),
        headers: { 'content-type': 'application/json' },
        body,
        ...(deps.timeoutMs ? { timeoutMs: deps.timeoutMs } : {}),
      };
      return exchange(deps.http, req, (res) => readTelegramAnswer(res, 'sendMessage', now()));
    },
  };
}

/**
 * Bot API answers. error_code is the provider code; 401/403/404 are the token or the chat being
 * unusable (permanent), 400 a bad request (permanent), 429 retryable after `retry_after`.
 */
export function readTelegramAnswer(res: OutboundResponse, method: string, nowMs: number): ChannelResult {
  const json = jsonOf(res);
  if (res.status === 200) {
    if (json?.ok === true) return { outcome: 'delivered', httpStatus: 200, providerCode: null, latencyMs: res.latencyMs };
    // Not seen in practice (errors come with their status), but the body is the truth.
    if (json?.ok === false) return permanent(200, stringOf(json.error_code), res.latencyMs, `Telegram ${method} failed: ${stringOf(json.description) ?? 'ok: false'}`, null);
    return retryable(200, null, res.latencyMs, `Telegram ${method} answered 200 with an unreadable body`, { ambiguous: true });
  }
  const parameters = json?.parameters !== null && typeof json?.parameters === 'object' ? (json.parameters as Record<string, unknown>) : {};
  const migrated = stringOf(parameters.migrate_to_chat_id);
  const description = stringOf(json?.description);
  const cause: FailureCause | undefined = res.status === 401 || res.status === 404 ? 'auth' : res.status === 403 ? 'not_found' : undefined;
  return fromHttpStatus(res, {
    urlAddressed: false,
    who: `Telegram ${method}`,
    providerCode: stringOf(json?.error_code),
    detail: migrated ? `${description ?? 'the group moved'} (the group is now chat_id ${migrated}: update the connection)` : description,
    retryAfterMs: secondsToMs(parameters.retry_after),
    ...(cause ? { cause } : {}),
    nowMs,
  });
}

export const adapter: ChannelAdapter<TelegramConfig> = {
  createSender: (deps) => createTelegramSender({ ...deps, apiUrl: deps.telegramApiUrl }),
  /** `getMe` proves the token without posting; the chat is only checked by sending. */
  async check(config, deps) {
    const req = { method: 'POST', url: telegramMethodUrl(deps.telegramApiUrl, config.bot_token, 'getMe'), headers: { 'content-type': 'application/json' }, body: '{}', ...(deps.timeoutMs ? { timeoutMs: deps.timeoutMs } : {}) };
    const nowMs = (deps.now ?? Date.now)();
    let bot = '';
    const result = await exchange(deps.http, req, (res) => {
      const r = jsonOf(res)?.result;
      bot = r !== null && typeof r === 'object' ? (stringOf((r as Record<string, unknown>).username) ?? '') : '';
      return readTelegramAnswer(res, 'getMe', nowMs);
    });
    return { result, okDetail: `Telegram accepted the bot token${bot ? ` (@${bot})` : ''}; chat ${String(config.chat_id)} is not checked until a message is sent.` };
  },
};
