import {
  currentDeadline,
  nothing,
  RequestDeadlineError,
  setRedisStallProbe,
  whenStalledAfter,
} from '../domain/common/unavailable.js';
import { Cluster, type Redis } from 'ioredis';
import type { RedisClient } from './redis-client.js';

/*
 * The store's half of the request deadline (domain/common/unavailable.ts has the deadline itself):
 * the Redis commands of a request connection race it.
 */

/** Throws RequestDeadlineError when the current request's deadline has passed. */
export function checkDeadline(): void {
  const d = currentDeadline();
  if (d !== undefined && d.passed) throw new RequestDeadlineError();
}

/** `p`, or RequestDeadlineError once the current request's deadline passes first. */
export function raceDeadline<T>(p: Promise<T>): Promise<T> {
  const d = currentDeadline();
  return d === undefined ? p : Promise.race([p, d.expired]);
}

/*
 * Whether Redis is answering at all: the commands the request connections have outstanding, and
 * when the last of them was answered (or, from idle, when the first was sent). A deadline passes
 * only while this shows no progress (domain/common/unavailable.ts), so a slow machine is not
 * mistaken for a stalled Redis.
 */
let outstanding = 0;
let progressAt = Date.now();
/** Of the time since progressAt, how much this process was not being run (see noticePause). */
let pausedSinceProgress = 0;
/** Whether the last command to settle was answered by Redis (a reply, or an error reply). */
let lastWasReply = true;
const progress = (): void => {
  progressAt = Date.now();
  pausedSinceProgress = 0;
};
const answered = (): void => {
  outstanding--;
  progress();
  lastWasReply = true;
};
// A time-out or a closed connection is not Redis answering: counting it as progress would keep a
// stalled Redis looking alive (each command's own time-out fires during a long stall).
const unanswered = (err: unknown): void => {
  if (err instanceof Error && err.name === 'ReplyError') return answered();
  outstanding--;
  lastWasReply = false;
};

/*
 * Silence counts only while this process is being run. A paused machine (a VM the host stops for
 * a moment, a container frozen or throttled) stops Redis and Herald alike: on waking, Herald's
 * overdue timers would find Redis "silent" for the whole pause before Redis has had a moment to
 * answer, and a healthy Redis would be taken for a stalled one (503). A heartbeat notices such
 * pauses by how late it runs, and the time they took is not counted as silence. Lateness under
 * PAUSE_MS is left alone: a busy machine's timers run that late all the time, and a stall must
 * still be recognised there within its bound.
 */
const HEARTBEAT_MS = 50;
const PAUSE_MS = 100;
let beatAt = Date.now();
let heartbeat: NodeJS.Timeout | undefined;

/** Counts the time since the last beat as a pause when it is PAUSE_MS longer than a beat. */
function noticePause(): void {
  const now = Date.now();
  const late = now - beatAt - HEARTBEAT_MS;
  beatAt = now;
  // Only the part after the last progress: the rest is not in the silence being measured.
  if (late >= PAUSE_MS) pausedSinceProgress += Math.min(late, now - progressAt - pausedSinceProgress);
}

/** How long Redis has been silent while this process was running, on the request connections. */
function silentFor(): number {
  if (outstanding === 0) return 0;
  // A timer of a deadline can run before the heartbeat that would see the pause it woke from.
  noticePause();
  return Math.max(0, Date.now() - progressAt - pausedSinceProgress);
}

/** The first request connection bound, with its own (unbound) ping, for the probe below. */
let pinger: (() => Promise<unknown>) | undefined;
setRedisStallProbe(silentFor, () => {
  // One ping at a time, and only when nothing else would show whether Redis answers.
  if (outstanding === 0 && pinger !== undefined) tracked(pinger()).catch(() => undefined);
});

/** Counts `p` as outstanding until it settles (whatever its outcome). */
function tracked<T>(p: Promise<T>): Promise<T> {
  // From idle, the wait starts now, unless Redis was already not answering the last command.
  if (outstanding === 0 && lastWasReply) progress();
  outstanding++;
  p.then(answered, unanswered);
  return p;
}

/**
 * Any byte Redis sends on a request connection is progress, not only a whole reply: a large reply
 * (an execution's thousand deliveries of ~10 kB, one MGET of megabytes) streams in over many reads
 * on a busy machine, and judging by whole replies alone took a Redis that was sending the whole
 * time for a stalled one. A paused or cut-off Redis sends nothing, so a stall is still seen.
 */
function countBytesAsProgress(client: RedisClient): void {
  const watch = (node: Redis): void => {
    // Each (re)connection has a socket of its own.
    node.on('connect', () => node.stream.on('data', progress));
    if (node.status === 'connect' || node.status === 'ready') node.stream.on('data', progress);
  };
  if (client instanceof Cluster) client.on('+node', watch);
  else watch(client);
}

type AnyFn = (this: unknown, ...args: unknown[]) => unknown;

const isThenable = (v: unknown): v is Promise<unknown> =>
  typeof v === 'object' && v !== null && typeof (v as { then?: unknown }).then === 'function';

/**
 * Binds every command of `client` to the request deadline: its built-in commands, `call`, the
 * commands a library defined on it so far (rate-limiter-flexible's scripts) and what its pipelines
 * and transactions `exec`. Outside a request, with `silenceBound`, a command fails once Redis has
 * sent nothing for REQUEST_COMMAND_STALL_MS (the connection's fixed time-out is only a backstop);
 * without it (a connection of long commands, ConnectOptions.longCommands), its own time-out bounds it.
 * Call after the scripts are defined.
 */
export function bindToRequestDeadline(client: RedisClient, opts: { silenceBound: boolean }): void {
  const target = client as unknown as Record<string, unknown>;
  pinger ??= client.ping.bind(client);
  // Unref'd: it must not keep a process (the CLI, a test) alive.
  if (heartbeat === undefined) {
    beatAt = Date.now();
    heartbeat = setInterval(noticePause, HEARTBEAT_MS).unref();
  }
  countBytesAsProgress(client);
  const names = new Set<string>([...client.getBuiltinCommands(), 'call', 'sendCommand']);
  // A library's scripts and their Buffer variants are own properties added by defineCommand.
  for (const key of Object.keys(target)) if (typeof target[key] === 'function') names.add(key);
  for (const name of names) {
    if (name === 'pipeline' || name === 'multi' || name === 'sendCommand') continue;
    const original = target[name];
    if (typeof original !== 'function') continue;
    target[name] = bound(original as AnyFn, opts.silenceBound);
  }
  for (const name of ['pipeline', 'multi'] as const) {
    const create = target[name];
    if (typeof create !== 'function') continue;
    target[name] = function (this: unknown, ...args: unknown[]) {
      const chain = (create as AnyFn).apply(this, args) as Record<string, unknown>;
      const exec = chain.exec;
      if (typeof exec === 'function') chain.exec = bound(exec as AnyFn, opts.silenceBound);
      return chain;
    };
  }
}

/**
 * How long a request connection's command may wait while Redis sends nothing, outside a request
 * (Socket Mode events, the work an edge does after answering, the CLI). Inside a request the
 * request's deadline bounds it instead. Redis that is sending — a reply of megabytes on a busy
 * machine — is never cut off: a fixed per-command time-out answered such reads 503.
 */
export const REQUEST_COMMAND_STALL_MS = 1200;

/** `p`, or RequestDeadlineError once Redis has sent nothing for REQUEST_COMMAND_STALL_MS. */
function stallBounded<T>(p: Promise<T>): Promise<T> {
  let cancel = nothing;
  const stalled = new Promise<never>((_, reject) => {
    cancel = whenStalledAfter(REQUEST_COMMAND_STALL_MS, () => reject(new RequestDeadlineError()));
  });
  return Promise.race([p, stalled]).finally(cancel);
}

function bound(original: AnyFn, silenceBound: boolean): AnyFn {
  return function (this: unknown, ...args: unknown[]) {
    // A call with a callback is ioredis' own (its ready check, its connection set-up): it must
    // run, and its callback is how it learns the outcome, whatever request is being served.
    if (typeof args[args.length - 1] === 'function') return original.apply(this, args);
    const d = currentDeadline();
    if (d === undefined) {
      const result = original.apply(this, args);
      if (!isThenable(result)) return result;
      return silenceBound ? handled(stallBounded(tracked(result))) : tracked(result);
    }
    // Past the deadline nothing more is sent: the request is being answered 503.
    if (d.passed) return handled(Promise.reject(new RequestDeadlineError()));
    const result = original.apply(this, args);
    if (!isThenable(result)) return result;
    d.hold();
    // Unnamed callbacks: a named closure costs each command a redefinition of its name in the
    // bundle (StallWatch in domain/common/unavailable.ts).
    tracked(result).then(
      () => d.release(),
      () => d.release(),
    );
    return handled(Promise.race([result, d.expired]));
  };
}

/**
 * Marks a rejection as seen: a caller that drops the promise (a fire-and-forget renewal) must not
 * turn a request's deadline into an unhandled rejection, which ends the process. Callers that
 * await it still get the error.
 */
function handled<T>(p: Promise<T>): Promise<T> {
  p.catch(() => undefined);
  return p;
}
