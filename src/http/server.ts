import { createHash, timingSafeEqual } from 'node:crypto';
import { STATUS_CODES, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import express, { type Express, type Request, type RequestHandler, type Router } from 'express';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { DomainError } from '../domain/common/errors.js';
import { requestIdOf } from './context.js';
import { problemHandler, toProblem } from './middleware/problem.js';
import { requestId } from './middleware/request-id.js';
import { httpMetrics } from './middleware/metrics.js';

export interface Readiness {
  redis: 'ok' | 'unreachable';
  persistence: 'aof' | 'rdb' | 'none' | 'unknown';
}

export interface ServerDeps {
  log: Logger;
  registry: Registry;
  metricsToken: string | undefined;
  readiness(): Promise<Readiness>;
  /** The /v1 router (its own express.json lives inside, never in front of Slack's receiver). */
  v1: Router;
  trustProxy: boolean;
}

/**
 * The Express app: probes, metrics and /v1. Slack's receiver is mounted on the same app by the
 * composition root, at /slack/events, before the final 404.
 */
export function createHttpApp(deps: ServerDeps): { app: Express; finish: () => void } {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', deps.trustProxy);
  app.use(requestId);
  app.use(accessLog(deps.log));
  app.use(httpMetrics(deps.registry));
  app.use(refuseMalformedPaths);

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (_req, res) => {
    const r = await deps.readiness();
    res.status(r.redis === 'ok' ? 200 : 503).json({ status: r.redis === 'ok' ? 'ready' : 'unavailable', ...r });
  });
  app.get('/metrics', async (req, res) => {
    if (deps.metricsToken !== undefined && !constantTimeEquals(req.get('Authorization') ?? '', `Bearer ${deps.metricsToken}`)) {
      res.setHeader('WWW-Authenticate', 'Bearer realm="herald-metrics"');
      res.status(401).type('text/plain').send('unauthorized\n');
      return;
    }
    res.type(deps.registry.contentType).send(await deps.registry.metrics());
  });
  app.use('/v1', deps.v1);

  /** Called once every other route (Slack) is mounted: the catch-all 404 and the error handler. */
  const finish = () => {
    app.use(() => {
      throw new DomainError('not_found', 'No such endpoint.');
    });
    // A paused Redis closes no connection (commands just time out), so the 503s themselves are
    // logged too, at most once per UNAVAILABLE_LOG_EVERY_MS.
    let lastUnavailableLog = 0;
    app.use(
      problemHandler(
        (err, req) => {
          deps.log.error({ err, request_id: requestIdOf(req, req.res!), method: req.method, path: fullPath(req) }, 'unhandled error');
        },
        (err) => {
          const now = Date.now();
          if (now - lastUnavailableLog < UNAVAILABLE_LOG_EVERY_MS) return;
          lastUnavailableLog = now;
          deps.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'answering 503 service_unavailable: Redis cannot be used');
        },
      ),
    );
  };
  return { app, finish };
}

const UNAVAILABLE_LOG_EVERY_MS = 10_000;

/**
 * A path whose percent-encoding does not decode (`/v1/incidents/inc_x%ZZ`, a lone `%`, bytes
 * that are not UTF-8) is the client's mistake: 400 `invalid_path` before anything else runs,
 * instead of the router's URIError surfacing as a 500.
 */
const refuseMalformedPaths: RequestHandler = (req, _res, next) => {
  try {
    decodeURIComponent(fullPath(req));
  } catch {
    throw new DomainError('invalid_path', 'The path has malformed percent-encoding (each % must start a valid UTF-8 escape such as %20).');
  }
  next();
};

/**
 * Requests Node's HTTP parser refuses before Express sees them (a request line that is not HTTP,
 * headers over Node's 16 KiB limit, a bad Content-Length) get a problem+json answer like every
 * other refusal, instead of Node's bare "400 Bad Request". Call once on the listening server.
 */
export function answerClientErrors(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // A reset or an already-answered socket has nobody left to read an answer.
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
    const problem = tooLarge
      ? toProblem(new DomainError('request_headers_too_large', 'The request headers are larger than the server accepts (16 KiB in all).'), 'none')
      : toProblem(new DomainError('bad_request', 'The request is not valid HTTP/1.1.'), 'none');
    const body = JSON.stringify(problem);
    socket.end(
      `HTTP/1.1 ${problem.status} ${STATUS_CODES[problem.status] ?? 'Bad Request'}\r\n` +
        `Content-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}

function constantTimeEquals(a: string, b: string): boolean {
  // timingSafeEqual throws on unequal lengths: compare fixed-size digests instead.
  const digest = (s: string) => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(a), digest(b));
}

/**
 * The path as the client sent it, without the query (query strings can carry cursors and are not
 * worth the noise). Not `req.path`: inside a mounted router that is relative (`/openapi.json`).
 */
function fullPath(req: Request): string {
  const q = req.originalUrl.indexOf('?');
  return q < 0 ? req.originalUrl : req.originalUrl.slice(0, q);
}

/**
 * One line per request. Its fields are fixed here and none can hold a secret (ids, a status, the
 * path without its query), so it skips the logger's path redaction: with Herald's wildcard paths
 * that costs 30–50 µs a line, a third of a core at a few thousand requests a second.
 */
function accessLog(parent: Logger): RequestHandler {
  const log = parent.child({}, { redact: { paths: [], censor: '[redacted]' } });
  return (req, res, next) => {
    const start = process.hrtime.bigint();
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - start) / 1e6;
      log.info({ request_id: requestIdOf(req, res), method: req.method, path: fullPath(req), status: res.statusCode, ms: Math.round(ms) }, 'request');
    });
    next();
  };
}
