import { Cluster, type Redis } from 'ioredis';
import { connectRedis, type RedisClient, type RedisTarget } from './redis-connect.js';

/**
 * Redis connections, to a URL (or socket path) or to any target of src/store/redis-connect.ts
 * (Cluster, Sentinel). `worker: true` is for BullMQ workers, which block and must never give up a
 * command (`maxRetriesPerRequest: null`).
 */
export function createRedis(target: string | RedisTarget, opts: { worker?: boolean; name?: string } = {}): RedisClient {
  const t: RedisTarget = typeof target === 'string' ? { kind: 'standalone', url: target } : target;
  return connectRedis(t, { use: opts.worker ? 'worker' : 'request', name: opts.name ?? 'herald' });
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
