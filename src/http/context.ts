import type { Request, Response } from 'express';
import type { Actor } from '../domain/common/actor.js';
import type { ApiKey } from '../domain/common/api-key.js';

/** Per-request state the middlewares hand to the routes, kept in res.locals with types. */
export interface RequestLocals {
  requestId: string;
  /** performance.now() when the request reached the edge: the access log's and metrics' duration. */
  startedAt: number;
  apiKey?: ApiKey;
}

export function requestIdOf(_req: Request, res: Response): string {
  return (res.locals as Partial<RequestLocals>).requestId ?? 'unknown';
}

export function apiKeyOf(res: Response): ApiKey {
  const key = (res.locals as Partial<RequestLocals>).apiKey;
  if (!key) throw new Error('route reached without authentication');
  return key;
}

/** The actor recorded for a request made with an API key. */
export function actorOf(res: Response): Actor {
  const key = apiKeyOf(res);
  return { type: 'api_key', id: key.id, name: key.name };
}
