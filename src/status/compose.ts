import type { Logger } from 'pino';
import type { Clock } from '../domain/common/clock.js';
import type { Keys } from '../store/keys.js';
import type { RedisClient as Redis } from '../store/redis-connect.js';
import { REDIS_STATUS_LOADERS } from './loaders.js';
import { createStatusSite, type StatusSite } from './site.js';
import { createRedisSnapshotSource } from './source.js';

/** The status page over the store (the composition root's one call): a Redis-fed snapshot and the site. */
export function composeStatusSite(parts: {
  redis: Redis;
  keys: Keys;
  clock: Clock;
  log: Logger;
  /** With HERALD_SMTP_URL set, the index page offers e-mail subscriptions. */
  config?: { HERALD_SMTP_URL?: string | undefined };
}): StatusSite {
  const log = parts.log.child({ component: 'status-page' });
  const source = createRedisSnapshotSource({ ...parts, log, loaders: REDIS_STATUS_LOADERS });
  return createStatusSite({
    source,
    clock: parts.clock,
    log,
    emailSubscriptions: parts.config?.HERALD_SMTP_URL !== undefined,
  });
}
