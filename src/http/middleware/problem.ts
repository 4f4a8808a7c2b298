import type { ErrorRequestHandler, Request, Response } from 'express';
import { DomainError, serviceUnavailable, type ErrorCode, type FieldError } from '../../domain/common/errors.js';
import { isRedisUnavailable } from '../../domain/common/unavailable.js';
import { requestIdOf } from '../context.js';

/** The one table from domain error code to HTTP status, so every edge answers the same error the same way. */
export const STATUS_BY_CODE: Record<ErrorCode, number> = {
  validation_failed: 422,
  invalid_json: 400,
  invalid_path: 400,
  bad_request: 400,
  request_headers_too_large: 431,
  invalid_cursor: 400,
  unsupported_media_type: 415,
  payload_too_large: 413,
  not_found: 404,
  method_not_allowed: 405,
  unauthenticated: 401,
  insufficient_scope: 403,
  incident_closed: 409,
  use_close_endpoint: 422,
  invalid_transition: 422,
  unknown_template: 422,
  unknown_connection: 422,
  undeclared_variable: 422,
  missing_variables: 422,
  no_connections: 422,
  template_name_taken: 409,
  template_in_use: 409,
  audience_key_taken: 409,
  audience_in_use: 409,
  component_name_taken: 409,
  component_in_use: 409,
  unknown_component: 422,
  status_page_exists: 409,
  status_page_test_refused: 422,
  no_approvers: 422,
  invalid_approver: 422,
  secret_required: 422,
  destination_not_allowed: 422,
  legacy_webhook_not_supported: 422,
  idempotency_key_reused: 422,
  idempotency_key_in_use: 409,
  precondition_failed: 412,
  conflict: 409,
  not_correctable: 409,
  nothing_delivered: 409,
  unsupported_update_mode: 422,
  unknown_audience: 422,
  audiences_and_connection_ids: 422,
  not_pending: 409,
  four_eyes: 403,
  not_an_approver: 403,
  rate_limited: 429,
  not_implemented: 501,
  internal_error: 500,
  service_unavailable: 503,
};

const TITLES: Partial<Record<ErrorCode, string>> = {
  validation_failed: 'Invalid request',
  invalid_json: 'Malformed JSON',
  invalid_path: 'Malformed path',
  not_found: 'Not found',
  unauthenticated: 'Unauthenticated',
  insufficient_scope: 'Insufficient scope',
  rate_limited: 'Too many requests',
  internal_error: 'Internal error',
  service_unavailable: 'Service unavailable',
};

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ErrorCode;
  request_id: string;
  errors: FieldError[];
}

export function toProblem(err: DomainError, requestId: string): Problem {
  return {
    type: `urn:herald:problem:${err.code}`,
    title: TITLES[err.code] ?? err.code.replace(/_/g, ' ').replace(/^./, (c) => c.toUpperCase()),
    status: STATUS_BY_CODE[err.code],
    detail: err.message,
    code: err.code,
    request_id: requestId,
    errors: err.errors,
  };
}

export function sendProblem(req: Request, res: Response, err: DomainError): void {
  const problem = toProblem(err, requestIdOf(req, res));
  if (err.code === 'unauthenticated') {
    res.setHeader(
      'WWW-Authenticate',
      err.meta.reason === 'missing' ? 'Bearer realm="herald"' : 'Bearer realm="herald", error="invalid_token"',
    );
  } else if (err.code === 'insufficient_scope') {
    res.setHeader(
      'WWW-Authenticate',
      `Bearer realm="herald", error="insufficient_scope", scope="${String(err.meta.scope)}"`,
    );
  } else if (
    (err.code === 'rate_limited' || err.code === 'service_unavailable' || err.code === 'idempotency_key_in_use') &&
    err.meta.retryAfter !== undefined
  ) {
    res.setHeader('Retry-After', String(err.meta.retryAfter));
  } else if (err.code === 'method_not_allowed' && err.meta.allow !== undefined) {
    res.setHeader('Allow', String(err.meta.allow));
  }
  res.status(problem.status).type('application/problem+json').send(JSON.stringify(problem));
}

/** Body-parser failures arrive as errors with a `type`; everything else unknown is a 500. */
/** The limit a body-parser refusal names, in KiB (its `limit`; 256 when it names none). */
function kib(err: object): number {
  const limit = 'limit' in err && typeof err.limit === 'number' ? err.limit : 256 * 1024;
  return Math.round(limit / 1024);
}

function fromParserError(err: unknown): DomainError | null {
  if (!err || typeof err !== 'object' || !('type' in err)) return null;
  switch (err.type) {
    case 'entity.parse.failed':
      return new DomainError('invalid_json', 'The body is not valid JSON.');
    case 'entity.too.large':
      return new DomainError('payload_too_large', `The body is larger than ${kib(err)} KiB.`);
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new DomainError('unsupported_media_type', 'Send the body as UTF-8 JSON.');
    case 'request.aborted':
      return new DomainError('invalid_json', 'The request body was cut off.');
    default:
      return null;
  }
}

/**
 * The one mapping of infrastructure failures to a problem: Redis (or BullMQ over it) unreachable,
 * paused or timing out is a 503 `service_unavailable` with Retry-After, never a 500.
 */
export function fromInfrastructureError(err: unknown): DomainError | null {
  return isRedisUnavailable(err) ? serviceUnavailable() : null;
}

/**
 * The last middleware: domain errors become problems; anything else is logged with its stack
 * and answered as a bare 500 — no stack or internal detail ever leaves the process.
 */
export function problemHandler(
  log: (err: unknown, req: Request) => void,
  unavailable: (err: unknown) => void = () => undefined,
): ErrorRequestHandler {
  return (err: unknown, req, res, next) => {
    if (res.headersSent) {
      next(err);
      return;
    }
    const infrastructure = err instanceof DomainError ? null : fromInfrastructureError(err);
    if (infrastructure) unavailable(err);
    const domain = err instanceof DomainError ? err : (fromParserError(err) ?? infrastructure);
    if (domain) {
      sendProblem(req, res, domain);
      return;
    }
    log(err, req);
    sendProblem(
      req,
      res,
      new DomainError('internal_error', 'Something went wrong on our side; the request id helps us find it.'),
    );
  };
}
