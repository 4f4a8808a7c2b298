/**
 * The one optimistic-write loop. Every service that compare-and-sets a record reads it, computes
 * the change and commits only if the record is still what it read; losing that race is not the
 * client's problem (docs/api.md): the attempt is re-run on a fresh read after a short,
 * jittered pause, so many writers at once spread out instead of colliding again in lock-step.
 * Only a client's own stale If-Match is a 412/409 — the attempt throws that itself.
 */

/** What an attempt returns when its compare-and-set lost to a concurrent write. */
export const LOST_RACE: unique symbol = Symbol('lost race');
export type Attempt<T> = T | typeof LOST_RACE;

export interface RetryOptions {
  /** Attempts before giving up (each one re-reads). */
  attempts?: number;
  /** Upper bound of the first pause; it doubles per attempt up to `maxDelayMs` (full jitter). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  random?: () => number;
}

/**
 * Enough for 20 concurrent writers of one record (each round lets at least one through) with
 * time to spare; the worst case waits well under a second in all.
 */
export const CONFLICT_ATTEMPTS = 40;

/**
 * The bound for a delivery's own writes (the worker's and a cancel's). Unlike an API record, a
 * delivery has few writers that can race: the one worker holding its job, and a cancel
 * (its connection deleted or disabled); redeliver only touches a failed one, which no worker
 * writes. Each lost round lets one of them through, so 5 rounds cover them with room to spare;
 * past that something is wrong, and the loser does not spin: the worker looks again later
 * (the job is delayed), a cancel leaves that delivery to its worker's next look.
 */
export const DELIVERY_WRITE_ATTEMPTS = 5;

export async function retryOnConflict<T>(
  attempt: (n: number) => Promise<Attempt<T>>,
  exhausted: () => Error,
  opts: RetryOptions = {},
): Promise<T> {
  const attempts = opts.attempts ?? CONFLICT_ATTEMPTS;
  const base = opts.baseDelayMs ?? 4;
  const max = opts.maxDelayMs ?? 50;
  const random = opts.random ?? Math.random;
  for (let n = 0; n < attempts; n++) {
    const r = await attempt(n);
    if (r !== LOST_RACE) return r;
    if (n + 1 < attempts) {
      const cap = Math.min(max, base * 2 ** Math.min(n, 10));
      await new Promise((resolve) => setTimeout(resolve, Math.floor(random() * cap)));
    }
  }
  throw exhausted();
}
