import http from 'node:http';
import https from 'node:https';
import type { OutboundAllow } from '../domain/address-policy.js';
import { classifyNetworkError, OutboundError } from './outbound-error.js';
import { OutboundGuard, type Resolver } from './outbound-guard.js';

/**
 * The HTTP client of every delivery and connection test: node:http/https over the guarded agents
 * of outbound-guard.ts, never following a redirect, with a total time-out, a connect time-out and
 * a cap on how much of the answer is read. Failures are OutboundError (kind, retryable,
 * ambiguous); any answer that is not a redirect — 4xx and 5xx included — is returned as data, for
 * the caller's platform-specific reading.
 *
 * `trustedBaseUrls` are the operator's platform API bases from configuration (SLACK_API_URL,
 * TELEGRAM_API_URL: the operator's own settings, trusted). URLs under them skip the address and https rules
 * — the operator chose them, and tests point them at loopback — but keep every other rule here
 * (no redirects, time-outs, the answer cap). Everything else a user supplied is guarded.
 */

export interface OutboundRequest {
  method: string;
  url: string;
  headers?: Record<string, string>;
  /** Sent as given (JSON callers stringify); Content-Length is always set, never chunked. */
  body?: string | Buffer;
  /** Total budget from start to the end of the answer (default 10 s). */
  timeoutMs?: number;
}

export interface OutboundResponse {
  status: number;
  /** Lower-case names; repeated headers joined with ", ". */
  headers: Record<string, string>;
  /** The answer as UTF-8 text, at most `maxResponseBytes` of it. */
  body: string;
  /** True when the answer was longer than the cap and was cut (the status is still real). */
  truncated: boolean;
  latencyMs: number;
}

export interface OutboundHttp {
  readonly guard: OutboundGuard;
  request(req: OutboundRequest): Promise<OutboundResponse>;
}

export interface OutboundHttpOptions {
  resolver?: Resolver;
  defaultTimeoutMs?: number;
  /** Budget to open the TCP connection (default 5 s, never more than the total). */
  connectTimeoutMs?: number;
  /** Bytes of an answer kept (default 1 MiB); the rest is not read. */
  maxResponseBytes?: number;
  /** Extra CA certificates to trust (PEM), e.g. a private CA behind an allow-listed host. */
  ca?: string | string[];
  userAgent?: string;
  /** Operator-configured API bases (e.g. SLACK_API_URL) whose URLs are not guarded; see above. */
  trustedBaseUrls?: string[];
  /** Monotonic clock for latencies (injectable for tests). */
  now?: () => number;
}

const MIB = 1024 * 1024;

function flattenHeaders(h: http.IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) if (v !== undefined) out[k] = Array.isArray(v) ? v.join(', ') : v;
  return out;
}

/** True when `url` has the origin of `base` and a path under base's path. */
function isUnder(url: URL, base: URL): boolean {
  if (url.origin !== base.origin) return false;
  const prefix = base.pathname.endsWith('/') ? base.pathname : `${base.pathname}/`;
  return url.pathname === base.pathname || url.pathname.startsWith(prefix);
}

export function createOutboundHttp(allow: OutboundAllow, opts: OutboundHttpOptions = {}): OutboundHttp {
  const guard = new OutboundGuard(allow, { resolver: opts.resolver });
  const maxBytes = opts.maxResponseBytes ?? MIB;
  const now = opts.now ?? (() => performance.now());
  const userAgent = opts.userAgent ?? 'Herald';
  const trusted = (opts.trustedBaseUrls ?? []).map((u) => new URL(u));
  const plainAgents = { http: new http.Agent({ keepAlive: false }), https: new https.Agent({ keepAlive: false }) };
  // With extra CAs the guarded agents are still the ones used: `ca` is a per-request TLS option.
  const ca = opts.ca;

  function request(r: OutboundRequest): Promise<OutboundResponse> {
    const started = now();
    const elapsed = () => Math.round(now() - started);
    let url: URL;
    let guarded = true;
    try {
      url = new URL(r.url);
      guarded = !trusted.some((base) => isUnder(url, base));
      if (guarded) url = guard.checkUrl(url);
    } catch (e) {
      return Promise.reject(e instanceof OutboundError ? e : new OutboundError('invalid_url', 'the destination is not a valid URL'));
    }
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const timeoutMs = r.timeoutMs ?? opts.defaultTimeoutMs ?? 10_000;
    const connectTimeoutMs = Math.min(opts.connectTimeoutMs ?? 5_000, timeoutMs);
    const body = r.body === undefined ? undefined : Buffer.isBuffer(r.body) ? r.body : Buffer.from(r.body, 'utf8');
    const headers: Record<string, string> = { 'user-agent': userAgent, ...r.headers };
    if (body !== undefined) headers['content-length'] = String(body.length);

    return new Promise<OutboundResponse>((resolve, reject) => {
      const progress = { connected: false, sent: false };
      let settled = false;
      const timers: NodeJS.Timeout[] = [];
      const finish = (fn: () => void) => {
        if (settled) return;
        settled = true;
        for (const t of timers) clearTimeout(t);
        fn();
      };
      const fail = (err: OutboundError) => {
        err.latencyMs ??= elapsed();
        finish(() => reject(err));
        req.destroy();
      };

      const isHttps = url.protocol === 'https:';
      const options: https.RequestOptions = {
        method: r.method,
        hostname: host,
        port: url.port === '' ? undefined : Number(url.port),
        path: `${url.pathname}${url.search}`,
        headers,
        agent: guarded ? (isHttps ? guard.httpsAgent : guard.httpAgent) : isHttps ? plainAgents.https : plainAgents.http,
        ...(isHttps && ca !== undefined ? { ca } : {}),
      };
      const req = (isHttps ? https : http).request(options);

      timers.push(
        setTimeout(() => {
          if (!progress.connected) fail(new OutboundError('connect_timeout', `${host} did not accept a connection within ${connectTimeoutMs} ms`));
        }, connectTimeoutMs),
        setTimeout(() => {
          fail(
            progress.connected
              ? new OutboundError('timeout', `${host} did not answer within ${timeoutMs} ms`, { sent: progress.sent })
              : new OutboundError('connect_timeout', `${host} did not accept a connection within ${timeoutMs} ms`),
          );
        }, timeoutMs),
      );

      req.on('socket', (socket) => {
        // A TLS socket emits 'connect' for the TCP part too: "connected" means TCP, before TLS.
        socket.once('connect', () => {
          progress.connected = true;
        });
      });
      req.on('finish', () => {
        progress.sent = true;
      });
      req.on('error', (e) => fail(classifyNetworkError(e, host, { ...progress, latencyMs: elapsed() })));

      req.on('response', (res) => {
        const status = res.statusCode ?? 0;
        const resHeaders = flattenHeaders(res.headers);
        if (status >= 300 && status < 400) {
          res.destroy();
          fail(
            new OutboundError('redirect', `${host} answered ${status} (a redirect); redirects are never followed`, {
              httpStatus: status,
              location: resHeaders.location ?? null,
            }),
          );
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        const done = (truncated: boolean) =>
          finish(() => resolve({ status, headers: resHeaders, body: Buffer.concat(chunks).toString('utf8'), truncated, latencyMs: elapsed() }));
        res.on('data', (c: Buffer) => {
          if (settled) return;
          const room = maxBytes - size;
          if (c.length > room) {
            chunks.push(c.subarray(0, room));
            size = maxBytes;
            done(true);
            res.destroy(); // stop reading: the rest is not worth the memory
            req.destroy();
            return;
          }
          chunks.push(c);
          size += c.length;
        });
        res.on('end', () => done(false));
        res.on('error', (e) => fail(classifyNetworkError(e, host, { ...progress, latencyMs: elapsed() })));
        res.on('aborted', () => fail(new OutboundError('reset', `${host} closed the connection mid-answer`, { sent: true, httpStatus: status })));
      });

      req.end(body);
    });
  }

  return { guard, request };
}
