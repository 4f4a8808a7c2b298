import type { TelegramConfig } from './config.js';
import { escapeTelegram } from './escape.js';
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
  jsonOf,
  permanent,
  refused,
  retryable,
  secondsToMs,
  stringOf,
} from '../common/http-outcome.js';
import { joinSubject, subjectOf, TEST_MARKER, truncate } from '../common/message-text.js';
import { byAction } from '../common/actions.js';

/**
 * Telegram Bot API `sendMessage` on TELEGRAM_API_URL (the operator's, trusted). The subject is
 * bold in the connection's parse mode (`<b>` for HTML, `*` for MarkdownV2), plain otherwise; link
 * previews are off. Telegram answers `{ok: true, result}` or `{ok: false, error_code,
 * description, parameters: {retry_after}}` — the retry delay is in the body only.
 *
 * Conversations (docs/explanation/living-updates.md): a later message of an incident replies to its first one
 * (`reply_parameters`), a correction is `editMessageText`, a retraction `deleteMessage`. A sent
 * message's ref is `{id: message_id, channel: chat id, permalink: t.me link or null}`. Edits and
 * deletes are judged by Telegram's description (its error_code is a bare 400): "not modified" and
 * "to delete not found" mean the work is done; the others are explained.
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
  const bold =
    subject === ''
      ? ''
      : parseMode === 'HTML'
        ? `<b>${subject}</b>`
        : parseMode === 'MarkdownV2'
          ? `*${subject}*`
          : subject;
  return joinSubject(bold, message.content.body);
}

/** `${TELEGRAM_API_URL}/bot<token>/<method>`. */
export function telegramMethodUrl(apiUrl: string, token: string, method: string): string {
  return `${apiUrl.replace(/\/+$/, '')}/bot${token}/${method}`;
}

/** What one sender keeps: its deps and clock. */
interface Bot {
  deps: TelegramSenderDeps;
  now: () => number;
}

export function createTelegramSender(deps: TelegramSenderDeps) {
  const bot: Bot = { deps, now: deps.now ?? Date.now };
  return {
    send(target: { config: TelegramConfig }, message: OutboundMessage): Promise<SendResult> {
      return byAction(message, {
        post: () => post(bot, target.config, message),
        edit: () => edit(bot, target.config, message),
        delete: () => remove(bot, target.config, message),
      });
    },
  };
}

/** The message's text within Telegram's limit, or why it cannot be sent (see the module comment). */
function fittedText(
  message: OutboundMessage,
  parseMode: TelegramConfig['parse_mode'],
): { text: string } | { refusal: SendResult } {
  const text = telegramText(message, parseMode);
  if (text.length <= TELEGRAM_TEXT_LIMIT) return { text };
  if (parseMode !== undefined) {
    return {
      refusal: refused(
        `the message is ${text.length} characters, over Telegram's ${TELEGRAM_TEXT_LIMIT}; with parse_mode ${parseMode} Herald does not cut formatted text (shorten the template)`,
      ),
    };
  }
  return { text: truncate(text, TELEGRAM_TEXT_LIMIT) };
}

/** What a post and an edit send besides the text: the parse mode, and no link previews. */
const formatting = (config: TelegramConfig) => ({
  ...(config.parse_mode !== undefined ? { parse_mode: config.parse_mode } : {}),
  disable_web_page_preview: true,
});

/**
 * `sendMessage` to the connection's chat; with `thread`, as a reply to the incident's first
 * message (`allow_sending_without_reply`: if that message was deleted, the update still goes out).
 */
async function post(bot: Bot, config: TelegramConfig, message: OutboundMessage): Promise<SendResult> {
  const fitted = fittedText(message, config.parse_mode);
  if ('refusal' in fitted) return fitted.refusal;
  const replyTo = replyTarget(message.thread ?? null, config.chat_id);
  const body = {
    chat_id: config.chat_id,
    text: fitted.text,
    ...formatting(config),
    ...(replyTo !== null ? { reply_parameters: { message_id: replyTo, allow_sending_without_reply: true } } : {}),
  };
  const { result, json } = await callBot(bot, config, 'sendMessage', body);
  if (result.outcome !== 'delivered') return result;
  return { ...result, message: sentRef(json?.result, config.chat_id) };
}

/**
 * The message id to reply to. Message ids count per chat: when the connection's chat is no longer
 * the one the conversation began in (both numeric and different), the same id would name an
 * unrelated message there, so the update is posted without a reply. A chat named by @username
 * cannot be compared with an id: the reply is kept (Telegram drops it if the message is not there).
 */
function replyTarget(thread: MessageRef | null, chatId: TelegramConfig['chat_id']): number | null {
  if (thread === null) return null;
  const id = telegramMessageId(thread.id);
  const here = String(chatId);
  if (thread.channel !== null && /^-?\d+$/.test(here) && thread.channel !== here) return null;
  return id;
}

/** A Telegram message id (a positive integer) from a ref's id; null when it is not one. */
function telegramMessageId(id: string): number | null {
  return /^[1-9]\d{0,14}$/.test(id) ? Number(id) : null;
}

/** The ref of a sent message, from `sendMessage`'s `result` (a Message). */
function sentRef(result: unknown, configChat: TelegramConfig['chat_id']): MessageRef | null {
  const r = recordOf(result);
  const id = stringOf(r?.message_id);
  if (id === null) return null;
  const chat = recordOf(r?.chat);
  const channel = stringOf(chat?.id) ?? String(configChat);
  // A private chat's `username` is the person's: only a channel's or supergroup's makes a public link.
  const publicName = chat?.type === 'channel' || chat?.type === 'supergroup' ? stringOf(chat.username) : null;
  return { id, channel, permalink: telegramPermalink(publicName, channel, configChat, id) };
}

/**
 * A link to a message: `https://t.me/<username>/<id>` in a public chat (its username, or the
 * connection's `@name`), `https://t.me/c/<id without -100>/<id>` in a private supergroup or
 * channel (it opens for its members), none in a private chat or a basic group.
 */
export function telegramPermalink(
  username: string | null,
  chatId: string,
  configChat: TelegramConfig['chat_id'],
  messageId: string,
): string | null {
  if (!/^\d{1,15}$/.test(messageId)) return null;
  const name = username ?? (typeof configChat === 'string' && configChat.startsWith('@') ? configChat.slice(1) : null);
  if (name !== null && /^[A-Za-z][A-Za-z0-9_]{3,31}$/.test(name)) return `https://t.me/${name}/${messageId}`;
  const internal = /^-100(\d{1,15})$/.exec(chatId)?.[1];
  return internal !== undefined ? `https://t.me/c/${internal}/${messageId}` : null;
}

/**
 * `editMessageText` of the target, with the same text rules as a post. "message is not modified"
 * means the message already says this (a retry after a lost answer, or an unchanged correction):
 * nothing is left to do, so it is delivered.
 */
async function edit(bot: Bot, config: TelegramConfig, message: OutboundMessage): Promise<SendResult> {
  const target = message.target ?? null;
  if (target === null) return refused('an edit needs the message to change (target), and none was given');
  const messageId = telegramMessageId(target.id);
  if (messageId === null) return refused(`"${target.id}" is not a Telegram message id, so it cannot be edited`);
  const fitted = fittedText(message, config.parse_mode);
  if ('refusal' in fitted) return fitted.refusal;
  const body = {
    chat_id: target.channel ?? config.chat_id,
    message_id: messageId,
    text: fitted.text,
    ...formatting(config),
  };
  const { result, json } = await callBot(bot, config, 'editMessageText', body);
  if (result.outcome === 'delivered') return { ...result, message: target };
  const description = stringOf(json?.description) ?? '';
  if (result.outcome === 'permanent' && /message is not modified/i.test(description))
    return deliveredAnyway(result, target);
  if (result.outcome === 'permanent' && /message to edit not found/i.test(description)) {
    return {
      ...result,
      error: `${result.error} (the message was deleted in Telegram, so it cannot be corrected or updated)`,
    };
  }
  return result;
}

/**
 * `deleteMessage` of the target. A message Telegram no longer has is gone either way (deleted by
 * a person, or by an attempt whose answer was lost): delivered. Telegram lets a bot delete a
 * message only within 48 hours of sending it, which nothing but an explanation can help.
 */
async function remove(bot: Bot, config: TelegramConfig, message: OutboundMessage): Promise<SendResult> {
  const target = message.target ?? null;
  if (target === null) return refused('a delete needs the message to delete (target), and none was given');
  const messageId = telegramMessageId(target.id);
  if (messageId === null) return refused(`"${target.id}" is not a Telegram message id, so it cannot be deleted`);
  const { result, json } = await callBot(bot, config, 'deleteMessage', {
    chat_id: target.channel ?? config.chat_id,
    message_id: messageId,
  });
  if (result.outcome === 'delivered') return { ...result, message: null };
  const description = stringOf(json?.description) ?? '';
  if (result.outcome === 'permanent' && /message to delete not found/i.test(description))
    return deliveredAnyway(result, null);
  if (result.outcome === 'permanent' && /message can'?t be deleted/i.test(description)) {
    return {
      ...result,
      error: `${result.error} (Telegram lets a bot delete a message only within 48 hours of sending it, and only where it may delete messages; delete it by hand in Telegram)`,
    };
  }
  return result;
}

/** A refusal that means the work is already done: delivered, with Telegram's answer kept. */
function deliveredAnyway(result: Extract<SendResult, { outcome: 'permanent' }>, ref: MessageRef | null): SendResult {
  return {
    outcome: 'delivered',
    httpStatus: result.httpStatus,
    providerCode: result.providerCode,
    latencyMs: result.latencyMs ?? 0,
    message: ref,
  };
}

/** One Bot API call with a JSON body; answers the SendResult and the JSON Telegram answered, if any. */
async function callBot(
  bot: Bot,
  config: TelegramConfig,
  method: string,
  body: Record<string, unknown>,
): Promise<{ result: SendResult; json: Record<string, unknown> | null }> {
  // Filled by the reader: a holder, because TypeScript does not see a callback assign a local.
  const seen: { json: Record<string, unknown> | null } = { json: null };
  const req = {
    method: 'POST',
    url: telegramMethodUrl(bot.deps.apiUrl, config.bot_token, method),
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    ...(bot.deps.timeoutMs ? { timeoutMs: bot.deps.timeoutMs } : {}),
  };
  const result = await exchange(bot.deps.http, req, (res) => {
    seen.json = jsonOf(res);
    return readTelegramAnswer(res, method, bot.now());
  });
  return { result, json: seen.json };
}

const recordOf = (v: unknown): Record<string, unknown> | null =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;

/**
 * Bot API answers. error_code is the provider code; 401/403/404 are the token or the chat being
 * unusable (permanent), 400 a bad request (permanent), 429 retryable after `retry_after`.
 */
export function readTelegramAnswer(res: OutboundResponse, method: string, nowMs: number): SendResult {
  const json = jsonOf(res);
  if (res.status === 200) {
    if (json?.ok === true)
      return { outcome: 'delivered', httpStatus: 200, providerCode: null, latencyMs: res.latencyMs };
    // Not seen in practice (errors come with their status), but the body is the truth.
    if (json?.ok === false)
      return permanent(
        200,
        stringOf(json.error_code),
        res.latencyMs,
        `Telegram ${method} failed: ${stringOf(json.description) ?? 'ok: false'}`,
        null,
      );
    return retryable(200, null, res.latencyMs, `Telegram ${method} answered 200 with an unreadable body`, {
      ambiguous: true,
    });
  }
  const parameters =
    json?.parameters !== null && typeof json?.parameters === 'object'
      ? (json.parameters as Record<string, unknown>)
      : {};
  const migrated = stringOf(parameters.migrate_to_chat_id);
  const description = stringOf(json?.description);
  const cause: FailureCause | undefined =
    res.status === 401 || res.status === 404 ? 'auth' : res.status === 403 ? 'not_found' : undefined;
  return fromHttpStatus(res, {
    urlAddressed: false,
    who: `Telegram ${method}`,
    providerCode: stringOf(json?.error_code),
    detail: migrated
      ? `${description ?? 'the group moved'} (the group is now chat_id ${migrated}: update the connection)`
      : description,
    retryAfterMs: secondsToMs(parameters.retry_after),
    ...(cause ? { cause } : {}),
    nowMs,
  });
}

export const adapter: ChannelAdapter<TelegramConfig> = {
  createSender: (deps) => createTelegramSender({ ...deps, apiUrl: deps.telegramApiUrl }),
  /** `getMe` proves the token without posting; the chat is only checked by sending. */
  async check(config, deps) {
    const req = {
      method: 'POST',
      url: telegramMethodUrl(deps.telegramApiUrl, config.bot_token, 'getMe'),
      headers: { 'content-type': 'application/json' },
      body: '{}',
      ...(deps.timeoutMs ? { timeoutMs: deps.timeoutMs } : {}),
    };
    const nowMs = (deps.now ?? Date.now)();
    let bot = '';
    const result = await exchange(deps.http, req, (res) => {
      const r = jsonOf(res)?.result;
      bot = r !== null && typeof r === 'object' ? (stringOf((r as Record<string, unknown>).username) ?? '') : '';
      return readTelegramAnswer(res, 'getMe', nowMs);
    });
    return {
      result,
      okDetail: `Telegram accepted the bot token${bot ? ` (@${bot})` : ''}; chat ${String(config.chat_id)} is not checked until a message is sent.`,
    };
  },
};
