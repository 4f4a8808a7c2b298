/**
 * The core a short-lived command needs (the CLI): configuration's Redis, the API key service and
 * secret resealing — and nothing else. Kept apart from app.ts so `herald keys list` loads no HTTP,
 * Slack or queue code: the CLI's start-up is most of its run time.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { systemClock, type Clock } from '../domain/common/clock.js';
import { createIdGenerator } from '../domain/common/ids.js';
import type { ApiKeyService } from '../services/api-keys.js';
import { RedisApiKeyRepo } from '../store/api-keys.js';
import { createSecretBox, nodeTokenCrypto } from '../store/crypto.js';
import {
  EmbeddedRedisError,
  NotRunningError,
  openEmbeddedRedis,
  type EmbeddedRedis,
} from '../runtime/embedded-redis/index.js';
import { createKeys } from '../store/keys.js';
import { buildKeyServices } from './key-services.js';
import { createRedis, whenReady } from '../store/redis.js';
import { describeRedisTarget, redisTargetFromConfig } from '../store/redis-connect.js';
import { redisLocation } from '../store/redis-location.js';
import { resealAll, type ResealReport } from '../store/reseal.js';
import { loadOrCreateSecretKey, previousSecretKeys, verifySecretKey } from '../store/secret-key.js';

/** Herald refuses to start (or a command to run): the message says why and what to change. */
export class StartupError extends Error {}

export const CORE_CONNECT_TIMEOUT_MS = 5000;

/** Rejects when `p` has not settled within `ms` (p's own late rejection is swallowed). */
export function withDeadline<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  p.catch(() => undefined);
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** What a short-lived command (the CLI) gets: the API key service over the configured Redis. */
export interface Core {
  services: { apiKeys: ApiKeyService };
  /**
   * Which Redis the command uses, safe to print (no user name, password or token): e.g.
   * `Redis redis://10.0.0.5:6379 (REDIS_URL)` or `the embedded Redis in /srv/herald/data (of the
   * running Herald)`.
   */
  redisInUse: string;
  /** `herald secrets reseal`: moves every sealed value to HERALD_SECRET_KEY (key rotation). */
  resealSecrets(): Promise<ResealReport>;
  close(): Promise<void>;
}

/**
 * When the command may START an embedded Redis (reusing the running Herald's is always allowed).
 * A new one in the wrong place looks like success: the key lands in an empty Redis nobody serves
 * from, and the token then fails with 401. So a server is started only on request (`--embedded`)
 * or on a data directory that already exists outside production.
 */
export interface EmbeddedPolicy {
  /** `--embedded`: start one whatever NODE_ENV says, creating the data directory if need be. */
  forced: boolean;
  /** NODE_ENV is `production`: the deployment runs its Redis elsewhere (the image and the unit set it). */
  production: boolean;
}

/**
 * Opens the core for the CLI, with the server's configuration: REDIS_URL (or a Cluster or
 * Sentinels), or the embedded Redis of HERALD_DATA_DIR (the running Herald's socket, or, as
 * `policy` allows, a server started for the command and stopped by close()). No HTTP, no start-up
 * checks. Throws StartupError when Redis cannot be had, or may not be started. Without `policy`
 * an embedded Redis is started when none runs (as with `--embedded`).
 */
export async function openCore(opts: {
  config: Config;
  log: Logger;
  clock?: Clock;
  policy?: EmbeddedPolicy;
}): Promise<Core> {
  const { config, log } = opts;
  let embedded: EmbeddedRedis | null = null;
  const external = config.REDIS_URL ?? config.REDIS_CLUSTER_NODES ?? config.REDIS_SENTINELS;
  if (external === undefined)
    embedded = await openEmbedded(config.HERALD_DATA_DIR, log, opts.policy ?? { forced: true, production: false });
  const redisInUse = describeRedisInUse(config, embedded?.started);
  const target = redisTargetFromConfig(config, embedded?.socketPath);
  const redis = createRedis(target, { name: 'herald-cli' });
  // The CLI says "cannot reach Redis" itself; the client's own errors are only worth a debug line.
  redis.on('error', (err: Error) => log.debug({ err }, 'redis connection error'));
  const close = async () => {
    await withDeadline(redis.quit(), 2000).catch(() => redis.disconnect());
    await embedded?.stop();
  };
  try {
    await whenReady(redis, CORE_CONNECT_TIMEOUT_MS);
    await withDeadline(redis.ping(), CORE_CONNECT_TIMEOUT_MS);
  } catch {
    redis.disconnect();
    await embedded?.stop();
    throw new StartupError(
      `Cannot reach Redis at ${describeRedisTarget(target)}; check REDIS_URL (or REDIS_CLUSTER_NODES / REDIS_SENTINELS) and that Redis is running.`,
    );
  }
  const clock = opts.clock ?? systemClock;
  const ids = createIdGenerator(() => clock.now().getTime());
  // The server's own wiring of the key service (buildServices calls the same). The CLI acts as the
  // system actor (the operator on the host), whom AccessPolicy lets manage keys: no Slack admin here.
  const { apiKeys } = buildKeyServices({
    clock,
    ids,
    apiKeys: new RedisApiKeyRepo(redis, createKeys(config.HERALD_KEY_PREFIX)),
    crypto: nodeTokenCrypto,
    slackAdmins: [],
  });
  const resealSecrets = async (): Promise<ResealReport> => {
    const keys = createKeys(config.HERALD_KEY_PREFIX);
    const box = createSecretBox(
      loadOrCreateSecretKey(config.HERALD_SECRET_KEY, config.HERALD_DATA_DIR).key,
      previousSecretKeys(config),
    );
    // The check value first: with a key that opens nothing, stop before touching anything.
    await verifySecretKey(redis, keys, box);
    return resealAll(redis, keys, box);
  };
  return { services: { apiKeys }, redisInUse, resealSecrets, close };
}

/**
 * Which Redis a command uses, for the CLI's first line: never a user name, password or token.
 * `embeddedStarted` says, for the embedded Redis, whether the command started it.
 */
export function describeRedisInUse(
  config: Pick<
    Config,
    'REDIS_URL' | 'REDIS_CLUSTER_NODES' | 'REDIS_SENTINELS' | 'REDIS_SENTINEL_NAME' | 'HERALD_DATA_DIR'
  >,
  embeddedStarted?: boolean,
): string {
  const list = (hs: { host: string; port: number }[]) => hs.map((h) => `${h.host}:${h.port}`).join(',');
  if (config.REDIS_CLUSTER_NODES !== undefined)
    return `Redis Cluster ${list(config.REDIS_CLUSTER_NODES)} (REDIS_CLUSTER_NODES)`;
  if (config.REDIS_SENTINELS !== undefined)
    return `Redis Sentinel primary "${config.REDIS_SENTINEL_NAME ?? ''}" via ${list(config.REDIS_SENTINELS)} (REDIS_SENTINELS)`;
  if (config.REDIS_URL !== undefined) return `Redis ${redisLocation(config.REDIS_URL)} (REDIS_URL)`;
  const how = embeddedStarted === true ? 'started for this command' : 'of the running Herald';
  return `the embedded Redis in ${resolve(config.HERALD_DATA_DIR)} (${how})`;
}

/** What to set instead of a new embedded Redis: the end of every refusal below. */
const INSTEAD =
  'Set REDIS_URL (or REDIS_CLUSTER_NODES / REDIS_SENTINELS) to the Redis your Herald uses, or run the command where Herald runs, ' +
  'with its environment; or pass --embedded to start an embedded Redis for this command anyway.';

/** The running Herald's embedded Redis, or one started for the command when `policy` allows. */
async function openEmbedded(dataDir: string, log: Logger, policy: EmbeddedPolicy): Promise<EmbeddedRedis> {
  const where = resolve(dataDir);
  // A data directory that does not exist holds no Herald's data: a Redis started there would be
  // new and empty (the usual cause: run from another directory, or without the server's REDIS_URL).
  if (!policy.forced && !existsSync(dataDir)) {
    throw new StartupError(
      `No Redis configured: REDIS_URL is not set and the data directory ${where} (HERALD_DATA_DIR) does not exist, so there is no Herald's embedded Redis to use. ${INSTEAD}`,
    );
  }
  const start = policy.forced || !policy.production;
  try {
    return await openEmbeddedRedis({ dataDir, log, start });
  } catch (e) {
    if (e instanceof NotRunningError) {
      throw new StartupError(
        `No Redis configured: REDIS_URL is not set, no Herald runs on the data directory ${where}, and NODE_ENV=production, so the command starts no embedded Redis of its own. ${INSTEAD}`,
      );
    }
    throw e instanceof EmbeddedRedisError ? new StartupError(e.message) : e;
  }
}
