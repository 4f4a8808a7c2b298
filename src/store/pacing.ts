import type { RedisClient as Redis } from './redis-connect.js';
import type { PacingRule } from '../domain/delivery-policy.js';
import type { Pacer } from '../ports/index.js';
import type { Keys } from './keys.js';
import { luaScript, runScript } from './scripts.js';

/**
 * pace — a token bucket as GCRA (one timestamp per key: the "theoretical arrival time" of the
 * next free slot), shared by every worker through Redis and timed by Redis' own clock so workers
 * with skewed clocks agree. Two buckets per connection, same rule:
 *
 * - the schedule (ARGV[3] = 1, reserve): every call takes a slot, now or later, and answers how
 *   far away it is. A backlog of N deliveries asks N times in all and drains in order, instead of
 *   N waiters waking together every interval to race for one token (a thundering herd);
 * - the send bucket (ARGV[3] = 0, take): taken right before sending, only when a token is free
 *   now. It is what holds the actual sends to the rate when workers wake late and several
 *   reserved slots fall due at once.
 *
 * KEYS[1] the bucket's key
 * ARGV[1] emission interval, ms (1000 / rate per second)
 * ARGV[2] burst (slots that may be used back to back)
 * ARGV[3] 1 = reserve the next slot even if it is later, 0 = take only a slot free now
 * Returns the ms until the slot (0 = now; with ARGV[3] = 0 a positive answer took nothing).
 */
const PACE_LUA = luaScript('pace', `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local tolerance = (tonumber(ARGV[2]) - 1) * interval
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local wait = tat - tolerance - now
if wait < 0 then wait = 0 end
if wait > 0 and ARGV[3] == '0' then return math.ceil(wait) end
local nexttat = tat + interval
redis.call('SET', KEYS[1], tostring(nexttat), 'PX', math.ceil(nexttat - now) + 1000)
return math.ceil(wait)
`);

export class RedisPacer implements Pacer {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  reserve(connectionId: string, rule: PacingRule): Promise<number> {
    return this.run(this.keys.pacingSchedule(connectionId), rule, true);
  }

  take(connectionId: string, rule: PacingRule): Promise<number> {
    return this.run(this.keys.pacing(connectionId), rule, false);
  }

  async reset(connectionId: string): Promise<void> {
    await this.redis.del(this.keys.pacingSchedule(connectionId), this.keys.pacing(connectionId));
  }

  private async run(key: string, rule: PacingRule, reserve: boolean): Promise<number> {
    const interval = 1000 / rule.perSecond;
    const wait = await runScript(this.redis, PACE_LUA, [key], [String(interval), String(Math.max(1, Math.floor(rule.burst))), reserve ? '1' : '0']);
    return Number(wait);
  }
}
