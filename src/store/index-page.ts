import type { RedisClient as Redis } from './redis-connect.js';
import type { Cursor, Page, PageRequest } from '../domain/pagination.js';

/**
 * Newest-first pages over one or more id indexes. Every index is a sorted set whose members are
 * ULID-based ids, all with score 0, so `ZRANGE … BYLEX REV` orders them by creation and the cursor
 * (the last id served) is exclusive and exact: ids added while a client pages sort before or after
 * it and never make the next page skip or repeat one (score cursors would skip equal scores).
 * Several indexes (a status filter with two values) are merged, de-duplicated, in the same order.
 */
export async function pageIndexes(redis: Redis, indexKeys: string[], page: PageRequest): Promise<{ ids: string[]; nextCursor: Cursor | null }> {
  const after = page.cursor && 'after' in page.cursor ? page.cursor.after : null;
  const want = page.limit + 1;
  const lists = await Promise.all(indexKeys.map((k) => redis.zrange(k, after ? `(${after}` : '+', '-', 'BYLEX', 'REV', 'LIMIT', 0, want)));
  const merged = [...new Set(lists.flat())].sort((a, b) => (a < b ? 1 : a > b ? -1 : 0)).slice(0, want);
  const ids = merged.slice(0, page.limit);
  const last = ids[ids.length - 1];
  return { ids, nextCursor: merged.length > page.limit && last ? { after: last } : null };
}

/**
 * Pages an index and keeps only the records `accept` takes, reading further batches until the
 * page is full or the index ends. Used where a filter has no index of its own.
 */
export async function pageFiltered<T extends { id: string }>(
  redis: Redis,
  indexKeys: string[],
  page: PageRequest,
  load: (ids: string[]) => Promise<(T | null)[]>,
  accept: (item: T) => boolean,
): Promise<Page<T>> {
  const out: T[] = [];
  let cursor = page.cursor;
  for (;;) {
    const batch = await pageIndexes(redis, indexKeys, { limit: Math.max(page.limit, 50), cursor });
    const items = await load(batch.ids);
    for (let i = 0; i < batch.ids.length; i++) {
      const item = items[i];
      if (item && accept(item)) {
        out.push(item);
        if (out.length === page.limit) {
          // More may follow when this page stopped before the batch or the batch was not the last.
          const more = i < batch.ids.length - 1 || batch.nextCursor !== null;
          return { data: out, nextCursor: more ? { after: item.id } : null };
        }
      }
    }
    if (!batch.nextCursor) return { data: out, nextCursor: null };
    cursor = batch.nextCursor;
  }
}

/** MGET of JSON records; missing ones come back as null, in order. */
export async function loadJson<T>(redis: Redis, keys: string[]): Promise<(T | null)[]> {
  if (keys.length === 0) return [];
  const raw = await redis.mget(...keys);
  return raw.map((r) => (r === null ? null : (JSON.parse(r) as T)));
}
