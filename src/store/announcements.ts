import type { RedisClient as Redis } from './redis-connect.js';
import type { Announcement, AnnouncementRepo, AnnouncementReminderLog } from '../ports/index.js';
import type { Keys } from './keys.js';
import { luaScript, runScript } from './scripts.js';

/**
 * announcement-track — point an announcement's receipts at a newer execution.
 * KEYS[1] inc:<id>:announcement, a JSON string {channel, ts, execution_id}
 * ARGV[1] execution id (a prefixed ULID: a later execution sorts higher)
 * Returns the record after the change (JSON), or false when the incident has no announcement.
 * In a script so two deliveries of different executions finishing at once cannot interleave
 * their read and write and leave the older execution on show.
 */
const TRACK_LUA = luaScript(
  'announcement_track',
  `
local cur = redis.call('GET', KEYS[1])
if not cur then return false end
local rec = cjson.decode(cur)
if rec.execution_id == cjson.null or rec.execution_id == nil or rec.execution_id < ARGV[1] then
  rec.execution_id = ARGV[1]
  cur = cjson.encode(rec)
  redis.call('SET', KEYS[1], cur)
end
return cur
`,
);

/**
 * announcement-claim — become the one process refreshing an announcement.
 * KEYS[1] inc:<id>:announcement:refresh (holder token, with a TTL)
 * KEYS[2] inc:<id>:announcement:dirty ("changed while someone was refreshing")
 * ARGV[1] token, ARGV[2] TTL in ms
 * Returns 1 when the caller now holds the claim; 0 when another holds it, after marking dirty in
 * the same step, so the holder cannot miss this change between its render and its release.
 */
const CLAIM_LUA = luaScript(
  'announcement_claim',
  `
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('DEL', KEYS[2])
  return 1
end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
return 0
`,
);

/**
 * announcement-finish — end a refresh, or go again when a change came in meanwhile.
 * KEYS[1] inc:<id>:announcement:refresh, KEYS[2] inc:<id>:announcement:dirty
 * ARGV[1] token, ARGV[2] TTL in ms
 * Returns 1 when the caller must render again (the dirty mark is consumed and the claim renewed,
 * or taken over when it had expired with nobody else holding it); 0 when released (or held by
 * another process, which will see any mark itself).
 */
const FINISH_LUA = luaScript(
  'announcement_finish',
  `
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
if redis.call('DEL', KEYS[2]) == 1 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if holder then redis.call('DEL', KEYS[1]) end
return 0
`,
);

/**
 * announcement-reminder — record that overdue reminder ARGV[1] was posted under the announcement.
 * KEYS[1] inc:<id>:announcement (JSON; gains `last_reminder`)
 * Returns 1 when recorded, 0 when a reminder as high was recorded already or there is no
 * announcement. In a script so a receipts change (announcement-track) made at the same moment
 * cannot write back the record without it, and the number never goes down.
 */
const REMINDER_LUA = luaScript(
  'announcement_reminder',
  `
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local rec = cjson.decode(cur)
local n = tonumber(ARGV[1])
if type(rec.last_reminder) == 'number' and rec.last_reminder >= n then return 0 end
rec.last_reminder = n
redis.call('SET', KEYS[1], cjson.encode(rec))
return 1
`,
);

/**
 * One JSON string per announced incident; kept as long as the incident is. Also the log of the
 * overdue reminders posted under it.
 */
export class RedisAnnouncementRepo implements AnnouncementRepo, AnnouncementReminderLog {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  async get(incidentId: string): Promise<Announcement | null> {
    const raw = await this.redis.get(this.keys.incidentAnnouncement(incidentId));
    return raw === null ? null : parse(raw);
  }

  async create(incidentId: string, announcement: Announcement): Promise<boolean> {
    const r = await this.redis.set(this.keys.incidentAnnouncement(incidentId), JSON.stringify(announcement), 'NX');
    return r === 'OK';
  }

  async trackExecution(incidentId: string, executionId: string): Promise<Announcement | null> {
    const raw = (await runScript(
      this.redis,
      TRACK_LUA,
      [this.keys.incidentAnnouncement(incidentId)],
      [executionId],
    )) as string | null;
    return raw === null ? null : parse(raw);
  }

  async reminders(incidentId: string): Promise<{ announcement: Announcement; lastReminder: number } | null> {
    const raw = await this.redis.get(this.keys.incidentAnnouncement(incidentId));
    if (raw === null) return null;
    const o = JSON.parse(raw) as { last_reminder?: unknown };
    return { announcement: parse(raw), lastReminder: typeof o.last_reminder === 'number' ? o.last_reminder : 0 };
  }

  async recordReminder(incidentId: string, reminder: number): Promise<void> {
    await runScript(this.redis, REMINDER_LUA, [this.keys.incidentAnnouncement(incidentId)], [reminder]);
  }

  async claimRefresh(incidentId: string, token: string, ttlMs: number): Promise<boolean> {
    const k = this.keys;
    return (
      (await runScript(
        this.redis,
        CLAIM_LUA,
        [k.incidentAnnouncementRefresh(incidentId), k.incidentAnnouncementDirty(incidentId)],
        [token, ttlMs],
      )) === 1
    );
  }

  async finishRefresh(incidentId: string, token: string, ttlMs: number): Promise<boolean> {
    const k = this.keys;
    return (
      (await runScript(
        this.redis,
        FINISH_LUA,
        [k.incidentAnnouncementRefresh(incidentId), k.incidentAnnouncementDirty(incidentId)],
        [token, ttlMs],
      )) === 1
    );
  }
}

function parse(raw: string): Announcement {
  const o = JSON.parse(raw) as Partial<Announcement>;
  return {
    channel: String(o.channel ?? ''),
    ts: String(o.ts ?? ''),
    execution_id: typeof o.execution_id === 'string' ? o.execution_id : null,
  };
}
