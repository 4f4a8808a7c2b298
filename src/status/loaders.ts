import type { PublicPageConfig } from '../domain/status/public.js';
import { loadPublicComponents } from '../store/components.js';
import { RedisConnectionRepo } from '../store/connections.js';
import type { Keys } from '../store/keys.js';
import { loadPublicMaintenances } from '../store/maintenances.js';
import { loadPublicIncidents } from '../store/public-incidents.js';
import type { RedisClient as Redis } from '../store/redis-connect.js';
import type { StatusLoaders } from './source.js';

/**
 * The published incidents the snapshot holds: the history pages reach back this far. An
 * incident still open is among them unless a thousand were published after it.
 */
export const SNAPSHOT_INCIDENTS = 1000;

/**
 * The page's settings: the config of the status_page connection that claimed the page
 * (keys.statusPage()). No claim, or the claimed connection gone: null (the page answers 404).
 */
export async function loadPageConfig(redis: Redis, keys: Keys): Promise<PublicPageConfig | null> {
  const id = await redis.get(keys.statusPage());
  if (id === null) return null;
  const record = await new RedisConnectionRepo(redis, keys).get(id);
  if (record === null || record.type !== 'status_page') return null;
  return pageConfigOf(record.config);
}

/** The stored config as the page reads it; fields are validated by the connection's schema on write. */
export function pageConfigOf(c: Record<string, unknown>): PublicPageConfig {
  const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);
  return {
    title: str(c.title) ?? 'Status',
    public_url: (str(c.public_url) ?? '').replace(/\/+$/, ''),
    logo_url: str(c.logo_url),
    time_zone: str(c.time_zone) ?? 'UTC',
    locale: str(c.locale) ?? 'en',
    support_url: str(c.support_url),
    frame_ancestors: Array.isArray(c.frame_ancestors)
      ? c.frame_ancestors.filter((o): o is string => typeof o === 'string')
      : [],
  };
}

/**
 * The stores' readers of public state: components (show_on_status_page ones, with their 90-day
 * history), published incidents (with the internal incident's resolved/closed applied) and
 * maintenances.
 */
export const REDIS_STATUS_LOADERS: StatusLoaders = {
  components: (redis, keys, nowMs) => loadPublicComponents(redis, keys, nowMs),
  incidents: (redis, keys) => loadPublicIncidents(redis, keys, SNAPSHOT_INCIDENTS),
  maintenances: (redis, keys, nowMs) => loadPublicMaintenances(redis, keys, nowMs),
  page: loadPageConfig,
};
