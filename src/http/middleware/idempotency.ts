import type { Request, Response } from 'express';
import { hash } from 'node:crypto';
import { DomainError } from '../../domain/common/errors.js';
import { LIMITS } from '../../domain/common/limits.js';
import type {
  CommittedEffect,
  IdempotencyClaim,
  IdempotencyStore,
  IdempotentRequest,
  StoredResponse,
} from '../../ports/index.js';
import type { WithBodyDigest } from './body.js';
import { apiKeyOf } from '../context.js';

/** Headers worth replaying with a stored response. */
const REPLAYED_HEADERS = ['content-type', 'location', 'etag'];

/** How often a running request renews its claim: three times per lease, so one slow renewal never loses it. */
const RENEW_EVERY_MS = 1_500;

/**
 * `Idempotency-Key` on POST (docs/api.md), scoped to the API key and kept 24 h.
 *
 * Crash safety: the key is held by a short lease (5 s) that this request renews while it runs, so
 * a claim whose process died is taken over by a retry within seconds instead of blocking it. A
 * route that commits an effect says how that effect answers (`respondOnCommit`), and the store
 * writes that answer in the same atomic step as the effect: a crash after the commit replays it,
 * a crash before it lets the retry run once. Other answers (validation errors, routes without an
 * effect) are stored *before* they are sent, so a client that retries the moment it gets an
 * answer already sees the replay. 5xx answers free the key (the client should retry); 429 is
 * never stored.
 *
 * Runs `work` (the route) unless the key replays or refuses; without an Idempotency-Key it just
 * runs it.
 */
export async function idempotent(
  store: IdempotencyStore,
  req: Request,
  res: Response,
  work: () => void | Promise<void>,
): Promise<void> {
  const key = req.headers['idempotency-key'];
  if (key === undefined) {
    await work();
    return;
  }
  // Node joins a repeated header with ", " (as req.get did); a list is never what we read.
  const value = Array.isArray(key) ? key.join(', ') : key;
  if (value.length < 1 || value.length > LIMITS.idempotencyKeyMax) {
    throw new DomainError('validation_failed', 'Idempotency-Key must be 1 to 255 characters.', [
      { field: 'Idempotency-Key', code: 'invalid_length', message: 'Use 1 to 255 characters.' },
    ]);
  }
  const scope = apiKeyOf(res).id;
  const fingerprint = hash(
    'sha256',
    `${req.method}\n${req.originalUrl}\n${(req as unknown as WithBodyDigest).bodyDigest ?? ''}`,
    'hex',
  );
  const begun = await store.begin(scope, value, fingerprint);
  switch (begun.state) {
    case 'mismatch':
      throw new DomainError('idempotency_key_reused', 'This Idempotency-Key was used for a different request.');
    case 'in_flight':
      throw new DomainError(
        'idempotency_key_in_use',
        'A request with this Idempotency-Key is still in progress; retry shortly.',
        [],
        { retryAfter: 1 },
      );
    case 'done':
      replay(res, begun.response);
      return;
    case 'new': {
      const request: IdempotentRequest = { claim: begun.claim, respond: null, stored: false };
      (res.locals as IdempotentLocals)[LOCALS] = request;
      const stopRenewing = keepClaim(store, begun.claim);
      res.on('close', stopRenewing);
      captureResponse(res, async (stored) => {
        stopRenewing();
        // Written with the effect, in the same step: nothing more to store.
        if (request.stored) return;
        if (stored.status >= 500) await store.release(begun.claim);
        else if (stored.status !== 429) await store.complete(begun.claim, stored);
      });
      await store.within(request, work);
      return;
    }
  }
}

const LOCALS = 'heraldIdempotentRequest';
type IdempotentLocals = { [LOCALS]?: IdempotentRequest };

/**
 * Declares how this request's committed effect answers, so the answer is stored with the effect
 * (no-op without an Idempotency-Key). Return null for an effect that is not this request's answer.
 */
export function respondOnCommit(res: Response, respond: (effect: CommittedEffect) => StoredResponse | null): void {
  const request = (res.locals as IdempotentLocals)[LOCALS];
  if (request) request.respond = respond;
}

/** Sends a response built as a StoredResponse (the same bytes a replay sends later). */
export function sendStored(res: Response, stored: StoredResponse): void {
  for (const [h, v] of Object.entries(stored.headers)) res.setHeader(h, v);
  res.status(stored.status).send(stored.body === '' ? undefined : Buffer.from(stored.body, 'utf8'));
}

/** A JSON answer as a StoredResponse. */
export function jsonResponse(status: number, body: unknown, headers: Record<string, string> = {}): StoredResponse {
  return {
    status,
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
  };
}

/** Renews the claim's lease until stopped (when the response is sent or the client went away). */
function keepClaim(store: IdempotencyStore, claim: IdempotencyClaim): () => void {
  const timer = setInterval(() => {
    // A failed renewal (Redis away) is not an error of the request: the commit's claim check is
    // what decides whether this request may still take effect.
    store.renew(claim).catch(() => false);
  }, RENEW_EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
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
    const text =
      body === undefined
        ? ''
        : Buffer.isBuffer(body)
          ? body.toString('utf8')
          : typeof body === 'string'
            ? body
            : JSON.stringify(body);
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
