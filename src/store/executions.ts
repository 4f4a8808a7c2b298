import type { RedisClient as Redis } from './redis-connect.js';
import { isHeld, isTerminal, type Delivery, type Execution } from '../domain/execution/execution.js';
import type { ExecutionApprovals } from '../domain/execution/approval.js';
import { writeNewApprovals } from './approvals.js';
import type { Incident } from '../domain/incident/incident.js';
import { encodeIncident, storedString } from './incident-record.js';
import { rememberText, storedTextSha1 } from './stored-text.js';
import type { IncidentEvent } from '../domain/incident/incident-event.js';
import type { Page, PageRequest } from '../domain/common/pagination.js';
import type { ExecutionRepo, Threads } from '../ports/index.js';
import { advanceThreads } from './conversations.js';
import { mirrorReminder } from './reminders.js';
import { Change } from './commit.js';
import { durableWriter, replicaWaitError } from './durability.js';
import { loadJson, pageIndexes } from './index-page.js';
import type { Keys } from './keys.js';
import { luaScript, runScript, SCRIPT_FAILURE, scriptFailure } from './scripts.js';
import { appendTimeline } from './timeline.js';
import { decodedEach, turnBatched } from './turn-batch.js';
import { mapYielding } from '../domain/common/map-yielding.js';

/**
 * delivery_update — updateDelivery's compare-and-set, the delivery engine's hottest write (two or
 * more per delivery), for every delivery written in one turn of the event loop (turn-batch.ts):
 * one command where the worker's concurrent sends would take one each. The items run one after
 * the other inside the script, exactly as that many scripts would. The general commit script
 * (commit.ts) would take the records inside a JSON array of checks and writes — each record
 * escaped again, and decoded again by cjson in Redis — so this one takes them as plain arguments
 * and runs the same steps. The record as read is compared by its SHA-1, computed here and by
 * Redis over the stored text: the whole delivery (its rendered content, its attempts) would
 * otherwise cross the wire a second time with every write.
 *
 * Each item has six keys and its own run of arguments, led by their count:
 * KEYS[1] the delivery, KEYS[2] its connection's active set, KEYS[3] the outbox, KEYS[4] the
 *         incident's timeline, KEYS[5] the event outbox stream (store/timeline.ts), KEYS[6] the
 *         execution's tally (executionTally: deliveries still open and finished per status)
 * ARGV[1] SHA-1 (hex) of the record as read, ARGV[2] the new record, ARGV[3] the delivery id,
 * ARGV[4] 1 = terminal (leaves the active set) / 0, ARGV[5] outbox score ('' = not queued again),
 * ARGV[6] the incident id, ARGV[7] '+<status>' when the delivery becomes final, '-<status>' when
 * it leaves a final status (a redeliver), else '', ARGV[8] the execution id, ARGV[9] now (ISO),
 * ARGV[10..] timeline events to append (each also goes on the event stream, with the delivery)
 * (numbered as the item sees them: its keys and arguments start at 1).
 * The last open delivery becoming final emits `execution.completed` with the counts, in this same
 * step, so it is emitted exactly once per completion. Executions from before the tally have none
 * and emit none.
 * Returns, per item, 0 when written, 1 when the stored record is not the one read (nothing written),
 * or the error that stopped it (SCRIPT_FAILURE): an item's error ends only that item.
 */
const DELIVERY_UPDATE_LUA = luaScript(
  'delivery_update',
  `
${SCRIPT_FAILURE}
local function update(K, A, n)
  local stored = redis.call('GET', K[1])
  if not stored or redis.sha1hex(stored) ~= A[1] then return 1 end
  redis.call('SET', K[1], A[2])
  if A[4] == '1' then redis.call('SREM', K[2], A[3]) else redis.call('SADD', K[2], A[3]) end
  if A[5] ~= '' then redis.call('ZADD', K[3], A[5], A[3]) end
  if n > 9 then redis.call('RPUSH', K[4], unpack(A, 10, n)) end
  for i = 10, n do
    local e = cjson.decode(A[i])
    redis.call('XADD', K[5], '*', 'id', e.id, 't', e.type, 'i', A[6], 'e', A[i], 'r', A[2])
  end
  if A[7] ~= '' and redis.call('EXISTS', K[6]) == 1 then
    local d = (string.sub(A[7], 1, 1) == '+') and 1 or -1
    redis.call('HINCRBY', K[6], string.sub(A[7], 2), d)
    if redis.call('HINCRBY', K[6], 'open', -d) == 0 and d == 1 then
      local c = redis.call('HINCRBY', K[6], 'completions', 1)
      local t = redis.call('HMGET', K[6], 'delivered', 'failed', 'cancelled')
      local id = 'evt_' .. string.sub(A[8], 5) .. '.completed'
      if c > 1 then id = id .. '.' .. c end
      local ev = cjson.encode({id = id, type = 'execution.completed', at = A[9],
        actor = {type = 'system', id = 'herald', name = 'Herald'},
        data = {execution_id = A[8], delivered = tonumber(t[1] or '0') or 0,
          failed = tonumber(t[2] or '0') or 0, cancelled = tonumber(t[3] or '0') or 0}})
      redis.call('XADD', K[5], '*', 'id', id, 't', 'execution.completed', 'i', A[6], 'e', ev)
    end
  end
  return 0
end
local out, p = {}, 1
for i = 1, #KEYS / 6 do
  local n = tonumber(ARGV[p])
  local ok, r = pcall(update, {unpack(KEYS, i * 6 - 5, i * 6)}, {unpack(ARGV, p + 1, p + n)}, n)
  out[i] = ok and r or failure(r)
  p = p + n + 1
end
return out
`,
);

/** One write of updateDelivery, waiting for its turn's batch. */
interface DeliveryWrite {
  prev: Delivery;
  next: Delivery;
  opts: { outbox?: boolean; events?: IncidentEvent[] };
}

/**
 * How long the outbox sweep leaves an execute's deliveries to their dispatch jobs (markDispatched).
 * A backlog in the queue shorter than this does not turn them into a job each; a dispatch job
 * that a worker of an older version failed (it knows only jobs of one delivery) is made good by
 * the sweep after this, so it is a minute, not longer.
 */
export const DISPATCH_LEASE_MS = 60_000;

/**
 * The outbox's scores. An execute's deliveries enter it at their execution's `created_at` (a whole
 * ms, the claim a dispatch job carries); markDispatched moves them to the claim plus the lease plus
 * half a ms; the sweep stamps what it takes with its own time plus a quarter. The fractions keep
 * the three apart: what the sweep took can never be claimed by a dispatch job.
 */
const dispatchedScore = (claim: number): number => claim + DISPATCH_LEASE_MS + 0.5;
const SWEPT_FRACTION = 0.25;

/**
 * outbox_claim — a dispatch job takes its deliveries (ExecutionRepo.claimOutbox).
 * KEYS[1] the outbox; ARGV[1] the committed score, ARGV[2] the dispatched one, ARGV[3..] ids.
 * Returns the ids it removed: those still scored ARGV[1] or ARGV[2].
 */
const OUTBOX_CLAIM_LUA = luaScript(
  'outbox_claim',
  `
local claimed = {}
for i = 3, #ARGV do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if s and (tonumber(s) == tonumber(ARGV[1]) or tonumber(s) == tonumber(ARGV[2])) then
    redis.call('ZREM', KEYS[1], ARGV[i])
    claimed[#claimed + 1] = ARGV[i]
  end
end
return claimed
`,
);

/**
 * outbox_dispatched — ExecutionRepo.markDispatched. KEYS[1] the outbox; ARGV[1] the committed
 * score, ARGV[2] the dispatched one, ARGV[3..] ids. Only an entry still at ARGV[1] moves.
 */
const OUTBOX_DISPATCHED_LUA = luaScript(
  'outbox_dispatched',
  `
for i = 3, #ARGV do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if s and tonumber(s) == tonumber(ARGV[1]) then redis.call('ZADD', KEYS[1], 'XX', ARGV[2], ARGV[i]) end
end
return 0
`,
);

/**
 * outbox_take — the sweep's ExecutionRepo.takeOutbox. KEYS[1] the outbox; ARGV[1] the cut-off
 * score, ARGV[2] the stamp, ARGV[3] how many at most. Returns the ids taken.
 */
const OUTBOX_TAKE_LUA = luaScript(
  'outbox_take',
  `
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do redis.call('ZADD', KEYS[1], 'XX', ARGV[2], id) end
return ids
`,
);

/** Outbox entries markDispatched moves per script: a few ms of Redis' time each. */
export const DISPATCHED_PER_SCRIPT = 1000;

/** The most deliveries one sweep takes (the next takes the rest). */
const SWEEP_BATCH = 1000;

/**
 * Executions and deliveries: `exe:<id>` and `dlv:<id>` JSON records, `inc:<id>:exes` (newest
 * first), `con:<id>:active` (non-terminal deliveries per connection) and the enqueue outbox.
 */
export class RedisExecutionRepo implements ExecutionRepo {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly nowMs: () => number = Date.now,
    /** The connection for the execute's commit (see BULK_COMMAND_TIMEOUT_MS); the same one by default. */
    private readonly bulk: Redis = redis,
  ) {}

  /** getDelivery's reads of one turn, as one MGET (turn-batch.ts). */
  private readonly readOne = turnBatched(async (ids: readonly string[]) =>
    decodedEach(await this.redis.mget(ids.map((id) => this.keys.delivery(id))), decodeDelivery),
  );

  /** updateDelivery's writes of one turn, as one script (DELIVERY_UPDATE_LUA). */
  private readonly writeOne = turnBatched((writes: readonly DeliveryWrite[]) => this.writeDeliveries(writes));

  async create(
    execution: Execution,
    deliveries: Delivery[],
    incidentPrev: Incident,
    incidentNext: Incident,
    events: IncidentEvent[],
    threads?: Threads,
    approvals?: ExecutionApprovals | null,
  ): Promise<boolean> {
    const k = this.keys;
    // Not connected yet (just started) or reconnecting: the bounded connection answers at once.
    const client = this.bulk.status === 'ready' ? this.bulk : this.redis;
    // The incident in its stored form (store/incident-record.ts), compared as the exact string read.
    const nextText = encodeIncident(incidentNext);
    const change = new Change(client)
      .expect(k.incident(incidentPrev.id), storedString(incidentPrev))
      .write('SET', k.incident(incidentNext.id), nextText)
      .write('SET', k.execution(execution.id), JSON.stringify(execution))
      .write('ZADD', k.incidentExecutions(execution.incident_id), '0', execution.id);
    // The execution's own time: the claim its dispatch jobs carry (claimOutbox). A record without
    // one (none is made so) is still swept, after the sweep's period.
    const created = Date.parse(execution.created_at);
    const now = String(Number.isFinite(created) ? created : this.nowMs());
    const records = await mapYielding(deliveries, (d) => JSON.stringify(d));
    const recordKeys = deliveries.map((d) => k.delivery(d.id));
    // A large fan-out's records go to Redis ahead of the commit, expiring unless it keeps them,
    // so that the one atomic step which every other client waits for stays short.
    const ahead = deliveries.length >= WRITE_AHEAD_FROM;
    if (ahead) {
      await writeAhead(client, recordKeys, records);
      change.expectEachExists(recordKeys).writeEach('PERSIST', recordKeys, () => []);
    } else change.writeEach('SET', recordKeys, (i) => [records[i]!]);
    change.writeEach(
      'SADD',
      deliveries.map((d) => k.connectionActiveDeliveries(d.connection_id)),
      (i) => [deliveries[i]!.id],
    );
    // One held for its audience's approval enters the outbox only when approved (store/approvals.ts).
    const queued = deliveries.filter((d) => !isHeld(d.status));
    change.writeItems(
      'ZADD',
      k.deliveryOutbox(),
      queued.flatMap((d) => [now, d.id]),
      2,
    );
    // What execution.completed counts (see DELIVERY_UPDATE_LUA): the deliveries not yet final.
    const tally: Record<string, number> = { open: 0, delivered: 0, failed: 0, cancelled: 0 };
    for (const d of deliveries) tally[isTerminal(d.status) ? d.status : 'open']! += 1;
    change.write('HSET', k.executionTally(execution.id), ...Object.entries(tally).flat());
    appendTimeline(change, k, incidentNext.id, events, {
      snapshots: { incident: nextText, execution: JSON.stringify(execution) },
    });
    // A held delivery has no place in its conversation until approved.
    if (threads)
      advanceThreads(
        change,
        k,
        incidentNext.id,
        threads,
        deliveries.filter((d) => !isHeld(d.status)),
      );
    // Scheduled by the execution's own time (its clock), as the sweep that tells approvers reads it.
    if (approvals) writeNewApprovals(change, k, approvals, Number(now));
    mirrorReminder(change, k, incidentPrev, incidentNext);
    const committed = await change.commit({ kind: 'execution', execution, deliveries, approvals: approvals ?? null });
    if (committed) rememberText(incidentNext, nextText);
    // Lost to a concurrent change: the records written ahead are nobody's. (After an error the
    // commit may still have run, so they are left to expire or to stay, as the commit decided.)
    else if (ahead) await discard(client, recordKeys);
    return committed;
  }

  async get(id: string): Promise<Execution | null> {
    const [e] = await loadJson<Execution>(this.redis, [this.keys.execution(id)]);
    return e ?? null;
  }

  async listForIncident(incidentId: string, page: PageRequest): Promise<Page<Execution>> {
    const { ids, nextCursor } = await pageIndexes(this.redis, [this.keys.incidentExecutions(incidentId)], page);
    const list = await loadJson<Execution>(
      this.redis,
      ids.map((id) => this.keys.execution(id)),
    );
    return { data: list.filter((e): e is Execution => e !== null), nextCursor };
  }

  async getDeliveries(ids: string[]): Promise<(Delivery | null)[]> {
    if (ids.length === 0) return [];
    // Arrays, not spread arguments, wherever the count follows an execute's size (scripts.ts).
    const raw = await this.redis.mget(ids.map((id) => this.keys.delivery(id)));
    return raw.map((r) => (r === null ? null : decodeDelivery(r)));
  }

  getDelivery(id: string): Promise<Delivery | null> {
    return this.readOne(id);
  }

  updateDelivery(
    prev: Delivery,
    next: Delivery,
    opts: { outbox?: boolean; events?: IncidentEvent[] } = {},
  ): Promise<boolean> {
    return this.writeOne({ prev, next, opts });
  }

  /** The writes of one turn, in one script; per write, whether it was written, or the error. */
  private async writeDeliveries(writes: readonly DeliveryWrite[]): Promise<(boolean | Error)[]> {
    const k = this.keys;
    const keys: string[] = [];
    const args: string[] = [];
    const texts: string[] = [];
    const at = new Date(this.nowMs()).toISOString();
    for (const { prev, next, opts } of writes) {
      keys.push(
        k.delivery(prev.id),
        k.connectionActiveDeliveries(next.connection_id),
        k.deliveryOutbox(),
        k.incidentEvents(next.incident_id),
        k.eventStream(),
        k.executionTally(next.execution_id),
      );
      const nextText = JSON.stringify(next);
      texts.push(nextText);
      const [was, is] = [isTerminal(prev.status), isTerminal(next.status)];
      // The timeline's `delivery.failed` is written with the failure itself: never one without the other.
      const events = (opts.events ?? []).map((e) => JSON.stringify(e));
      args.push(
        String(9 + events.length),
        storedTextSha1(prev),
        nextText,
        next.id,
        is ? '1' : '0',
        opts.outbox ? String(this.nowMs()) : '',
        next.incident_id,
        !was && is ? `+${next.status}` : was && !is ? `-${prev.status}` : '',
        next.execution_id,
        at,
        ...events,
      );
    }
    const answers = (await runScript(durableWriter(this.redis), DELIVERY_UPDATE_LUA, keys, args)) as (
      number | string
    )[];
    const written = answers.map((a) => (typeof a === 'string' ? scriptFailure(a) : a === 0));
    const first = written.indexOf(true);
    if (first < 0) return written;
    // A delivery's state must outlive a failover: a lost "sending" would resend it unflagged.
    // Should that wait fail, each write made is answered with its error (it may not have lasted).
    const lasted = await replicaWaitError(this.redis, keys[first * 6]!);
    return written.map((w, i) => {
      if (w !== true) return w;
      if (lasted) return lasted;
      rememberText(writes[i]!.next, texts[i]!);
      return true;
    });
  }

  activeForConnection(connectionId: string): Promise<string[]> {
    return this.redis.smembers(this.keys.connectionActiveDeliveries(connectionId));
  }

  async takeOutbox(olderThanMs: number): Promise<string[]> {
    const now = this.nowMs();
    const args = [String(now - olderThanMs), String(now + SWEPT_FRACTION), String(SWEEP_BATCH)];
    return (await runScript(this.redis, OUTBOX_TAKE_LUA, [this.keys.deliveryOutbox()], args)) as string[];
  }

  async markDispatched(ids: string[], claim: number): Promise<void> {
    // Each entry moves on its own, so a large execute's go in slices, one after the other: one
    // script over 10,000 of them held every other client of Redis for about 50 ms.
    for (let i = 0; i < ids.length; i += DISPATCHED_PER_SCRIPT) {
      await runScript(
        this.redis,
        OUTBOX_DISPATCHED_LUA,
        [this.keys.deliveryOutbox()],
        [String(claim), String(dispatchedScore(claim)), ...ids.slice(i, i + DISPATCHED_PER_SCRIPT)],
      );
    }
  }

  async claimOutbox(ids: string[], claim: number): Promise<string[]> {
    if (ids.length === 0) return [];
    return (await runScript(
      this.redis,
      OUTBOX_CLAIM_LUA,
      [this.keys.deliveryOutbox()],
      [String(claim), String(dispatchedScore(claim)), ...ids],
    )) as string[];
  }

  async markEnqueued(ids: string[]): Promise<void> {
    if (ids.length > 0) await this.redis.zrem(this.keys.deliveryOutbox(), ids);
  }
}

/** A stored delivery, tied to its text (the compare-and-set of its next write expects it). */
const decodeDelivery = (raw: string): Delivery => rememberText(JSON.parse(raw) as Delivery, raw);

/**
 * From this many deliveries an execute writes their records ahead of its commit. Redis runs a
 * script to the end before it serves anyone else, and an execute to 10,000 connections carried
 * 10,000 records of a kilobyte or more in its commit: every other client waited for all of them
 * to be written. Written ahead, as plain commands between which Redis serves others, the commit
 * only checks that they are there and keeps them. Below this, one step costs less than the
 * round trips the writes ahead would add to the execute's answer.
 */
const WRITE_AHEAD_FROM = 500;
/** Records per write-ahead round trip. */
const WRITE_AHEAD_BATCH = 500;
/**
 * How long a record written ahead lives unless the commit keeps it: long enough for any commit
 * (the bulk connection gives up on one after BULK_COMMAND_TIMEOUT_MS), so short that a crash
 * between the two leaves nothing behind for long.
 */
const WRITE_AHEAD_TTL_MS = 15 * 60_000;

async function writeAhead(client: Redis, keys: readonly string[], records: readonly string[]): Promise<void> {
  for (let i = 0; i < keys.length; i += WRITE_AHEAD_BATCH) {
    const batch: Promise<unknown>[] = [];
    for (let j = i; j < Math.min(i + WRITE_AHEAD_BATCH, keys.length); j++)
      batch.push(client.set(keys[j]!, records[j]!, 'PX', WRITE_AHEAD_TTL_MS));
    await Promise.all(batch);
  }
}

/** Removes records written ahead for a commit that lost; they expire anyway if this fails. */
async function discard(client: Redis, keys: readonly string[]): Promise<void> {
  for (let i = 0; i < keys.length; i += WRITE_AHEAD_BATCH)
    await client.unlink(keys.slice(i, i + WRITE_AHEAD_BATCH)).catch(() => 0);
}
