import type { RedisClient as Redis } from './redis-connect.js';
import type { Incident } from '../domain/incident/incident.js';
import type { ReminderSchedule } from '../ports/index.js';
import type { Change } from './commit.js';
import type { Keys } from './keys.js';
import { luaScript, runScript } from './scripts.js';

/**
 * reminder_claim — leases the incidents whose reminder is due.
 * KEYS[1] the schedule (score = due, ms); ARGV[1] now (ms), ARGV[2] lease (ms), ARGV[3] limit.
 * Returns a flat list: id, lease score, id, lease score, …
 */
const CLAIM_LUA = luaScript(
  'reminder_claim',
  `
local due = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[3]))
local lease = tonumber(ARGV[1]) + tonumber(ARGV[2])
local out = {}
for _, id in ipairs(due) do
  redis.call('ZADD', KEYS[1], lease, id)
  out[#out + 1] = id
  out[#out + 1] = tostring(lease)
end
return out
`,
);

/**
 * reminder_release — ends a lease: reschedules or drops the incident, only while the lease is
 * still its score (a commit that set a new time since, such as an execute, wins).
 * KEYS[1] the schedule; ARGV[1] incident id, ARGV[2] lease score, ARGV[3] new score ('' = drop).
 * Returns 1 when changed.
 */
const RELEASE_LUA = luaScript(
  'reminder_release',
  `
local cur = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not cur or tonumber(cur) ~= tonumber(ARGV[2]) then return 0 end
if ARGV[3] == '' then redis.call('ZREM', KEYS[1], ARGV[1]) else redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1]) end
return 1
`,
);

/** The update cadence's schedule, a sorted set (see ReminderSchedule). */
export class RedisReminderSchedule implements ReminderSchedule {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  async claimDue(nowMs: number, leaseMs: number, limit: number): Promise<{ incidentId: string; lease: number }[]> {
    const flat = (await runScript(
      this.redis,
      CLAIM_LUA,
      [this.keys.reminders()],
      [String(nowMs), String(leaseMs), String(limit)],
    )) as string[];
    const out: { incidentId: string; lease: number }[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) out.push({ incidentId: flat[i]!, lease: Number(flat[i + 1]) });
    return out;
  }

  async release(incidentId: string, lease: number, atMs: number | null): Promise<void> {
    await runScript(
      this.redis,
      RELEASE_LUA,
      [this.keys.reminders()],
      [incidentId, String(lease), atMs === null ? '' : String(atMs)],
    );
  }
}

/** Keeps the reminder schedule in step with an incident's `next_reminder_at` (in the same commit). */
export function mirrorReminder(change: Change, keys: Keys, prev: Incident | null, next: Incident): void {
  const before = prev?.next_reminder_at ?? null;
  const after = next.next_reminder_at ?? null;
  if (before === after) return;
  if (after === null) change.write('ZREM', keys.reminders(), next.id);
  else change.write('ZADD', keys.reminders(), String(Date.parse(after)), next.id);
}
