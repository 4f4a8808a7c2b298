import http from 'node:http';
import https from 'node:https';
import type { OutboundAllow } from '../../domain/connection/address-policy.js';
import { classifyNetworkError, OutboundError } from './error.js';
import { OutboundGuard, type Resolver } from './guard.js';
import type { OutboundHttp, OutboundRequest, OutboundResponse } from '../../contracts/channel.js';

/**
 * The HTTP client of every delivery and connection test: node:http/https over the guarded agents
 * of outbound/guard.ts, never following a redirect, with a total time-out, a connect time-out and
 * a cap on how much of the answer is read. Failures are OutboundError (kind, retryable,
 * ambiguous); any answer that is not a redirect — 4xx and 5xx included — is returned as data, for
 * the caller's platform-specific reading.
 *
 * `trustedBaseUrls` are the operator's platform API bases from configuration (SLACK_API_URL,
 * TELEGRAM_API_URL: the operator's own settings, trusted). URLs under them skip the address and https rules
 * — the operator chose them, and tests point them at loopback — but keep every other rule here
 * (no redirects, time-outs, the answer cap). Everything else a user supplied is guarded.
 */

/** The guarded client as the delivery machinery holds it: the senders' OutboundHttp, with its guard. */
export interface GuardedOutboundHttp extends OutboundHttp {
  /** Resolves and judges addresses: the SMTP client and the connection tester's pre-checks go through it. */
  readonly guard: OutboundGuard;
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

export function createOutboundHttp(allow: OutboundAllow, opts: OutboundHttpOptions = {}): GuardedOutboundHttp {
  const guard = new OutboundGuard(allow, { resolver: opts.resolver });
  const client: Client = {
    opts,
    guard,
    maxBytes: opts.maxResponseBytes ?? MIB,
    now: opts.now ?? (() => performance.now()),
    userAgent: opts.userAgent ?? 'Herald',
    trusted: (opts.trustedBaseUrls ?? []).map((u) => new URL(u)),
    plainAgents: { http: new http.Agent({ keepAlive: false }), https: new https.Agent({ keepAlive: false }) },
    // With extra CAs the guarded agents are still the ones used: `ca` is a per-request TLS option.
    ca: opts.ca,
  };
  return { guard, request: (r) => request(client, r) };
}

/** What every request of one client shares, settled once at creation. */
interface Client {
  opts: OutboundHttpOptions;
  guard: OutboundGuard;
  maxBytes: number;
  now: () => number;
  userAgent: string;
  trusted: URL[];
  plainAgents: { http: http.Agent; https: https.Agent };
  ca: string | string[] | undefined;
}

function request(c: Client, r: OutboundRequest): Promise<OutboundResponse> {
  const started = c.now();
  const destination = destinationOf(c, r.url);
  if (destination instanceof OutboundError) return Promise.reject(destination);
  return send(c, planOf(c, r, destination), () => Math.round(c.now() - started));
}

interface Destination {
  url: URL;
  /** False under a trusted base: the address and https rules are skipped, nothing else. */
  guarded: boolean;
}

/** The URL to ask, checked by the guard unless it is under a trusted base; a refusal is returned, not thrown. */
function destinationOf(c: Client, raw: string): Destination | OutboundError {
  try {
    const parsed = new URL(raw);
    const guarded = !c.trusted.some((base) => isUnder(parsed, base));
    return { url: guarded ? c.guard.checkUrl(parsed) : parsed, guarded };
  } catch (e) {
    return e instanceof OutboundError ? e : new OutboundError('invalid_url', 'the destination is not a valid URL');
  }
}

/** One request as node:http takes it, with its budgets; decided before anything is sent. */
interface Plan {
  host: string;
  timeoutMs: number;
  connectTimeoutMs: number;
  isHttps: boolean;
  options: https.RequestOptions;
  body: Buffer | undefined;
}

function planOf(c: Client, r: OutboundRequest, { url, guarded }: Destination): Plan {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const timeoutMs = r.timeoutMs ?? c.opts.defaultTimeoutMs ?? 10_000;
  const connectTimeoutMs = Math.min(c.opts.connectTimeoutMs ?? 5_000, timeoutMs);
  const body = r.body === undefined ? undefined : Buffer.isBuffer(r.body) ? r.body : Buffer.from(r.body, 'utf8');
  const headers: Record<string, string> = { 'user-agent': c.userAgent, ...r.headers };
  if (body !== undefined) headers['content-length'] = String(body.length);
  const isHttps = url.protocol === 'https:';
  const ca = c.ca;
  const options: https.RequestOptions = {
    method: r.method,
    hostname: host,
    port: url.port === '' ? undefined : Number(url.port),
    path: `${url.pathname}${url.search}`,
    headers,
    agent: guarded
      ? isHttps
        ? c.guard.httpsAgent
        : c.guard.httpAgent
      : isHttps
        ? c.plainAgents.https
        : c.plainAgents.http,
    ...(isHttps && ca !== undefined ? { ca } : {}),
  };
  return { host, timeoutMs, connectTimeoutMs, isHttps, options, body };
}

/**
 * One request in flight. Whichever comes first — the answer, a failure, a time-out — settles it;
 * everything after is ignored, and settling clears the timers. A class, and its callbacks
 * unnamed: every delivery makes one, and the bundle redefines the name of each named closure as
 * it is created (StallWatch in domain/common/unavailable.ts).
 */
class Exchange {
  readonly progress = { connected: false, sent: false };
  readonly timers: NodeJS.Timeout[] = [];
  private done = false;
  constructor(
    readonly req: http.ClientRequest,
    readonly host: string,
    readonly elapsed: () => number,
    private readonly reject: (err: OutboundError) => void,
  ) {}

  settled(): boolean {
    return this.done;
  }

  finish(fn: () => void): void {
    if (this.done) return;
    this.done = true;
    for (const t of this.timers) clearTimeout(t);
    fn();
  }

  fail(err: OutboundError): void {
    err.latencyMs ??= this.elapsed();
    this.finish(() => this.reject(err));
    this.req.destroy();
  }
}

function send(c: Client, p: Plan, elapsed: () => number): Promise<OutboundResponse> {
  return new Promise<OutboundResponse>((resolve, reject) => {
    const req = (p.isHttps ? https : http).request(p.options);
    const x = new Exchange(req, p.host, elapsed, reject);
    x.timers.push(...timeouts(x, p));
    watchProgress(x);
    req.on('error', (e) => failNetwork(x, e));
    req.on('response', (res) => readAnswer(x, res, c.maxBytes, resolve));
    req.end(p.body);
  });
}

/** The connect budget, then the total one. */
function timeouts(x: Exchange, p: Plan): NodeJS.Timeout[] {
  return [
    setTimeout(() => {
      if (!x.progress.connected)
        x.fail(
          new OutboundError('connect_timeout', `${p.host} did not accept a connection within ${p.connectTimeoutMs} ms`),
        );
    }, p.connectTimeoutMs),
    setTimeout(() => {
      x.fail(
        x.progress.connected
          ? new OutboundError('timeout', `${p.host} did not answer within ${p.timeoutMs} ms`, { sent: x.progress.sent })
          : new OutboundError('connect_timeout', `${p.host} did not accept a connection within ${p.timeoutMs} ms`),
      );
    }, p.timeoutMs),
  ];
}

/** How far the request got: a failure says whether the request may have been acted on. */
function watchProgress(x: Exchange): void {
  x.req.on('socket', (socket) => {
    // A kept-alive socket handed over again is connected already and emits no 'connect': without
    // this, a time-out after sending on it would pass for a connect time-out (not ambiguous).
    if (!socket.connecting) {
      x.progress.connected = true;
      return;
    }
    // A TLS socket emits 'connect' for the TCP part too: "connected" means TCP, before TLS.
    socket.once('connect', () => {
      x.progress.connected = true;
    });
  });
  x.req.on('finish', () => {
    x.progress.sent = true;
  });
}

function failNetwork(x: Exchange, e: Error): void {
  x.fail(classifyNetworkError(e, x.host, { ...x.progress, latencyMs: x.elapsed() }));
}

/** A redirect fails the request (never followed); any other answer is read as data. */
function readAnswer(
  x: Exchange,
  res: http.IncomingMessage,
  maxBytes: number,
  resolve: (r: OutboundResponse) => void,
): void {
  const status = res.statusCode ?? 0;
  const headers = flattenHeaders(res.headers);
  if (status >= 300 && status < 400) {
    res.destroy();
    x.fail(
      new OutboundError('redirect', `${x.host} answered ${status} (a redirect); redirects are never followed`, {
        httpStatus: status,
        location: headers.location ?? null,
      }),
    );
    return;
  }
  readBoundedBody(x, res, maxBytes, (body, truncated) =>
    resolve({ status, headers, body, truncated, latencyMs: x.elapsed() }),
  );
  res.on('error', (e) => failNetwork(x, e));
  res.on('aborted', () =>
    x.fail(
      new OutboundError('reset', `${x.host} closed the connection mid-answer`, { sent: true, httpStatus: status }),
    ),
  );
}

/** Reads at most `maxBytes` of the answer; past the cap the rest is not read. */
function readBoundedBody(
  x: Exchange,
  res: http.IncomingMessage,
  maxBytes: number,
  answer: (body: string, truncated: boolean) => void,
): void {
  const chunks: Buffer[] = [];
  let size = 0;
  res.on('data', (c: Buffer) => {
    if (x.settled()) return;
    const room = maxBytes - size;
    if (c.length > room) {
      chunks.push(c.subarray(0, room));
      size = maxBytes;
      x.finish(() => answer(Buffer.concat(chunks).toString('utf8'), true));
      res.destroy(); // stop reading: the rest is not worth the memory
      x.req.destroy();
      return;
    }
    chunks.push(c);
    size += c.length;
  });
  res.on('end', () => x.finish(() => answer(Buffer.concat(chunks).toString('utf8'), false)));
}

export type { OutboundHttp, OutboundRequest, OutboundResponse } from '../../contracts/channel.js';
