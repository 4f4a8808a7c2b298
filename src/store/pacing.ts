import type { RedisClient as Redis } from './redis-connect.js';
import type { PaceStep, PacingRule } from '../domain/execution/delivery-policy.js';
import type { Delivery } from '../domain/execution/execution.js';
import type { Pacer } from '../ports/index.js';
import type { Keys } from './keys.js';
import { durableWriter, replicaWaitError } from './durability.js';
import { luaScript, runScript, SCRIPT_FAILURE, scriptFailure } from './scripts.js';
import { rememberText, storedTextSha1 } from './stored-text.js';
import { turnBatched } from './turn-batch.js';

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
local function rule(a)
  local interval = tonumber(ARGV[a])
  return interval, (tonumber(ARGV[a + 1]) - 1) * interval
end
`;

const PACE_LUA = luaScript(
  'pace',
  `${GCRA_STEP}
local interval, tolerance = rule(1)
return pace(KEYS[1], now, interval, tolerance, ARGV[3] == '1')
`,
);

/**
 * pace_send — what a delivery does right before sending, in one round trip instead of two: when
 * it holds no slot yet (ARGV[3] = 1) it reserves one on the schedule, and only when that slot is
 * now does it take a token of the send bucket — exactly `reserve` then `take` (same keys, same
 * rule), run as one step. A Lua function, so the delivery engine's last step before a send
 * (delivery_start, below) runs the very same code with its record's check and write.
 *
 * pace_send(schedule key, send bucket key, a) reads its rule from ARGV[a] (emission interval, ms),
 * ARGV[a + 1] (burst) and ARGV[a + 2] (1 = reserve first, 0 = it holds a slot), and returns step,
 * ms: step 0 = send now, 1 = its reserved slot is ms away, 2 = no send token for ms.
 */
const PACE_SEND_FUNCTION = `${GCRA_STEP}
local function pace_send(schedule, bucket, a)
  local interval, tolerance = rule(a)
  if ARGV[a + 2] == '1' then
    local wait = pace(schedule, now, interval, tolerance, true)
    if wait > 0 then return 1, wait end
  end
  local wait = pace(bucket, now, interval, tolerance, false)
  if wait > 0 then return 2, wait end
  return 0, 0
end
`;

/**
 * pace_send as a script: KEYS[1] the schedule's key, KEYS[2] the send bucket's key, ARGV[1..3]
 * the rule; returns {step, ms}.
 */
const PACE_SEND_LUA = luaScript(
  'pace_send',
  `${PACE_SEND_FUNCTION}
local step, wait = pace_send(KEYS[1], KEYS[2], 1)
return {step, wait}
`,
);

/**
 * delivery_start — a delivery's last step before its send, one round trip where it was two:
 * pace_send, and only when it may send now, the compare-and-set of the delivery's record to its
 * `sending` one (the same steps as delivery_update in executions.ts). The record is checked
 * first, so a delivery that lost a race takes neither a slot nor a token; one that must wait is
 * not written (the engine records its reserved slot itself). It takes every delivery that starts
 * in one turn of the event loop (turn-batch.ts), and runs them one after the other, exactly as
 * that many scripts would.
 *
 * Per delivery, four keys and six arguments:
 * KEYS[1] the schedule, KEYS[2] the send bucket, KEYS[3] the delivery, KEYS[4] its connection's
 *         active set
 * ARGV[1..3] pace_send's rule, ARGV[4] SHA-1 (hex) of the record as read, ARGV[5] the `sending`
 * record, ARGV[6] the delivery id
 * (numbered as the delivery sees them).
 * Returns, per delivery, step and ms: pace_send's answer (0 = written: send now), or 3, 0 when the
 * stored record is not the one read (nothing taken, nothing written), or 4 and the error that
 * stopped that delivery alone (SCRIPT_FAILURE).
 */
const DELIVERY_START_LUA = luaScript(
  'delivery_start',
  `
${PACE_SEND_FUNCTION}
${SCRIPT_FAILURE}
local function start(k, a)
  local stored = redis.call('GET', KEYS[k + 3])
  if not stored or redis.sha1hex(stored) ~= ARGV[a + 4] then return 3, 0 end
  local step, wait = pace_send(KEYS[k + 1], KEYS[k + 2], a + 1)
  if step == 0 then
    redis.call('SET', KEYS[k + 3], ARGV[a + 5])
    redis.call('SADD', KEYS[k + 4], ARGV[a + 6])
  end
  return step, wait
end
local out = {}
for i = 0, #KEYS / 4 - 1 do
  local ok, step, wait = pcall(start, i * 4, i * 6)
  if not ok then step, wait = 4, failure(step) end
  out[#out + 1] = step
  out[#out + 1] = wait
end
return out
`,
);

/** One delivery's start (RedisPacer.paceAndStart), waiting for its turn's batch. */
interface Start {
  prev: Delivery;
  sending: Delivery;
  rule: PacingRule;
  reserveFirst: boolean;
}

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
    return paceStepOf(
      (await runScript(this.redis, PACE_SEND_LUA, keys, paceSendArgs(rule, reserveFirst))) as [number, number],
    );
  }

  /**
   * paceSend, and when the delivery may go now, its `sending` record written over `prev` by
   * compare-and-set (delivery_start; the starts of one turn go as one script). Null when the
   * stored record is not `prev`.
   */
  paceAndStart(prev: Delivery, sending: Delivery, rule: PacingRule, reserveFirst: boolean): Promise<PaceStep | null> {
    return this.startOne({ prev, sending, rule, reserveFirst });
  }

  private readonly startOne = turnBatched((starts: readonly Start[]) => this.start(starts));

  private async start(starts: readonly Start[]): Promise<(PaceStep | null | Error)[]> {
    const k = this.keys;
    const keys: string[] = [];
    const args: string[] = [];
    const texts: string[] = [];
    for (const { prev, sending, rule, reserveFirst } of starts) {
      const connectionId = sending.connection_id;
      keys.push(
        k.pacingSchedule(connectionId),
        k.pacing(connectionId),
        k.delivery(prev.id),
        k.connectionActiveDeliveries(connectionId),
      );
      const text = JSON.stringify(sending);
      texts.push(text);
      args.push(...paceSendArgs(rule, reserveFirst), storedTextSha1(prev), text, sending.id);
    }
    const answer = (await runScript(durableWriter(this.redis), DELIVERY_START_LUA, keys, args)) as (number | string)[];
    const steps = starts.map((_, i): PaceStep | null | Error => {
      const [step, wait] = [answer[i * 2], answer[i * 2 + 1]];
      if (step === 4) return scriptFailure(String(wait));
      return step === 3 ? null : paceStepOf([Number(step), Number(wait)]);
    });
    const first = steps.findIndex((s) => !(s instanceof Error) && s?.step === 'send');
    if (first < 0) return steps;
    // "sending" must outlive a failover before the send: lost, the retry would not be flagged.
    // Should that wait fail, each start written is answered with its error (it must not send).
    const lasted = await replicaWaitError(this.redis, keys[first * 4 + 2]!);
    return steps.map((step, i) => {
      if (step instanceof Error || step?.step !== 'send') return step;
      if (lasted) return lasted;
      // Written: the next compare-and-set of this delivery expects exactly this text.
      rememberText(starts[i]!.sending, texts[i]!);
      return step;
    });
  }

  private async run(key: string, rule: PacingRule, reserve: boolean): Promise<number> {
    const wait = await runScript(this.redis, PACE_LUA, [key], [...ruleArgs(rule), reserve ? '1' : '0']);
    return Number(wait);
  }
}

/** ARGV[1..3] of pace_send. */
function paceSendArgs(rule: PacingRule, reserveFirst: boolean): [string, string, string] {
  return [...ruleArgs(rule), reserveFirst ? '1' : '0'];
}

/** pace_send's answer as a PaceStep. */
function paceStepOf([step, wait]: [number, number]): PaceStep {
  return step === 0 ? { step: 'send' } : { step: step === 1 ? 'reserved' : 'take', waitMs: Number(wait) };
}

function ruleArgs(rule: PacingRule): [string, string] {
  return [String(1000 / rule.perSecond), String(Math.max(1, Math.floor(rule.burst)))];
}
