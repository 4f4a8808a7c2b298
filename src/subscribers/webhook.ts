import { signWebhook } from '../domain/common/webhook-signature.js';
import type { OutboundHttp, OutboundResponse } from '../contracts/channel.js';
import { classifyHttpStatus } from '../domain/execution/delivery-policy.js';
import { OutboundError } from '../delivery/outbound/error.js';
import type { SendOutcome } from './relay.js';

/**
 * Webhook subscribers (docs/subscribers.md): a notice's payload, or the subscription's challenge,
 * POSTed as JSON with Standard Webhooks headers signed with the subscriber's own `whsec_` secret,
 * through the guarded outbound client (the URL is checked again on every request: a name may
 * resolve elsewhere since the subscriber gave it).
 *
 * A notice's `webhook-id` is `<notice id>.<subscriber id>`, the same on every attempt, so the
 * receiver can drop a repeat. Answers: 2xx delivered; 410 Gone bounces (the endpoint is gone: the
 * subscriber is stopped); 408, 425, 429, 5xx and network trouble are retried; other 4xx and the
 * guard's refusals fail. Error texts hold the status or the failure's kind only: never the URL
 * (the subscriber's address, often with a secret in its path) nor the receiver's answer.
 */

/** What a send needs of a webhook subscriber. */
export interface WebhookTarget {
  id: string;
  /** The URL (the subscriber's address). */
  address: string;
  webhook_secret: string | null;
}

export interface SubscriberWebhook {
  /** Sends a notice's payload. */
  notice(target: WebhookTarget, noticeId: string, payload: Record<string, unknown>): Promise<SendOutcome>;
  /**
   * Sends the challenge; true only when the endpoint answered 2xx with a body holding the
   * challenge string (JSON `{"challenge": …}` or plain text).
   */
  challenge(target: WebhookTarget, payload: Record<string, unknown>, challenge: string): Promise<boolean>;
}

export interface SubscriberWebhookOptions {
  http: OutboundHttp;
  /** Wall clock (ms): the signed timestamp. */
  now?: () => number;
  /** Budget of one request (the challenge's 10 s too). */
  timeoutMs?: number;
}

/** The id a receiver sees for a notice: stable per (notice, subscriber). */
export const webhookIdOf = (noticeId: string, subscriberId: string): string => `${noticeId}.${subscriberId}`;

export function createSubscriberWebhook(o: SubscriberWebhookOptions): SubscriberWebhook {
  const now = o.now ?? Date.now;
  const timeoutMs = o.timeoutMs ?? 10_000;

  function post(target: WebhookTarget, id: string, payload: Record<string, unknown>): Promise<OutboundResponse> {
    if (target.webhook_secret === null) return Promise.reject(new Error('the webhook subscriber has no secret'));
    const body = JSON.stringify(payload);
    const timestamp = Math.floor(now() / 1000);
    return o.http.request({
      method: 'POST',
      url: target.address,
      headers: {
        'content-type': 'application/json',
        'webhook-id': id,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': signWebhook(target.webhook_secret, id, timestamp, body),
      },
      body,
      timeoutMs,
    });
  }

  return {
    async notice(target, noticeId, payload) {
      try {
        return outcomeOf(await post(target, webhookIdOf(noticeId, target.id), payload));
      } catch (e) {
        return failureOf(e);
      }
    },
    async challenge(target, payload, challenge) {
      try {
        const res = await post(target, `${target.id}.challenge.${challenge.slice(0, 16)}`, payload);
        return res.status >= 200 && res.status < 300 && res.body.includes(challenge);
      } catch {
        return false;
      }
    },
  };
}

/** The receiver's answer as an outcome. */
export function outcomeOf(res: OutboundResponse): SendOutcome {
  if (res.status === 410) return { outcome: 'bounced', error: 'the endpoint answered 410 Gone' };
  const c = classifyHttpStatus(res.status);
  if (c === 'delivered') return { outcome: 'delivered' };
  const error = `the endpoint answered ${res.status}`;
  if (c === 'retryable') return { outcome: 'retryable', error, retryAfterMs: retryAfterMs(res.headers['retry-after']) };
  return { outcome: 'failed', error };
}

/** A failed request as an outcome: the guard's refusals are final, network trouble is retried. */
export function failureOf(e: unknown): SendOutcome {
  if (e instanceof OutboundError) {
    const error = `the request failed (${e.kind})`;
    return e.retryable ? { outcome: 'retryable', error } : { outcome: 'failed', error };
  }
  return { outcome: 'failed', error: 'the request could not be made' };
}

/** Retry-After in seconds (the HTTP-date form is rare from webhook receivers: ignored). */
function retryAfterMs(v: string | undefined): number | null {
  if (v === undefined || !/^\d{1,6}$/.test(v.trim())) return null;
  return Number(v.trim()) * 1000;
}
