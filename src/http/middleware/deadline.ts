import { ServerResponse } from 'node:http';
import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import { serviceUnavailable, UNAVAILABLE_RETRY_AFTER_S } from '../../domain/common/errors.js';
import { openDeadline, whenStalledAfter, withDeadline, type Deadline } from '../../domain/common/unavailable.js';
import { requestIdOf } from '../context.js';
import { toProblem } from './problem.js';

/**
 * How long a request's Redis calls may take in all, from its arrival, while Redis is not
 * answering. Every command a request sends races the deadline (src/store/deadline.ts), so a
 * paused or unreachable Redis is answered 503 once, at this bound, however many calls the request
 * makes. A Redis that is answering, however slowly the request progresses, is not cut off
 * (domain/common/unavailable.ts, REDIS_STALL_MS).
 */
export const REQUEST_REDIS_BUDGET_MS = 900;

/**
 * The latest an API request or /readyz is answered while Redis does not respond: a 503 is sent
 * at this point, if Redis is stalled, even when the request is waiting on something else (BullMQ,
 * whose connections are not bound to the deadline). With REQUEST_REDIS_BUDGET_MS it leaves 200 ms for the answer to reach a client
 * on a busy machine within the 2 s promised (docs/operations/failover.md).
 */
export const REQUEST_ANSWER_BOUND_MS = 1200;

const ANSWERED = Symbol('answeredByDeadline');
const OPEN = Symbol('openDeadline');
type DeadlineLocals = { [ANSWERED]?: boolean; [OPEN]?: OpenDeadline };

/**
 * Opens the request's deadline, which every Redis call under it observes. When `answer` says so
 * for the request's path (the API and /readyz: not Slack's endpoint, whose answer is its own
 * friendly line), a request still unanswered at REQUEST_ANSWER_BOUND_MS while Redis is stalled gets 503
 * service_unavailable problem+json with Retry-After, and whatever the request does afterwards is
 * dropped (see deadlineAftermath).
 */
export function requestDeadline(answer: (path: string) => boolean): RequestHandler {
  return (req, res, next) => {
    const deadline = openDeadline(REQUEST_REDIS_BUDGET_MS);
    const open: OpenDeadline = { deadline, cancelBound: undefined };
    if (answer(req.path))
      open.cancelBound = whenStalledAfter(REQUEST_ANSWER_BOUND_MS, () => answerUnavailable(req, res));
    (res.locals as DeadlineLocals)[OPEN] = open;
    // Listeners at module level, which find their request through `this`: no closure per request
    // (see StallWatch in domain/common/unavailable.ts for why that matters here). `on`, not
    // `once`, which wraps each listener in a closure of its own; closing twice does nothing more.
    res.on('finish', closeDeadline);
    res.on('close', closeDeadline);
    withDeadline(deadline, next);
  };
}

/** The deadline a request opened, and the bound's cancel when it has one. */
interface OpenDeadline {
  deadline: Deadline;
  cancelBound: (() => void) | undefined;
}

/** The request is answered (or its connection closed): its deadline and bound stop. */
function closeDeadline(this: Response): void {
  const open = (this.locals as DeadlineLocals)[OPEN];
  if (open === undefined) return;
  open.deadline.end();
  open.cancelBound?.();
}

/** At the bound, with Redis stalled: 503 problem+json, unless the request was answered already. */
function answerUnavailable(req: Request, res: Response): void {
  if (res.headersSent || res.writableEnded) return;
  (res.locals as DeadlineLocals)[ANSWERED] = true;
  const err = serviceUnavailable();
  const body = JSON.stringify(toProblem(err, requestIdOf(req, res)));
  // Node's own methods, not Express' send: a route's wrappers of res.send (the idempotency
  // store's capture) would first wait on the very Redis that is not answering.
  ServerResponse.prototype.writeHead.call(res, 503, {
    'Content-Type': 'application/problem+json',
    'Content-Length': Buffer.byteLength(body),
    'Retry-After': String(err.meta.retryAfter ?? UNAVAILABLE_RETRY_AFTER_S),
  });
  ServerResponse.prototype.end.call(res, body, 'utf8');
  freeze(res);
}

/**
 * After the bound answered a request, the route may still finish and try to answer: those calls
 * must not reach the socket (the client has its 503, and the connection may be serving its next
 * request), nor throw "headers already sent" into Express, whose last resort destroys the socket.
 */
function freeze(res: Response): void {
  const r = res as unknown as Record<string, unknown>;
  const self = (): Response => res;
  for (const name of ['status', 'set', 'setHeader', 'type', 'location', 'append', 'cookie']) r[name] = self;
  for (const name of ['send', 'json', 'end', 'write', 'writeHead', 'sendStatus', 'redirect']) r[name] = self;
}

/**
 * Registered just before the problem handler: an error from a request the bound already answered
 * (typically the Redis call that gave up) is dropped, as its answer is.
 */
export function deadlineAftermath(): ErrorRequestHandler {
  return (err: unknown, _req, res, next) => {
    if ((res.locals as DeadlineLocals)[ANSWERED] === true) return;
    next(err);
  };
}
