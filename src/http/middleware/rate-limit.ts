import type { RequestHandler } from 'express';
import { DomainError } from '../../domain/common/errors.js';
import type { RateLimiter } from '../../ports/index.js';
import { apiKeyOf } from '../context.js';

/**
 * Per-key limits with draft-ietf-httpapi-ratelimit-headers-10 headers on every authenticated
 * response. Execute routes consume their own policy on top of the default one, and report both.
 */
export function rateLimit(limiter: RateLimiter, policies: ('default' | 'execute')[]): RequestHandler {
  return async (_req, res, next) => {
    const subject = apiKeyOf(res).id;
    const decisions = [];
    for (const p of policies) decisions.push({ name: p, ...(await limiter.consume(p, subject)) });
    res.setHeader('RateLimit-Policy', decisions.map((d) => `"${d.name}";q=${d.limit};w=60`).join(', '));
    res.setHeader('RateLimit', decisions.map((d) => `"${d.name}";r=${d.remaining};t=${d.resetSeconds}`).join(', '));
    const denied = decisions.find((d) => !d.allowed);
    if (denied) {
      throw new DomainError('rate_limited', `Rate limit "${denied.name}" of ${denied.limit} requests per minute reached; retry after ${denied.resetSeconds} s.`, [], {
        retryAfter: denied.resetSeconds,
      });
    }
    next();
  };
}
