import { AsyncLocalStorage } from 'node:async_hooks';

/*
 * Kept in the domain layer (it does no I/O) so that both edges, HTTP and Slack, can judge an
 * error without reaching into the store.
 */

/**
 * Whether an error means "Redis cannot be used right now" rather than a bug: ioredis' time-outs,
 * closed or unwritable connections, exhausted retries, socket errors, and the replies of a Redis
 * that is loading, read-only (a demoted primary, which also unblocks a WAIT with UNBLOCKED) or whose
 * cluster is down. The HTTP and Slack
 * edges answer these as 503 service_unavailable.
 */
export function isRedisUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  // RequestDeadlineError: the request's one deadline over all its Redis calls passed (store/deadline.ts).
  // ReplicaWaitError: fewer replicas than HERALD_REDIS_WAIT_REPLICAS acknowledged a write in time.
  if (['MaxRetriesPerRequestError', 'RequestDeadlineError', 'ReplicaWaitError'].includes(err.name)) return true;
  const code = (err as { code?: unknown }).code;
  if (
    typeof code === 'string' &&
    /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|ENOTFOUND|EHOSTUNREACH|ENETUNREACH|EAI_AGAIN|ENOENT)$/.test(code)
  )
    return true;
  const m = err.message;
  return (
    m === 'Command timed out' ||
    m === 'Connection is closed.' ||
    // A command in flight when its connection closed (a failover drops every connection).
    m === 'Command aborted due to connection close' ||
    m.startsWith("Stream isn't writeable") ||
    m.startsWith('Reached the max retries per request limit') ||
    m.startsWith('connect ETIMEDOUT') ||
    /^(LOADING|READONLY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|BUSY|UNBLOCKED) /.test(m) ||
    m.startsWith('Failed to refresh slots cache') ||
    m.startsWith('Too many Cluster redirections') ||
    m.startsWith('None of startup nodes is available')
  );
}

/**
 * One deadline per request, covering every Redis call the request makes.
 *
 * A per-command time-out adds up: a request that makes three calls against a paused Redis waits
 * three time-outs. Instead the HTTP edge opens a deadline when a request arrives
 * (src/http/middleware/deadline.ts), and every command a request connection sends while the
 * request is unanswered races the time that is left. Past the deadline a command fails with
 * RequestDeadlineError (a "Redis cannot be used" error, answered 503), and a command not yet sent
 * is never sent: a request answered 503 does not go on to commit its write afterwards.
 */
export interface Deadline {
  /** Date.now() at which the request's Redis calls give up. */
  readonly at: number;
  /** Rejects at `at` (never resolves); commands race it. */
  readonly expired: Promise<never>;
  /** Set once the request is answered: what it started afterwards is not bound by it. */
  finished: boolean;
  /** Stops the timer (the request was answered). */
  end(): void;
}

/** The error a command gets when the request's deadline passes before Redis answers. */
export class RequestDeadlineError extends Error {
  constructor() {
    super("Redis did not answer within the request's deadline");
    this.name = 'RequestDeadlineError';
  }
}

const storage = new AsyncLocalStorage<Deadline>();

/** A deadline `ms` from now; `end()` it when the request is answered. */
export function openDeadline(ms: number): Deadline {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RequestDeadlineError()), Math.max(0, ms));
  });
  // Nobody may be racing it when it fires.
  expired.catch(() => undefined);
  const d: Deadline = {
    at: Date.now() + ms,
    expired,
    finished: false,
    end() {
      d.finished = true;
      clearTimeout(timer);
    },
  };
  return d;
}

/** Runs `fn` (and everything it starts) under `deadline`. */
export function withDeadline<T>(deadline: Deadline, fn: () => T): T {
  return storage.run(deadline, fn);
}

/** The deadline of the request being served, if any and still open. */
export function currentDeadline(): Deadline | undefined {
  const d = storage.getStore();
  return d === undefined || d.finished ? undefined : d;
}
