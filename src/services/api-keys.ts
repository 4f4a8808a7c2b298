import type { Actor } from '../domain/actor.js';
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
} from '../domain/api-key.js';
import { iso } from '../domain/clock.js';
import { DomainError, notFound } from '../domain/errors.js';
import type { Page, PageRequest } from '../domain/pagination.js';
import { parseInput } from '../domain/validation.js';
import type { ApiKeyRepo, Clock, IdGenerator, TokenCrypto } from '../ports/index.js';
import { LOST_RACE, retryOnConflict } from './retry.js';

export interface ApiKeyServiceDeps {
  repo: ApiKeyRepo;
  clock: Clock;
  ids: IdGenerator;
  crypto: TokenCrypto;
}

/** API keys: made by the CLI and the Slack App Home, checked on every /v1 request. */
export class ApiKeyService {
  constructor(private readonly d: ApiKeyServiceDeps) {}

  /** Creates a key; the token is returned here and never again (only its SHA-256 is kept). */
  async create(input: unknown, actor: Actor): Promise<{ key: ApiKey; token: string }> {
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
  async revoke(id: string): Promise<ApiKey> {
    return retryOnConflict(async () => {
      const key = await this.get(id);
      if (key.revoked_at !== null) return key;
      const next = { ...key, revoked_at: iso(this.d.clock.now()) };
      return (await this.d.repo.update(key, next)) ? next : LOST_RACE;
    }, () => new DomainError('conflict', 'The key changed while it was being revoked; try again.'));
  }

  /**
   * Resolves a bearer token to an active key. No cache: every instance reads Redis on every
   * request, which is what makes a revocation effective everywhere at once (within 1 s, README "API keys").
   */
  async authenticate(token: string | null): Promise<ApiKey> {
    if (token === null) throw unauthenticated('missing');
    if (!isWellFormedToken(token)) throw unauthenticated('invalid');
    const key = await this.d.repo.findByTokenHash(this.d.crypto.sha256Hex(token));
    const now = this.d.clock.now();
    if (!key || keyState(key, now) !== 'active') throw unauthenticated('invalid');
    await this.d.repo.touch(key.id, iso(now));
    return key;
  }

  /** Throws `insufficient_scope` naming the scope. */
  requireScope(key: ApiKey, scope: Scope): void {
    if (!hasScope(key, scope)) {
      throw new DomainError('insufficient_scope', `This API key lacks the "${scope}" scope.`, [], { scope });
    }
  }
}
