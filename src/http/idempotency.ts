import type { RequestHandler, Response } from 'express';
import { createHash } from 'node:crypto';
import { DomainError } from '../domain/errors.js';
import { LIMITS } from '../domain/limits.js';
import type { IdempotencyStore, StoredResponse } from '../ports.js';
import type { WithBodyDigest } from './body.js';
import { apiKeyOf } from './context.js';

/** Headers worth replaying with a stored response. */
const REPLAYED_HEADERS = ['content-type', 'location', 'etag'];

/**
 * `Idempotency-Key` on POST (SPEC §1), scoped to the API key and kept 24 h. The first response
 * is stored *before* it is sent, so a client that retries the moment it gets an answer already
 * sees the replay. 5xx answers free the key (the client should retry); 429 is never stored.
 */
export function idempotency(store: IdempotencyStore): RequestHandler {
  return async (req, res, next) => {
    const key = req.get('Idempotency-Key');
    if (key === undefined) {
      next();
      return;
    }
    if (key.length < 1 || key.length > LIMITS.idempotencyKeyMax) {
      throw new DomainError('validation_failed', 'Idempotency-Key must be 1 to 255 characters.', [
        { field: 'Idempotency-Key', code: 'invalid_length', message: 'Use 1 to 255 characters.' },
      ]);
    }
    const scope = apiKeyOf(res).id;
    const fingerprint = createHash('sha256')
      .update(`${req.method}\n${req.originalUrl}\n${(req as unknown as WithBodyDigest).bodyDigest ?? ''}`)
      .digest('hex');
    const begun = await store.begin(scope, key, fingerprint);
    switch (begun.state) {
      case 'mismatch':
        throw new DomainError('idempotency_key_reused', 'This Idempotency-Key was used for a different request.');
      case 'in_flight':
        throw new DomainError('idempotency_key_in_use', 'A request with this Idempotency-Key is still in progress; retry shortly.');
      case 'done':
        replay(res, begun.response);
        return;
      case 'new':
        captureResponse(res, async (stored) => {
          if (stored.status >= 500) await store.release(scope, key);
          else if (stored.status !== 429) await store.complete(scope, key, fingerprint, stored);
        });
        next();
        return;
    }
  };
}

function replay(res: Response, stored: StoredResponse): void {
  for (const [h, v] of Object.entries(stored.headers)) res.setHeader(h, v);
  res.setHeader('Idempotent-Replayed', 'true');
  res.status(stored.status).send(stored.body === '' ? undefined : Buffer.from(stored.body, 'utf8'));
}

/** Wraps res.send so the final response is persisted (awaited) before it leaves. */
function captureResponse(res: Response, persist: (r: StoredResponse) => Promise<void>): void {
  const send = res.send.bind(res);
  let done = false;
  res.send = ((body?: unknown) => {
    if (done) return send(body);
    done = true;
    const text = body === undefined ? '' : Buffer.isBuffer(body) ? body.toString('utf8') : typeof body === 'string' ? body : JSON.stringify(body);
    const headers: Record<string, string> = {};
    for (const h of REPLAYED_HEADERS) {
      const v = res.getHeader(h);
      if (v !== undefined) headers[h] = String(v);
    }
    persist({ status: res.statusCode, body: text, headers }).then(
      () => send(body),
      () => send(body), // storing failed: still answer; the key simply won't replay
    );
    return res;
  }) as Response['send'];
}
