import type { RedisClient as Redis } from './redis-connect.js';
import { nextExpiry, unnotified, type ExecutionApprovals } from '../domain/execution/approval.js';
import { isTerminal, type Delivery } from '../domain/execution/execution.js';
import type { IncidentEvent } from '../domain/incident/incident-event.js';
import type { ApprovalCommit, ApprovalRepo } from '../ports/index.js';
import { Change } from './commit.js';
import { advanceThreads } from './conversations.js';
import type { Keys } from './keys.js';
import { luaScript, runScript } from './scripts.js';
import { rememberText, storedText } from './stored-text.js';
import { appendTimeline } from './timeline.js';

/**
 * approvals_claim — leases the executions due in a schedule (expiry or notification): each is
 * pushed `lease` ms ahead, so another worker leaves it alone while this one works on it, and
 * takes it over should this one die. KEYS[1] the schedule; ARGV[1] now, ARGV[2] lease, ARGV[3]
 * limit. Returns the execution ids.
 */
const CLAIM_LUA = luaScript(
  'approvals_claim',
  `
local due = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[3]))
local lease = tonumber(ARGV[1]) + tonumber(ARGV[2])
for _, id in ipairs(due) do redis.call('ZADD', KEYS[1], lease, id) end
return due
`,
);

const encode = (a: ExecutionApprovals): string => JSON.stringify(a);

/**
 * Approval records (`exe:<id>:approvals`), the expiry schedule (`approvals-due`, score = the
 * first pending expiry) and the notification schedule (`approvals-notify`). Every decision is one
 * compare-and-set over the record, its deliveries, their conversations, the outbox, the
 * timeline and the audience's pending index (see `commit`).
 */
export class RedisApprovalRepo implements ApprovalRepo {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  async get(executionId: string): Promise<ExecutionApprovals | null> {
    const [a] = await this.getMany([executionId]);
    return a ?? null;
  }

  async getMany(executionIds: string[]): Promise<(ExecutionApprovals | null)[]> {
    if (executionIds.length === 0) return [];
    const raw = await this.redis.mget(...executionIds.map((id) => this.keys.approvals(id)));
    return raw.map((r) => (r === null ? null : rememberText(JSON.parse(r) as ExecutionApprovals, r)));
  }

  async tally(executionId: string): Promise<Record<string, string>> {
    return this.redis.hgetall(this.keys.executionTally(executionId));
  }

  async commit(c: ApprovalCommit): Promise<boolean> {
    const k = this.keys;
    const { prev, next } = c;
    const nextText = encode(next);
    const change = new Change(this.redis)
      .expect(
        k.approvals(prev.execution_id),
        storedText(prev, () => encode(prev)),
      )
      .write('SET', k.approvals(next.execution_id), nextText);
    let cancelled = 0;
    for (const { prev: was, next: now } of c.deliveries) {
      change
        .expect(
          k.delivery(was.id),
          storedText(was, () => JSON.stringify(was)),
        )
        .write('SET', k.delivery(now.id), JSON.stringify(now));
      if (isTerminal(now.status)) {
        change.write('SREM', k.connectionActiveDeliveries(now.connection_id), now.id);
        cancelled++;
      } else {
        change.write('SADD', k.connectionActiveDeliveries(now.connection_id), now.id);
        // Released: it enters the outbox with the claim its dispatch jobs carry (claimOutbox).
        if (c.claim !== undefined) change.write('ZADD', k.deliveryOutbox(), String(c.claim), now.id);
      }
    }
    const released = c.deliveries.filter((x) => !isTerminal(x.next.status)).map((x) => x.next);
    if (released.length > 0) advanceThreads(change, k, next.incident_id, c.threads, released);
    const events: IncidentEvent[] = [...c.events];
    // What execution.completed counts (store/executions.ts): held deliveries count as open. Those
    // cancelled here may be the last open ones; the tally as read is checked, so the event is
    // emitted exactly when this commit closes the execution.
    if (cancelled > 0 && c.tally && Object.keys(c.tally).length > 0) {
      const open = Number(c.tally.open ?? '0');
      change
        .expectHashField(k.executionTally(next.execution_id), 'open', c.tally.open ?? null)
        .expectHashField(k.executionTally(next.execution_id), 'completions', c.tally.completions ?? null)
        .write('HINCRBY', k.executionTally(next.execution_id), 'cancelled', cancelled)
        .write('HINCRBY', k.executionTally(next.execution_id), 'open', -cancelled);
      if (open === cancelled) {
        const n = Number(c.tally.completions ?? '0') + 1;
        change.write('HINCRBY', k.executionTally(next.execution_id), 'completions', 1);
        const id = `evt_${next.execution_id.slice(4)}.completed${n > 1 ? `.${n}` : ''}`;
        const ev = {
          id,
          type: 'execution.completed',
          at: c.at,
          actor: { type: 'system', id: 'herald', name: 'Herald' },
          data: {
            execution_id: next.execution_id,
            delivered: Number(c.tally.delivered ?? '0'),
            failed: Number(c.tally.failed ?? '0'),
            cancelled: Number(c.tally.cancelled ?? '0') + cancelled,
          },
        };
        change.write(
          'XADD',
          k.eventStream(),
          '*',
          'id',
          id,
          't',
          'execution.completed',
          'i',
          next.incident_id,
          'e',
          JSON.stringify(ev),
        );
      }
    }
    appendTimeline(change, k, next.incident_id, events);
    for (const audienceId of c.ended) change.write('SREM', k.audiencePendingApprovals(audienceId), next.execution_id);
    scheduleWrites(change, k, next, c.nowMs);
    const ok = await change.commit(c.effect);
    if (ok) rememberText(next, nextText);
    return ok;
  }

  async markNotified(prev: ExecutionApprovals, next: ExecutionApprovals): Promise<boolean> {
    const k = this.keys;
    const nextText = encode(next);
    const change = new Change(this.redis)
      .expect(
        k.approvals(prev.execution_id),
        storedText(prev, () => encode(prev)),
      )
      .write('SET', k.approvals(next.execution_id), nextText);
    if (unnotified(next).length === 0) change.write('ZREM', k.approvalsToNotify(), next.execution_id);
    const ok = await change.commit();
    if (ok) rememberText(next, nextText);
    return ok;
  }

  async claimDue(nowMs: number, leaseMs: number, limit: number): Promise<string[]> {
    return this.claim(this.keys.approvalsDue(), nowMs, leaseMs, limit);
  }

  async claimToNotify(nowMs: number, leaseMs: number, limit: number): Promise<string[]> {
    return this.claim(this.keys.approvalsToNotify(), nowMs, leaseMs, limit);
  }

  async settle(approvals: ExecutionApprovals): Promise<void> {
    // Only what the record says: an execution with nothing pending leaves the expiry schedule.
    const at = nextExpiry(approvals);
    if (at === null) await this.redis.zrem(this.keys.approvalsDue(), approvals.execution_id);
    else await this.redis.zadd(this.keys.approvalsDue(), String(at), approvals.execution_id);
  }

  private async claim(key: string, nowMs: number, leaseMs: number, limit: number): Promise<string[]> {
    return (await runScript(this.redis, CLAIM_LUA, [key], [String(nowMs), String(leaseMs), String(limit)])) as string[];
  }
}

/**
 * Adds an execute's approvals to its commit (store/executions.ts): the record, each audience's
 * pending index (its delete is refused while it is pending), the expiry and notification schedules.
 */
export function writeNewApprovals(change: Change, keys: Keys, approvals: ExecutionApprovals, nowMs: number): void {
  const text = encode(approvals);
  change
    .expect(keys.approvals(approvals.execution_id), null)
    .write('SET', keys.approvals(approvals.execution_id), text);
  for (const r of approvals.audiences)
    if (r.state === 'pending')
      change.write('SADD', keys.audiencePendingApprovals(r.audience_id), approvals.execution_id);
  scheduleWrites(change, keys, approvals, nowMs);
  rememberText(approvals, text);
}

/** The expiry and notification schedules as the record `next` asks. */
function scheduleWrites(change: Change, keys: Keys, next: ExecutionApprovals, nowMs: number): void {
  const at = nextExpiry(next);
  if (at === null) change.write('ZREM', keys.approvalsDue(), next.execution_id);
  else change.write('ZADD', keys.approvalsDue(), String(at), next.execution_id);
  if (unnotified(next).length > 0) change.write('ZADD', keys.approvalsToNotify(), String(nowMs), next.execution_id);
}

/** A delivery as read and as this commit writes it. */
export type DeliveryChange = { prev: Delivery; next: Delivery };
