import type { RedisClient as Redis } from './redis-connect.js';
import type { Audience } from '../domain/audience/audience.js';
import { LIMITS } from '../domain/common/limits.js';
import type { Page, PageRequest } from '../domain/common/pagination.js';
import type { AudienceRepo, AudienceWriteOutcome } from '../ports/index.js';
import { Change } from './commit.js';
import { loadJson, pageFiltered } from './index-page.js';
import type { Keys } from './keys.js';

/**
 * Audiences as JSON strings at `aud:<id>`, with:
 * - `auds`, the score-0 sorted set paged BYLEX, newest first;
 * - `aud-keys`, a hash key → id: uniqueness is claimed in the same atomic Change as the create
 *   (HGET must be empty), so two concurrent creates of one key cannot both succeed (keys are
 *   lower-case slugs, so this is also case-insensitive);
 * - `con:<id>:auds`, per connection the audiences it belongs to, and `con-auds-rev`, a counter
 *   per connection bumped by every write that adds or removes it: a connection delete reads both
 *   and takes the connection out of each audience in its own Change, checking the counter, so
 *   an audience joining meanwhile fails that delete's check and it reads again
 *   (RedisConnectionRepo.delete);
 * - `aud-count`, how many there are: a create compare-and-sets it, so LIMITS.audiences holds
 *   even when creates race for the last place;
 * - `aud:<id>:pending` (written by the approval engine): executions with an approval still
 *   pending for the audience, which must be empty at the moment of a delete.
 * Writes check that every connection and template they add still exists, in the same step, so
 * an audience never gains an id deleted a moment before. Records are compared as the exact JSON
 * string read: the compare-and-set of updates and deletes.
 */
export class RedisAudienceRepo implements AudienceRepo {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  async get(id: string): Promise<Audience | null> {
    const [one] = await loadJson<Audience>(this.redis, [this.keys.audience(id)]);
    return one ?? null;
  }

  async getByKeys(audienceKeys: string[]): Promise<(Audience | null)[]> {
    if (audienceKeys.length === 0) return [];
    const ids = await this.redis.hmget(this.keys.audienceKeys(), ...audienceKeys);
    const found = ids.flatMap((id) => (id === null ? [] : [id]));
    const records = await loadJson<Audience>(
      this.redis,
      found.map((id) => this.keys.audience(id)),
    );
    const byId = new Map(records.flatMap((r) => (r === null ? [] : [[r.id, r] as const])));
    // A key whose audience went away between the two reads is unknown, like a key never used.
    return ids.map((id, i) => {
      const a = id === null ? undefined : byId.get(id);
      return a !== undefined && a.key === audienceKeys[i] ? a : null;
    });
  }

  async all(): Promise<Audience[]> {
    const ids = await this.redis.zrange(this.keys.audiences(), '0', '-1');
    const records = await loadJson<Audience>(
      this.redis,
      ids.map((id) => this.keys.audience(id)),
    );
    return records.flatMap((r) => (r === null ? [] : [r])).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  list(page: PageRequest): Promise<Page<Audience>> {
    // An audience deleted between reading the index and the record is skipped, not a hole.
    return pageFiltered(
      this.redis,
      [this.keys.audiences()],
      page,
      (ids) =>
        loadJson<Audience>(
          this.redis,
          ids.map((id) => this.keys.audience(id)),
        ),
      () => true,
    );
  }

  /**
   * The count is read, checked against the limit, and compare-and-set with the write: two creates
   * racing for the last place cannot both take it (the loser reads again and is refused).
   */
  async create(a: Audience): Promise<AudienceWriteOutcome> {
    const k = this.keys;
    const count = await this.redis.hget(k.audienceCount(), 'n');
    if (Number(count ?? 0) >= LIMITS.audiences) return { ok: false, reason: 'too_many' };
    const change = new Change(this.redis)
      .expectHashField(k.audienceCount(), 'n', count)
      .write('HINCRBY', k.audienceCount(), 'n', 1)
      .expect(k.audience(a.id), null)
      .expectHashField(k.audienceKeys(), a.key, null)
      .write('SET', k.audience(a.id), JSON.stringify(a))
      .write('HSET', k.audienceKeys(), a.key, a.id)
      .write('ZADD', k.audiences(), '0', a.id);
    this.references(change, a, [], a.connection_ids, a.template_ids);
    if (await change.commit({ kind: 'audience', audience: a })) return { ok: true };
    const holder = await this.redis.hget(k.audienceKeys(), a.key);
    return holder !== null && holder !== a.id ? { ok: false, reason: 'key_taken' } : { ok: false, reason: 'conflict' };
  }

  async update(prev: Audience, next: Audience): Promise<AudienceWriteOutcome> {
    const k = this.keys;
    const change = new Change(this.redis)
      .expect(k.audience(prev.id), JSON.stringify(prev))
      .write('SET', k.audience(next.id), JSON.stringify(next));
    const addedTemplates = next.template_ids.filter((t) => !prev.template_ids.includes(t));
    this.references(change, next, prev.connection_ids, next.connection_ids, addedTemplates);
    return (await change.commit()) ? { ok: true } : { ok: false, reason: 'conflict' };
  }

  async delete(prev: Audience): Promise<AudienceWriteOutcome> {
    const k = this.keys;
    const change = new Change(this.redis)
      .expect(k.audience(prev.id), JSON.stringify(prev))
      .expectEmptySet(k.audiencePendingApprovals(prev.id))
      .write('DEL', k.audience(prev.id))
      .write('HDEL', k.audienceKeys(), prev.key)
      .write('ZREM', k.audiences(), prev.id)
      .write('HINCRBY', k.audienceCount(), 'n', -1);
    this.references(change, prev, prev.connection_ids, [], []);
    if (await change.commit()) return { ok: true };
    const pending = await this.redis.smembers(k.audiencePendingApprovals(prev.id));
    return pending.length > 0
      ? { ok: false, reason: 'in_use', executionIds: pending.sort() }
      : { ok: false, reason: 'conflict' };
  }

  /**
   * The connection membership of a write going from `before` to `after` connections: each one
   * added must exist (and joins `con:<id>:auds`), each one removed leaves it; both bump the
   * connection's counter. Each template added must exist.
   */
  private references(change: Change, a: Audience, before: string[], after: string[], addedTemplates: string[]): void {
    const k = this.keys;
    for (const cid of after) {
      if (before.includes(cid)) continue;
      change
        .expectExists(k.connection(cid))
        .write('SADD', k.connectionAudiences(cid), a.id)
        .write('HINCRBY', k.connectionAudiencesRev(), cid, 1);
    }
    for (const cid of before) {
      if (after.includes(cid)) continue;
      change.write('SREM', k.connectionAudiences(cid), a.id).write('HINCRBY', k.connectionAudiencesRev(), cid, 1);
    }
    for (const tid of addedTemplates) change.expectExists(k.template(tid));
  }
}
