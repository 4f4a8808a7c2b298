import type { RedisClient as Redis } from './redis-connect.js';

/** EXISTS for each key, in one round trip. */
export async function keysExist(redis: Redis, keys: string[]): Promise<boolean[]> {
  if (keys.length === 0) return [];
  const pipeline = redis.pipeline();
  for (const k of keys) pipeline.exists(k);
  const results = (await pipeline.exec()) ?? [];
  return results.map(([err, n]) => {
    if (err) throw err;
    return n === 1;
  });
}
