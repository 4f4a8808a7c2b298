import type { Response } from 'express';
import { DomainError } from '../../domain/common/errors.js';
import type { RateDecision, RateLimiter } from '../../ports/index.js';

export type RatePolicy = 'default' | 'execute';

/**
 * A policy's `RateLimit-Policy` item, kept per policy: it changes only with the configured limit,
 * and every authenticated request sends it.
 */
const policyItems: Partial<Record<RatePolicy, { limit: number; item: string }>> = {};
function policyItem(name: RatePolicy, limit: number): string {
  const known = policyItems[name];
  if (known !== undefined && known.limit === limit) return known.item;
  const item = `"${name}";q=${limit};w=60`;
  policyItems[name] = { limit, item };
  return item;
}

/**
 * Counts a request of `subject` against its per-key limits, with draft-ietf-httpapi-ratelimit-headers-10
 * headers on every authenticated response. Execute routes consume their own policy on top of the
 * default one (in that order), and report both. Throws `rate_limited` when any of them is spent.
 */
export async function countRequest(
  limiter: RateLimiter,
  policies: readonly RatePolicy[],
  subject: string,
  res: Response,
): Promise<void> {
  let policy = '';
  let remaining = '';
  let denied: RatePolicy | null = null;
  let deniedDecision: RateDecision | null = null;
  for (let i = 0; i < policies.length; i++) {
    const name = policies[i]!;
    const d = await limiter.consume(name, subject);
    if (i > 0) {
      policy += ', ';
      remaining += ', ';
    }
    policy += policyItem(name, d.limit);
    remaining += `"${name}";r=${d.remaining};t=${d.resetSeconds}`;
    if (!d.allowed && denied === null) {
      denied = name;
      deniedDecision = d;
    }
  }
  res.setHeader('RateLimit-Policy', policy);
  res.setHeader('RateLimit', remaining);
  if (denied !== null && deniedDecision !== null) {
    const d = deniedDecision;
    throw new DomainError(
      'rate_limited',
      `Rate limit "${denied}" of ${d.limit} requests per minute reached; retry after ${d.resetSeconds} s.`,
      [],
      {
        retryAfter: d.resetSeconds,
      },
    );
  }
}
