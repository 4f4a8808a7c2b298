/**
 * Why an outbound request failed, as data the delivery engine can act on without parsing
 * messages. Two questions matter for a retry policy and are answered on every error:
 *
 * - `retryable`: could the same request succeed later? (policy refusals and redirects: never)
 * - `ambiguous`: may the destination have received the request? True only when the whole request
 *   had been handed to the socket before the failure (a reset or time-out while waiting for the
 *   answer); a retry after an ambiguous failure is a possible duplicate (docs/explanation/delivery-semantics.md).
 *
 * Messages name the host at most, never the URL: webhook URLs carry their secret in the path.
 */
export type OutboundErrorKind =
  /** The URL is not an absolute http(s) URL. Permanent. */
  | 'invalid_url'
  /** `http:` to a host the allow list does not name. Permanent, nothing was sent. */
  | 'https_required'
  /** The guard refused the resolved (or literal) address. Permanent, nothing was sent. */
  | 'blocked_by_policy'
  /** The destination answered 3xx; redirects are never followed. Permanent. */
  | 'redirect'
  /** The name did not resolve (NXDOMAIN, SERVFAIL, resolver time-out). Nothing was sent. */
  | 'dns_failure'
  /** The TCP connection was refused. Nothing was sent. */
  | 'connection_refused'
  /** No TCP connection within the connect time-out. Nothing was sent. */
  | 'connect_timeout'
  /** No route to the network or host. Nothing was sent. */
  | 'unreachable'
  /** The TLS handshake failed (certificate, protocol). Nothing was sent. */
  | 'tls_error'
  /** The connection was reset or closed before a complete answer. Ambiguous once sent. */
  | 'reset'
  /** The total time-out ran out after connecting. Ambiguous once sent. */
  | 'timeout'
  /** Any other socket-level failure. Ambiguous once sent. */
  | 'network_error';

const PERMANENT: ReadonlySet<OutboundErrorKind> = new Set([
  'invalid_url',
  'https_required',
  'blocked_by_policy',
  'redirect',
]);

export interface OutboundErrorDetails {
  /** Whether the whole request had been written when it failed (decides `ambiguous`). */
  sent?: boolean;
  httpStatus?: number | null;
  /** The Location of a refused redirect. */
  location?: string | null;
  latencyMs?: number | null;
  cause?: unknown;
}

export class OutboundError extends Error {
  readonly kind: OutboundErrorKind;
  readonly retryable: boolean;
  readonly ambiguous: boolean;
  readonly httpStatus: number | null;
  readonly location: string | null;
  latencyMs: number | null;

  constructor(kind: OutboundErrorKind, message: string, details: OutboundErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'OutboundError';
    this.kind = kind;
    this.retryable = !PERMANENT.has(kind);
    // A refusal or an answered redirect is never ambiguous: we know what happened.
    this.ambiguous = this.retryable && details.sent === true;
    this.httpStatus = details.httpStatus ?? null;
    this.location = details.location ?? null;
    this.latencyMs = details.latencyMs ?? null;
  }
}

const DNS_CODES = new Set([
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'EAI_NODATA',
  'EAI_NONAME',
  'ENODATA',
  'ESERVFAIL',
  'ENONAME',
  'ETIMEOUT',
]);
const UNREACHABLE_CODES = new Set(['ENETUNREACH', 'EHOSTUNREACH', 'EHOSTDOWN', 'ENETDOWN', 'EADDRNOTAVAIL']);
const RESET_CODES = new Set([
  'ECONNRESET',
  'EPIPE',
  'ECONNABORTED',
  'ERR_STREAM_PREMATURE_CLOSE',
  'HPE_INVALID_EOF_STATE',
]);
const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH|ERR_OSSL_)/;

/** The `code` of a Node error; for the AggregateError of a multi-address connect, the first inner one. */
export function errorCode(err: unknown): string | undefined {
  if (err === null || typeof err !== 'object') return undefined;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') return code;
  const inner = (err as { errors?: unknown }).errors;
  return Array.isArray(inner) && inner.length > 0 ? errorCode(inner[0]) : undefined;
}

/**
 * Turns a socket/DNS/TLS error into an OutboundError. `connected` and `sent` say how far the
 * request got, which decides between "nothing left the machine" and "ambiguous".
 */
export function classifyNetworkError(
  err: unknown,
  host: string,
  progress: { connected: boolean; sent: boolean; latencyMs: number },
): OutboundError {
  if (err instanceof OutboundError) return err;
  const code = errorCode(err) ?? '';
  const base = { cause: err, latencyMs: progress.latencyMs };
  if (DNS_CODES.has(code)) return new OutboundError('dns_failure', `${host} did not resolve (${code})`, base);
  if (code === 'ECONNREFUSED') return new OutboundError('connection_refused', `${host} refused the connection`, base);
  if (code === 'ETIMEDOUT' && !progress.connected)
    return new OutboundError('connect_timeout', `${host} did not accept a connection in time`, base);
  if (UNREACHABLE_CODES.has(code)) return new OutboundError('unreachable', `${host} is unreachable (${code})`, base);
  if (TLS_CODE.test(code)) return new OutboundError('tls_error', `TLS with ${host} failed (${code})`, base);
  const sent = progress.sent;
  if (RESET_CODES.has(code))
    return new OutboundError(
      'reset',
      `${host} closed the connection ${sent ? 'before answering' : 'while the request was being sent'}`,
      { ...base, sent },
    );
  return new OutboundError('network_error', `request to ${host} failed${code ? ` (${code})` : ''}`, { ...base, sent });
}
