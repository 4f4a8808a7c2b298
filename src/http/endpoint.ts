import type { RequestHandler, Router } from 'express';
import type { Scope } from '../domain/api-key.js';
import { DomainError } from '../domain/errors.js';
import type { IdempotencyStore, RateLimiter } from '../ports/index.js';
import type { ApiKeyService } from '../services/api-keys.js';
import { authenticate, requireScope } from './auth.js';
import { jsonBody } from './body.js';
import { idempotency } from './idempotency.js';
import { rateLimit } from './rate-limit.js';

export interface EdgeDeps {
  keys: ApiKeyService;
  limiter: RateLimiter;
  idempotency: IdempotencyStore;
}

export type Method = 'get' | 'post' | 'patch' | 'delete';

export interface Endpoint {
  /** Scope needed; null only for the public OpenAPI document. */
  scope: Scope | null;
  /** Whether a JSON body is read: required, optional (close/test/redeliver), or none. */
  body?: 'required' | 'optional' | 'none';
  /** The execute limit applies on top of the default one. */
  execute?: boolean;
  handler: RequestHandler;
}

/**
 * Registers one path with the chain of README "Conventions worth knowing", in its order of checks: the path is known
 * (else 404 at the end of the router) → method allowed (405 + Allow) → 401 → rate limit → 403 →
 * body (400/413/415) → Idempotency-Key (POST) → the route, which does 404/409/422.
 */
export function endpoint(router: Router, deps: EdgeDeps, path: string, methods: Partial<Record<Method, Endpoint>>): void {
  for (const [method, ep] of Object.entries(methods) as [Method, Endpoint][]) {
    const chain: RequestHandler[] = [];
    if (ep.scope !== null) {
      // Counted before the scope check: a 403 is an authenticated response too, so it carries
      // the RateLimit headers, and probing for scopes spends the key's budget.
      chain.push(authenticate(deps.keys), rateLimit(deps.limiter, ep.execute ? ['default', 'execute'] : ['default']));
      chain.push(requireScope(deps.keys, ep.scope));
    }
    const body = ep.body ?? (method === 'post' || method === 'patch' ? 'required' : 'none');
    if (body !== 'none') chain.push(jsonBody({ optional: body === 'optional' }));
    if (method === 'post') chain.push(idempotency(deps.idempotency));
    chain.push(ep.handler);
    router[method](path, ...chain);
  }
  const allow = Object.keys(methods)
    .map((m) => m.toUpperCase())
    .flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m]))
    .join(', ');
  router.all(path, () => {
    throw new DomainError('method_not_allowed', `Use one of: ${allow}.`, [], { allow });
  });
}

/** Reads a comma-separated (or repeated) query parameter into a list. */
export function queryList(value: unknown): string[] | undefined {
  if (value === undefined) return undefined;
  const parts = (Array.isArray(value) ? value : [value]).flatMap((v) => (typeof v === 'string' ? v.split(',') : []));
  return parts.map((p) => p.trim()).filter((p) => p.length > 0);
}

/** A single string query parameter (a repeated one is a client error in every place we read one). */
export function queryString(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}
