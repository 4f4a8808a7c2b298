import { createHash, timingSafeEqual } from 'node:crypto';
import { STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import express, { type Express, type RequestHandler, type Router } from 'express';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { DomainError } from '../domain/common/errors.js';
import { requestIdOf } from './context.js';
import { deadlineAftermath, requestDeadline } from './middleware/deadline.js';
import { edge, fullPath } from './middleware/edge.js';
import { problemHandler, toProblem, type Problem } from './middleware/problem.js';

export interface Readiness {
  redis: 'ok' | 'unreachable';
  persistence: 'aof' | 'rdb' | 'none' | 'unknown';
}

export interface ServerDeps {
  log: Logger;
  registry: Registry;
  metricsToken: string | undefined;
  readiness(): Promise<Readiness>;
  /**
   * Mounts the API (every path under /v1) onto the app, in `finish()`: after what the caller
   * mounted in between (Slack's endpoint). Bodies are read by each route's handler, never by a
   * parser in front of Slack's receiver.
   */
  api: (app: Router) => void;
  trustProxy: boolean;
  /**
   * The public status page (src/status/): served at /status, and at / of `host` when set, where
   * nothing else is served. Mounted ahead of everything but the edge: no deadline, no body
   * parser, no auth, and an API request passes it with one path test.
   */
  statusPage?: {
    handler(base: string): RequestHandler;
    host: string | undefined;
    /**
     * The page's subscriptions (subscribe, confirm, manage, unsubscribe: src/status/subscriptions/),
     * mounted at `<page>/subscriptions` ahead of the page; absent when subscriptions are off.
     */
    subscriptions?: RequestHandler;
  };
}

/**
 * The Express app: probes, metrics and /v1. Slack's endpoint is mounted on the same app by the
 * composition root between this and `finish()`: ahead of the API's routes, since Express tries
 * every route in order and a Slack request (an ack has 3 s, and a busy process needs them) would
 * otherwise be tested against each of the API's ~45 first, about a tenth of an ack's CPU. An API
 * request passes the one Slack route with a single path test.
 */
export function createHttpApp(deps: ServerDeps): { app: Express; finish: () => void } {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', deps.trustProxy);
  // Request id, access log, metrics and the malformed-path 400, in one layer (middleware/edge.ts).
  app.use(edge(deps.log, deps.registry));
  if (deps.statusPage) mountStatusPage(app, deps.statusPage);
  // One deadline per request over all its Redis calls; the API and /readyz answer 503 by it.
  app.use(requestDeadline((path) => path.startsWith('/v1/') || path === '/readyz'));

  /** Called once every other route (Slack) is mounted: the API, the probes, the catch-all 404 and the error handler. */
  const finish = () => {
    // The API before the probes: their paths are disjoint, so the order only spares every API
    // request the probes' path tests.
    deps.api(app);
    mountProbes(app, deps);
    app.use(() => {
      throw new DomainError('not_found', 'No such endpoint.');
    });
    // A paused Redis closes no connection (commands just time out), so the 503s themselves are
    // logged too, at most once per UNAVAILABLE_LOG_EVERY_MS.
    let lastUnavailableLog = 0;
    app.use(deadlineAftermath());
    app.use(
      problemHandler(
        (err, req) => {
          deps.log.error(
            { err, request_id: requestIdOf(req, req.res!), method: req.method, path: fullPath(req) },
            'unhandled error',
          );
        },
        (err) => {
          const now = Date.now();
          if (now - lastUnavailableLog < UNAVAILABLE_LOG_EVERY_MS) return;
          lastUnavailableLog = now;
          deps.log.warn(
            { err: err instanceof Error ? err.message : String(err) },
            'answering 503 service_unavailable: Redis cannot be used',
          );
        },
      ),
    );
  };
  return { app, finish };
}

/**
 * With a host of its own, the page is served there instead of under /status: that host answers
 * every request with the page (its own 404 page included), so an API, Slack or metrics path is
 * never passed on, and the API's host serves no public copy at another address. Without one, the
 * page is at /status.
 */
function mountStatusPage(app: Express, page: NonNullable<ServerDeps['statusPage']>): void {
  const subscriptions = page.subscriptions;
  if (page.host === undefined) {
    if (subscriptions) app.use('/status/subscriptions', subscriptions);
    app.use('/status', page.handler('/status'));
    return;
  }
  const host = page.host;
  const own = page.handler('');
  const ownSubscriptions = subscriptions ? express.Router().use('/subscriptions', subscriptions) : null;
  app.use((req, res, next) => {
    if (req.hostname.toLowerCase() !== host) return next();
    // The page's own 404 answers whatever the subscriptions do not.
    if (ownSubscriptions) ownSubscriptions(req, res, () => own(req, res, next));
    else own(req, res, next);
  });
}

/** /healthz, /readyz and /metrics. */
function mountProbes(app: Express, deps: ServerDeps): void {
  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (_req, res) => {
    const r = await deps.readiness();
    res.status(r.redis === 'ok' ? 200 : 503).json({ status: r.redis === 'ok' ? 'ready' : 'unavailable', ...r });
  });
  app.get('/metrics', async (req, res) => {
    if (
      deps.metricsToken !== undefined &&
      !constantTimeEquals(req.get('Authorization') ?? '', `Bearer ${deps.metricsToken}`)
    ) {
      res.setHeader('WWW-Authenticate', 'Bearer realm="herald-metrics"');
      res.status(401).type('text/plain').send('unauthorized\n');
      return;
    }
    res.type(deps.registry.contentType).send(await deps.registry.metrics());
  });
}

const UNAVAILABLE_LOG_EVERY_MS = 10_000;

/**
 * Every answer Node's HTTP layer would give by itself, as problem+json like every other refusal
 * instead of Node's bare text: a request line that is not HTTP (400), headers over Node's 16 KiB
 * limit (431), a request that did not arrive in time (408) — the server's 'clientError' — and an
 * `Expect` other than `100-continue` (417, 'checkExpectation'). Bodies too large or of the wrong
 * type are the body reader's (middleware/body.ts: 413, 415). Call once on the listening server.
 */
export function answerClientErrors(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // A reset or an already-answered socket has nobody left to read an answer.
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const problem =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? toProblem(
            new DomainError(
              'request_headers_too_large',
              'The request headers are larger than the server accepts (16 KiB in all).',
            ),
            'none',
          )
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? ownProblem(408, 'request_timeout', 'The request did not arrive in time.')
          : toProblem(new DomainError('bad_request', 'The request is not valid HTTP/1.1.'), 'none');
    const body = JSON.stringify(problem);
    socket.end(
      `HTTP/1.1 ${problem.status} ${STATUS_CODES[problem.status] ?? 'Bad Request'}\r\n` +
        `Content-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
  // With a listener here Node no longer answers a bad Expect itself, and no 'request' follows.
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const expect = String(req.headers.expect ?? '').slice(0, 64);
    const body = JSON.stringify(
      ownProblem(
        417,
        'expectation_failed',
        `The server meets no expectation but "100-continue" (Expect: ${JSON.stringify(expect).slice(1, -1)}).`,
      ),
    );
    res.writeHead(417, {
      'Content-Type': 'application/problem+json',
      'Content-Length': Buffer.byteLength(body),
      Connection: 'close',
    });
    res.end(body);
  });
}

/**
 * A problem for an answer no domain error stands for (only Node's HTTP layer gives these), in
 * the shape of middleware/problem.ts's; no request id, as none was given before Express.
 */
function ownProblem(status: number, code: string, detail: string): Omit<Problem, 'code'> & { code: string } {
  return {
    type: `urn:herald:problem:${code}`,
    title: STATUS_CODES[status] ?? code,
    status,
    detail,
    code,
    request_id: 'none',
    errors: [],
  };
}

function constantTimeEquals(a: string, b: string): boolean {
  // timingSafeEqual throws on unequal lengths: compare fixed-size digests instead.
  const digest = (s: string) => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(a), digest(b));
}
