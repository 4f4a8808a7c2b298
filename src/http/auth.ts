import type { RequestHandler } from 'express';
import type { Scope } from '../domain/api-key.js';
import type { ApiKeyService } from '../services/api-keys.js';
import { apiKeyOf, type RequestLocals } from './context.js';

/** Reads `Authorization: Bearer <token>`; anything else counts as a missing token. */
export function bearerToken(header: string | undefined): string | null {
  if (header === undefined) return null;
  const m = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  return m?.[1] ?? (header.trim() === '' ? null : '');
}

export function authenticate(keys: ApiKeyService): RequestHandler {
  return async (req, res, next) => {
    (res.locals as RequestLocals).apiKey = await keys.authenticate(bearerToken(req.get('Authorization')));
    next();
  };
}

export function requireScope(keys: ApiKeyService, scope: Scope): RequestHandler {
  return (_req, res, next) => {
    keys.requireScope(apiKeyOf(res), scope);
    next();
  };
}
