import type { RedisClient as Redis } from './redis-connect.js';
import type { Cursor, Page, PageRequest } from '../domain/common/pagination.js';
import { luaScript, runScript } from './scripts.js';

/**
 * Newest-first pages over one or more id indexes. Every index is a sorted set whose members are
 * ULID-based ids, all with score 0, so `ZRANGE … BYLEX REV` orders them by creation and the cursor
 * (the last id served) is exclusive and exact: ids added while a client pages sort before or after
 * it and never make the next page skip or repeat one (score cursors would skip equal scores).
 * Several indexes (every status index, or a status filter with two values) are merged,
 * de-duplicated, in the same order, by one script: one snapshot, so an id moving from one index to
 * another meanwhile is seen exactly once (separate reads could miss it, or see it twice).
 */
export async function pageIndexes(
  redis: Redis,
  indexKeys: string[],
  page: PageRequest,
): Promise<{ ids: string[]; nextCursor: Cursor | null }> {
  const after = page.cursor && 'after' in page.cursor ? page.cursor.after : null;
  const from = after ? `(${after}` : '+';
  const want = page.limit + 1;
  const merged =
    indexKeys.length === 1
      ? await redis.zrange(indexKeys[0]!, from, '-', 'BYLEX', 'REV', 'LIMIT', 0, want)
      : ((await runScript(redis, MERGE_INDEXES_LUA, indexKeys, [from, want])) as string[]);
  const ids = merged.slice(0, page.limit);
  const last = ids[ids.length - 1];
  return { ids, nextCursor: merged.length > page.limit && last ? { after: last } : null };
}

/**
 * KEYS    the score-0 id indexes to merge
 * ARGV[1] where to start, exclusive: "(<id>", or "+" for the newest
 * ARGV[2] how many ids at most
 * Returns up to ARGV[2] ids of all the indexes together, newest first, each once.
 */
const MERGE_INDEXES_LUA = luaScript(
  'merge_indexes',
  `
local n = tonumber(ARGV[2])
local lists, pos = {}, {}
for i, key in ipairs(KEYS) do
  lists[i] = redis.call('ZRANGE', key, ARGV[1], '-', 'BYLEX', 'REV', 'LIMIT', 0, n)
  pos[i] = 1
end
local out, last = {}, nil
while #out < n do
  local best, top = nil, nil
  for i = 1, #lists do
    local v = lists[i][pos[i]]
    if v and (top == nil or v > top) then best, top = i, v end
  end
  if best == nil then break end
  pos[best] = pos[best] + 1
  if top ~= last then out[#out + 1] = top; last = top end
end
return out
`,
);

/**
 * Pages an index and keeps only the records `accept` takes, reading further batches until the
 * page is full or the index ends. Used where a filter has no index of its own (then a batch of
 * `batchSize` ids, 50 by default, is read at a time), or where `accept` only re-checks what the index
 * said and rarely drops one (then `batchSize` = the page size: one read when nothing was dropped).
 */
export async function pageFiltered<T extends { id: string }>(
  redis: Redis,
  indexKeys: string[],
  page: PageRequest,
  load: (ids: string[]) => Promise<(T | null)[]>,
  accept: (item: T) => boolean,
  batchSize = Math.max(page.limit, 50),
): Promise<Page<T>> {
  const out: T[] = [];
  let cursor = page.cursor;
  for (;;) {
    const batch = await pageIndexes(redis, indexKeys, { limit: Math.max(page.limit, batchSize), cursor });
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
