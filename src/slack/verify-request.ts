import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Slack request signing (v0), checked before Bolt sees a request. Bolt refuses only *stale*
 * timestamps; a timestamp from the future is refused here too, so a captured request cannot be
 * pre-signed for later. Pure: the clock and the raw body are inputs.
 *
 * Signature = "v0=" + hex(HMAC-SHA256(signing secret, "v0:" + timestamp + ":" + raw body)).
 */
export const MAX_CLOCK_SKEW_SECONDS = 5 * 60;

export type VerifyFailure =
  'missing_headers' | 'bad_timestamp' | 'stale_timestamp' | 'future_timestamp' | 'bad_signature';

export interface VerifyInput {
  signingSecret: string;
  timestamp: string | undefined;
  signature: string | undefined;
  /** The body exactly as received: the HMAC covers these bytes, never a decoded copy of them. */
  rawBody: Buffer | string;
  nowMs: number;
}

export function verifySlackRequest(input: VerifyInput): { ok: true } | { ok: false; reason: VerifyFailure } {
  const { timestamp, signature } = input;
  if (timestamp === undefined || signature === undefined) return { ok: false, reason: 'missing_headers' };
  if (!/^\d{1,12}$/.test(timestamp)) return { ok: false, reason: 'bad_timestamp' };
  const skew = Number(timestamp) - Math.floor(input.nowMs / 1000);
  if (skew < -MAX_CLOCK_SKEW_SECONDS) return { ok: false, reason: 'stale_timestamp' };
  if (skew > MAX_CLOCK_SKEW_SECONDS) return { ok: false, reason: 'future_timestamp' };
  // The raw bytes are hashed as they came: decoding first would map invalid UTF-8 to U+FFFD, and
  // two different byte strings would then share one signature.
  const expected = `v0=${createHmac('sha256', input.signingSecret).update(`v0:${timestamp}:`).update(input.rawBody).digest('hex')}`;
  const a = Buffer.from(expected);
  const b = Buffer.from(signature);
  if (a.length !== b.length || !timingSafeEqual(a, b)) return { ok: false, reason: 'bad_signature' };
  return { ok: true };
}

/** Signs a body the way Slack does (tests and local tooling). */
export function signSlackRequest(signingSecret: string, timestamp: number, rawBody: Buffer | string): string {
  return `v0=${createHmac('sha256', signingSecret).update(`v0:${timestamp}:`).update(rawBody).digest('hex')}`;
}
