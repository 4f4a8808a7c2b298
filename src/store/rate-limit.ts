import type { RedisClient as Redis } from './redis-connect.js';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { RateDecision, RateLimiter } from '../ports/index.js';
import type { Keys } from './keys.js';

/**
 * Per-API-key fixed-window limits shared by every instance (rate-limiter-flexible on Redis):
 * `default` for every request, `execute` on top of it for executions.
 *
 * A busy key does not ask Redis on every request: the process takes a small lease of the key's
 * budget at once (a batch of points, consumed in Redis like single requests would be) and hands
 * them out itself until the lease is used up or the window ends. The budget stays shared: what all
 * instances lease together never exceeds the limit. What a lease costs is that a process may hold
 * a few points another instance could have used: a client spread over several instances can meet
 * its 429 up to (instances − 1) × the lease size early. So leases stay small — they grow (doubling)
 * only while a key uses them up within a second, shrink when it slows down, are at most 1/50 of
 * the limit (12 points of the default 600, none for the 60 of execute) and 100 points at most, and
 * shrink again near the end of the budget so the last points go out one by one.
 */

/** A lease is at most this share of the limit (1/50): the bound on what a process may hold back. */
const LEASE_SHARE = 50;
const MAX_LEASE = 100;
/** A lease used up within this long means the key is busy enough for a bigger one. */
const BUSY_MS = 1000;
/** Keys whose lease is remembered; past it the oldest are forgotten (they only ask Redis again). */
const MAX_KEYS = 10_000;

interface Lease {
  /** Points still to hand out. */
  tokens: number;
  /** When the window (and so the lease) ends, ms. */
  until: number;
  /** What Redis had left for everyone once this lease was taken. */
  remainingAfter: number;
  /** Its size, and when it was taken: the next one's size follows how fast it went. */
  size: number;
  takenAt: number;
  /** The budget was spent when it was asked for: refused until the window ends. */
  spent?: boolean;
}

export class RedisRateLimiter implements RateLimiter {
  private readonly limiters: Record<'default' | 'execute', RateLimiterRedis>;
  private readonly leases = new Map<string, Lease>();
  /** The lease being taken for a key: concurrent requests wait for it (and share its failure) instead of each taking one. */
  private readonly taking = new Map<string, Promise<void>>();

  constructor(
    redis: Redis,
    keys: Keys,
    limits: { default: number; execute: number },
    private readonly now: () => number = Date.now,
  ) {
    const make = (name: 'default' | 'execute', points: number) =>
      new RateLimiterRedis({ storeClient: redis, keyPrefix: keys.rateLimitPrefix(name), points, duration: 60 });
    this.limiters = { default: make('default', limits.default), execute: make('execute', limits.execute) };
  }

  /**
   * A point of `subject`'s budget under `policy`. Synchronous while the process holds a lease for
   * the key (nearly every request of a busy key): no promise, no turn of the event loop.
   */
  consume(policy: 'default' | 'execute', subject: string): RateDecision | Promise<RateDecision> {
    const limiter = this.limiters[policy];
    const key = `${policy}\u0000${subject}`;
    return this.fromLease(limiter, key, this.now()) ?? this.consumeLeasing(limiter, key, subject);
  }

  /** The decision the key's lease gives on its own, or undefined when a new lease is needed. */
  private fromLease(limiter: RateLimiterRedis, key: string, now: number): RateDecision | undefined {
    const held = this.leases.get(key);
    if (held === undefined || now >= held.until) return undefined;
    if (held.spent)
      return {
        allowed: false,
        limit: limiter.points,
        remaining: 0,
        resetSeconds: Math.max(1, Math.ceil((held.until - now) / 1000)),
      };
    if (held.tokens <= 0) return undefined;
    held.tokens--;
    return {
      allowed: true,
      limit: limiter.points,
      remaining: held.remainingAfter + held.tokens,
      resetSeconds: Math.max(1, Math.ceil((held.until - now) / 1000)),
    };
  }

  private async consumeLeasing(limiter: RateLimiterRedis, key: string, subject: string): Promise<RateDecision> {
    for (;;) {
      // One lease at a time per key: requests that arrive meanwhile share it, then look again.
      const inFlight = this.taking.get(key);
      if (inFlight === undefined) return this.lease(limiter, key, subject, this.leases.get(key), this.now());
      await inFlight;
      const decided = this.fromLease(limiter, key, this.now());
      if (decided !== undefined) return decided;
    }
  }

  /** Takes a new lease for `key` and hands its first point to the caller. */
  private async lease(
    limiter: RateLimiterRedis,
    key: string,
    subject: string,
    held: Lease | undefined,
    now: number,
  ): Promise<RateDecision> {
    const size = leaseSize(held, now, limiter.points);
    const taking = take(limiter, subject, size);
    // Waiters share the outcome, a failure included: with Redis away each of them must answer
    // 503 now, not take its turn at failing again, one bounded time-out after another.
    const shared = taking.then(() => undefined);
    shared.catch(() => undefined);
    this.taking.set(key, shared);
    let taken: Awaited<typeof taking>;
    try {
      taken = await taking;
    } finally {
      this.taking.delete(key);
    }
    const resetSeconds = Math.max(1, Math.ceil(taken.msBeforeNext / 1000));
    if (taken.granted === 0) {
      // Spent for this window (fixed windows refill only when they end): refused here until then.
      this.remember(key, {
        tokens: 0,
        until: now + taken.msBeforeNext,
        remainingAfter: 0,
        size: 1,
        takenAt: now,
        spent: true,
      });
      return { allowed: false, limit: limiter.points, remaining: 0, resetSeconds };
    }
    this.remember(key, {
      tokens: taken.granted - 1,
      until: now + taken.msBeforeNext,
      remainingAfter: taken.remaining,
      size,
      takenAt: now,
    });
    return { allowed: true, limit: limiter.points, remaining: taken.remaining + taken.granted - 1, resetSeconds };
  }

  private remember(key: string, lease: Lease): void {
    this.leases.delete(key);
    this.leases.set(key, lease);
    if (this.leases.size > MAX_KEYS) this.leases.delete(this.leases.keys().next().value as string);
  }
}

/** The next lease's size for a key (see the module comment). */
function leaseSize(prev: Lease | undefined, now: number, limit: number): number {
  const cap = Math.min(MAX_LEASE, Math.floor(limit / LEASE_SHARE));
  if (cap <= 1 || prev === undefined) return 1;
  const busy = now - prev.takenAt < BUSY_MS;
  const wanted = busy ? prev.size * 2 : Math.floor(prev.size / 2);
  // Near the end of the budget, small leases: the last points go out one by one.
  const nearEnd = now < prev.until ? Math.floor(prev.remainingAfter / 4) : cap;
  return Math.max(1, Math.min(cap, wanted, nearEnd));
}

/**
 * Consumes up to `size` points: all of them, or what was left (the overshoot is given back, so a
 * refused request never uses up points other requests could have had).
 */
async function take(
  limiter: RateLimiterRedis,
  subject: string,
  size: number,
): Promise<{ granted: number; remaining: number; msBeforeNext: number }> {
  try {
    const r = await limiter.consume(subject, size);
    return { granted: size, remaining: r.remainingPoints, msBeforeNext: r.msBeforeNext };
  } catch (e) {
    // The library rejects with a RateLimiterRes when the limit is hit, and with an Error otherwise.
    if (!(e instanceof RateLimiterRes)) throw e;
    const over = Math.min(size, e.consumedPoints - limiter.points);
    await limiter.reward(subject, over);
    return { granted: size - over, remaining: 0, msBeforeNext: e.msBeforeNext };
  }
}
