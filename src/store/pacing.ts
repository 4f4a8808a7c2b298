import type { Redis } from 'ioredis';
import type { PacingRule } from '../domain/delivery-policy.js';
import type { Pacer } from '../ports.js';
import type { Keys } from './keys.js';

/**
 * pace — a token bucket per connection, as GCRA (one timestamp per key: the "theoretical arrival
 * time" of the next token), shared by every worker through Redis and timed by Redis' own clock so
 * workers with skewed clocks agree.
 * KEYS[1] pace:<connection id>
 * ARGV[1] emission interval, ms (1000 / rate per second)
 * ARGV[2] burst (tokens the bucket holds)
 * Returns 0 when a token was taken, else the ms to wait before asking again (nothing taken).
 */
const PACE_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local tolerance = (tonumber(ARGV[2]) - 1) * interval
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local ahead = tat - now
if ahead > tolerance then return math.ceil(ahead - tolerance) end
local nexttat = tat + interval
redis.call('SET', KEYS[1], tostring(nexttat), 'PX', math.ceil(nexttat - now) + 1000)
return 0
`;

export class RedisPacer implements Pacer {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  async take(connectionId: string, rule: PacingRule): Promise<number> {
    const interval = 1000 / rule.perSecond;
    const wait = await this.redis.eval(PACE_LUA, 1, this.keys.pacing(connectionId), String(interval), String(Math.max(1, Math.floor(rule.burst))));
    return Number(wait);
  }
}
