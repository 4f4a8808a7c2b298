import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { StartupError } from './cli.js';
import { OutboundAllowError, parseOutboundAllow, type OutboundAllow } from '../domain/connection/address-policy.js';
import type { SecretBox } from '../ports/index.js';
import { createSecretBox } from '../store/crypto.js';
import type { Keys } from '../store/keys.js';
import type { RedisClient } from '../store/redis-connect.js';
import { readRedisFacts, type RedisFacts } from '../store/redis.js';
import { loadOrCreateSecretKey, previousSecretKeys, verifySecretKey } from '../store/secret-key.js';

/**
 * What start-up refuses or warns about, each once (docs/operations.md): a Redis that
 * may evict, a Redis that keeps nothing on disk, a secret key that does not open what Redis
 * holds, and an unparsable HERALD_OUTBOUND_ALLOW. Each refusal is a StartupError naming the fix.
 */

/** Refuses an evicting Redis, warns about one without persistence; the facts for the start-up line. */
export async function checkRedis(redis: RedisClient, log: Logger): Promise<RedisFacts> {
  const facts = await readRedisFacts(redis);
  if (facts.maxmemoryPolicy !== 'noeviction') {
    throw new StartupError(
      `Redis maxmemory-policy is "${facts.maxmemoryPolicy}"; Herald needs "noeviction" (an evicting Redis silently drops queued deliveries). ` +
        'Run: CONFIG SET maxmemory-policy noeviction (and put it in redis.conf).',
    );
  }
  if (facts.persistence === 'none') {
    log.warn(
      'REDIS KEEPS NOTHING ON DISK (appendonly no, no save points): a Redis restart loses every incident, key and queued delivery. Enable AOF: appendonly yes, appendfsync everysec.',
    );
  }
  return facts;
}

/** The secret box (HERALD_SECRET_KEY or the data directory's key), proven against what Redis holds. */
export async function openSecretBox(config: Config, redis: RedisClient, keys: Keys, log: Logger): Promise<SecretBox> {
  const secret = loadOrCreateSecretKey(config.HERALD_SECRET_KEY, config.HERALD_DATA_DIR);
  if (secret.generated) {
    log.warn(
      { path: secret.path },
      'HERALD_SECRET_KEY is not set: using a generated key from the data directory. Every instance sharing this Redis must be given the same key.',
    );
  }
  const box = createSecretBox(secret.key, previousSecretKeys(config));
  try {
    if ((await verifySecretKey(redis, keys, box)) === 'previous') {
      log.warn(
        'Secrets in this Redis are still sealed with HERALD_SECRET_KEY_PREVIOUS: run `herald secrets reseal`, then remove HERALD_SECRET_KEY_PREVIOUS.',
      );
    }
  } catch (e) {
    throw new StartupError((e as Error).message);
  }
  return box;
}

/** HERALD_OUTBOUND_ALLOW, parsed once; a bad entry stops start-up naming it. */
export function outboundAllow(entries: string[]): OutboundAllow {
  try {
    return parseOutboundAllow(entries);
  } catch (e) {
    throw e instanceof OutboundAllowError ? new StartupError(e.message) : e;
  }
}
