import type { GoogleChatConfig } from './config.js';
import type {
  ChannelAdapter,
  MessageRef,
  OutboundHttp,
  OutboundMessage,
  OutboundResponse,
  SendResult,
} from '../../contracts/channel.js';
import { exchange, fromHttpStatus, hostOf, jsonOf, refused, stringOf, withQuery } from '../common/http-outcome.js';
import { joinSubject, subjectOf, truncate } from '../common/message-text.js';

/**
 * Google Chat space webhook: `{text: "*subject*\n\nbody"}` (values were escaped for Chat's text
 * markup at render). `requestId` = the delivery id makes a retry idempotent on Google's side — the
 * same requestId returns the message already created instead of posting it again
 * (docs/explanation/delivery-semantics.md). Threads: a webhook cannot name a thread Google made, only a `threadKey` of
 * Herald's choosing, with `messageReplyOption=REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD` (without it Google ignores the
 * key and starts a new thread; with it the first message under a key starts the thread and later
 * ones reply in it). When the incident's conversation is threaded the key is sent from the FIRST
 * message on — the config's `thread_key` when set (one thread for the connection, as before),
 * else `herald-<incident id>` (one thread per incident). Otherwise — each update on its own, or a
 * connection test — only a configured `thread_key` threads, as it always did.
 *
 * Delivered answers carry the created message's ref: `id` = its `name`
 * (`spaces/…/messages/…`), `channel` = its thread's `name`. A webhook can neither edit nor delete
 * (that needs the Chat API's own auth), so `edit` and `delete` fail permanently without sending.
 *
 * Over 4,096 characters the text is cut with a visible "… (truncated)" (chosen over failing: an
 * incident message half-shown beats none, and the other chat platforms do the same).
 */

export interface GoogleChatSenderDeps {
  http: OutboundHttp;
  now?: () => number;
  timeoutMs?: number;
}

export const GOOGLE_CHAT_TEXT_LIMIT = 4096;

export function googleChatPayload(message: OutboundMessage): { text: string } {
  const subject = subjectOf(message);
  return {
    text: truncate(joinSubject(subject === '' ? '' : `*${subject}*`, message.content.body), GOOGLE_CHAT_TEXT_LIMIT),
  };
}

/** Google's option for "reply in the key's thread, or start it when there is none yet". */
export const REPLY_OR_NEW_THREAD = 'REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD';

/** The threadKey a message is sent under, or null to post it on its own (see the module comment). */
export function googleChatThreadKey(config: GoogleChatConfig, message: OutboundMessage): string | null {
  if (message.conversation?.threaded === true) return config.thread_key ?? `herald-${message.incident.id}`;
  return config.thread_key ?? null;
}

/** The webhook URL (its key and token kept) with requestId, and the thread parameters. */
export function googleChatUrl(config: GoogleChatConfig, message: OutboundMessage): string {
  const key = googleChatThreadKey(config, message);
  const thread: Record<string, string> =
    key !== null ? { threadKey: key, messageReplyOption: REPLY_OR_NEW_THREAD } : {};
  return withQuery(config.webhook_url, { requestId: message.deliveryId, ...thread });
}

export function createGoogleChatSender(deps: GoogleChatSenderDeps) {
  const now = deps.now ?? Date.now;
  return {
    send(target: { config: GoogleChatConfig }, message: OutboundMessage): Promise<SendResult> {
      if (message.action !== undefined && message.action !== 'post') {
        return Promise.resolve(
          refused(`Google Chat cannot ${message.action} a sent message (a space webhook only posts)`),
        );
      }
      const body = JSON.stringify(googleChatPayload(message));
      const req = {
        method: 'POST',
        url: googleChatUrl(target.config, message),
        headers: { 'content-type': 'application/json; charset=UTF-8' },
        body,
        ...(deps.timeoutMs ? { timeoutMs: deps.timeoutMs } : {}),
      };
      return exchange(deps.http, req, (res) => readAnswer(res, hostOf(target.config.webhook_url), now()));
    },
  };
}

/** The created Message's `name` and `thread.name`; null when the answer does not say (no ref to keep). */
function refOf(res: OutboundResponse): MessageRef | null {
  const answer = jsonOf(res);
  const id = stringOf(answer?.name);
  if (id === null) return null;
  const thread = answer?.thread;
  const channel =
    thread !== null && typeof thread === 'object' ? stringOf((thread as Record<string, unknown>).name) : null;
  return { id, channel, permalink: null };
}

/** Google API errors: `{error: {code, message, status}}`; `status` (RESOURCE_EXHAUSTED…) is the provider code. */
function readAnswer(res: OutboundResponse, host: string, nowMs: number): SendResult {
  const error = res.status >= 400 ? jsonOf(res)?.error : null;
  const e = error !== null && typeof error === 'object' ? (error as Record<string, unknown>) : {};
  const result = fromHttpStatus(res, {
    urlAddressed: true,
    who: `Google Chat (${host})`,
    providerCode: stringOf(e.status),
    detail: stringOf(e.message),
    nowMs,
  });
  return result.outcome === 'delivered' ? { ...result, message: refOf(res) } : result;
}

/** Google Chat's incoming webhooks have no read-only check. */
export const adapter: ChannelAdapter<GoogleChatConfig> = {
  createSender: (deps) => createGoogleChatSender(deps),
  check: null,
};
