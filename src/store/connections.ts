import type { RedisClient as Redis } from './redis-connect.js';
import { withoutConnection, type Audience } from '../domain/audience/audience.js';
import type { ConnectionRecord } from '../domain/connection/connection.js';
import type { Page, PageRequest } from '../domain/common/pagination.js';
import type { ConnectionFilter, ConnectionRepo } from '../ports/index.js';
import { DomainError } from '../domain/common/errors.js';
import { Change } from './commit.js';
import { bumpStatusVersion } from './status-version.js';
import { loadJson, pageFiltered } from './index-page.js';
import type { Keys } from './keys.js';
import { decodedEach, turnBatched } from './turn-batch.js';

/**
 * Connections as JSON strings at `con:<id>`, indexed by `cons` (score-0 sorted set, newest first
 * BYLEX). Secrets arrive already sealed by the service (AES-256-GCM through the SecretBox port):
 * nothing here ever sees a plaintext secret. Updates are compare-and-set on the exact string read.
 */
export class RedisConnectionRepo implements ConnectionRepo {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  /** One connection; the reads of one turn go as one MGET (turn-batch.ts: the worker reads one per delivery). */
  get(id: string): Promise<ConnectionRecord | null> {
    return this.readOne(id);
  }

  private readonly readOne = turnBatched(async (ids: readonly string[]) =>
    decodedEach(
      await this.redis.mget(ids.map((id) => this.keys.connection(id))),
      (raw) => JSON.parse(raw) as ConnectionRecord,
    ),
  );

  getMany(ids: string[]): Promise<(ConnectionRecord | null)[]> {
    return loadJson<ConnectionRecord>(
      this.redis,
      ids.map((id) => this.keys.connection(id)),
    );
  }

  /**
   * A status page claims the one place there is (keys.statusPage()) in the same Change: a second
   * one answers 409 status_page_exists, whoever won the race. Its config is what the public page
   * shows, so its writes bump the status version.
   */
  async create(connection: ConnectionRecord, signingSecret: string | null = null): Promise<boolean> {
    const k = this.keys;
    const change = new Change(this.redis)
      .expect(k.connection(connection.id), null)
      .write('SET', k.connection(connection.id), JSON.stringify(connection))
      .write('ZADD', k.connections(), '0', connection.id);
    const page = isStatusPage(connection);
    if (page) {
      change.expect(k.statusPage(), null).write('SET', k.statusPage(), connection.id);
      bumpStatusVersion(change, k);
    }
    const done = await change.commit({ kind: 'connection', connection, signingSecret });
    if (!done && page && (await this.redis.exists(k.statusPage())) === 1)
      throw new DomainError(
        'status_page_exists',
        'This Herald already has its status page; change that connection, or delete it first.',
      );
    return done;
  }

  update(prev: ConnectionRecord, next: ConnectionRecord): Promise<boolean> {
    const k = this.keys;
    const change = new Change(this.redis)
      .expect(k.connection(prev.id), JSON.stringify(prev))
      .write('SET', k.connection(next.id), JSON.stringify(next));
    if (isStatusPage(next)) bumpStatusVersion(change, k);
    return change.commit();
  }

  /**
   * The audiences it belongs to are read first, then rewritten without it in the delete's own
   * Change: their records are checked as read, and so is the connection's membership counter,
   * which every audience write that adds or removes the connection bumps (store/audiences.ts).
   * An audience joining or changing meanwhile fails the check, and the caller reads again.
   */
  async delete(prev: ConnectionRecord, at: string = new Date().toISOString()): Promise<boolean> {
    const k = this.keys;
    const rev = await this.redis.hget(k.connectionAudiencesRev(), prev.id);
    const audienceIds = await this.redis.smembers(k.connectionAudiences(prev.id));
    const raw = audienceIds.length > 0 ? await this.redis.mget(...audienceIds.map((id) => k.audience(id))) : [];
    const change = new Change(this.redis)
      .expect(k.connection(prev.id), JSON.stringify(prev))
      .expectHashField(k.connectionAudiencesRev(), prev.id, rev);
    audienceIds.forEach((id, i) => {
      const json = raw[i];
      if (json === null || json === undefined) return; // deleted meanwhile: its delete bumped the counter
      const next = withoutConnection(JSON.parse(json) as Audience, prev.id, at);
      change.expect(k.audience(id), json).write('SET', k.audience(id), JSON.stringify(next));
    });
    // The status page frees its place (checked: it is this connection's to free).
    if (isStatusPage(prev)) {
      change.expect(k.statusPage(), prev.id).write('DEL', k.statusPage());
      bumpStatusVersion(change, k);
    }
    return change
      .write('DEL', k.connection(prev.id))
      .write('ZREM', k.connections(), prev.id)
      .write('DEL', k.connectionAudiences(prev.id))
      .write('HDEL', k.connectionAudiencesRev(), prev.id)
      .commit();
  }

  list(filter: ConnectionFilter, page: PageRequest): Promise<Page<ConnectionRecord>> {
    const types = filter.type && filter.type.length > 0 ? new Set<string>(filter.type) : null;
    return pageFiltered(
      this.redis,
      [this.keys.connections()],
      page,
      (ids) => this.getMany(ids),
      (c) => (types === null || types.has(c.type)) && (filter.enabled === undefined || c.enabled === filter.enabled),
    );
  }
}

/** The public status page's connection: one per Herald (see create). */
const isStatusPage = (c: Pick<ConnectionRecord, 'type'>): boolean => c.type === 'status_page';
