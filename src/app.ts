/**
 * The composition root: Redis adapters → services → edges. Nothing else constructs adapters, and
 * nothing here decides a business rule.
 */
import type { Express } from 'express';
import { Router } from 'express';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import type { Config } from './config.js';
import { systemClock, type Clock } from './domain/clock.js';
import { createIdGenerator } from './domain/ids.js';
import type { EdgeDeps } from './http/endpoint.js';
import { incidentRoutes } from './http/routes/incidents.js';
import { createHttpApp, type Readiness } from './http/server.js';
import { ApiKeyService } from './services/api-keys.js';
import { IncidentService } from './services/incidents.js';
import { RedisApiKeyRepo } from './store/api-keys.js';
import { createSecretBox, nodeTokenCrypto } from './store/crypto.js';
import { keysExist } from './store/exists.js';
import { RedisIdempotencyStore } from './store/idempotency.js';
import { RedisIncidentRepo } from './store/incidents.js';
import { createKeys, type Keys } from './store/keys.js';
import { RedisRateLimiter } from './store/rate-limit.js';
import { createRedis, readRedisFacts } from './store/redis.js';
import { loadOrCreateSecretKey, verifySecretKey } from './store/secret-key.js';

export interface HeraldOptions {
  config: Config;
  redisUrl: string;
  log: Logger;
  clock?: Clock;
}

export interface Services {
  apiKeys: ApiKeyService;
  incidents: IncidentService;
}

export interface Herald {
  config: Config;
  redis: Redis;
  keys: Keys;
  services: Services;
  /** The Express app (routes, probes, metrics); `listen` it, or hand it to a test. */
  app: Express;
  /** Stops background work and closes connections. */
  close(): Promise<void>;
}

export class StartupError extends Error {}

/** Connects, checks Redis, and wires everything. Throws StartupError on a refusal to start. */
export async function createHerald(opts: HeraldOptions): Promise<Herald> {
  const { config, log } = opts;
  const clock = opts.clock ?? systemClock;
  const redis = createRedis(opts.redisUrl, { name: 'herald-api' });
  try {
    const facts = await readRedisFacts(redis);
    if (facts.maxmemoryPolicy !== 'noeviction') {
      throw new StartupError(
        `Redis maxmemory-policy is "${facts.maxmemoryPolicy}"; Herald needs "noeviction" (an evicting Redis silently drops queued deliveries). ` +
          'Run: CONFIG SET maxmemory-policy noeviction (and put it in redis.conf).',
      );
    }
    if (facts.persistence === 'none') {
      log.warn('REDIS KEEPS NOTHING ON DISK (appendonly no, no save points): a Redis restart loses every incident, key and queued delivery. Enable AOF: appendonly yes, appendfsync everysec.');
    }
    const keys = createKeys(config.HERALD_KEY_PREFIX);
    const secret = loadOrCreateSecretKey(config.HERALD_SECRET_KEY, config.HERALD_DATA_DIR);
    if (secret.generated) {
      log.warn({ path: secret.path }, 'HERALD_SECRET_KEY is not set: using a generated key from the data directory. Every instance sharing this Redis must be given the same key.');
    }
    const box = createSecretBox(secret.key);
    try {
      await verifySecretKey(redis, keys, box);
    } catch (e) {
      throw new StartupError((e as Error).message);
    }

    const ids = createIdGenerator(() => clock.now().getTime());
    const apiKeys = new ApiKeyService({ repo: new RedisApiKeyRepo(redis, keys), clock, ids, crypto: nodeTokenCrypto });
    const incidents = new IncidentService({
      incidents: new RedisIncidentRepo(redis, keys),
      templatesExist: (tids) => keysExist(redis, tids.map((t) => keys.template(t))),
      clock,
      ids,
    });
    const services: Services = { apiKeys, incidents };

    const edge: EdgeDeps = {
      keys: apiKeys,
      limiter: new RedisRateLimiter(redis, keys, { default: config.HERALD_RATE_LIMIT, execute: config.HERALD_EXECUTE_RATE_LIMIT }),
      idempotency: new RedisIdempotencyStore(redis, keys),
    };
    const v1 = Router();
    v1.use(incidentRoutes({ ...edge, incidents }));

    const registry = new Registry();
    collectDefaultMetrics({ register: registry, prefix: 'herald_' });
    const readiness = async (): Promise<Readiness> => {
      try {
        const f = await readRedisFacts(redis);
        return { redis: 'ok', persistence: f.persistence };
      } catch {
        return { redis: 'unreachable', persistence: 'unknown' };
      }
    };
    const { app, finish } = createHttpApp({ log, registry, metricsToken: config.HERALD_METRICS_TOKEN, readiness, v1, trustProxy: config.HERALD_TRUST_PROXY });
    finish();

    return {
      config,
      redis,
      keys,
      services,
      app,
      async close() {
        await redis.quit().catch(() => undefined);
      },
    };
  } catch (e) {
    redis.disconnect();
    throw e;
  }
}
