import { Cluster, type Redis, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import { isRedisUnavailable } from '../domain/common/unavailable.js';
import { requireReplicas, type ReplicaWait } from './durability.js';
import { acquireFailoverWatch } from './failover-watch.js';
import { closedByHerald, connectRedis, type RedisClient, type RedisTarget } from './redis-connect.js';

export { isRedisUnavailable };

/** The fixed time-out of a request connection's commands: a backstop, see requestRedisOptions. */
export const REQUEST_COMMAND_BACKSTOP_MS = 10_000;

/**
 * The bound of the one command that commits an execute: a single atomic script writing every
 * delivery (thousands of keys) can take seconds on a busy machine. Under the 1.2 s bound it was
 * answered 503 although Redis went on to apply it (a time-out does not cancel a command sent).
 * It runs only after the request's earlier commands succeeded, so a Redis that is down or paused
 * has already been answered 503 within 2 s by then.
 */
export const BULK_COMMAND_TIMEOUT_MS = 15_000;

/**
 * Options of every connection that serves requests (API, Slack, CLI, the queue's producer side):
 * commands are bounded in time, and none is queued while disconnected — it fails at once (a 503)
 * instead. A queued command that timed out would still be sent on reconnect, applying a write
 * whose request was already answered 503. Reconnection keeps trying every second at most, so
 * Herald recovers by itself when Redis returns. Wait for `whenReady` before the first command.
 */
export function requestRedisOptions(name: string): RedisOptions {
  return {
    connectionName: name,
    maxRetriesPerRequest: 1,
    // A command fails once Redis has sent nothing for a while (store/deadline.ts), inside a
    // request by the request's one deadline: that is what answers a stalled Redis within 2 s. The
    // fixed time-out is only a backstop (commands ioredis' clients define after binding, such as
    // BullMQ's scripts): a short one cut off Redis while it was sending a large reply.
    commandTimeout: REQUEST_COMMAND_BACKSTOP_MS,
    connectTimeout: 2000,
    enableOfflineQueue: false,
    enableReadyCheck: true,
    lazyConnect: false,
    retryStrategy: (times) => Math.min(100 * times, 1000),
  };
}

/**
 * Resolves once the client is ready (request connections queue nothing before that), or rejects
 * after `ms` with the last connection error, e.g. ECONNREFUSED or WRONGPASS.
 */
export function whenReady(redis: RedisClient, ms: number): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    let last = '';
    const onError = (err: Error) => {
      last = err.message;
    };
    const done = (err?: Error) => {
      clearTimeout(timer);
      redis.off('ready', onReady);
      redis.off('error', onError);
      if (err) reject(err);
      else resolve();
    };
    const onReady = () => done();
    const timer = setTimeout(() => done(new Error(`Redis not ready within ${ms} ms${last ? ` (${last})` : ''}`)), ms);
    redis.on('ready', onReady);
    redis.on('error', onError);
  });
}

/**
 * Options of BullMQ's worker connections: blocking commands must never give up
 * (`maxRetriesPerRequest: null`, no command time-out); callers on a request path bound their own
 * wait (execute's enqueue).
 */
export function workerRedisOptions(name: string): RedisOptions {
  return {
    connectionName: name,
    maxRetriesPerRequest: null,
    enableReadyCheck: true,
    lazyConnect: false,
    retryStrategy: (times) => Math.min(100 * times, 1000),
  };
}

/**
 * Redis connections. `worker: true` is for BullMQ, whose workers block and must never give up a
 * command. Pass `log` to get the one error listener every client needs (see watchRedis).
 */
export function createRedis(
  target: string | RedisTarget,
  opts: {
    worker?: boolean;
    name?: string;
    log?: Logger;
    commandTimeoutMs?: number;
    /** Acknowledged commits on this connection wait for replicas (durability.ts). */
    replicaWait?: ReplicaWait;
  } = {},
): RedisClient {
  const name = opts.name ?? 'herald';
  const t: RedisTarget = typeof target === 'string' ? { kind: 'standalone', url: target } : target;
  const options = opts.worker
    ? workerRedisOptions(name)
    : {
        ...requestRedisOptions(name),
        ...(opts.commandTimeoutMs !== undefined ? { commandTimeout: opts.commandTimeoutMs } : {}),
      };
  const longCommands = opts.commandTimeoutMs !== undefined;
  const redis = connectRedis(t, { use: opts.worker ? 'worker' : 'request', name, options, longCommands });
  if (!opts.worker && opts.replicaWait !== undefined) {
    // Writes that wait for replicas get a connection of their own (durability.ts).
    const writer = connectRedis(t, {
      use: 'request',
      name: `${name}-durable`,
      options: { ...options, connectionName: `${name}-durable` },
      longCommands,
    });
    if (opts.log) watchRedis(writer, opts.log, `${name}-durable`);
    // Sentinel: the sentinels' events say when a failover begins, before the primary moves.
    const failover = t.kind === 'sentinel' ? acquireFailoverWatch(t, opts.log) : undefined;
    requireReplicas(redis, opts.replicaWait, writer, failover?.watch);
    // Closed with its client: 'end' comes once the client is quit or disconnected for good (a
    // Sentinel client may also end on its own, and then connects again: redis-connect.ts).
    const closeWith = () => {
      if (t.kind === 'sentinel' && !closedByHerald(redis)) return;
      redis.off('end', closeWith);
      writer.disconnect();
      failover?.release();
    };
    redis.on('end', closeWith);
  }
  if (opts.log) watchRedis(redis, opts.log, name);
  return redis;
}

/**
 * Logs a client's trouble once per state change: the first error or lost connection after being
 * healthy (warn), and the return (info). ioredis emits an error for every failed reconnect (and a
 * connection closed under it may emit none, only 'reconnecting'), and a client without an
 * 'error' listener prints "Unhandled error event" on stderr, outside the JSON log.
 */
export function watchRedis(client: Pick<Redis, 'on'> | Pick<Cluster, 'on'>, log: Logger, name: string): void {
  const onError = redisErrorLogger(log, name);
  client.on('error', onError.error);
  // Emitted only for an unexpected close (never after quit/disconnect).
  client.on('reconnecting', () => onError.error(new Error('connection lost; reconnecting')));
  client.on('ready', onError.ready);
}

/** The state-change logger behind watchRedis, for emitters that re-emit a client's errors (BullMQ). */
export function redisErrorLogger(log: Logger, name: string): { error: (err: unknown) => void; ready: () => void } {
  let down = false;
  return {
    error: (err: unknown) => {
      if (down) return;
      down = true;
      log.warn(
        { connection: name, err: err instanceof Error ? err.message : String(err) },
        'redis unreachable; retrying (requests answer 503 meanwhile)',
      );
    },
    ready: () => {
      if (!down) return;
      down = false;
      log.info({ connection: name }, 'redis reachable again');
    },
  };
}

export type Persistence = 'aof' | 'rdb' | 'none';

export interface RedisFacts {
  maxmemoryPolicy: string;
  persistence: Persistence;
}

/**
 * Reads what start-up must judge: the eviction policy (anything but noeviction can silently drop
 * queued deliveries) and whether anything survives a restart. CONFIG GET of several names comes
 * back as a flat [name, value, …] array in any order (or a map under RESP3), so it is paired up.
 */
export async function readRedisFacts(redis: Redis | Cluster): Promise<RedisFacts> {
  if (!(redis instanceof Cluster)) return readNodeFacts(redis);
  // CONFIG GET is answered per node: on a Cluster every master holds some of the data, so the
  // weakest master decides (one evicting or amnesiac master loses its slots' deliveries).
  // A fresh Cluster knows its nodes only once the slot map is loaded: a command waits for that.
  await redis.ping();
  const masters = redis.nodes('master');
  if (masters.length === 0) throw new Error('Redis Cluster has no reachable master');
  const all = await Promise.all(masters.map((n) => readNodeFacts(n)));
  const rank: Record<Persistence, number> = { none: 0, rdb: 1, aof: 2 };
  return {
    maxmemoryPolicy: all.find((f) => f.maxmemoryPolicy !== 'noeviction')?.maxmemoryPolicy ?? 'noeviction',
    persistence: all.reduce<Persistence>((w, f) => (rank[f.persistence] < rank[w] ? f.persistence : w), 'aof'),
  };
}

async function readNodeFacts(redis: Redis): Promise<RedisFacts> {
  const raw: unknown = await redis.call('CONFIG', 'GET', 'maxmemory-policy', 'appendonly', 'save');
  const cfg = new Map<string, string>();
  if (Array.isArray(raw)) {
    for (let i = 0; i + 1 < raw.length; i += 2) cfg.set(String(raw[i]), String(raw[i + 1]));
  } else if (raw instanceof Map) {
    for (const [k, v] of raw) cfg.set(String(k), String(v));
  } else if (raw && typeof raw === 'object') {
    for (const [k, v] of Object.entries(raw)) cfg.set(k, String(v));
  }
  const aof = cfg.get('appendonly') === 'yes';
  const rdb = (cfg.get('save') ?? '').trim() !== '';
  return { maxmemoryPolicy: cfg.get('maxmemory-policy') ?? 'unknown', persistence: aof ? 'aof' : rdb ? 'rdb' : 'none' };
}
