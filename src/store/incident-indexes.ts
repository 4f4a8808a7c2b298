import type { Logger } from 'pino';
import type { RedisClient as Redis } from './redis-connect.js';
import { SEVERITIES, STATUSES } from '../domain/incident/incident.js';
import type { Keys } from './keys.js';
import type { IndexSet } from './index-page.js';
import { luaScript, runScript } from './scripts.js';

/**
 * The incident indexes: one score-0 sorted set per status and severity (`incs:by:<status>:<severity>`,
 * 5 × 4 of them), every incident in exactly one. A list merges the ones its filter names
 * (store/index-page.ts), so a severity filter reads its own ids like a status filter does, and no
 * filter reads records it then drops. One set per pair rather than a status set plus a severity
 * set: each incident is one index member either way, so a million incidents cost no more memory
 * than with status sets alone.
 *
 * Incidents written before these indexes are in the former per-status sets (`incs:status:<s>`).
 * Lists keep reading those too (the merge de-duplicates, and a list re-checks every record against
 * its filter), so nothing is missing while the worker moves them (`moveLegacyIndexes`).
 */
export function incidentIndexKeys(keys: Keys, statuses: readonly string[], severities: readonly string[]): IndexSet {
  const pairs: string[] = [];
  for (const s of new Set(statuses)) for (const v of new Set(severities)) pairs.push(keys.incidentsBy(s, v));
  return { keys: pairs, rare: [...new Set(statuses)].map((s) => keys.incidentsByStatus(s)) };
}

/** Ids moved per script: ~200 records decoded keeps Redis busy a millisecond or two at a time. */
const MOVE_BATCH = 200;

/**
 * KEYS[1]            a former per-status set
 * KEYS[2 .. 1+S*V]   the pair sets, status-major in the order of ARGV's lists
 * KEYS[2+S*V ..]     the records of the ids in ARGV[4 ..], in that order
 * ARGV[1] S, ARGV[2] the statuses joined by ",", ARGV[3] the severities joined by ","
 * ARGV[4 ..]         ids (members of KEYS[1])
 * Each id still in KEYS[1] moves to the pair set its record names, in one step with reading the
 * record, so an update meanwhile (which removes it from KEYS[1] itself) cannot be undone. An id
 * without a record leaves the index (lists skip it anyway); one whose record names no known pair
 * stays where it is. Returns the number moved.
 */
const MOVE_LUA = luaScript(
  'move_incident_index',
  `
local function positions(csv)
  local out, i = {}, 0
  for v in string.gmatch(csv, '[^,]+') do i = i + 1; out[v] = i end
  return out, i
end
local statuses = positions(ARGV[2])
local severities, nsev = positions(ARGV[3])
local nstat = tonumber(ARGV[1])
local first = 2 + nstat * nsev
local moved = 0
for i = 4, #ARGV do
  local id = ARGV[i]
  if redis.call('ZSCORE', KEYS[1], id) then
    local raw = redis.call('GET', KEYS[first + i - 4])
    if not raw then
      redis.call('ZREM', KEYS[1], id)
    else
      local ok, rec = pcall(cjson.decode, raw)
      if ok and type(rec) == 'table' then
        -- The array form (store/incident-record.ts) holds severity and status at positions 1 and
        -- 2 (Lua: 2 and 3); the object form, written before it, by name.
        local status, severity = rec.status, rec.severity
        if rec[1] ~= nil then status, severity = rec[3], rec[2] end
        if status == nil or status == cjson.null then status = 'investigating' end
        local s = statuses[status]
        local v = severities[severity]
        if s and v then
          redis.call('ZADD', KEYS[1 + (s - 1) * nsev + v], 0, id)
          redis.call('ZREM', KEYS[1], id)
          moved = moved + 1
        end
      end
    end
  end
end
return moved
`,
);

export interface IndexMoveReport {
  /** Ids moved to the pair sets. */
  moved: number;
  /** Ids left in the former sets: their record names no known status and severity. */
  left: number;
}

/**
 * Moves every id of the former per-status sets to its pair set, a batch at a time. Safe beside
 * running Herald processes and other movers (each batch is one script that re-reads the record),
 * and a second run finds nothing to do. `stopped` is asked between batches.
 */
export async function moveLegacyIndexes(
  redis: Redis,
  keys: Keys,
  stopped: () => boolean = () => false,
): Promise<IndexMoveReport> {
  const report: IndexMoveReport = { moved: 0, left: 0 };
  const pairs = incidentIndexKeys(keys, STATUSES, SEVERITIES).keys;
  const header = [STATUSES.length, STATUSES.join(','), SEVERITIES.join(',')];
  for (const status of STATUSES) {
    const legacy = keys.incidentsByStatus(status);
    let from = '-';
    while (!stopped()) {
      const ids = await redis.zrange(legacy, from, '+', 'BYLEX', 'LIMIT', 0, MOVE_BATCH);
      if (ids.length === 0) break;
      const moved = (await runScript(
        redis,
        MOVE_LUA,
        [legacy, ...pairs, ...ids.map((id) => keys.incident(id))],
        [...header, ...ids],
      )) as number;
      report.moved += moved;
      from = `(${ids[ids.length - 1]!}`;
    }
    if (!stopped()) report.left += await redis.zcard(legacy);
  }
  return report;
}

/**
 * Runs the move in the background of a worker process, once at start (the former sets empty: a
 * few `ZCARD`s and done). Its end, and any failure, go to the log; `stop` ends it between batches.
 */
export function startIndexMove(redis: Redis, keys: Keys, log: Logger): { stop(): Promise<void> } {
  let stopping = false;
  const run = (async () => {
    const started = Date.now();
    const report = await moveLegacyIndexes(redis, keys, () => stopping);
    if (report.moved > 0 || report.left > 0) {
      log.info({ ...report, ms: Date.now() - started }, 'moved incidents to the status-and-severity indexes');
    }
  })().catch((err: unknown) => {
    // Lists read the former sets too, so a failed move costs speed, never an incident: the next start retries.
    if (!stopping) log.warn({ err }, 'could not move incidents to the status-and-severity indexes');
  });
  return {
    async stop() {
      stopping = true;
      await run;
    },
  };
}
