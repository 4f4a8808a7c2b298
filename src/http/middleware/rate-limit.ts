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
 * Returns nothing when every decision came at once (the limiter's lease), so the request goes on
 * without waiting a turn of the event loop; a promise otherwise.
 */
export function countRequest(
  limiter: RateLimiter,
  policies: readonly RatePolicy[],
  subject: string,
  res: Response,
): void | Promise<void> {
  const decisions: RateDecision[] = [];
  for (let i = 0; i < policies.length; i++) {
    const d = limiter.consume(policies[i]!, subject);
    if (d instanceof Promise) return countLater(limiter, policies, subject, res, decisions, d);
    decisions.push(d);
  }
  answerDecisions(policies, decisions, res);
}

/** The rest of countRequest once a decision has to wait for Redis. */
async function countLater(
  limiter: RateLimiter,
  policies: readonly RatePolicy[],
  subject: string,
  res: Response,
  decisions: RateDecision[],
  pending: Promise<RateDecision>,
): Promise<void> {
  decisions.push(await pending);
  for (let i = decisions.length; i < policies.length; i++) decisions.push(await limiter.consume(policies[i]!, subject));
  answerDecisions(policies, decisions, res);
}

/** The RateLimit headers of every policy's decision; `rate_limited` for the first one spent. */
function answerDecisions(policies: readonly RatePolicy[], decisions: readonly RateDecision[], res: Response): void {
  let policy = '';
  let remaining = '';
  let denied: RatePolicy | null = null;
  let deniedDecision: RateDecision | null = null;
  for (let i = 0; i < policies.length; i++) {
    const name = policies[i]!;
    const d = decisions[i]!;
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
