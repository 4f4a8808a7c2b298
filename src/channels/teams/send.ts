import type { TeamsConfig } from './config.js';
import type {
  ChannelAdapter,
  OutboundHttp,
  OutboundMessage,
  OutboundResponse,
  SendResult,
} from '../../contracts/channel.js';
import { exchange, fromHttpStatus, hostOf, jsonOf, refused, stringOf } from '../common/http-outcome.js';
import { subjectOf } from '../common/message-text.js';

/**
 * Microsoft Teams through a Power Automate "Workflows" webhook: a message envelope carrying one
 * Adaptive Card 1.4 (the subject as a bold TextBlock, the body as a wrapping TextBlock; values
 * were escaped as Markdown at render). The flow runs after the answer, so 202 Accepted (or 200)
 * is all Herald ever learns: delivered means "accepted by the workflow".
 *
 * It answers no message id, so a delivered message has no ref (`message: null`): nothing to
 * reply under, edit or delete; `edit` and `delete` fail permanently without sending.
 *
 * Teams refuses posts over about 28 KB; an oversized card is failed permanently BEFORE sending
 * (a card cut in the middle is worse than a clear error, and Teams would reject it anyway).
 */

export interface TeamsSenderDeps {
  http: OutboundHttp;
  now?: () => number;
  timeoutMs?: number;
}

/** Teams' message size limit (bytes of the posted JSON). */
export const TEAMS_PAYLOAD_LIMIT = 28 * 1024;

export function teamsPayload(message: OutboundMessage): Record<string, unknown> {
  const subject = subjectOf(message);
  const body: Record<string, unknown>[] = [];
  if (subject !== '') body.push({ type: 'TextBlock', text: subject, weight: 'Bolder', size: 'Medium', wrap: true });
  if (message.content.body !== '') body.push({ type: 'TextBlock', text: message.content.body, wrap: true });
  return {
    type: 'message',
    attachments: [
      {
        contentType: 'application/vnd.microsoft.card.adaptive',
        contentUrl: null,
        content: {
          $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
          type: 'AdaptiveCard',
          version: '1.4',
          body,
          msteams: { width: 'Full' },
        },
      },
    ],
  };
}

export function createTeamsSender(deps: TeamsSenderDeps) {
  const now = deps.now ?? Date.now;
  return {
    send(target: { config: TeamsConfig }, message: OutboundMessage): Promise<SendResult> {
      if (message.action !== undefined && message.action !== 'post')
        return Promise.resolve(
          refused(`Teams cannot ${message.action} a sent message (a Workflows webhook only posts)`),
        );
      const body = JSON.stringify(teamsPayload(message));
      const size = Buffer.byteLength(body);
      if (size > TEAMS_PAYLOAD_LIMIT) {
        return Promise.resolve(
          refused(
            `payload too large for Teams (28 KB): the card is ${Math.ceil(size / 1024)} KB; shorten the template`,
          ),
        );
      }
      const url = target.config.webhook_url;
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

/** Workflows errors look like `{error: {code, message}}`. */
function readAnswer(res: OutboundResponse, host: string, nowMs: number): SendResult {
  const error = jsonOf(res)?.error;
  const e = error !== null && typeof error === 'object' ? (error as Record<string, unknown>) : {};
  const result = fromHttpStatus(res, {
    urlAddressed: true,
    who: `Teams (${host})`,
    providerCode: stringOf(e.code),
    detail: stringOf(e.message),
    nowMs,
  });
  // The platform answers no id: the message cannot be referred to later.
  return result.outcome === 'delivered' ? { ...result, message: null } : result;
}

/** Teams has no read-only check: a Workflows URL can only be tried by posting. */
export const adapter: ChannelAdapter<TeamsConfig> = { createSender: (deps) => createTeamsSender(deps), check: null };
