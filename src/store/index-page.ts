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
 *
 * `rare` indexes are merged too, but only when one of them exists (one `EXISTS` for all): former
 * indexes that a migration is emptying cost nothing once it has.
 */
export async function pageIndexes(
  redis: Redis,
  indexKeys: IndexKeys,
  page: PageRequest,
): Promise<{ ids: string[]; nextCursor: Cursor | null }> {
  const after = page.cursor && 'after' in page.cursor ? page.cursor.after : null;
  const from = after ? `(${after}` : '+';
  const want = page.limit + 1;
  const { keys, rare }: IndexSet = 'rare' in indexKeys ? indexKeys : { keys: indexKeys, rare: [] };
  const merged =
    keys.length === 1 && rare.length === 0
      ? await redis.zrange(keys[0]!, from, '-', 'BYLEX', 'REV', 'LIMIT', 0, want)
      : ((await runScript(redis, MERGE_INDEXES_LUA, [...keys, ...rare], [from, want, rare.length])) as string[]);
  const ids = merged.slice(0, page.limit);
  const last = ids[ids.length - 1];
  return { ids, nextCursor: merged.length > page.limit && last ? { after: last } : null };
}

/** Index keys: all merged, or `rare` ones merged only when one of them exists (see pageIndexes). */
export interface IndexSet {
  keys: readonly string[];
  rare: readonly string[];
}
export type IndexKeys = readonly string[] | IndexSet;

/**
 * KEYS    the score-0 id indexes to merge
 * ARGV[1] where to start, exclusive: "(<id>", or "+" for the newest
 * ARGV[2] how many ids at most
 * ARGV[3] how many of the KEYS, at the end, are rare: merged only when one of them exists
 * Returns up to ARGV[2] ids of all the indexes together, newest first, each once.
 *
 * Each index is read a few ids at a time and read again only when the merge has used them all:
 * with twenty indexes (every status and severity), reading a whole page from each would take
 * twenty pages' ids for one page, most of it never used.
 */
const MERGE_INDEXES_LUA = luaScript(
  'merge_indexes',
  `
local n = tonumber(ARGV[2])
local k = #KEYS
local rare = tonumber(ARGV[3])
if rare > 0 and redis.call('EXISTS', unpack(KEYS, k - rare + 1, k)) == 0 then k = k - rare end
local chunk = math.max(4, math.ceil(n / k) + 1)
-- Per index: the ids read so far, the next one to use (its head), and whether more follow.
local lists, pos, heads, more = {}, {}, {}, {}
local function fill(i, from)
  lists[i] = redis.call('ZRANGE', KEYS[i], from, '-', 'BYLEX', 'REV', 'LIMIT', 0, chunk)
  pos[i] = 1
  heads[i] = lists[i][1]
  more[i] = #lists[i] == chunk
end
for i = 1, k do fill(i, ARGV[1]) end
local out, last = {}, nil
while #out < n do
  local best, top = nil, nil
  for i = 1, k do
    local v = heads[i]
    if v and (top == nil or v > top) then best, top = i, v end
  end
  if best == nil then break end
  local p = pos[best] + 1
  if lists[best][p] == nil and more[best] then
    fill(best, '(' .. top)
  else
    pos[best] = p
    heads[best] = lists[best][p]
  end
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
  indexKeys: IndexKeys,
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
