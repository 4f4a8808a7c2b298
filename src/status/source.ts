import type { Logger } from 'pino';
import type { Clock } from '../domain/common/clock.js';
import { isRedisUnavailable } from '../domain/common/unavailable.js';
import type {
  PublicComponent,
  PublicIncident,
  PublicMaintenance,
  PublicPageConfig,
  StatusSnapshot,
} from '../domain/status/public.js';
import type { Keys } from '../store/keys.js';
import type { RedisClient as Redis } from '../store/redis-connect.js';

/**
 * Where the page gets its snapshot. `current()` answers from memory while the source is live; it
 * returns a promise only when it must read first (the first request, or the first after an idle
 * pause), so a request on a live page never waits for Redis.
 */
export interface SnapshotSource {
  /** null: the state could not be read yet (Redis away at start-up). */
  current(): StatusSnapshot | null | Promise<StatusSnapshot | null>;
  close(): Promise<void>;
}

/** A source that always answers the same snapshot (tests, the benchmark's baseline). */
export function fixedSource(snapshot: StatusSnapshot | (() => StatusSnapshot)): SnapshotSource {
  return {
    current: () => (typeof snapshot === 'function' ? snapshot() : snapshot),
    close: () => Promise.resolve(),
  };
}

/** The readers of public state, one per owner of it (components, published incidents, maintenances, the page). */
export interface StatusLoaders {
  components(redis: Redis, keys: Keys, nowMs: number): Promise<PublicComponent[]>;
  incidents(redis: Redis, keys: Keys, nowMs: number): Promise<PublicIncident[]>;
  maintenances(redis: Redis, keys: Keys, nowMs: number): Promise<PublicMaintenance[]>;
  page(redis: Redis, keys: Keys): Promise<PublicPageConfig | null>;
}

export interface RedisSourceOptions {
  redis: Redis;
  keys: Keys;
  clock: Clock;
  log: Logger;
  loaders: StatusLoaders;
  /** How often the status version is read while the page is served (default 200 ms). */
  pollMs?: number;
  /** After this long without a request the polling pauses (default 10 min); the next request reads first. */
  idleMs?: number;
}

export const STATUS_POLL_MS = 200;
const IDLE_MS = 10 * 60_000;
const FAILURE_LOG_EVERY_MS = 60_000;

/**
 * The page's snapshot, read from Redis and held in memory: a timer reads the status version
 * (HGET, one small command) every `pollMs` and rebuilds the snapshot only when it moved — every
 * write that changes what the page shows bumps it in the same atomic commit
 * (store/status-version.ts). The version is read BEFORE the state, so a write landing during a
 * rebuild moves the version past the one recorded and the next tick rebuilds again: the page is
 * never left behind a change. A failed read keeps the last snapshot (a stale page is better than
 * none) and is retried on the next tick. Nobody asking for the page for `idleMs` pauses the reads.
 */
export function createRedisSnapshotSource(o: RedisSourceOptions): SnapshotSource {
  const pollMs = o.pollMs ?? STATUS_POLL_MS;
  const idleMs = o.idleMs ?? IDLE_MS;
  let snap: StatusSnapshot | null = null;
  let lastAsked = Date.now();
  let paused = true;
  let closed = false;
  let inFlight: Promise<void> | null = null;
  let timer: NodeJS.Timeout | undefined;
  let lastFailureLog = 0;

  const rebuild = async (): Promise<void> => {
    const raw = await o.redis.hget(o.keys.statusVersion(), 'v');
    const version = raw === null ? 0 : Number(raw);
    if (snap !== null && snap.version === version) return;
    const now = o.clock.now();
    const nowMs = now.getTime();
    const [page, components, incidents, maintenances] = await Promise.all([
      o.loaders.page(o.redis, o.keys),
      o.loaders.components(o.redis, o.keys, nowMs),
      o.loaders.incidents(o.redis, o.keys, nowMs),
      o.loaders.maintenances(o.redis, o.keys, nowMs),
    ]);
    snap = { version, page, components, incidents, maintenances, read_at: now.toISOString() };
  };

  /** One read at a time: a slow rebuild is not overtaken by the next tick. */
  const refresh = (): Promise<void> => {
    inFlight ??= rebuild()
      .catch((err: unknown) => {
        const t = Date.now();
        if (t - lastFailureLog < FAILURE_LOG_EVERY_MS) return;
        lastFailureLog = t;
        // Redis being away is logged by its connection; anything else is a bug worth seeing.
        if (isRedisUnavailable(err)) o.log.info('status page: Redis unavailable, serving the last snapshot');
        else o.log.warn({ err: (err as Error).message }, 'status page: reading the public state failed');
      })
      .finally(() => {
        inFlight = null;
      });
    return inFlight;
  };

  const tick = () => {
    timer = undefined;
    if (closed) return;
    if (Date.now() - lastAsked > idleMs) {
      paused = true;
      return;
    }
    void refresh().then(schedule);
  };
  const schedule = () => {
    if (!closed && !paused && timer === undefined) timer = setTimeout(tick, pollMs).unref();
  };

  return {
    current() {
      lastAsked = Date.now();
      if (!paused && snap !== null) return snap;
      // First request, or the first after a pause: read now, then keep polling.
      return refresh().then(() => {
        if (paused && !closed) {
          paused = false;
          schedule();
        }
        return snap;
      });
    },
    async close() {
      closed = true;
      clearTimeout(timer);
      await inFlight;
    },
  };
}
