import { AsyncLocalStorage } from 'node:async_hooks';

/*
 * Kept in the domain layer (it does no I/O) so that both edges, HTTP and Slack, can judge an
 * error without reaching into the store.
 */

/**
 * Whether an error means "Redis cannot be used right now" rather than a bug: ioredis' time-outs,
 * closed or unwritable connections, exhausted retries, socket errors, and the replies of a Redis
 * that is loading, read-only (a demoted primary, which also unblocks a WAIT with UNBLOCKED), short
 * of replicas (NOREPLICAS, min-replicas-to-write) or whose cluster is down. The HTTP and Slack
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
    /^(LOADING|READONLY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|BUSY|UNBLOCKED|NOREPLICAS) /.test(m) ||
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
 * request is unanswered races it. Once it passes a command fails with RequestDeadlineError (a
 * "Redis cannot be used" error, answered 503), and a command not yet sent is never sent: a request
 * answered 503 does not go on to commit its write afterwards.
 *
 * The deadline passes only while Redis is not answering (see redisStalledFor): a request that
 * Redis keeps answering — a large execute, or any request on a machine whose CPUs are busy — is
 * slow, not stuck, and cutting it off would turn load into errors. When the time is up and Redis
 * has made progress recently, the deadline looks again shortly after.
 */
export interface Deadline {
  /** Set once the deadline has passed: commands not yet sent fail at once. */
  readonly passed: boolean;
  /** Rejects when the deadline passes (never resolves); commands race it. */
  readonly expired: Promise<never>;
  /** Set once the request is answered: what it started afterwards is not bound by it. */
  finished: boolean;
  /**
   * The request was answered. The deadline stops once no command sent under it is outstanding:
   * one still waiting (a Slack handler acks first and reads on) stays bound by it.
   */
  end(): void;
  /** A command is sent under the deadline; `release` when it settles. */
  hold(): void;
  release(): void;
}

/** The error a command gets when the request's deadline passes before Redis answers. */
export class RequestDeadlineError extends Error {
  constructor() {
    super("Redis did not answer within the request's deadline");
    this.name = 'RequestDeadlineError';
  }
}

/**
 * Redis counts as stalled once commands have been waiting this long with no reply to any of them.
 * Far above a healthy reply on a loaded machine, and far below the 2 s within which a stalled
 * Redis is answered. A reply usually takes milliseconds, but an overloaded 2-core machine has
 * left Redis unscheduled for a quarter of a second inside one trivial script (its SLOWLOG: 245 ms
 * for an HGET and an HSET): a bound near that turns load into 503s.
 */
export const REDIS_STALL_MS = 500;
/** How often a deadline whose time is up looks again while Redis is still answering. */
const RECHECK_MS = 100;

/**
 * How long the request connections' outstanding commands have gone without any reply (0 when
 * nothing is outstanding), and a way to ask Redis something when nothing is: the store sets both
 * (src/store/deadline.ts) when it binds a request connection. Without them, Redis counts as
 * stalled whenever a deadline's time is up.
 */
let stalledFor: () => number = () => Number.POSITIVE_INFINITY;
let probeRedis: () => void = () => undefined;

export function setRedisStallProbe(probe: () => number, ping: () => void): void {
  stalledFor = probe;
  probeRedis = ping;
}

/** Whether Redis has stopped answering the request connections (see REDIS_STALL_MS). */
export function redisStalled(): boolean {
  return stalledFor() >= REDIS_STALL_MS;
}

/**
 * Calls `then` once `ms` have passed and Redis is stalled, looking again every RECHECK_MS while
 * it is not. A stall is confirmed after the event loop's I/O phase (setImmediate): on a busy
 * machine a reply may already sit in the socket, and a timer runs before it is read.
 * Returns a function that cancels.
 */
export function whenStalledAfter(ms: number, then: () => void): () => void {
  const watch = new StallWatch(then);
  // A request waiting on something else has no command outstanding, and a ping sent only at `ms`
  // could show a stall no earlier than REDIS_STALL_MS later: send it ahead, so that by `ms` it
  // has been waiting that long if Redis is not answering. One timer at a time: the look at `ms`
  // is set when the ping goes out. Nearly every wait is cancelled within milliseconds, before
  // either, and each timer set and cleared is a cost on every request.
  if (ms > REDIS_STALL_MS) {
    watch.lookAt = performance.now() + ms;
    watch.timer = setTimeout(probeAhead, ms - REDIS_STALL_MS, watch);
  } else watch.timer = setTimeout(look, Math.max(0, ms), watch);
  return () => watch.cancel();
}

/*
 * One wait of whenStalledAfter, with its timers' callbacks at module level. Every request opens
 * two such waits and every command outside a request one: the bundle (scripts/bundle.mjs) keeps
 * function names with esbuild's `keepNames`, which redefines the `name` of each named closure as
 * it is created, about a microsecond apiece, so hot paths create no named closures.
 */
class StallWatch {
  /** The one timer the wait has: the early ping's, then the look's. */
  timer: NodeJS.Timeout | undefined;
  immediate: NodeJS.Immediate | undefined;
  /** When the first look is due (performance.now() ms), while the early ping's timer is the one set. */
  lookAt = 0;
  constructor(readonly onStall: () => void) {}
  cancel(): void {
    clearTimeout(this.timer);
    if (this.immediate !== undefined) clearImmediate(this.immediate);
  }
}

function probeAhead(watch: StallWatch): void {
  probeRedis();
  // A late ping (a busy machine runs timers late) does not push the look back.
  watch.timer = setTimeout(look, Math.max(0, Math.ceil(watch.lookAt - performance.now())), watch);
}

function look(watch: StallWatch): void {
  watch.timer = undefined;
  if (!redisStalled()) {
    // A request waiting on something else (BullMQ's connection, the CPU) has no command of its
    // own outstanding: a ping shows within REDIS_STALL_MS whether Redis is answering.
    probeRedis();
    watch.timer = setTimeout(look, RECHECK_MS, watch);
    return;
  }
  watch.immediate = setImmediate(confirm, watch);
}

function confirm(watch: StallWatch): void {
  watch.immediate = undefined;
  if (redisStalled()) watch.onStall();
  else watch.timer = setTimeout(look, RECHECK_MS, watch);
}

const storage = new AsyncLocalStorage<Deadline>();
/** Does nothing: a wait's cancel before it has one (one shared function, not a closure per call). */
export const nothing = (): void => undefined;

/** A deadline `ms` from now (passing only while Redis is stalled); `end()` it when answered. */
export function openDeadline(ms: number): Deadline {
  let cancel = nothing;
  let pending = 0;
  const d = {
    passed: false,
    finished: false,
    expired: undefined as unknown as Promise<never>,
    end() {
      d.finished = true;
      if (pending === 0) cancel();
    },
    hold() {
      pending++;
    },
    release() {
      if (--pending === 0 && d.finished) cancel();
    },
  };
  d.expired = new Promise<never>((_, reject) => {
    cancel = whenStalledAfter(ms, () => {
      d.passed = true;
      reject(new RequestDeadlineError());
    });
  });
  // Nobody may be racing it when it passes.
  d.expired.catch(() => undefined);
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
