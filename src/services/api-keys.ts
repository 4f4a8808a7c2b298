import type { Actor } from '../domain/common/actor.js';
import {
  ApiKeyCreateSchema,
  formatToken,
  hasScope,
  isWellFormedToken,
  keyState,
  parseExpiresIn,
  unauthenticated,
  type ApiKey,
  type Scope,
} from '../domain/common/api-key.js';
import { iso } from '../domain/common/clock.js';
import { DomainError, notFound } from '../domain/common/errors.js';
import type { Page, PageRequest } from '../domain/common/pagination.js';
import { parseInput } from '../domain/common/validation.js';
import type { ApiKeyRepo, Clock, IdGenerator, TokenCrypto } from '../ports/index.js';
import type { AccessPolicy } from './access.js';
import { LOST_RACE, retryOnConflict } from './retry.js';
import { SingleFlight } from './single-flight.js';

export interface ApiKeyServiceDeps {
  repo: ApiKeyRepo;
  clock: Clock;
  ids: IdGenerator;
  crypto: TokenCrypto;
  /** Who may create and revoke keys (the service asks it on every call). */
  access: AccessPolicy;
}

/**
 * How long one process trusts a key it has looked up. Revocation must take effect on every
 * instance within a second (docs/api.md "Authentication and scopes"): an entry is at most this old, the process that
 * revokes drops its own at once, and an expiry is checked against the clock on every request.
 * Within that window a request spends no Redis round trip on its key; the lookup (three reads
 * and the last-use write) happens at most four times a second per key and process.
 */
export const AUTH_CACHE_MS = 250;
/** Keys remembered per process; beyond it the oldest entry goes (a Map keeps insertion order). */
const AUTH_CACHE_MAX = 10_000;

interface CachedKey {
  key: ApiKey;
  /** Clock milliseconds after which the key is looked up again. */
  until: number;
}

/** API keys: made by the CLI and the Slack App Home, checked on every /v1 request. */
export class ApiKeyService {
  /** Token SHA-256 → the active key found for it. Unknown and inactive tokens are never kept. */
  private readonly cache = new Map<string, CachedKey>();
  /**
   * Token SHA-256 → the lookup under way for it. A busy key's entry expires under all of its
   * in-flight requests at once (64 of them in the benchmark): they wait for one lookup instead of
   * each making its own four round trips and last-use write.
   */
  private readonly lookups = new SingleFlight<string, ApiKey | null>();
  /** Bumped by every revocation here: a lookup that began before one must not cache what it read. */
  private generation = 0;

  constructor(private readonly d: ApiKeyServiceDeps) {}

  /** Creates a key; the token is returned here and never again (only its SHA-256 is kept). */
  async create(input: unknown, actor: Actor): Promise<{ key: ApiKey; token: string }> {
    this.d.access.authorize(actor, 'manage_api_keys');
    const body = parseInput(ApiKeyCreateSchema, input);
    const now = this.d.clock.now();
    const expiresMs = body.expires_in === undefined ? null : parseExpiresIn(body.expires_in);
    const scopes = body.scopes.includes('*') ? (['*'] as const) : [...new Set(body.scopes)];
    const key: ApiKey = {
      id: this.d.ids.next('apiKey'),
      name: body.name,
      scopes: [...scopes],
      created_at: iso(now),
      expires_at: expiresMs === null ? null : iso(new Date(now.getTime() + expiresMs)),
      last_used_at: null,
      revoked_at: null,
      created_by: actor,
    };
    const token = formatToken(this.d.crypto.randomBytes(32));
    await this.d.repo.create(key, this.d.crypto.sha256Hex(token));
    return { key, token };
  }

  list(page: PageRequest): Promise<Page<ApiKey>> {
    return this.d.repo.list(page);
  }

  async get(id: string): Promise<ApiKey> {
    const key = await this.d.repo.get(id);
    if (!key) throw notFound('API key', id);
    return key;
  }

  /** Revokes a key (idempotent: revoking twice keeps the first time). */
  async revoke(id: string, actor: Actor): Promise<ApiKey> {
    this.d.access.authorize(actor, 'manage_api_keys');
    return retryOnConflict(
      async () => {
        const key = await this.get(id);
        if (key.revoked_at !== null) return key;
        const next = { ...key, revoked_at: iso(this.d.clock.now()) };
        if (!(await this.d.repo.update(key, next))) return LOST_RACE;
        this.forget(id);
        return next;
      },
      () => new DomainError('conflict', 'The key changed while it was being revoked; try again.'),
    );
  }

  /**
   * Resolves a bearer token to an active key: from this process's cache when it looked the key up
   * less than AUTH_CACHE_MS ago, else from Redis (which also records the use as `last_used_at`).
   * A token that is unknown or no longer active is looked up again on every request, so a key
   * created by another process works at once.
   */
  async authenticate(token: string | null): Promise<ApiKey> {
    if (token === null) throw unauthenticated('missing');
    const hash = this.d.crypto.sha256Hex(token);
    return this.fromCache(hash) ?? this.lookUpToken(token, hash);
  }

  /**
   * authenticate() without a promise while this process's cache can answer (nearly every request
   * of a key in use): the key, or the refusal thrown; undefined when Redis must be asked
   * (authenticate() then).
   */
  authenticateNow(token: string | null): ApiKey | undefined {
    if (token === null) throw unauthenticated('missing');
    return this.fromCache(this.d.crypto.sha256Hex(token));
  }

  /** The cached key of a token hash, the refusal of one no longer active, or undefined (ask Redis). */
  private fromCache(hash: string): ApiKey | undefined {
    const cached = this.cache.get(hash);
    if (cached === undefined) return undefined;
    const now = this.d.clock.now();
    if (cached.until <= now.getTime()) return undefined;
    // Only a lookup caches a key, and only a well-formed token is looked up: a token found here
    // needs no shape check (its checksum costs a CRC and BigInt arithmetic on every request).
    if (keyState(cached.key, now) === 'active') return cached.key;
    this.cache.delete(hash);
    throw unauthenticated('invalid');
  }

  private async lookUpToken(token: string, hash: string): Promise<ApiKey> {
    const now = this.d.clock.now();
    if (!isWellFormedToken(token)) throw unauthenticated('invalid');
    this.cache.delete(hash);
    const key = await this.lookups.run(hash, () => this.lookUp(hash, now));
    if (!key || keyState(key, now) !== 'active') throw unauthenticated('invalid');
    return key;
  }

  /** Reads the key of a token hash from Redis; an active one has its use recorded and is cached. */
  private async lookUp(hash: string, now: Date): Promise<ApiKey | null> {
    const generation = this.generation;
    const key = await this.d.repo.findByTokenHash(hash);
    if (!key || keyState(key, now) !== 'active') return key;
    await this.d.repo.touch(key.id, iso(now));
    if (generation !== this.generation) return key;
    if (this.cache.size >= AUTH_CACHE_MAX) this.cache.delete(this.cache.keys().next().value as string);
    this.cache.set(hash, { key, until: now.getTime() + AUTH_CACHE_MS });
    return key;
  }

  /** Drops a key from this process's cache (its token hash is not kept, so search by id). */
  private forget(id: string): void {
    for (const [hash, entry] of this.cache) if (entry.key.id === id) this.cache.delete(hash);
    // A lookup under way may have read the key before the revocation: requests from now on start
    // their own, and it caches nothing.
    this.generation++;
    this.lookups.clear();
  }

  /** Throws `insufficient_scope` naming the scope. */
  requireScope(key: ApiKey, scope: Scope): void {
    if (!hasScope(key, scope)) {
      throw new DomainError('insufficient_scope', `This API key lacks the "${scope}" scope.`, [], { scope });
    }
  }
}
