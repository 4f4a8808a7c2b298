import type { RedisClient as Redis } from './redis-connect.js';
import type { ConnectionRecord } from '../domain/connection/connection.js';
import type { Page, PageRequest } from '../domain/common/pagination.js';
import type { ConnectionFilter, ConnectionRepo } from '../ports/index.js';
import { Change } from './commit.js';
import { loadJson, pageFiltered } from './index-page.js';
import type { Keys } from './keys.js';

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

  async get(id: string): Promise<ConnectionRecord | null> {
    const [one] = await this.getMany([id]);
    return one ?? null;
  }

  getMany(ids: string[]): Promise<(ConnectionRecord | null)[]> {
    return loadJson<ConnectionRecord>(
      this.redis,
      ids.map((id) => this.keys.connection(id)),
    );
  }

  create(connection: ConnectionRecord, signingSecret: string | null = null): Promise<boolean> {
    const k = this.keys;
    return new Change(this.redis)
      .expect(k.connection(connection.id), null)
      .write('SET', k.connection(connection.id), JSON.stringify(connection))
      .write('ZADD', k.connections(), '0', connection.id)
      .commit({ kind: 'connection', connection, signingSecret });
  }

  update(prev: ConnectionRecord, next: ConnectionRecord): Promise<boolean> {
    const k = this.keys;
    return new Change(this.redis)
      .expect(k.connection(prev.id), JSON.stringify(prev))
      .write('SET', k.connection(next.id), JSON.stringify(next))
      .commit();
  }

  delete(prev: ConnectionRecord): Promise<boolean> {
    const k = this.keys;
    return new Change(this.redis)
      .expect(k.connection(prev.id), JSON.stringify(prev))
      .write('DEL', k.connection(prev.id))
      .write('ZREM', k.connections(), prev.id)
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
