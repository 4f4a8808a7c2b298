/**
 * Domain errors carry a stable snake_case code; the edges own the mapping to HTTP statuses
 * (http/middleware/problem.ts) and to Slack messages (slack/errors.ts). Nothing here knows about HTTP.
 */

export const ERROR_CODES = [
  'validation_failed',
  'invalid_json',
  'invalid_path',
  'bad_request',
  'request_headers_too_large',
  'invalid_cursor',
  'unsupported_media_type',
  'payload_too_large',
  'not_found',
  'method_not_allowed',
  'unauthenticated',
  'insufficient_scope',
  'incident_closed',
  'use_close_endpoint',
  'invalid_transition',
  'unknown_template',
  'unknown_connection',
  'undeclared_variable',
  'missing_variables',
  'no_connections',
  'template_name_taken',
  'template_in_use',
  'audience_key_taken',
  'audience_in_use',
  'component_name_taken',
  'component_in_use',
  'unknown_component',
  'status_page_exists',
  'status_page_test_refused',
  'no_approvers',
  'invalid_approver',
  'secret_required',
  'destination_not_allowed',
  'legacy_webhook_not_supported',
  'idempotency_key_reused',
  'idempotency_key_in_use',
  'precondition_failed',
  'conflict',
  'not_correctable',
  'nothing_delivered',
  'unsupported_update_mode',
  'unknown_audience',
  'audiences_and_connection_ids',
  'not_pending',
  'four_eyes',
  'not_an_approver',
  'rate_limited',
  'not_implemented',
  'internal_error',
  'service_unavailable',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/** One problem with one input field: `field` is a dotted path into the request body. */
export interface FieldError {
  field: string;
  code: string;
  message: string;
}

export class DomainError extends Error {
  readonly code: ErrorCode;
  readonly errors: FieldError[];
  /** Extra, non-sensitive facts for the edge (e.g. the missing scope, Retry-After seconds). */
  readonly meta: Record<string, string | number>;

  constructor(code: ErrorCode, message: string, errors: FieldError[] = [], meta: Record<string, string | number> = {}) {
    super(message);
    this.name = 'DomainError';
    this.code = code;
    this.errors = errors;
    this.meta = meta;
  }
}

export const isDomainError = (e: unknown): e is DomainError => e instanceof DomainError;

/** Shorthand for the common "one field is wrong" case. */
export function fieldError(code: ErrorCode, field: string, message: string, fieldCode: string = code): DomainError {
  return new DomainError(code, message, [{ field, code: fieldCode, message }]);
}

export function notFound(what: string, id: string): DomainError {
  return new DomainError('not_found', `${what} ${id} was not found.`);
}

/** A PATCH with no field in it (docs/api.md). */
export function emptyPatch(): DomainError {
  return new DomainError('validation_failed', 'The patch is empty: send at least one field.', [
    { field: '', code: 'empty_patch', message: 'Send at least one field to change.' },
  ]);
}

/** A client's If-Match that names another revision than the record's: 412. */
export function checkRevision(what: string, current: number, ifMatch: number | null): void {
  if (ifMatch !== null && ifMatch !== current) {
    throw new DomainError(
      'precondition_failed',
      `The ${what} changed since you read it (If-Match does not match its ETag).`,
    );
  }
}

/** A record that kept changing under every attempt of the optimistic-write loop: 409. */
export function keptChanging(what: string): DomainError {
  return new DomainError('conflict', `The ${what} kept changing concurrently; try again.`);
}

/** Seconds a client should wait before retrying when Herald's database is unreachable. */
export const UNAVAILABLE_RETRY_AFTER_S = 2;

/** The database (Redis) cannot be used right now: 503 with Retry-After, never a 500. */
export function serviceUnavailable(): DomainError {
  // Not "nothing changed": a write sent just before Redis paused may still apply when it resumes.
  // An Idempotency-Key makes the retry safe either way (the answer is stored with the effect).
  return new DomainError(
    'service_unavailable',
    "Herald can't reach its database right now. Retry shortly, with the same Idempotency-Key for a POST.",
    [],
    {
      retryAfter: UNAVAILABLE_RETRY_AFTER_S,
    },
  );
}
