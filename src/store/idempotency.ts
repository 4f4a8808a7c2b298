import type { RedisClient as Redis } from './redis-connect.js';
import { AsyncLocalStorage } from 'node:async_hooks';
import { hash, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import { LIMITS } from '../domain/common/limits.js';
import type {
  IdempotencyBegin,
  IdempotencyClaim,
  IdempotencyStore,
  IdempotentRequest,
  SecretBox,
  StoredResponse,
} from '../ports/index.js';
import type { Keys } from './keys.js';
import { luaScript, runScript } from './scripts.js';

/**
 * idempotency-begin — claim an Idempotency-Key or report what holds it.
 * KEYS[1] idem:<api key>:<sha256(key)>
 * ARGV[1] fingerprint of the request (method, path, body bytes)
 * ARGV[2] lease, ms: a claim not renewed within this is abandoned (its process died) and the next
 *         retry takes the key over
 * ARGV[3] the claim to store: {"s":"in_flight","fp":…,"t":<holder's token>}, encoded by the caller
 *         so that later checks can compare the exact string
 * Returns {"new"} | {"in_flight"} | {"mismatch"} | {"done", <stored JSON>}
 */
const BEGIN_LUA = luaScript(
  'idempotency_begin',
  `
local cur = redis.call('GET', KEYS[1])
if not cur then
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[2])
  return {'new'}
end
local rec = cjson.decode(cur)
if rec.fp ~= ARGV[1] then return {'mismatch'} end
if rec.s == 'in_flight' then return {'in_flight'} end
return {'done', cur}
`,
);

/**
 * idempotency-holder — act on a claim only while it is still this holder's.
 * KEYS[1] the idempotency key; ARGV[1] the exact claim value; ARGV[2] "renew" | "complete" | "release";
 * ARGV[3] lease ms (renew) or the stored record (complete); ARGV[4] its TTL, s (complete).
 * Returns 1 when the claim held (and the action ran), else 0.
 */
const HOLDER_LUA = luaScript(
  'idempotency_holder',
  `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == 'renew' then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
elseif ARGV[2] == 'complete' then
  redis.call('SET', KEYS[1], ARGV[3], 'EX', ARGV[4])
else
  redis.call('DEL', KEYS[1])
end
return 1
`,
);

/**
 * The in-flight lease. A running request renews it every third of this, so only a claim whose
 * process died (or lost Redis for that long) lapses, and a retry takes it over within this time.
 */
export const IDEMPOTENCY_LEASE_MS = 5_000;

/** What a commit inside an idempotent request needs to write the response with the effect. */
export interface IdempotentScope {
  request: IdempotentRequest;
  /** The idempotency key in Redis (same hash tag as every other key). */
  key: string;
  /** The exact claim value that must still be there for the commit to go ahead. */
  claimValue: string;
  /** The stored record for a response, and its TTL in seconds. */
  record(response: StoredResponse): Promise<string>;
  ttlSeconds: number;
}

const scopes = new AsyncLocalStorage<IdempotentScope>();

/** The idempotent request the running code belongs to, if any (read by Change.commit). */
export function currentIdempotentScope(): IdempotentScope | undefined {
  return scopes.getStore();
}

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
    return this.keys.idempotency(scope, hash('sha256', key, 'hex'));
  }

  async begin(scope: string, key: string, fingerprint: string): Promise<IdempotencyBegin> {
    const claim: IdempotencyClaim = { scope, key, fingerprint, token: randomBytes(12).toString('hex') };
    const r = (await runScript(
      this.redis,
      BEGIN_LUA,
      [this.key(scope, key)],
      [fingerprint, IDEMPOTENCY_LEASE_MS, claimValueOf(claim)],
    )) as string[];
    switch (r[0]) {
      case 'new':
        return { state: 'new', claim };
      case 'in_flight':
        return { state: 'in_flight' };
      case 'mismatch':
        return { state: 'mismatch' };
      default: {
        const rec = JSON.parse(r[1] ?? '{}') as StoredRecord;
        const opened = this.box.open(rec.r);
        const text = rec.z === 'gzip' ? (await gunzipAsync(Buffer.from(opened, 'base64'))).toString('utf8') : opened;
        return { state: 'done', response: JSON.parse(text) as StoredResponse };
      }
    }
  }

  private async holder(
    claim: IdempotencyClaim,
    action: 'renew' | 'complete' | 'release',
    ...args: (string | number)[]
  ): Promise<boolean> {
    const held = await runScript(
      this.redis,
      HOLDER_LUA,
      [this.key(claim.scope, claim.key)],
      [claimValueOf(claim), action, ...args],
    );
    return held === 1;
  }

  renew(claim: IdempotencyClaim): Promise<boolean> {
    return this.holder(claim, 'renew', IDEMPOTENCY_LEASE_MS);
  }

  async complete(claim: IdempotencyClaim, response: StoredResponse): Promise<void> {
    await this.holder(claim, 'complete', await this.record(claim.fingerprint, response), LIMITS.idempotencyTtlSeconds);
  }

  async release(claim: IdempotencyClaim): Promise<void> {
    await this.holder(claim, 'release');
  }

  within<T>(request: IdempotentRequest, work: () => T): T {
    const scope: IdempotentScope = {
      request,
      key: this.key(request.claim.scope, request.claim.key),
      claimValue: claimValueOf(request.claim),
      record: (response) => this.record(request.claim.fingerprint, response),
      ttlSeconds: LIMITS.idempotencyTtlSeconds,
    };
    return scopes.run(scope, work);
  }

  /**
   * A long answer is compressed before it is sealed (gzip, on libuv's threads, not the event
   * loop): an execute to 10,000 connections answers 3.9 MB of receipts, which sealed as it is took
   * 5.6 MB of Redis for a day, inside the execute's own commit.
   */
  private async record(fingerprint: string, response: StoredResponse): Promise<string> {
    const text = JSON.stringify(response);
    const rec: StoredRecord =
      text.length < COMPRESS_FROM
        ? { s: 'done', fp: fingerprint, r: this.box.seal(text) }
        : { s: 'done', fp: fingerprint, r: this.box.seal((await gzipAsync(text)).toString('base64')), z: 'gzip' };
    return JSON.stringify(rec);
  }
}

/** A completed key's record: the sealed answer (`z`: its text gzipped, then base64, before sealing). */
interface StoredRecord {
  s: 'done';
  fp: string;
  r: string;
  z?: 'gzip';
}

/** Answers from this length on (characters of their JSON) are stored compressed. */
export const COMPRESS_FROM = 16 * 1024;

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);

/** The stored claim: compared as this exact string by every holder action and atomic commit. */
function claimValueOf(claim: IdempotencyClaim): string {
  return JSON.stringify({ s: 'in_flight', fp: claim.fingerprint, t: claim.token });
}
