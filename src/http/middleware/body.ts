import express, { type Request, type Response } from 'express';
import { hash } from 'node:crypto';
import { DomainError } from '../../domain/common/errors.js';
import { LIMITS } from '../../domain/common/limits.js';
import { textHygieneErrors } from '../../domain/common/validation.js';

/** Marks the raw body's digest on the request, for idempotency fingerprints. */
export interface WithBodyDigest {
  bodyDigest?: string;
}

/**
 * Only an Idempotency-Key fingerprint reads the digest, so a request without one is not hashed
 * (a POST body is up to 256 KiB).
 */
const wantsDigest = (req: Request): boolean => req.headers['idempotency-key'] !== undefined;

/** The digest of no body at all (an optional body left out). */
const EMPTY_DIGEST = hash('sha256', '', 'hex');

/** A JSON parser per body limit (the default, and the few routes that take more: an import). */
const parsers = new Map<number, ReturnType<typeof jsonParser>>();
const parserFor = (limit: number) => {
  let p = parsers.get(limit);
  if (p === undefined) parsers.set(limit, (p = jsonParser(limit)));
  return p;
};

const jsonParser = (limit: number) =>
  express.json({
    limit,
    strict: true,
    type: () => true, // the media type is judged below, so a wrong one is 415, not an empty body
    // Runs on the raw (decompressed) bytes before JSON.parse: a thrown DomainError passes through
    // body-parser untouched and becomes the problem answer.
    verify: (req, _res, buf, encoding) => {
      // JSON on the wire is UTF-8 (RFC 8259 §8.1); other charsets are refused, not transcoded.
      if (encoding.toLowerCase() !== 'utf-8')
        throw new DomainError('unsupported_media_type', 'Send the body as UTF-8 JSON.');
      try {
        // A lossy decoder would store U+FFFD where the client sent broken bytes: refuse instead.
        STRICT_UTF8.decode(buf);
      } catch {
        throw new DomainError('invalid_json', 'The body is not valid UTF-8.');
      }
      if (wantsDigest(req as Request)) (req as unknown as WithBodyDigest).bodyDigest = hash('sha256', buf, 'hex');
    },
  });

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** body-parser error types that problem.ts already maps to a 4xx (see fromParserError there). */
const KNOWN_PARSER_ERRORS = new Set([
  'entity.parse.failed',
  'entity.too.large',
  'encoding.unsupported',
  'charset.unsupported',
  'request.aborted',
]);

/**
 * Any other failure to read the body is the client's: above all a body that does not decode as
 * its Content-Encoding says (`gzip` on plain bytes → a zlib error), or a length that lies.
 */
function readFailure(err: unknown, contentEncoding: string | undefined): unknown {
  if (err instanceof DomainError) return err;
  const type = err !== null && typeof err === 'object' && 'type' in err ? String(err.type) : '';
  if (KNOWN_PARSER_ERRORS.has(type)) return err;
  const status = err !== null && typeof err === 'object' && 'status' in err ? Number(err.status) : NaN;
  if (!(status >= 400 && status < 500)) return err;
  const coding = contentEncoding?.trim().toLowerCase();
  if (coding !== undefined && coding !== '' && coding !== 'identity') {
    return new DomainError(
      'invalid_json',
      `The body does not decode as its Content-Encoding (${coding.slice(0, 32)}) says.`,
    );
  }
  return new DomainError('invalid_json', 'The request body could not be read.');
}

function hasBody(req: Request): boolean {
  const h = req.headers;
  const len = h['content-length'];
  return (len !== undefined && len !== '0') || h['transfer-encoding'] !== undefined;
}

/**
 * Reads a JSON body under docs/api.md: `application/json` or 415; malformed → 400; over `limit`
 * (256 KiB unless the route says otherwise) → 413.
 * `optional` routes (close, test, redeliver) also take no body at all, without a Content-Type.
 * Settles once `req.body` is set; a refusal rejects (or throws, when it needs no reading) with
 * the error to answer. Nothing to read (an optional body left out) returns undefined, not a
 * promise, so that case costs no tick.
 */
export function readJsonBody(
  req: Request,
  res: Response,
  optional: boolean,
  limit: number = LIMITS.bodyBytes,
): Promise<void> | undefined {
  if (!hasBody(req)) {
    if (optional) {
      req.body = undefined;
      if (wantsDigest(req)) (req as unknown as WithBodyDigest).bodyDigest = EMPTY_DIGEST;
      return undefined;
    }
    if (!req.is('application/json'))
      throw new DomainError('unsupported_media_type', 'Send a JSON body with Content-Type: application/json.');
    throw new DomainError('invalid_json', 'The request needs a JSON body.');
  }
  if (!req.is('application/json')) {
    throw new DomainError('unsupported_media_type', 'Send the body as Content-Type: application/json.');
  }
  return new Promise((resolve, reject) => {
    parserFor(limit)(req, res, (err?: unknown) => {
      if (err) {
        const failure = readFailure(err, req.headers['content-encoding']);
        // body-parser only ever fails with Errors; anything else would be a 500 either way.
        reject(failure instanceof Error ? failure : new Error(String(failure)));
        return;
      }
      // Lone surrogates, NUL and control characters are refused here for every endpoint at once.
      const hostile = textHygieneErrors(req.body);
      if (hostile.length > 0) {
        reject(
          new DomainError(
            'validation_failed',
            'The request has text that no field may hold (control characters or invalid Unicode); see errors.',
            hostile,
          ),
        );
        return;
      }
      resolve();
    });
  });
}
