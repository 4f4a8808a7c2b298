import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { Config } from '../config.js';
import { releaseSettledPipelines } from './pipeline-release.js';
import { bindToRequestDeadline } from './deadline.js';
import { acquireFailoverWatch, type FailoverWatchLease } from './failover-watch.js';
import { redisLocation } from './redis-location.js';

/**
 * Where Herald's Redis is: one server (REDIS_URL or the embedded socket), a Redis Cluster
 * (REDIS_CLUSTER_NODES) or a primary found through Sentinels (REDIS_SENTINELS).
 * docs/configuration.md lists the variables; docs/operations.md and docs/operations/failover.md say what each buys.
 */
export type RedisTarget =
  | { kind: 'standalone'; url: string }
  | { kind: 'cluster'; nodes: { host: string; port: number }[]; username?: string; password?: string }
  | {
      kind: 'sentinel';
      sentinels: { host: string; port: number }[];
      name: string;
      username?: string;
      password?: string;
    };

/**
 * The target the configuration names. `fallbackUrl` (the embedded server's socket) is used only
 * when none of REDIS_URL, REDIS_CLUSTER_NODES and REDIS_SENTINELS is set.
 */
export function redisTargetFromConfig(
  config: Pick<
    Config,
    | 'REDIS_URL'
    | 'REDIS_CLUSTER_NODES'
    | 'REDIS_SENTINELS'
    | 'REDIS_SENTINEL_NAME'
    | 'REDIS_USERNAME'
    | 'REDIS_PASSWORD'
  >,
  fallbackUrl?: string,
): RedisTarget {
  const auth = {
    ...(config.REDIS_USERNAME !== undefined ? { username: config.REDIS_USERNAME } : {}),
    ...(config.REDIS_PASSWORD !== undefined ? { password: config.REDIS_PASSWORD } : {}),
  };
  if (config.REDIS_CLUSTER_NODES !== undefined) return { kind: 'cluster', nodes: config.REDIS_CLUSTER_NODES, ...auth };
  if (config.REDIS_SENTINELS !== undefined) {
    // loadConfig already refuses sentinels without a name; this guards direct callers.
    if (config.REDIS_SENTINEL_NAME === undefined)
      throw new Error('REDIS_SENTINEL_NAME is required with REDIS_SENTINELS');
    return { kind: 'sentinel', sentinels: config.REDIS_SENTINELS, name: config.REDIS_SENTINEL_NAME, ...auth };
  }
  const url = config.REDIS_URL ?? fallbackUrl;
  if (url === undefined) throw new Error('no Redis configured and no embedded Redis to fall back on');
  return { kind: 'standalone', url };
}

/** Where the target is, safe to log (never a password). */
export function describeRedisTarget(t: RedisTarget): string {
  const list = (hs: { host: string; port: number }[]) => hs.map((h) => `${h.host}:${h.port}`).join(',');
  if (t.kind === 'cluster') return `cluster (${list(t.nodes)})`;
  if (t.kind === 'sentinel') return `sentinel "${t.name}" (${list(t.sentinels)})`;
  return redisLocation(t.url);
}

/**
 * What a connection is for:
 * - `request`: serves HTTP requests and Slack; a command fails after a few retries rather than
 *   hanging the request while Redis is away.
 * - `worker`: BullMQ queue and worker connections; they block and must never give up a command
 *   (`maxRetriesPerRequest: null`, BullMQ refuses anything else for workers).
 * - `subscriber`: long-lived pub/sub or blocking reads; like `worker`, never gives up.
 */
export type RedisUse = 'request' | 'worker' | 'subscriber';

export type RedisClient = Redis | Cluster;

export interface ConnectOptions {
  use: RedisUse;
  /** CLIENT SETNAME, so `CLIENT LIST` shows which part of Herald holds a connection. */
  name: string;
  /** Extra per-connection options (time-outs, …) laid over the defaults for `use`. */
  options?: RedisOptions;
  /**
   * A request connection whose commands may keep Redis busy for seconds (an execute's commit of
   * thousands of deliveries): outside a request they are bounded by their own time-out, not by
   * Redis' silence, which such a command causes itself (store/deadline.ts).
   */
  longCommands?: boolean;
}

/**
 * Whether an error answer means "this connection is on the wrong node": a primary demoted by a
 * failover answers writes with READONLY (and a replica being promoted can say MASTERDOWN).
 * Reconnecting makes a Sentinel client ask the sentinels for the primary again, instead of
 * answering 503 for as long as the demoted node lives. Request connections (no offline queue)
 * only reconnect: the failed command is answered 503 and nothing is re-sent behind the request's
 * back. Worker connections re-send the command once reconnected (2): a write refused by a replica
 * was not applied, so sending it again applies it once.
 */
export function reconnectOnError(use: RedisUse): (err: Error) => boolean | 1 | 2 {
  return (err) => {
    if (!/^(READONLY|MASTERDOWN|UNBLOCKED) /.test(err.message)) return false;
    return use === 'request' ? 1 : 2;
  };
}

function baseOptions(o: ConnectOptions): RedisOptions {
  return {
    connectionName: o.name,
    maxRetriesPerRequest: o.use === 'request' ? 3 : null,
    reconnectOnError: reconnectOnError(o.use),
    // Commands issued in the same tick go out in one write: with dozens of requests in flight,
    // that is one syscall and one Redis read per batch instead of per command.
    // Each batch is a pipeline object; connectRedis has it let go of what it carried once it
    // settles (pipeline-release.ts), or finished batches keep later ones alive through V8's
    // young-generation collections.
    enableAutoPipelining: o.use === 'request',
    enableReadyCheck: true,
    lazyConnect: false,
    ...o.options,
  };
}

/**
 * One connection to the configured Redis. On a Cluster, reads go to the masters too
 * (`scaleReads: 'master'`): Herald reads what it has just written, and a replica may lag.
 * Every multi-key command Herald sends keeps its keys under one hash tag (src/store/keys.ts), so
 * one slot serves it; BullMQ's prefix is a hash tag for the same reason.
 */
export function connectRedis(target: RedisTarget, o: ConnectOptions): RedisClient {
  const client = newClient(target, o);
  if (client instanceof Redis && target.kind === 'sentinel') {
    keepConnecting(client);
    // Released once Herald closes the client (keepConnecting marks that).
    const failover = failoverWatches.get(client);
    client.on('end', () => {
      if (!closedOnPurpose.has(client)) return;
      failover?.watch.unfollow(client);
      failover?.release();
    });
  }
  releaseSettledPipelines(client);
  // Commands sent while serving a request race the request's one deadline (deadline.ts).
  if (o.use === 'request') bindToRequestDeadline(client, { silenceBound: o.longCommands !== true });
  return client;
}

/** The failover watch (failover-watch.ts) each Sentinel client holds. */
const failoverWatches = new WeakMap<Redis, FailoverWatchLease>();

/** Clients Herald itself quit or disconnected: their 'end' is final. */
const closedOnPurpose = new WeakSet<RedisClient>();

/** Whether `client` ended because Herald closed it (quit, disconnect), not on its own. */
export function closedByHerald(client: RedisClient): boolean {
  return closedOnPurpose.has(client);
}

/** How long a Sentinel client that ended on its own waits before it connects again. */
const RECONNECT_AFTER_END_MS = 200;

/**
 * Connects a Sentinel client again when it ended without being closed. ioredis gives a client up
 * for good (status 'end') when its connector is disconnected while it asks the sentinels for the
 * primary, which is what the failover detector of its previous connection does when a sentinel
 * announces +switch-master during a reconnect: after a primary was killed, a connection could
 * stay dead, answering "Connection is closed." to every command, until Herald restarted.
 */
function keepConnecting(client: Redis): void {
  const quit = client.quit.bind(client);
  const disconnect = client.disconnect.bind(client);
  client.quit = (...args: Parameters<Redis['quit']>) => {
    closedOnPurpose.add(client);
    return quit(...args);
  };
  client.disconnect = (reconnect = false) => {
    if (!reconnect) closedOnPurpose.add(client);
    disconnect(reconnect);
  };
  client.on('end', () => {
    if (closedOnPurpose.has(client)) return;
    const timer = setTimeout(() => {
      if (closedOnPurpose.has(client) || client.status !== 'end') return;
      // A failure ends the client again, and this runs again.
      client.connect().catch(() => undefined);
    }, RECONNECT_AFTER_END_MS);
    timer.unref();
  });
}

function newClient(target: RedisTarget, o: ConnectOptions): RedisClient {
  const options = baseOptions(o);
  if (target.kind === 'standalone') return new Redis(target.url, options);
  const auth = {
    ...(target.username !== undefined ? { username: target.username } : {}),
    ...(target.password !== undefined ? { password: target.password } : {}),
  };
  if (target.kind === 'sentinel') {
    const failover = acquireFailoverWatch(target);
    const client = new Redis({
      ...options,
      ...auth,
      sentinels: target.sentinels,
      name: target.name,
      role: 'master',
      // The shared watch (failover-watch.ts) drops the connection the moment the primary
      // changes, once: without that Herald kept writing to the old primary until the sentinels
      // demoted it, and a demoted primary throws away what it received since in its resync.
      // ioredis' own detector dropped it again at each sentinel's +switch-master, seconds apart
      // (the leader's comes last), and a BullMQ job whose completion was cut off by one stayed
      // locked until its lock ran out.
      failoverDetector: false,
      // Every sentinel is asked in turn; a dead one must not hold up finding the new primary.
      sentinelCommandTimeout: 1000,
      sentinelRetryStrategy: (times: number) => Math.min(100 * times, 1000),
      // Sentinels usually share the primary's password when they have one at all.
      ...(target.password !== undefined ? { sentinelPassword: target.password } : {}),
      ...(target.username !== undefined ? { sentinelUsername: target.username } : {}),
      // A sentinel that has not yet learnt of the last switch still names the old primary, which
      // takes writes until it is demoted and then throws them away: go to the new one instead.
      natMap: (address: string) => failover.watch.redirect(address),
    });
    failoverWatches.set(client, failover);
    failover.watch.follow(client);
    return client;
  }
  const clusterOptions: ClusterOptions = {
    scaleReads: 'master',
    redisOptions: { ...options, ...auth },
    enableReadyCheck: true,
    lazyConnect: false,
    // A failover moves slots for a few seconds; keep asking instead of failing requests at once.
    retryDelayOnClusterDown: 200,
    retryDelayOnFailover: 200,
    retryDelayOnTryAgain: 200,
    ...(options.maxRetriesPerRequest === null ? {} : { maxRedirections: 16 }),
  };
  return new Cluster(target.nodes, clusterOptions);
}
