import type { RequestHandler } from 'express';
import type { Scope } from '../../domain/common/api-key.js';
import type { ApiKeyService } from '../../services/api-keys.js';
import { apiKeyOf, type RequestLocals } from '../context.js';

/**
 * Reads `Authorization: Bearer <token>`. No header, or another scheme (`Basic …`), is a missing
 * token (RFC 6750 §3.1: no error code in the challenge); a Bearer header whose credentials are
 * not one token is malformed (''), answered with `error="invalid_token"`.
 */
export function bearerToken(header: string | undefined): string | null {
  if (header === undefined || !/^\s*Bearer(\s|$)/i.test(header)) return null;
  const m = /^\s*Bearer[ ]+(\S+)\s*$/i.exec(header);
  return m?.[1] ?? '';
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
