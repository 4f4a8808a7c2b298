import { isIP } from 'node:net';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { RedisClient } from './redis-client.js';

/*
 * What the sentinels say about a failover of Herald's primary, from its first step on
 * (docs/operations/failover.md).
 *
 * ioredis' own failover detector (redis-connect.ts) acts on +switch-master, the END of a
 * failover: every connection then drops and asks the sentinels for the new primary. Before that,
 * while the leader sentinel selects a replica and sends it REPLICAOF NO ONE, the old primary goes
 * on taking writes, and the promoted replica no longer receives them. A write confirmed there by
 * another replica would then be acknowledged and lost when that replica resyncs from the new
 * primary. So Herald also listens for the events the sentinels publish when a failover BEGINS,
 * and from then until +switch-master (or an abort) acknowledges no durable write (durability.ts).
 */

/** What one sentinel event means for Herald's primary; null for anything else. */
export type SentinelSignal =
  | { kind: 'begun'; master: string; at?: { host: string; port: number } }
  | { kind: 'aborted'; master: string; at?: { host: string; port: number } }
  | { kind: 'switched'; master: string; from: { host: string; port: number }; to: { host: string; port: number } };

/**
 * Events a sentinel publishes while it runs a failover of a master (sentinel.c, in order:
 * +try-failover, +elected-leader, +failover-state-select-slave, +selected-slave,
 * +failover-state-send-slaveof-noone, +failover-state-wait-promotion, +promoted-slave,
 * +failover-state-reconf-slaves, +slave-reconf-*, +failover-end; then +switch-master).
 * +failover-detected: a replica of the master turned into a primary by someone else.
 * Any of them marks the failover as under way, so one missed event does not leave a hole.
 */
const BEGUN =
  /^\+(try-failover|elected-leader|selected-slave|promoted-slave|failover-state-.+|failover-end.*|slave-reconf-.+|failover-detected)$/;
/** A failover given up by the sentinel that started it: the primary stays where it was. */
const ABORTED = /^-failover-abort-/;

/**
 * Reads one event. Instance events name their master as "master <name> <ip> <port>", or, for a
 * replica, "... @ <master-name> <ip> <port>"; +switch-master is
 * "<name> <old-ip> <old-port> <new-ip> <new-port>".
 */
export function parseSentinelEvent(channel: string, message: string): SentinelSignal | null {
  const words = message.trim().split(/\s+/);
  if (channel === '+switch-master') {
    const [master, oldHost, oldPort, host, port] = words;
    if (master === undefined || oldHost === undefined || host === undefined || !(Number(port) > 0)) return null;
    return {
      kind: 'switched',
      master,
      from: { host: oldHost, port: Number(oldPort) },
      to: { host, port: Number(port) },
    };
  }
  const kind = BEGUN.test(channel) ? 'begun' : ABORTED.test(channel) ? 'aborted' : null;
  if (kind === null) return null;
  // The name is followed by the master's address, as the publishing sentinel knows it.
  const i = words.indexOf('@') >= 0 ? words.indexOf('@') + 1 : words[0] === 'master' ? 1 : -1;
  const master = i > 0 ? words[i] : undefined;
  if (master === undefined) return null;
  const host = words[i + 1];
  const port = Number(words[i + 2]);
  return { kind, master, ...(host !== undefined && port > 0 ? { at: { host, port } } : {}) };
}

/** What a sentinel answers to SENTINEL MASTER <name>, as far as the watch cares. */
export interface SentinelAnswer {
  failoverInProgress: boolean;
  /** Where this sentinel says the primary is. */
  at?: { host: string; port: number };
  /** Its failover-timeout for the master, in ms. */
  failoverTimeoutMs?: number;
}

/** SENTINEL MASTER's flat [field, value, …] reply (or a map under RESP3) read into an answer. */
export function readSentinelMaster(raw: unknown): SentinelAnswer | null {
  const f = new Map<string, string>();
  if (Array.isArray(raw)) for (let i = 0; i + 1 < raw.length; i += 2) f.set(String(raw[i]), String(raw[i + 1]));
  else if (raw instanceof Map) for (const [k, v] of raw) f.set(String(k), String(v));
  const flags = f.get('flags');
  if (flags === undefined) return null;
  const timeout = Number(f.get('failover-timeout'));
  const host = f.get('ip');
  const port = Number(f.get('port'));
  return {
    failoverInProgress: flags.split(',').includes('failover_in_progress'),
    ...(host !== undefined && port > 0 ? { at: { host, port } } : {}),
    ...(timeout > 0 ? { failoverTimeoutMs: timeout } : {}),
  };
}

/** Sentinel's own default failover-timeout: how long a failover we cannot ask about may last. */
const DEFAULT_FAILOVER_TIMEOUT_MS = 180_000;
/** How long a begun failover may go without news before its sentinel is asked again. */
export const FAILOVER_RECHECK_AFTER_MS = 2000;

/**
 * The failover state of one master, from the sentinels' events and answers (no I/O: the watch
 * below feeds it). A failover is under way from the first event of one until that same sentinel
 * aborts it, any sentinel announces the switch, or the sentinel, asked again, no longer has one
 * in progress. Tracked per sentinel: when the master is down, several may try, one is elected
 * and the others abort theirs, which must not end the elected one's.
 */
export class FailoverState {
  /** Sentinel → when its failover began and when it was last asked about it. */
  private readonly running = new Map<string, { since: number; askedAt: number }>();
  private failoverTimeoutMs = DEFAULT_FAILOVER_TIMEOUT_MS;
  /** Primaries switched away from (host:port) and when: see redirect() and signal(). */
  private readonly replaced = new Map<string, number>();
  /** Bumped when a failover begins or the primary switches: a write spanning one is not acknowledged. */
  generation = 0;
  /** The primary named by the last switch seen (undefined before any). */
  master: { host: string; port: number } | undefined;

  constructor(readonly name: string) {}

  signal(sentinel: string, s: SentinelSignal | null, now: number): void {
    if (s === null || s.master !== this.name) return;
    if (s.kind === 'begun') {
      // The tail of a failover whose switch was already announced: the other sentinels announce
      // it as soon as the leader has promoted the replica, and the leader goes on reconfiguring
      // the other replicas (+slave-reconf-…, +failover-end) of the primary it replaced.
      if (s.at !== undefined && this.replaced.has(addressKey(s.at))) return;
      if (!this.running.has(sentinel)) this.generation++;
      this.running.set(sentinel, { since: this.running.get(sentinel)?.since ?? now, askedAt: now });
    } else if (s.kind === 'aborted') {
      this.running.delete(sentinel);
    } else if (this.master === undefined || sameAddress(this.master, s.from)) {
      // A switch away from a primary other than the one last named is old news: a sentinel that
      // learns of two failovers late announces the first after another announced the second.
      this.generation++;
      this.master = s.to;
      this.running.clear();
      this.replaced.set(addressKey(s.from), now);
      this.replaced.delete(addressKey(s.to));
    }
  }

  /**
   * Where a connection should go that a sentinel sent to `address` (host:port): the primary the
   * last switch named, when `address` is one that switch replaced, seen within REDIRECT_MS; else
   * null (go where the sentinel said). The sentinels learn of a switch from its leader over a few
   * seconds; a connection that asks one that has not yet would go back to the old primary, which
   * still takes writes until it is demoted, and loses them then.
   */
  redirect(address: string, now: number): { host: string; port: number } | null {
    const at = this.replaced.get(address);
    if (this.master === undefined || at === undefined || now - at > REDIRECT_MS) return null;
    return { ...this.master };
  }

  /** Events may have been missed (a subscription was down): go where the sentinels say. */
  forgetRedirects(): void {
    this.replaced.clear();
  }

  /** What `sentinel` answered when asked; undefined when it could not be asked. */
  answer(sentinel: string, a: SentinelAnswer | undefined, now: number): void {
    if (a === undefined) {
      const r = this.running.get(sentinel);
      if (r !== undefined) r.askedAt = now;
      return;
    }
    if (a.failoverTimeoutMs !== undefined) this.failoverTimeoutMs = a.failoverTimeoutMs;
    // Where the sentinel says the primary is, is not taken from an answer: sentinels disagree for
    // a moment around every switch. Only +switch-master moves it.
    // A failover of a primary already switched away from is past the point that matters.
    const tail = a.at !== undefined && this.replaced.has(addressKey(a.at));
    if (a.failoverInProgress && !tail) this.signal(sentinel, { kind: 'begun', master: this.name }, now);
    else this.running.delete(sentinel);
  }

  /**
   * Whether a failover is under way. One that its sentinel cannot be asked about ends, at the
   * latest, after the sentinels' failover-timeout: by then it has ended or been given up.
   */
  underWay(now: number): boolean {
    for (const [sentinel, r] of this.running) {
      if (now - r.since > this.failoverTimeoutMs) this.running.delete(sentinel);
    }
    return this.running.size > 0;
  }

  /** Sentinels whose failover has gone FAILOVER_RECHECK_AFTER_MS without news. */
  due(now: number): string[] {
    return [...this.running].filter(([, r]) => now - r.askedAt >= FAILOVER_RECHECK_AFTER_MS).map(([s]) => s);
  }
}

/** How long after a switch a sentinel naming the old primary is taken to be late (redirect()). */
export const REDIRECT_MS = 30_000;

const addressKey = (a: { host: string; port: number }): string => `${a.host}:${a.port}`;
const unmapped = (a: string): string => (a.startsWith('::ffff:') ? a.slice(7) : a);
const sameAddress = (a: { host: string; port: number }, b: { host: string; port: number }): boolean =>
  a.port === b.port && unmapped(a.host) === unmapped(b.host);

/** What durability.ts asks of a watch. */
export interface FailoverSignal {
  /** Bumped when a failover begins or the primary switches. */
  readonly generation: number;
  /** Why a durable write must not be acknowledged now, or null when it may be. */
  refusal(writer: RedisClient): string | null;
}

export interface SentinelEndpoints {
  sentinels: { host: string; port: number }[];
  name: string;
  username?: string;
  password?: string;
}

/**
 * Subscribes to every sentinel's events (one connection each, and one to ask it questions) and
 * keeps a FailoverState for the master.
 */
export class SentinelFailoverWatch implements FailoverSignal {
  private readonly state: FailoverState;
  private readonly subscribers: Redis[] = [];
  private readonly askers = new Map<string, Redis>();
  private readonly asking = new Set<string>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    readonly target: SentinelEndpoints,
    /** Where "failover begun" is logged; the first user that has a logger sets it. */
    public log?: Logger,
    private readonly now: () => number = Date.now,
  ) {
    this.state = new FailoverState(target.name);
    for (const s of target.sentinels) {
      const id = `${s.host}:${s.port}`;
      const options = {
        host: s.host,
        port: s.port,
        ...(target.username !== undefined ? { username: target.username } : {}),
        ...(target.password !== undefined ? { password: target.password } : {}),
        // A sentinel that is down is tried again every second, for as long as Herald runs.
        retryStrategy: () => 1000,
        connectionName: 'herald-failover-watch',
      };
      const sub = new Redis({ ...options, maxRetriesPerRequest: null });
      sub.on('error', () => undefined);
      sub.on('pmessage', (_pattern: string, channel: string, message: string) => {
        const signal = parseSentinelEvent(channel, message);
        const before = this.state.underWay(this.now());
        const master = this.state.master;
        this.state.signal(id, signal, this.now());
        if (this.state.master !== master) this.moveFollowers();
        if (signal !== null && signal.master === target.name) {
          this.log?.info(
            { sentinel: id, event: channel },
            before ? 'sentinel failover event' : 'sentinel failover begun',
          );
        }
      });
      // Whatever happened while this sentinel was out of reach is asked once it is back, and a
      // switch it may have announced meanwhile is not known here: stop correcting the sentinels.
      let connected = false;
      sub.on('ready', () => {
        if (connected) this.state.forgetRedirects();
        connected = true;
        void this.ask(id);
      });
      // Every channel: the events of interest differ between Redis versions (parseSentinelEvent).
      sub.psubscribe('*').catch(() => undefined);
      this.subscribers.push(sub);
      const asker = new Redis({ ...options, maxRetriesPerRequest: 1, commandTimeout: 1000, enableOfflineQueue: false });
      asker.on('error', () => undefined);
      this.askers.set(id, asker);
    }
    this.timer = setInterval(() => {
      for (const id of this.state.due(this.now())) void this.ask(id);
    }, 250);
    this.timer.unref();
  }

  get generation(): number {
    return this.state.generation;
  }

  /** Sentinel connections to move to the new primary when the primary switches. */
  private readonly followers = new Set<Redis>();

  follow(client: Redis): void {
    this.followers.add(client);
  }

  unfollow(client: Redis): void {
    this.followers.delete(client);
  }

  /**
   * Reconnects every follower not on the primary the switch named; it asks the sentinels again
   * (and redirect() corrects one that has not heard of the switch yet).
   */
  private moveFollowers(): void {
    for (const client of this.followers) {
      if (client.status === 'end' || onAddress(client, this.state.master)) continue;
      client.disconnect(true);
    }
  }

  /** ioredis' natMap for the Sentinel connections: see FailoverState.redirect. */
  redirect(address: string): { host: string; port: number } | null {
    return this.state.redirect(address, this.now());
  }

  refusal(writer: RedisClient): string | null {
    if (this.state.underWay(this.now())) return 'a Sentinel failover of the primary is under way';
    if (!onAddress(writer, this.state.master)) return 'the connection is not on the primary the sentinels named';
    return null;
  }

  /** Asks one sentinel where the primary is and whether it runs a failover of it. */
  private async ask(id: string): Promise<void> {
    const asker = this.askers.get(id);
    if (asker === undefined || this.asking.has(id)) return;
    this.asking.add(id);
    try {
      const answer = readSentinelMaster(await asker.call('SENTINEL', 'MASTER', this.target.name)) ?? undefined;
      this.state.answer(id, answer, this.now());
    } catch {
      this.state.answer(id, undefined, this.now());
    } finally {
      this.asking.delete(id);
    }
  }

  close(): void {
    clearInterval(this.timer);
    for (const c of [...this.subscribers, ...this.askers.values()]) c.disconnect();
  }
}

/**
 * Whether `writer` is connected to `master` (true when no switch has named one yet: until then
 * ioredis' own choice stands). Compared by IP and port when the sentinels announce IPs; when they
 * announce host names (announce-hostnames), by port only, as the socket knows only the IP.
 */
function onAddress(writer: RedisClient, master: { host: string; port: number } | undefined): boolean {
  if (master === undefined || !(writer instanceof Redis)) return true;
  const stream = writer.status === 'ready' ? writer.stream : undefined;
  if (stream?.remotePort === undefined || stream.remoteAddress === undefined) return false;
  if (stream.remotePort !== master.port) return false;
  return isIP(master.host) === 0 || unmapped(master.host) === unmapped(stream.remoteAddress);
}

/** One watch per sentinel set and master name in a process, shared by the connections using it. */
const watches = new Map<string, { watch: SentinelFailoverWatch; users: number }>();

/** A use of a shared watch; release() once done with it (the last one stops the watch). */
export interface FailoverWatchLease {
  watch: SentinelFailoverWatch;
  release(): void;
}

/** The watch of `target`, started on first use. */
export function acquireFailoverWatch(target: SentinelEndpoints, log?: Logger): FailoverWatchLease {
  const key = JSON.stringify([target.name, target.sentinels, target.username ?? null]);
  const entry = watches.get(key) ?? { watch: new SentinelFailoverWatch(target, log), users: 0 };
  entry.watch.log ??= log;
  entry.users++;
  watches.set(key, entry);
  let released = false;
  return {
    watch: entry.watch,
    release() {
      if (released) return;
      released = true;
      if (--entry.users > 0) return;
      entry.watch.close();
      watches.delete(key);
    },
  };
}
