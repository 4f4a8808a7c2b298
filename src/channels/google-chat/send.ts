import type { GoogleChatConfig } from './config.js';
import type { OutboundMessage } from '../../ports/index.js';
import type { OutboundHttp, OutboundResponse } from '../../delivery/outbound/http.js';
import { exchange, fromHttpStatus, hostOf, jsonOf, stringOf, withQuery, type ChannelResult } from '../common/http-outcome.js';
import { joinSubject, subjectOf, truncate } from '../common/message-text.js';
import type { ChannelAdapter } from '../adapter.js';

/**
 * Google Chat space webhook: `{text: "*subject*\n\nbody"}` (values were escaped for Chat's text
 * markup at render). `requestId` = the delivery id makes a retry idempotent on Google's side — the
 * same requestId returns the message already created instead of posting it again (README "Delivery semantics").
 * With `thread_key`, messages of the connection go to one thread (`messageReplyOption` starts it
 * when it does not exist yet).
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
  return { text: truncate(joinSubject(subject === '' ? '' : `*${subject}*`, message.content.body), GOOGLE_CHAT_TEXT_LIMIT) };
}

/** The webhook URL (its key and token kept) with requestId, and the thread parameters. */
export function googleChatUrl(config: GoogleChatConfig, deliveryId: string): string {
  const thread: Record<string, string> = config.thread_key !== undefined ? { threadKey: config.thread_key, messageReplyOption: 'REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD' } : {};
  return withQuery(config.webhook_url, { requestId: deliveryId, ...thread });
}

export function createGoogleChatSender(deps: GoogleChatSenderDeps) {
  const now = deps.now ?? Date.now;
  return {
    send(target: { config: GoogleChatConfig }, message: OutboundMessage): Promise<ChannelResult> {
      const body = JSON.stringify(googleChatPayload(message));
      const req = {
        method: 'POST',
        url: googleChatUrl(target.config, message.deliveryId),
        headers: { 'content-type': 'application/json; charset=UTF-8' },
        body,
        ...(deps.timeoutMs ? { timeoutMs: deps.timeoutMs } : {}),
      };
      return exchange(deps.http, req, (res) => readAnswer(res, hostOf(target.config.webhook_url), now()));
    },
  };
}

/** Google API errors: `{error: {code, message, status}}`; `status` (RESOURCE_EXHAUSTED…) is the provider code. */
function readAnswer(res: OutboundResponse, host: string, nowMs: number): ChannelResult {
  const error = res.status >= 400 ? jsonOf(res)?.error : null;
  const e = error !== null && typeof error === 'object' ? (error as Record<string, unknown>) : {};
  return fromHttpStatus(res, { urlAddressed: true, who: `Google Chat (${host})`, providerCode: stringOf(e.status), detail: stringOf(e.message), nowMs });
}

/** Google Chat's incoming webhooks have no read-only check. */
export const adapter: ChannelAdapter<GoogleChatConfig> = { createSender: (deps) => createGoogleChatSender(deps), check: null };
