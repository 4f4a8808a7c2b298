import type { RedisClient as Redis } from './redis-connect.js';
import type { PaceStep, PacingRule } from '../domain/execution/delivery-policy.js';
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
const GCRA_STEP = `
local function pace(key, now, interval, tolerance, reserve)
  local tat = tonumber(redis.call('GET', key) or now)
  if tat < now then tat = now end
  local wait = tat - tolerance - now
  if wait < 0 then wait = 0 end
  if wait > 0 and not reserve then return math.ceil(wait) end
  local nexttat = tat + interval
  redis.call('SET', key, tostring(nexttat), 'PX', math.ceil(nexttat - now) + 1000)
  return math.ceil(wait)
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local tolerance = (tonumber(ARGV[2]) - 1) * interval
`;

const PACE_LUA = luaScript('pace', `${GCRA_STEP}
return pace(KEYS[1], now, interval, tolerance, ARGV[3] == '1')
`);

/**
 * pace_send — what a delivery does right before sending, in one round trip instead of two: when
 * it holds no slot yet (ARGV[3] = 1) it reserves one on the schedule, and only when that slot is
 * now does it take a token of the send bucket — exactly `reserve` then `take` (same keys, same
 * rule), run as one step.
 *
 * KEYS[1] the schedule's key, KEYS[2] the send bucket's key
 * ARGV[1] emission interval, ms; ARGV[2] burst; ARGV[3] 1 = reserve first, 0 = it holds a slot
 * Returns {step, ms}: step 0 = send now, 1 = its reserved slot is ms away, 2 = no send token for ms.
 */
const PACE_SEND_LUA = luaScript('pace_send', `${GCRA_STEP}
if ARGV[3] == '1' then
  local wait = pace(KEYS[1], now, interval, tolerance, true)
  if wait > 0 then return {1, wait} end
end
local wait = pace(KEYS[2], now, interval, tolerance, false)
if wait > 0 then return {2, wait} end
return {0, 0}
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

  /**
   * `reserve` (when `reserveFirst`: the delivery holds no slot yet) and then, only if that slot is
   * now, `take`, in one script: the delivery engine's path, one round trip per delivery.
   */
  async paceSend(connectionId: string, rule: PacingRule, reserveFirst: boolean): Promise<PaceStep> {
    const keys = [this.keys.pacingSchedule(connectionId), this.keys.pacing(connectionId)];
    const [step, wait] = (await runScript(this.redis, PACE_SEND_LUA, keys, [...ruleArgs(rule), reserveFirst ? '1' : '0'])) as [number, number];
    if (step === 0) return { step: 'send' };
    return { step: step === 1 ? 'reserved' : 'take', waitMs: Number(wait) };
  }

  private async run(key: string, rule: PacingRule, reserve: boolean): Promise<number> {
    const wait = await runScript(this.redis, PACE_LUA, [key], [...ruleArgs(rule), reserve ? '1' : '0']);
    return Number(wait);
  }
}

function ruleArgs(rule: PacingRule): [string, string] {
  return [String(1000 / rule.perSecond), String(Math.max(1, Math.floor(rule.burst)))];
}
