import { randomUUID } from 'node:crypto';
import type { RedisClient as Redis } from './redis-connect.js';
import type { ApprovalMessageLog, ApprovalMessageRef } from '../ports/notices.js';
import type { Keys } from './keys.js';
import { luaScript, runScript } from './scripts.js';

/**
 * Kept well past the longest approval (7 days): a decision can still update its DMs, and the
 * record does not outlive its use for ever.
 */
const TTL_SECONDS = 30 * 24 * 3600;

/** Longer than one notify (a few Slack calls with a 10 s timeout and two quick retries). */
const LOCK_TTL_MS = 60_000;
const LOCK_WAIT_MS = 20_000;
const LOCK_POLL_MS = 100;

/** approval_msgs_unlock — frees the lock only while it is still this holder's. KEYS[1] lock, ARGV[1] token. */
const UNLOCK_LUA = luaScript(
  'approval_msgs_unlock',
  `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`,
);

const dmField = (audience: string, userId: string) => `dm|${audience}|${userId}`;
const lineField = (audience: string, state: string) => `line|${audience}|${state}`;

/** The Slack edge's approval DMs and thread lines, one hash per execution (see keys.approvalMessages). */
export class RedisApprovalMessageLog implements ApprovalMessageLog {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  async dms(executionId: string, audience: string): Promise<Map<string, ApprovalMessageRef>> {
    const all = await this.redis.hgetall(this.keys.approvalMessages(executionId));
    const prefix = `dm|${audience}|`;
    const out = new Map<string, ApprovalMessageRef>();
    for (const [field, raw] of Object.entries(all)) {
      if (!field.startsWith(prefix)) continue;
      const ref = parseRef(raw);
      if (ref !== null) out.set(field.slice(prefix.length), ref);
    }
    return out;
  }

  async recordDm(executionId: string, audience: string, userId: string, ref: ApprovalMessageRef): Promise<boolean> {
    const key = this.keys.approvalMessages(executionId);
    const [[, set]] = (await this.redis
      .multi()
      .hsetnx(key, dmField(audience, userId), JSON.stringify(ref))
      .expire(key, TTL_SECONDS)
      .exec()) as [[Error | null, number]];
    return set === 1;
  }

  async threadLinePosted(executionId: string, audience: string, state: string): Promise<boolean> {
    return (await this.redis.hexists(this.keys.approvalMessages(executionId), lineField(audience, state))) === 1;
  }

  async recordThreadLine(executionId: string, audience: string, state: string): Promise<void> {
    const key = this.keys.approvalMessages(executionId);
    await this.redis.multi().hset(key, lineField(audience, state), '1').expire(key, TTL_SECONDS).exec();
  }

  async exclusively<T>(executionId: string, audience: string, work: () => Promise<T>): Promise<T> {
    const lock = this.keys.approvalMessagesLock(executionId, audience);
    const token = randomUUID();
    const deadline = Date.now() + LOCK_WAIT_MS;
    while ((await this.redis.set(lock, token, 'PX', LOCK_TTL_MS, 'NX')) !== 'OK') {
      if (Date.now() > deadline)
        throw new Error(`another process is still notifying approval ${executionId}/${audience}`);
      await new Promise((r) => setTimeout(r, LOCK_POLL_MS));
    }
    try {
      return await work();
    } finally {
      await runScript(this.redis, UNLOCK_LUA, [lock], [token]).catch(() => undefined);
    }
  }
}

function parseRef(raw: string): ApprovalMessageRef | null {
  try {
    const v = JSON.parse(raw) as unknown;
    if (v !== null && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      if (typeof o.channel === 'string' && typeof o.ts === 'string') return { channel: o.channel, ts: o.ts };
    }
  } catch {
    // a record that does not parse is as good as none: the DM is posted again
  }
  return null;
}
