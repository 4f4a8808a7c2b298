import type { Page, PageRequest } from '../../src/domain/common/pagination.js';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import { createKeys, type Keys } from '../../src/store/keys.js';
import { afterAll } from 'vitest';
import { dropPrefix, uniquePrefix, useTestRedis } from '../support/redis.js';

/**
 * What the port contracts share. Each contract is one `describe` body, a function of a factory
 * that makes an empty store, run once over the in-memory fake the service tests use and once
 * over the Redis adapter production uses: where they disagree, the fake is wrong.
 */

/** Makes an empty store for one test (a fresh fake, or the adapter on a prefix of its own). */
export type Make<R> = () => R;

/**
 * The test Redis for the calling contract file, and a fresh prefix per store it makes, each
 * dropped when the file's tests are done.
 */
export function contractRedis(label: string): { keys(): Keys; redis(): ReturnType<typeof useTestRedis>['redis'] } {
  const db = useTestRedis(label);
  const made: string[] = [];
  // Registered after useTestRedis's own hook, so it runs first, while the connection is open.
  afterAll(async () => {
    for (const prefix of made) await dropPrefix(db.redis, prefix);
  });
  return {
    keys: () => {
      const prefix = uniquePrefix(label);
      made.push(prefix);
      return createKeys(prefix);
    },
    redis: () => db.redis,
  };
}

export const ids = createIdGenerator();

/** Every item, reading pages of `limit` and following the cursor until there is none. */
export async function allPages<T>(read: (page: PageRequest) => Promise<Page<T>>, limit: number): Promise<T[][]> {
  const pages: T[][] = [];
  let cursor: PageRequest['cursor'] = null;
  for (let guard = 0; guard < 1000; guard++) {
    const page = await read({ limit, cursor });
    pages.push(page.data);
    if (page.nextCursor === null) return pages;
    cursor = page.nextCursor;
  }
  throw new Error('the cursor never ended');
}

/** The same value as plain JSON, whatever prototype or freezing the store gave it. */
export const plain = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;
