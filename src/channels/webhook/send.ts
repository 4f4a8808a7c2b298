import { signWebhook } from '../../domain/common/webhook-signature.js';
import type { WebhookConfig } from './config.js';
import type {
  ChannelAdapter,
  OutboundHttp,
  OutboundMessage,
  OutboundResponse,
  SendResult,
} from '../../contracts/channel.js';
import { exchange, fromHttpStatus, hostOf, refused } from '../common/http-outcome.js';
import { subjectOf } from '../common/message-text.js';

/**
 * Signed HTTP webhooks (Standard Webhooks, standardwebhooks.com). The body is JSON:
 *
 * ```json
 * {"type": "incident.executed", "test": false, "delivery_id": "dlv_…", "execution_id": "exe_…",
 *  "incident_id": "inc_…", "sequence": 2, "previous_delivery_id": "dlv_…", "target_delivery_id": null,
 *  "incident": {"id", "title", "severity", "status", "url"}, "subject": "…", "body": "…",
 *  "timestamp": "2026-11-22T10:00:00.000Z"}
 * ```
 *
 * A connection test sends `"type": "connection.test", "test": true` (so a consumer that acts on
 * `incident.executed` never mistakes it for an incident) with a "[Herald test]" subject, and
 * `sequence`/`previous_delivery_id` null: it belongs to no conversation.
 *
 * The receiver keeps the incident's conversation itself (a receiver's copy cannot be changed from
 * here): `incident_id` groups the messages, `sequence` (1, 2, …) orders them and
 * `previous_delivery_id` chains them (null for the first). A correction arrives as
 * `"type": "execution.corrected"` and a retraction as `"execution.retracted"`, both naming the
 * delivery they correct or retract in `target_delivery_id` (null on every other event). There is
 * no `edit` or `delete` to send: such a request fails permanently without sending. A delivered
 * message's ref is the delivery id (the `webhook-id` the receiver saw).
 *
 * Headers: `webhook-id` = the delivery id (stable across retries, so the receiver can drop a
 * duplicate), `webhook-timestamp` = Unix seconds of this attempt, `webhook-signature` =
 * `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` keyed with the base64-decoded bytes after
 * `whsec_`, plus the connection's own headers (their values are secrets; Herald's names are
 * reserved by the config schema). Bodies over 256 KiB fail permanently before sending. The
 * receiver's answer body is never quoted in errors: an arbitrary endpoint may echo the headers.
 */

export interface WebhookSenderDeps {
  http: OutboundHttp;
  /** Wall clock (ms): the signed timestamp and the body's `timestamp`. */
  now?: () => number;
  timeoutMs?: number;
}

export const WEBHOOK_BODY_LIMIT = 256 * 1024;

/** The event type: what a consumer switches on (a correction or retraction is not a new incident message). */
function eventType(message: OutboundMessage): string {
  if (message.test) return 'connection.test';
  switch (message.conversation?.kind) {
    case 'correction':
      return 'execution.corrected';
    case 'retraction':
      return 'execution.retracted';
    default:
      return 'incident.executed';
  }
}

export function webhookBody(message: OutboundMessage, nowMs: number): string {
  const c = message.conversation;
  return JSON.stringify({
    type: eventType(message),
    test: message.test === true,
    delivery_id: message.deliveryId,
    execution_id: message.executionId,
    incident_id: message.incident.id,
    sequence: c?.sequence ?? null,
    previous_delivery_id: c?.previousDeliveryId ?? null,
    target_delivery_id: c !== undefined && c.kind !== 'announcement' ? c.targetDeliveryId : null,
    incident: message.incident,
    subject: subjectOf(message),
    body: message.content.body,
    timestamp: new Date(nowMs).toISOString(),
  });
}

export function createWebhookSender(deps: WebhookSenderDeps) {
  const now = deps.now ?? Date.now;
  return {
    send(target: { config: WebhookConfig }, message: OutboundMessage): Promise<SendResult> {
      if (message.action !== undefined && message.action !== 'post')
        return Promise.resolve(refused(`a webhook cannot ${message.action} a sent message`));
      const config = target.config;
      const at = now();
      const body = webhookBody(message, at);
      const size = Buffer.byteLength(body);
      if (size > WEBHOOK_BODY_LIMIT)
        return Promise.resolve(
          refused(`the webhook body is ${Math.ceil(size / 1024)} KiB, over the 256 KiB limit; shorten the template`),
        );
      const timestamp = Math.floor(at / 1000);
      const headers: Record<string, string> = {
        ...config.headers,
        'content-type': 'application/json',
        'webhook-id': message.deliveryId,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': signWebhook(config.secret, message.deliveryId, timestamp, body),
      };
      const req = {
        method: 'POST',
        url: config.url,
        headers,
        body,
        ...(deps.timeoutMs ? { timeoutMs: deps.timeoutMs } : {}),
      };
      return exchange(deps.http, req, (res: OutboundResponse) => {
        const result = fromHttpStatus(res, { urlAddressed: true, who: hostOf(config.url), nowMs: now() });
        // The receiver knows the message by its webhook-id, the delivery id: that is the ref.
        return result.outcome === 'delivered'
          ? { ...result, message: { id: message.deliveryId, channel: null, permalink: null } }
          : result;
      });
    },
  };
}

/** A webhook receiver has nothing to ask without posting. */
export const adapter: ChannelAdapter<WebhookConfig> = {
  createSender: (deps) => createWebhookSender(deps),
  check: null,
};
