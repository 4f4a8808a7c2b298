import type { Redis } from 'ioredis';
import type { Announcement, AnnouncementRepo } from '../ports.js';
import type { Keys } from './keys.js';

/**
 * announcement-track — point an announcement's receipts at a newer execution.
 * KEYS[1] inc:<id>:announcement, a JSON string {channel, ts, execution_id}
 * ARGV[1] execution id (a prefixed ULID: a later execution sorts higher)
 * Returns the record after the change (JSON), or false when the incident has no announcement.
 * In a script so two deliveries of different executions finishing at once cannot interleave
 * their read and write and leave the older execution on show.
 */
const TRACK_LUA = `
local cur = redis.call('GET', KEYS[1])
if not cur then return false end
local rec = cjson.decode(cur)
if rec.execution_id == cjson.null or rec.execution_id == nil or rec.execution_id < ARGV[1] then
  rec.execution_id = ARGV[1]
  cur = cjson.encode(rec)
  redis.call('SET', KEYS[1], cur)
end
return cur
`;

/** One JSON string per announced incident; kept as long as the incident is. */
export class RedisAnnouncementRepo implements AnnouncementRepo {
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
    const raw = (await this.redis.eval(TRACK_LUA, 1, this.keys.incidentAnnouncement(incidentId), executionId)) as string | null;
    return raw === null ? null : parse(raw);
  }
}

function parse(raw: string): Announcement {
  const o = JSON.parse(raw) as Partial<Announcement>;
  return { channel: String(o.channel ?? ''), ts: String(o.ts ?? ''), execution_id: typeof o.execution_id === 'string' ? o.execution_id : null };
}
