import type { RedisClient as Redis } from './redis-connect.js';
import type { ApiKey } from '../domain/common/api-key.js';
import type { Page, PageRequest } from '../domain/common/pagination.js';
import type { ApiKeyRepo } from '../ports/index.js';
import { Change } from './commit.js';
import { loadJson, pageIndexes } from './index-page.js';
import type { Keys } from './keys.js';

/**
 * API keys: `key:<id>` (JSON), `key-hash:<sha256>` → id (the only trace of the token), the `keys`
 * index, and `key-used`, a hash id → last use, kept apart so a request's touch never races a
 * revocation's compare-and-set on the record.
 */
export class RedisApiKeyRepo implements ApiKeyRepo {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  async create(key: ApiKey, tokenSha256: string): Promise<void> {
    const k = this.keys;
    const ok = await new Change(this.redis)
      .expect(k.apiKeyByHash(tokenSha256), null)
      .write('SET', k.apiKey(key.id), JSON.stringify(key))
      .write('SET', k.apiKeyByHash(tokenSha256), key.id)
      .write('ZADD', k.apiKeys(), '0', key.id)
      .commit();
    if (!ok) throw new Error('token hash collision');
  }

  async get(id: string): Promise<ApiKey | null> {
    const [key] = await this.withLastUsed(await loadJson<ApiKey>(this.redis, [this.keys.apiKey(id)]));
    return key ?? null;
  }

  async findByTokenHash(tokenSha256: string): Promise<ApiKey | null> {
    const id = await this.redis.get(this.keys.apiKeyByHash(tokenSha256));
    return id === null ? null : this.get(id);
  }

  async list(page: PageRequest): Promise<Page<ApiKey>> {
    const { ids, nextCursor } = await pageIndexes(this.redis, [this.keys.apiKeys()], page);
    const keys = await this.withLastUsed(
      await loadJson<ApiKey>(
        this.redis,
        ids.map((id) => this.keys.apiKey(id)),
      ),
    );
    return { data: keys.filter((x): x is ApiKey => x !== null), nextCursor };
  }

  update(prev: ApiKey, next: ApiKey): Promise<boolean> {
    const strip = (k: ApiKey) => JSON.stringify({ ...k, last_used_at: null });
    return new Change(this.redis)
      .expect(this.keys.apiKey(prev.id), strip(prev))
      .write('SET', this.keys.apiKey(next.id), strip(next))
      .commit();
  }

  async touch(id: string, at: string): Promise<void> {
    await this.redis.hset(this.keys.apiKeyLastUsed(), id, at);
  }

  private async withLastUsed(keys: (ApiKey | null)[]): Promise<(ApiKey | null)[]> {
    const ids = keys.filter((k): k is ApiKey => k !== null).map((k) => k.id);
    if (ids.length === 0) return keys;
    const used = await this.redis.hmget(this.keys.apiKeyLastUsed(), ...ids);
    const byId = new Map(ids.map((id, i) => [id, used[i] ?? null]));
    return keys.map((k) => (k === null ? null : { ...k, last_used_at: byId.get(k.id) ?? null }));
  }
}
