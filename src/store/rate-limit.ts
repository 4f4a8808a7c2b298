import type { RedisClient as Redis } from './redis-connect.js';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { RateDecision, RateLimiter } from '../ports/index.js';
import type { Keys } from './keys.js';

/**
 * Per-API-key fixed-window limits shared by every instance (rate-limiter-flexible on Redis):
 * `default` for every request, `execute` on top of it for executions.
 */
export class RedisRateLimiter implements RateLimiter {
  private readonly limiters: Record<'default' | 'execute', RateLimiterRedis>;

  constructor(redis: Redis, keys: Keys, limits: { default: number; execute: number }) {
    const make = (name: 'default' | 'execute', points: number) =>
      new RateLimiterRedis({ storeClient: redis, keyPrefix: keys.rateLimitPrefix(name), points, duration: 60 });
    this.limiters = { default: make('default', limits.default), execute: make('execute', limits.execute) };
  }

  async consume(policy: 'default' | 'execute', subject: string): Promise<RateDecision> {
    const limiter = this.limiters[policy];
    try {
      const r = await limiter.consume(subject, 1);
      return { allowed: true, limit: limiter.points, remaining: r.remainingPoints, resetSeconds: Math.ceil(r.msBeforeNext / 1000) };
    } catch (e) {
      // The library rejects with a RateLimiterRes when the limit is hit, and with an Error otherwise.
      if (e instanceof RateLimiterRes) {
        return { allowed: false, limit: limiter.points, remaining: 0, resetSeconds: Math.max(1, Math.ceil(e.msBeforeNext / 1000)) };
      }
      throw e;
    }
  }
}
