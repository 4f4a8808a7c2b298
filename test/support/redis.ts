import { randomBytes } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';

export const testRedisUrl = (): string => process.env.HERALD_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A key prefix no other test uses. */
export const uniquePrefix = (label = 't'): string => `test-${label}-${randomBytes(6).toString('hex')}`;

/** Deletes every key under a prefix's hash tag (tests clean up after themselves). */
export async function dropPrefix(redis: Redis | Cluster, prefix: string): Promise<void> {
  // SCAN is per node: on a Cluster, the tag's slot lives on one master, so ask each.
  if (redis instanceof Cluster) {
    for (const node of redis.nodes('master')) await dropPrefix(node, prefix);
    return;
  }
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `{${prefix}}*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
}

export function connectTestRedis(): Redis {
  return new Redis(testRedisUrl());
}
