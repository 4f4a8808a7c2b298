/**
 * The core a short-lived command needs (the CLI): configuration's Redis, the API key service and
 * secret resealing — and nothing else. Kept apart from app.ts so `herald keys list` loads no HTTP,
 * Slack or queue code: the CLI's start-up is most of its run time.
 */
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { systemClock, type Clock } from '../domain/common/clock.js';
import { createIdGenerator } from '../domain/common/ids.js';
import { ApiKeyService } from '../services/api-keys.js';
import { RedisApiKeyRepo } from '../store/api-keys.js';
import { createSecretBox, nodeTokenCrypto } from '../store/crypto.js';
import { EmbeddedRedisError, openEmbeddedRedis, type EmbeddedRedis } from '../runtime/embedded-redis/index.js';
import { createKeys } from '../store/keys.js';
import { createRedis, whenReady } from '../store/redis.js';
import { describeRedisTarget, redisTargetFromConfig } from '../store/redis-connect.js';
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
  /** `herald secrets reseal`: moves every sealed value to HERALD_SECRET_KEY (key rotation). */
  resealSecrets(): Promise<ResealReport>;
  close(): Promise<void>;
}

/**
 * Opens the core for the CLI, with the server's configuration: REDIS_URL, or the embedded Redis of
 * HERALD_DATA_DIR (the running Herald's socket, or a server started for the command and stopped
 * by close()). No HTTP, no start-up checks. Throws StartupError when Redis cannot be had.
 */
export async function openCore(opts: { config: Config; log: Logger; clock?: Clock }): Promise<Core> {
  const { config, log } = opts;
  let embedded: EmbeddedRedis | null = null;
  if (
    config.REDIS_URL === undefined &&
    config.REDIS_CLUSTER_NODES === undefined &&
    config.REDIS_SENTINELS === undefined
  ) {
    try {
      embedded = await openEmbeddedRedis({ dataDir: config.HERALD_DATA_DIR, log });
    } catch (e) {
      throw e instanceof EmbeddedRedisError ? new StartupError(e.message) : e;
    }
  }
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
  const apiKeys = new ApiKeyService({
    repo: new RedisApiKeyRepo(redis, createKeys(config.HERALD_KEY_PREFIX)),
    clock,
    ids,
    crypto: nodeTokenCrypto,
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
  return { services: { apiKeys }, resealSecrets, close };
}
