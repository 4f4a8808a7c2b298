import type { ResponseConfig } from '@asteasolutions/zod-to-openapi';
import { Router, type Request, type RequestHandler, type Response } from 'express';
import type { z } from 'zod';
import type { Scope } from '../domain/common/api-key.js';
import { DomainError } from '../domain/common/errors.js';
import type { IdempotencyStore, RateLimiter } from '../ports/index.js';
import type { ApiKeyService } from '../services/api-keys.js';
import type { RequestLocals } from './context.js';
import { bearerToken } from './middleware/auth.js';
import { readJsonBody } from './middleware/body.js';
import { idempotent } from './middleware/idempotency.js';
import { countRequest, type RatePolicy } from './middleware/rate-limit.js';

export interface EdgeDeps {
  keys: ApiKeyService;
  limiter: RateLimiter;
  idempotency: IdempotencyStore;
}

export type Method = 'get' | 'post' | 'patch' | 'delete';
export type BodyMode = 'required' | 'optional' | 'none';

/** What the OpenAPI operation says beyond what the route's chain (scope, body, method) implies. */
export interface OperationDoc {
  operationId: string;
  summary: string;
  /** More than the summary says, when it needs saying. */
  description?: string;
  query?: z.ZodObject;
  /** The JSON body; whether it is required follows the route's body mode. */
  body?: z.ZodType;
  /** The answers the handler gives; those of the chain (401, 403, 413, 429, …) are added by the builder. */
  responses: Record<number, ResponseConfig>;
  /** The handler honours If-Match (it calls ifMatchRevision). */
  ifMatch?: boolean;
  /** Its 200/201 carry the record's ETag. */
  etag?: boolean;
}

export interface Route<D> {
  method: Method;
  /** Express syntax (`/incidents/:id`); the document's `{id}` form is derived from it. */
  path: string;
  /** Scope needed; null only for the public OpenAPI document. */
  scope: Scope | null;
  /** Whether a JSON body is read; default: required for POST and PATCH, none otherwise. */
  body?: BodyMode;
  /** The largest body it reads, in bytes (default LIMITS.bodyBytes, 256 KiB): larger is 413. */
  bodyLimit?: number;
  /** The execute limit applies on top of the default one. */
  execute?: boolean;
  /** null: not an API operation (the document itself). */
  doc: OperationDoc | null;
  /** Gets its dependencies per request, so a table can be read (for the document) without any. */
  handle: (req: Request, res: Response, deps: D) => void | Promise<void>;
}

/** One resource's routes: mounted by mountRoutes, documented by buildOpenApiDocument. */
export interface RouteTable<D> {
  tag: string;
  /** Path parameters by name, as the document shows them. */
  params: Record<string, z.ZodType>;
  routes: readonly Route<D>[];
}

export const defineRoutes = <D>(about: Omit<RouteTable<D>, 'routes'>, routes: readonly Route<D>[]): RouteTable<D> => ({
  ...about,
  routes,
});

export const bodyModeOf = (route: Pick<Route<unknown>, 'method' | 'body'>): BodyMode =>
  route.body ?? (route.method === 'post' || route.method === 'patch' ? 'required' : 'none');

/** `/incidents/:id` → `/incidents/{id}`. */
export const openApiPath = (path: string): string => path.replace(/:([A-Za-z]\w*)/g, '{$1}');

/**
 * Mounts a table with the chain of docs/api.md, in its order of checks: the path is known
 * (else 404 at the end of the router) → method allowed (405 + Allow) → 401 → rate limit → 403 →
 * body (400/413/415) → Idempotency-Key (POST) → the route, which does 404/409/422.
 *
 * Onto `router` when given, each path under `prefix`: every table goes straight onto the app,
 * under `/v1`, since each router nested in another is one more trip through Express's dispatch
 * (and its prefix trimming) for every request that passes it. The tables' paths are disjoint, so
 * sharing a router changes no match, 405 or metric label (`/v1/incidents/:id` either way).
 *
 * One Express route per path, holding its methods and then the 405 for the others: the router
 * tests a request's path against each of its layers in turn, so a layer per path rather than per
 * method and path is a third as many tests for the requests that pass them. Paths are tried in
 * the order the table first names them, so a table names a literal path before a parameter that
 * would also match it (`/subscribers/export` before `/subscribers/:id`): a wrong method on the
 * literal path is its 405, never the parameter's route.
 */
export function mountRoutes<D extends EdgeDeps>(
  deps: D,
  table: RouteTable<D>,
  router: Router = Router(),
  prefix = '',
): Router {
  const byPath = new Map<string, Route<D>[]>();
  for (const route of table.routes) byPath.set(route.path, [...(byPath.get(route.path) ?? []), route]);
  for (const [path, routes] of byPath) {
    const route = router.route(`${prefix}${path}`);
    for (const r of routes) route[r.method](handlerOf(r, deps));
    // After every method of the path, so only the others reach it.
    const allow = routes.flatMap((r) => (r.method === 'get' ? ['GET', 'HEAD'] : [r.method.toUpperCase()])).join(', ');
    route.all(() => {
      throw new DomainError('method_not_allowed', `Use one of: ${allow}.`, [], { allow });
    });
  }
  return router;
}

/**
 * The route and every check before it as one Express handler: plain calls in the order of
 * checks, instead of a layer per check (each layer is a trip through the router's dispatch, a
 * closure and a promise per request). A refusal throws; Express hands it to the problem handler.
 */
function handlerOf<D extends EdgeDeps>(route: Route<D>, deps: D): RequestHandler {
  const { scope } = route;
  const policies: readonly RatePolicy[] = route.execute ? ['default', 'execute'] : ['default'];
  const body = bodyModeOf(route);
  const post = route.method === 'post';
  return async (req, res) => {
    if (scope !== null) {
      // Both steps answer at once from this process's cache and lease when they can; a request
      // then waits no turn of the event loop for them.
      const token = bearerToken(req.headers.authorization);
      const key = deps.keys.authenticateNow(token) ?? (await deps.keys.authenticate(token));
      (res.locals as RequestLocals).apiKey = key;
      // Counted before the scope check: a 403 is an authenticated response too, so it carries
      // the RateLimit headers, and probing for scopes spends the key's budget.
      const counting = countRequest(deps.limiter, policies, key.id, res);
      if (counting !== undefined) await counting;
      deps.keys.requireScope(key, scope);
    }
    if (body !== 'none') {
      const reading = readJsonBody(req, res, body === 'optional', route.bodyLimit);
      if (reading !== undefined) await reading;
    }
    if (post) await idempotent(deps.idempotency, req, res, () => route.handle(req, res, deps));
    else await route.handle(req, res, deps);
  };
}

/** A path parameter as a string (Express 5 types them loosely). */
export const pathParam = (req: Request, name: string): string => String(req.params[name]);

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
