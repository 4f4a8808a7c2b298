import type { MattermostConfig } from './config.js';
import type {
  ChannelAdapter,
  OutboundHttp,
  OutboundMessage,
  OutboundResponse,
  SendResult,
} from '../../contracts/channel.js';
import { exchange, fromHttpStatus, hostOf, jsonOf, refused, stringOf } from '../common/http-outcome.js';
import { joinSubject, subjectOf, truncate } from '../common/message-text.js';

/**
 * Mattermost incoming webhook: `{text: "**subject**\n\nbody", channel?, username?}` (values were
 * escaped as Markdown at render). Mattermost answers 200 `ok` in plain text, or a JSON error
 * `{id, message}`. Posts are cut at 16,383 characters with a visible "… (truncated)".
 *
 * The answer never says which post was made, so a delivered message has no ref
 * (`message: null`): nothing to reply under, edit or delete; `edit` and `delete` fail
 * permanently without sending.
 */

export interface MattermostSenderDeps {
  http: OutboundHttp;
  now?: () => number;
  timeoutMs?: number;
}

export const MATTERMOST_TEXT_LIMIT = 16_383;

export function mattermostPayload(
  message: OutboundMessage,
  config: Pick<MattermostConfig, 'channel' | 'username'>,
): Record<string, unknown> {
  const subject = subjectOf(message);
  return {
    text: truncate(joinSubject(subject === '' ? '' : `**${subject}**`, message.content.body), MATTERMOST_TEXT_LIMIT),
    ...(config.channel !== undefined ? { channel: config.channel } : {}),
    ...(config.username !== undefined ? { username: config.username } : {}),
  };
}

export function createMattermostSender(deps: MattermostSenderDeps) {
  const now = deps.now ?? Date.now;
  return {
    send(target: { config: MattermostConfig }, message: OutboundMessage): Promise<SendResult> {
      if (message.action !== undefined && message.action !== 'post')
        return Promise.resolve(
          refused(`Mattermost cannot ${message.action} a sent message (an incoming webhook only posts)`),
        );
      const url = target.config.webhook_url;
      const body = JSON.stringify(mattermostPayload(message, target.config));
      const req = {
        method: 'POST',
        url,
        headers: { 'content-type': 'application/json' },
        body,
        ...(deps.timeoutMs ? { timeoutMs: deps.timeoutMs } : {}),
      };
      return exchange(deps.http, req, (res) => readAnswer(res, hostOf(url), now()));
    },
  };
}

function readAnswer(res: OutboundResponse, host: string, nowMs: number): SendResult {
  const json = res.status >= 400 ? jsonOf(res) : null;
  const result = fromHttpStatus(res, {
    urlAddressed: true,
    who: `Mattermost (${host})`,
    providerCode: stringOf(json?.id),
    detail: stringOf(json?.message),
    nowMs,
  });
  // The platform answers no id: the message cannot be referred to later.
  return result.outcome === 'delivered' ? { ...result, message: null } : result;
}

/** Mattermost's incoming webhooks have no read-only check. */
export const adapter: ChannelAdapter<MattermostConfig> = {
  createSender: (deps) => createMattermostSender(deps),
  check: null,
};
