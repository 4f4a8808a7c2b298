import { classifyHttpStatus, disablesConnection, MAX_RETRY_AFTER_MS } from '../../domain/execution/delivery-policy.js';
import type {
  FailureCause,
  OutboundHttp,
  OutboundRequest,
  OutboundResponse,
  SendResult,
} from '../../contracts/channel.js';
import { OutboundError, type OutboundErrorKind } from '../../delivery/outbound/error.js';

/**
 * The one mapping from "what the platform (or the network) did" to a SendResult, shared by every
 * sender: 2xx delivered; 408/425/429/5xx retryable, honouring Retry-After; 3xx and other 4xx
 * permanent; 404/410 on a webhook URL permanent AND disabling the connection. Platform modules
 * only read their own answer format (Slack's `ok:false`, Telegram's `parameters.retry_after`) and
 * hand the pieces to `fromHttpStatus`.
 *
 * Error strings name a host at most — never a URL (webhook URLs carry their secret) — and carry
 * the platform's own short message only where the platform is known not to echo the request.
 */

/** Seconds (integer or decimal) or an HTTP date → milliseconds from now; null when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | null {
  if (value === undefined) return null;
  const v = value.trim();
  if (/^\d+(?:\.\d+)?$/.test(v)) return Math.ceil(Number(v) * 1000);
  const at = Date.parse(v);
  if (Number.isNaN(at)) return null;
  return Math.max(0, at - nowMs);
}

/** A platform's `retry_after` in seconds (a number in its JSON body) → milliseconds. */
export function secondsToMs(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? Math.ceil(value * 1000) : null;
}

export interface HttpReading {
  /**
   * The URL is the destination's address (an incoming webhook): a 404/410 there means it is
   * gone and the connection is disabled. Platform APIs (Slack bot mode, Telegram) are not.
   */
  urlAddressed: boolean;
  /** Who answered, for messages (a host or a platform name, never a URL). */
  who: string;
  /** The platform's own error code (`channel_not_found`, `10015`, `RESOURCE_EXHAUSTED`). */
  providerCode?: string | null;
  /** The platform's short error message, if it is safe to repeat. */
  detail?: string | null;
  /** A retry delay the platform gave in its body; wins over the Retry-After header. */
  retryAfterMs?: number | null;
  cause?: FailureCause;
  /** Wall clock (ms) for HTTP-date Retry-After values. */
  nowMs: number;
}

/** Maps an HTTP answer by its status (see the module comment). */
export function fromHttpStatus(res: OutboundResponse, r: HttpReading): SendResult {
  const status = res.status;
  const providerCode = r.providerCode ?? null;
  const what = `${r.who} answered ${status}${r.detail ? `: ${clip(r.detail)}` : providerCode ? `: ${providerCode}` : ''}`;
  switch (classifyHttpStatus(status)) {
    case 'delivered':
      return { outcome: 'delivered', httpStatus: status, providerCode, latencyMs: res.latencyMs };
    case 'retryable': {
      const retryAfterMs = r.retryAfterMs ?? parseRetryAfter(res.headers['retry-after'], r.nowMs);
      const cause = r.cause ?? (status === 429 ? 'rate_limited' : undefined);
      if (retryAfterMs !== null && retryAfterMs > MAX_RETRY_AFTER_MS) {
        return permanent(
          status,
          providerCode,
          res.latencyMs,
          `${what} (asked to wait ${Math.round(retryAfterMs / 1000)} s, longer than Herald retries)`,
          null,
          cause,
        );
      }
      return withCause(
        {
          outcome: 'retryable',
          httpStatus: status,
          providerCode,
          latencyMs: res.latencyMs,
          retryAfterMs,
          error: what,
          // A gateway time-out means a server behind it may have done the work anyway.
          ambiguous: status === 504,
        },
        cause,
      );
    }
    case 'permanent': {
      const gone = disablesConnection(status, r.urlAddressed);
      const disable = gone ? `the webhook URL no longer exists (${what})` : null;
      const cause =
        r.cause ?? (gone || status === 404 ? 'not_found' : status === 401 || status === 403 ? 'auth' : undefined);
      return permanent(status, providerCode, res.latencyMs, what, disable, cause);
    }
  }
}

const POLICY_KINDS: ReadonlySet<OutboundErrorKind> = new Set(['blocked_by_policy', 'https_required']);

/** Maps a failed request (guard refusal, redirect, DNS, socket, time-out). */
export function fromOutboundError(err: OutboundError): SendResult {
  if (!err.retryable) {
    const cause = POLICY_KINDS.has(err.kind) ? 'policy' : undefined;
    const error = err.kind === 'redirect' ? `${err.message} (update the URL to where it now points)` : err.message;
    return permanent(err.httpStatus, null, err.latencyMs, error, null, cause);
  }
  return {
    outcome: 'retryable',
    httpStatus: err.httpStatus,
    providerCode: null,
    latencyMs: err.latencyMs,
    retryAfterMs: null,
    error: err.message,
    ambiguous: err.ambiguous,
  };
}

/** A failure decided before anything was sent (oversize payload, unusable config). */
export function refused(error: string): SendResult {
  return permanent(null, null, null, error, null);
}

export function permanent(
  httpStatus: number | null,
  providerCode: string | null,
  latencyMs: number | null,
  error: string,
  disable: string | null,
  cause?: FailureCause,
): SendResult {
  return withCause({ outcome: 'permanent', httpStatus, providerCode, latencyMs, error, disable }, cause);
}

export function retryable(
  httpStatus: number | null,
  providerCode: string | null,
  latencyMs: number | null,
  error: string,
  opts: { retryAfterMs?: number | null; ambiguous?: boolean; cause?: FailureCause } = {},
): SendResult {
  return withCause(
    {
      outcome: 'retryable',
      httpStatus,
      providerCode,
      latencyMs,
      retryAfterMs: opts.retryAfterMs ?? null,
      error,
      ambiguous: opts.ambiguous ?? false,
    },
    opts.cause,
  );
}

/** The results a cause can be added to: the failures. */
type Failure = Exclude<SendResult, { outcome: 'delivered' }>;

function withCause(result: Failure, cause: FailureCause | undefined): Failure {
  return cause === undefined ? result : { ...result, cause };
}

/**
 * Sends one request and reads the answer with `read`; a failed request becomes its SendResult.
 * Anything that is not an OutboundError is a bug and is thrown (the delivery service records it).
 */
export async function exchange(
  http: OutboundHttp,
  req: OutboundRequest,
  read: (res: OutboundResponse) => SendResult,
): Promise<SendResult> {
  let res: OutboundResponse;
  try {
    res = await http.request(req);
  } catch (e) {
    if (e instanceof OutboundError) return fromOutboundError(e);
    throw e;
  }
  return read(res);
}

/** JSON of an answer, or null when it is not JSON (platform errors are sometimes HTML or text). */
export function jsonOf(res: OutboundResponse): Record<string, unknown> | null {
  try {
    const v = JSON.parse(res.body) as unknown;
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

export const stringOf = (v: unknown): string | null =>
  typeof v === 'string' && v !== '' ? v : typeof v === 'number' ? String(v) : null;

/**
 * `url` with query parameters set (its own, like Google Chat's key and token, kept). A URL that
 * does not parse is returned as is: the HTTP client then refuses it as `invalid_url`.
 */
export function withQuery(url: string, params: Record<string, string>): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return url;
  }
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return u.toString();
}

/** The host of a URL for messages ("the destination" when it does not parse). */
export function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return 'the destination';
  }
}

/** Platform messages are kept short in attempt records: one line, at most `max` characters. */
export function clip(s: string, max = 300): string {
  const one = s.replace(/\s+/g, ' ').trim();
  return one.length > max ? `${one.slice(0, max - 1)}…` : one;
}

/**
 * Replaces every secret value of the connection found in `text` (belt and braces: senders never
 * put one in a message, but a platform could echo one back).
 */
export function scrubSecrets(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (s.length >= 6) out = out.split(s).join('[secret]');
  return out;
}

/** The result with secrets scrubbed from its error string. */
export function scrubResult(result: SendResult, secrets: readonly string[]): SendResult {
  if (result.outcome === 'delivered') return result;
  const error = scrubSecrets(result.error, secrets);
  const disable =
    result.outcome === 'permanent' && result.disable !== null ? scrubSecrets(result.disable, secrets) : null;
  return result.outcome === 'permanent' ? { ...result, error, disable } : { ...result, error };
}
