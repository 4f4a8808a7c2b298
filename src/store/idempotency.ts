import type { RedisClient as Redis } from './redis-connect.js';
import { createHash } from 'node:crypto';
import { LIMITS } from '../domain/limits.js';
import type { IdempotencyBegin, IdempotencyStore, SecretBox, StoredResponse } from '../ports.js';
import type { Keys } from './keys.js';

/**
 * idempotency-begin — claim an Idempotency-Key or report what holds it.
 * KEYS[1] idem:<api key>:<sha256(key)>
 * ARGV[1] fingerprint of the request (method, path, body bytes)
 * ARGV[2] in-flight claim lifetime, ms (a crashed request frees its key after this)
 * Returns {"new"} | {"in_flight"} | {"mismatch"} | {"done", <stored JSON>}
 */
const BEGIN_LUA = `
local cur = redis.call('GET', KEYS[1])
if not cur then
  redis.call('SET', KEYS[1], cjson.encode({s = 'in_flight', fp = ARGV[1]}), 'PX', ARGV[2])
  return {'new'}
end
local rec = cjson.decode(cur)
if rec.fp ~= ARGV[1] then return {'mismatch'} end
if rec.s == 'in_flight' then return {'in_flight'} end
return {'done', cur}
`;

/** In-flight claims expire so a process killed mid-request does not lock a key for 24 h. */
const IN_FLIGHT_MS = 120_000;

/**
 * Stored responses are sealed with the secrets key: a replayed create can carry a secret shown
 * once (a webhook's signing_secret, an API key's token), which must not sit in Redis in clear.
 */
export class RedisIdempotencyStore implements IdempotencyStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly box: SecretBox,
  ) {}

  private key(scope: string, key: string): string {
    return this.keys.idempotency(scope, createHash('sha256').update(key).digest('hex'));
  }

  async begin(scope: string, key: string, fingerprint: string): Promise<IdempotencyBegin> {
    const r = (await this.redis.eval(BEGIN_LUA, 1, this.key(scope, key), fingerprint, IN_FLIGHT_MS)) as string[];
    switch (r[0]) {
      case 'new':
        return { state: 'new' };
      case 'in_flight':
        return { state: 'in_flight' };
      case 'mismatch':
        return { state: 'mismatch' };
      default: {
        const rec = JSON.parse(r[1] ?? '{}') as { r: string };
        return { state: 'done', response: JSON.parse(this.box.open(rec.r)) as StoredResponse };
      }
    }
  }

  async complete(scope: string, key: string, fingerprint: string, response: StoredResponse): Promise<void> {
    await this.redis.set(this.key(scope, key), JSON.stringify({ s: 'done', fp: fingerprint, r: this.box.seal(JSON.stringify(response)) }), 'EX', LIMITS.idempotencyTtlSeconds);
  }

  async release(scope: string, key: string): Promise<void> {
    await this.redis.del(this.key(scope, key));
  }
}
