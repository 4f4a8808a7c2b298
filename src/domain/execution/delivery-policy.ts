import type { PacingRule } from '../../contracts/channel.js';

/**
 * The delivery policy of docs/explanation/delivery-semantics.md, declared once: how many attempts, how long to wait,
 * what is worth retrying, and how fast each platform may be sent to.
 */
export const MAX_ATTEMPTS = 8;
const BASE_MS = 2_000;
const CAP_MS = 5 * 60_000;
/** A platform asking for more than this is treated as a permanent "not now" (we won't wait a day). */
export const MAX_RETRY_AFTER_MS = 60 * 60_000;

/**
 * Wait before the attempt after failed attempt `n` (1-based): the platform's Retry-After when it
 * gave one, else min(5 min, 2 s × 2^(n−1)) × a random factor in [0.5, 1] (jitter spreads retries
 * of a fan-out so they do not hit the platform together).
 */
export function retryDelayMs(n: number, retryAfterMs: number | null, random: () => number): number {
  if (retryAfterMs !== null && retryAfterMs >= 0) return retryAfterMs;
  const backoff = Math.min(CAP_MS, BASE_MS * 2 ** (n - 1));
  return Math.round(backoff * (0.5 + random() * 0.5));
}

/**
 * "Up to 8 attempts within about an hour" (docs/explanation/delivery-semantics.md): the backoff alone spends about 4
 * minutes over 8 attempts, so only a platform's Retry-After can stretch a delivery further — and a retry
 * whose attempt would start more than this long after the first attempt (of the current
 * redeliver round) is not made: the delivery fails with the last error.
 */
export const RETRY_WINDOW_MS = 60 * 60_000;

export type RetryDecision = { retry: true; delayMs: number } | { retry: false; reason: string };

/**
 * Whether (and when) to try again after a retryable failure. `attemptsMade` counts the attempts
 * of the current round (a redeliver starts a new round with a fresh budget), `elapsedMs` is the
 * time since the round's first attempt started.
 */
export function decideRetry(p: {
  attemptsMade: number;
  retryAfterMs: number | null;
  elapsedMs: number;
  random: () => number;
}): RetryDecision {
  if (p.attemptsMade >= MAX_ATTEMPTS) return { retry: false, reason: `gave up after ${MAX_ATTEMPTS} attempts` };
  const delayMs = retryDelayMs(p.attemptsMade, p.retryAfterMs, p.random);
  if (p.elapsedMs + delayMs > RETRY_WINDOW_MS)
    return { retry: false, reason: 'gave up: the next attempt would be more than an hour after the first' };
  return { retry: true, delayMs };
}

export type HttpClass = 'delivered' | 'retryable' | 'permanent';

/** 2xx delivered; 408, 425, 429, 5xx retryable; 3xx (never followed) and other 4xx permanent. */
export function classifyHttpStatus(status: number): HttpClass {
  if (status >= 200 && status < 300) return 'delivered';
  if (status === 408 || status === 425 || status === 429 || status >= 500) return 'retryable';
  return 'permanent';
}

/** SMTP: 2xx accepted, 4xx transient, 5xx permanent. */
export function classifySmtpCode(code: number): HttpClass {
  if (code >= 200 && code < 400) return 'delivered';
  if (code >= 400 && code < 500) return 'retryable';
  return 'permanent';
}

/**
 * A 404 or 410 from a URL-addressed destination (an incoming webhook: the URL is the address)
 * means the URL is dead, so the connection is disabled; from an API addressed by token and
 * channel it only means that message failed.
 */
export function disablesConnection(status: number, urlAddressed: boolean): boolean {
  return urlAddressed && (status === 404 || status === 410);
}

export type { PacingRule } from '../../contracts/channel.js';

/**
 * The connection's override (`rate_limit_per_minute`) wins over the platform's default (its channel
 * module's `pacing`, which the caller passes: the domain does not read the channel registry).
 */
export function pacingFor(platformDefault: PacingRule, ratePerMinute: number | null): PacingRule {
  if (ratePerMinute !== null && ratePerMinute > 0) return { perSecond: ratePerMinute / 60, burst: 1 };
  return platformDefault;
}

/**
 * Where a delivery stands with pacing right before sending: send now, or wait `waitMs` — for the
 * slot it just reserved on the connection's schedule (`reserved`), or for a free send token
 * (`take`, its slot fell due together with others').
 */
export type PaceStep = { step: 'send' } | { step: 'reserved' | 'take'; waitMs: number };
