import { randomFillSync } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Request, RequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import { Counter, Histogram, type Registry } from 'prom-client';
import { DomainError } from '../../domain/common/errors.js';
import type { RequestLocals } from '../context.js';

const CLIENT_ID = /^[A-Za-z0-9._-]{1,128}$/;

/**
 * The one middleware every request passes first: its X-Request-Id (the client's when it is sane, a
 * fresh one otherwise), one access log line and the request metrics once the answer is sent, and
 * `400 invalid_path` for a path whose percent-encoding does not decode.
 *
 * One layer and one `finish` listener, shared by every request (it finds its request through
 * `this`), instead of four layers each adding its own listener closure: at thousands of requests a
 * second the per-request layers, closures and listeners were a visible share of the CPU.
 */
export function edge(parent: Logger, registry: Registry): RequestHandler {
  // The log line's fields are fixed here and none can hold a secret (ids, a status, the path
  // without its query), so it skips the logger's path redaction: with Herald's wildcard paths
  // that costs 30–50 µs a line, a third of a core at a few thousand requests a second.
  const log = parent.child({}, { redact: { paths: [], censor: '[redacted]' } });
  const requests = new Counter({
    name: 'herald_http_requests_total',
    help: 'HTTP requests by method, route and status.',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'herald_http_request_duration_seconds',
    help: 'HTTP request duration by method and route.',
    labelNames: ['method', 'route'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });

  function finished(this: Response): void {
    const req = this.req;
    const locals = this.locals as RequestLocals;
    const ms = performance.now() - locals.startedAt;
    // Labelled by route pattern (never the raw path: ids would explode cardinality), read when
    // the answer is sent: the route (and the router's base URL) is only known by then.
    const routePath: unknown = (req.route as { path?: unknown } | undefined)?.path;
    const route = typeof routePath === 'string' ? `${req.baseUrl}${routePath}` : 'unmatched';
    requests.inc({ method: req.method, route, status: String(this.statusCode) });
    duration.observe({ method: req.method, route }, ms / 1000);
    // Checked first so a silent logger (the benchmarks, tests) builds no line at all.
    if (log.isLevelEnabled('info')) {
      log.info(
        {
          request_id: locals.requestId,
          method: req.method,
          path: fullPath(req),
          status: this.statusCode,
          ms: Math.round(ms),
        },
        'request',
      );
    }
  }

  return (req, res, next) => {
    const locals = res.locals as RequestLocals;
    locals.startedAt = performance.now();
    const given = req.headers['x-request-id'];
    const id = typeof given === 'string' && CLIENT_ID.test(given) ? given : freshRequestId();
    locals.requestId = id;
    res.setHeader('X-Request-Id', id);
    res.on('finish', finished);
    refuseMalformedPath(req);
    next();
  };
}

/** Random bytes for request ids, 256 ids' worth at a time: one call into the CSPRNG per 256 requests. */
const idBytes = Buffer.alloc(16 * 256);
let idAt = idBytes.length;

/** `req_` + 32 hex digits, 128 random bits. */
function freshRequestId(): string {
  if (idAt === idBytes.length) {
    randomFillSync(idBytes);
    idAt = 0;
  }
  const id = `req_${idBytes.toString('hex', idAt, idAt + 16)}`;
  idAt += 16;
  return id;
}

/**
 * A path whose percent-encoding does not decode (`/v1/incidents/inc_x%ZZ`, a lone `%`, bytes
 * that are not UTF-8) is the client's mistake: 400 `invalid_path` before anything else runs,
 * instead of the router's URIError surfacing as a 500. Only a `%` can make decoding fail, so a
 * path without one is not decoded at all.
 */
function refuseMalformedPath(req: Request): void {
  const path = fullPath(req);
  if (!path.includes('%')) return;
  try {
    decodeURIComponent(path);
  } catch {
    throw new DomainError(
      'invalid_path',
      'The path has malformed percent-encoding (each % must start a valid UTF-8 escape such as %20).',
    );
  }
}

/**
 * The path as the client sent it, without the query (query strings can carry cursors and are not
 * worth the noise). Not `req.path`: inside a mounted router that is relative (`/openapi.json`).
 */
export function fullPath(req: Request): string {
  const q = req.originalUrl.indexOf('?');
  return q < 0 ? req.originalUrl : req.originalUrl.slice(0, q);
}
