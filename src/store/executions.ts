import type { RedisClient as Redis } from './redis-connect.js';
import { isHeld, isTerminal, type Delivery, type Execution } from '../domain/execution/execution.js';
import type { ExecutionApprovals } from '../domain/execution/approval.js';
import { writeNewApprovals } from './approvals.js';
import type { Incident } from '../domain/incident/incident.js';
import { encodeIncident, storedString } from './incident-record.js';
import { rememberText, storedTextSha1 } from './stored-text.js';
import type { IncidentEvent } from '../domain/incident/incident-event.js';
import type { Page, PageRequest } from '../domain/common/pagination.js';
import type { ExecutionRepo, ThreadState } from '../ports/index.js';
import { advanceThreads } from './conversations.js';
import { mirrorReminder } from './reminders.js';
import { Change } from './commit.js';
import { awaitReplicas, durableWriter } from './durability.js';
import { loadJson, pageIndexes } from './index-page.js';
import type { Keys } from './keys.js';
import { luaScript, runScript } from './scripts.js';
import { appendTimeline } from './timeline.js';

/**
 * delivery_update — updateDelivery's compare-and-set, the delivery engine's hottest write (two or
 * more per delivery). The general commit script (commit.ts) would take the records inside a JSON
 * array of checks and writes — each record escaped again, and decoded again by cjson in Redis — so
 * this one takes them as plain arguments and runs the same steps. The record as read is compared
 * by its SHA-1, computed here and by Redis over the stored text: the whole delivery (its rendered
 * content, its attempts) would otherwise cross the wire a second time with every write.
 *
 * KEYS[1] the delivery, KEYS[2] its connection's active set, KEYS[3] the outbox, KEYS[4] the
 *         incident's timeline, KEYS[5] the event outbox stream (store/timeline.ts), KEYS[6] the
 *         execution's tally (executionTally: deliveries still open and finished per status)
 * ARGV[1] SHA-1 (hex) of the record as read, ARGV[2] the new record, ARGV[3] the delivery id,
 * ARGV[4] 1 = terminal (leaves the active set) / 0, ARGV[5] outbox score ('' = not queued again),
 * ARGV[6] the incident id, ARGV[7] '+<status>' when the delivery becomes final, '-<status>' when
 * it leaves a final status (a redeliver), else '', ARGV[8] the execution id, ARGV[9] now (ISO),
 * ARGV[10..] timeline events to append (each also goes on the event stream, with the delivery)
 * The last open delivery becoming final emits `execution.completed` with the counts, in this same
 * step, so it is emitted exactly once per completion. Executions from before the tally have none
 * and emit none.
 * Returns 0 when written, 1 when the stored record is not the one read (nothing written).
 */
const DELIVERY_UPDATE_LUA = luaScript(
  'delivery_update',
  `
local stored = redis.call('GET', KEYS[1])
if not stored or redis.sha1hex(stored) ~= ARGV[1] then return 1 end
redis.call('SET', KEYS[1], ARGV[2])
if ARGV[4] == '1' then redis.call('SREM', KEYS[2], ARGV[3]) else redis.call('SADD', KEYS[2], ARGV[3]) end
if ARGV[5] ~= '' then redis.call('ZADD', KEYS[3], ARGV[5], ARGV[3]) end
if #ARGV > 9 then redis.call('RPUSH', KEYS[4], unpack(ARGV, 10)) end
for i = 10, #ARGV do
  local e = cjson.decode(ARGV[i])
  redis.call('XADD', KEYS[5], '*', 'id', e.id, 't', e.type, 'i', ARGV[6], 'e', ARGV[i], 'r', ARGV[2])
end
if ARGV[7] ~= '' and redis.call('EXISTS', KEYS[6]) == 1 then
  local d = (string.sub(ARGV[7], 1, 1) == '+') and 1 or -1
  redis.call('HINCRBY', KEYS[6], string.sub(ARGV[7], 2), d)
  if redis.call('HINCRBY', KEYS[6], 'open', -d) == 0 and d == 1 then
    local n = redis.call('HINCRBY', KEYS[6], 'completions', 1)
    local c = redis.call('HMGET', KEYS[6], 'delivered', 'failed', 'cancelled')
    local id = 'evt_' .. string.sub(ARGV[8], 5) .. '.completed'
    if n > 1 then id = id .. '.' .. n end
    local ev = cjson.encode({id = id, type = 'execution.completed', at = ARGV[9],
      actor = {type = 'system', id = 'herald', name = 'Herald'},
      data = {execution_id = ARGV[8], delivered = tonumber(c[1] or '0') or 0,
        failed = tonumber(c[2] or '0') or 0, cancelled = tonumber(c[3] or '0') or 0}})
    redis.call('XADD', KEYS[5], '*', 'id', id, 't', 'execution.completed', 'i', ARGV[6], 'e', ev)
  end
end
return 0
`,
);

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

  async create(
    execution: Execution,
    deliveries: Delivery[],
    incidentPrev: Incident,
    incidentNext: Incident,
    events: IncidentEvent[],
    threads?: Map<string, ThreadState>,
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
    for (let i = 0; i < deliveries.length; i++) {
      const d = deliveries[i]!;
      change
        .write('SET', k.delivery(d.id), JSON.stringify(d))
        .write('SADD', k.connectionActiveDeliveries(d.connection_id), d.id);
      // One held for its audience's approval enters the outbox only when approved (store/approvals.ts).
      if (!isHeld(d.status)) change.write('ZADD', k.deliveryOutbox(), now, d.id);
      // Writing out a large fan-out's records takes a while: let requests (a Slack ack has 3 s)
      // run in between. The change is only built here; its checks run atomically at commit.
      if ((i + 1) % SERIALISE_BETWEEN_YIELDS === 0) await new Promise<void>((resolve) => setImmediate(resolve));
    }
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
    return raw.map((r) => (r === null ? null : rememberText(JSON.parse(r) as Delivery, r)));
  }

  async getDelivery(id: string): Promise<Delivery | null> {
    const [d] = await this.getDeliveries([id]);
    return d ?? null;
  }

  async updateDelivery(
    prev: Delivery,
    next: Delivery,
    opts: { outbox?: boolean; events?: IncidentEvent[] } = {},
  ): Promise<boolean> {
    const k = this.keys;
    const keys = [
      k.delivery(prev.id),
      k.connectionActiveDeliveries(next.connection_id),
      k.deliveryOutbox(),
      k.incidentEvents(next.incident_id),
      k.eventStream(),
      k.executionTally(next.execution_id),
    ];
    const nextText = JSON.stringify(next);
    const [was, is] = [isTerminal(prev.status), isTerminal(next.status)];
    const args = [
      storedTextSha1(prev),
      nextText,
      next.id,
      is ? '1' : '0',
      opts.outbox ? String(this.nowMs()) : '',
      next.incident_id,
      !was && is ? `+${next.status}` : was && !is ? `-${prev.status}` : '',
      next.execution_id,
      new Date(this.nowMs()).toISOString(),
    ];
    // The timeline's `delivery.failed` is written with the failure itself: never one without the other.
    for (const e of opts.events ?? []) args.push(JSON.stringify(e));
    const written = (await runScript(durableWriter(this.redis), DELIVERY_UPDATE_LUA, keys, args)) === 0;
    // A delivery's state must outlive a failover: a lost "sending" would resend it unflagged.
    if (written) await awaitReplicas(this.redis, keys[0]!);
    if (written) rememberText(next, nextText);
    return written;
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
    if (ids.length === 0) return;
    await runScript(
      this.redis,
      OUTBOX_DISPATCHED_LUA,
      [this.keys.deliveryOutbox()],
      [String(claim), String(dispatchedScore(claim)), ...ids],
    );
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

/**
 * Delivery records serialised between two turns of the event loop while an execute's change is
 * built, so a large fan-out's records are not all serialised in one stretch (docs/performance.md:
 * with 1,000 records of 10 kB, acks while it was planned went from up to 1.1 s to 69 ms).
 */
const SERIALISE_BETWEEN_YIELDS = 100;
