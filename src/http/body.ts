import express, { type RequestHandler } from 'express';
import { createHash } from 'node:crypto';
import { DomainError } from '../domain/errors.js';
import { LIMITS } from '../domain/limits.js';

/** Marks the raw body's digest on the request, for idempotency fingerprints. */
export interface WithBodyDigest {
  bodyDigest?: string;
}

const parseJson = express.json({
  limit: LIMITS.bodyBytes,
  strict: true,
  type: () => true, // the media type is judged below, so a wrong one is 415, not an empty body
  verify: (req, _res, buf) => {
    (req as unknown as WithBodyDigest).bodyDigest = createHash('sha256').update(buf).digest('hex');
  },
});

function hasBody(req: Parameters<RequestHandler>[0]): boolean {
  const len = req.get('Content-Length');
  return (len !== undefined && len !== '0') || req.get('Transfer-Encoding') !== undefined;
}

/**
 * JSON bodies under SPEC §1: `application/json` or 415; malformed → 400; over 256 KiB → 413.
 * `optional` routes (close, test, redeliver) also take no body at all, without a Content-Type.
 */
export function jsonBody(opts: { optional: boolean }): RequestHandler {
  return (req, res, next) => {
    if (!hasBody(req)) {
      if (opts.optional) {
        req.body = undefined;
        (req as unknown as WithBodyDigest).bodyDigest = createHash('sha256').digest('hex');
        next();
        return;
      }
      if (!req.is('application/json')) throw new DomainError('unsupported_media_type', 'Send a JSON body with Content-Type: application/json.');
      throw new DomainError('invalid_json', 'The request needs a JSON body.');
    }
    if (!req.is('application/json')) {
      throw new DomainError('unsupported_media_type', 'Send the body as Content-Type: application/json.');
    }
    parseJson(req, res, (err?: unknown) => {
      if (err) {
        next(err);
        return;
      }
      next();
    });
  };
}
