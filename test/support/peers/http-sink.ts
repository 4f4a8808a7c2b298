import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { waitFor } from '../wait.js';

/**
 * A real HTTP server on 127.0.0.1 (random port) that records every request and answers from a
 * script: the base of every platform peer in this folder. See README.md beside this file.
 */

/** One request as the sink received it, body read in full before anything is answered. */
export interface RecordedRequest {
  /** 1, 2, 3… in arrival order. */
  seq: number;
  method: string;
  /** Path without the query string. */
  path: string;
  query: Record<string, string>;
  headers: IncomingHttpHeaders;
  rawBody: string;
  /** JSON when the body is JSON, an object for form bodies, else the text ('' when empty). */
  body: unknown;
  receivedAt: number;
  /** What was answered: a status, 'reset', or null while a delayed answer is pending. */
  answered: number | 'reset' | null;
}

/** How to answer one request. */
export interface Reply {
  /** Default 200. */
  status?: number;
  headers?: Record<string, string>;
  /** A string is sent as text/plain, anything else as JSON (unless headers set a content-type). */
  body?: unknown;
  /** Wait this long before answering (slowness). */
  delayMs?: number;
  /** Destroy the socket instead of answering (after the request was read in full). */
  reset?: boolean;
}

/** A scripted reply; `match` limits it to some requests (a path, a path pattern or a predicate). */
export interface ScriptedReply extends Reply {
  match?: string | RegExp | ((req: RecordedRequest) => boolean);
}

export interface HttpSink<X extends object = object> {
  /** Base URL, `http://127.0.0.1:<port>` (no trailing slash). */
  url: string;
  port: number;
  /** Every request received, oldest first. */
  requests: (RecordedRequest & X)[];
  /** Queues replies; each is used once, by the first later request it matches, in order. */
  script(...replies: ScriptedReply[]): void;
  /** Scripted replies not used yet. */
  pendingScript(): number;
  /**
   * Holds the answer to the next request that `match`es (default: the next one) for `ms` more:
   * the same answer, scripted or the peer's own, only later — a platform slow to answer that has
   * already done what was asked (a Slack post under load). Used once, like a scripted reply.
   */
  hold(ms: number, match?: ScriptedReply['match']): void;
  /** Resolves when at least `n` requests have arrived (polls with a deadline, never a fixed sleep). */
  waitForRequests(n: number, timeoutMs?: number): Promise<(RecordedRequest & X)[]>;
  /** Forgets recorded requests and the script. */
  clear(): void;
  close(): Promise<void>;
}

export interface HttpSinkOptions<X extends object> {
  /** The reply when nothing scripted matches. Default: 200 with an empty body. */
  respond?: (req: RecordedRequest & X) => Reply;
  /** Adds peer-specific fields to a record (e.g. whether a signature verified). */
  annotate?: (req: RecordedRequest) => X;
}

const MAX_BODY_BYTES = 10 * 1024 * 1024;

function parseBody(raw: string, contentType: string | undefined): unknown {
  const ct = (contentType ?? '').toLowerCase();
  if (ct.includes('json')) {
    try {
      return JSON.parse(raw) as unknown;
    } catch {
      return raw;
    }
  }
  if (ct.includes('application/x-www-form-urlencoded')) return Object.fromEntries(new URLSearchParams(raw));
  return raw;
}

function matches(s: ScriptedReply, req: RecordedRequest): boolean {
  if (s.match === undefined) return true;
  if (typeof s.match === 'string') return req.path === s.match;
  if (s.match instanceof RegExp) return s.match.test(req.path);
  return s.match(req);
}

export async function startHttpSink<X extends object = object>(opts: HttpSinkOptions<X> = {}): Promise<HttpSink<X>> {
  const requests: (RecordedRequest & X)[] = [];
  let queue: ScriptedReply[] = [];
  let holds: ScriptedReply[] = [];
  const timers = new Set<NodeJS.Timeout>();
  const sockets = new Set<Socket>();
  let seq = 0;

  const send = (res: ServerResponse, req: IncomingMessage, rec: RecordedRequest, reply: Reply): void => {
    if (res.destroyed || req.socket.destroyed) return;
    if (reply.reset) {
      rec.answered = 'reset';
      req.socket.destroy();
      return;
    }
    const status = reply.status ?? 200;
    const headers: Record<string, string> = { ...reply.headers };
    const hasType = Object.keys(headers).some((h) => h.toLowerCase() === 'content-type');
    let payload = '';
    if (reply.body !== undefined && status !== 204 && status !== 304) {
      if (typeof reply.body === 'string') {
        payload = reply.body;
        if (!hasType) headers['content-type'] = 'text/plain; charset=utf-8';
      } else {
        payload = JSON.stringify(reply.body);
        if (!hasType) headers['content-type'] = 'application/json; charset=utf-8';
      }
    }
    rec.answered = status;
    res.writeHead(status, headers);
    res.end(payload);
  };

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) req.socket.destroy();
      else chunks.push(c);
    });
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks).toString('utf8');
      const u = new URL(req.url ?? '/', 'http://sink.invalid');
      const base: RecordedRequest = {
        seq: ++seq,
        method: req.method ?? 'GET',
        path: u.pathname,
        query: Object.fromEntries(u.searchParams),
        headers: req.headers,
        rawBody,
        body: parseBody(rawBody, req.headers['content-type']),
        receivedAt: Date.now(),
        answered: null,
      };
      const rec: RecordedRequest & X = Object.assign<RecordedRequest, X | undefined>(base, opts.annotate?.(base));
      requests.push(rec);
      const i = queue.findIndex((s) => matches(s, rec));
      const reply: Reply = i >= 0 ? queue.splice(i, 1)[0]! : (opts.respond?.(rec) ?? {});
      const h = holds.findIndex((s) => matches(s, rec));
      const delayMs = (reply.delayMs ?? 0) + (h >= 0 ? (holds.splice(h, 1)[0]!.delayMs ?? 0) : 0);
      if (delayMs > 0) {
        const t = setTimeout(() => {
          timers.delete(t);
          send(res, req, rec, reply);
        }, delayMs);
        timers.add(t);
      } else {
        send(res, req, rec, reply);
      }
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    script(...replies) {
      queue.push(...replies);
    },
    pendingScript: () => queue.length,
    hold(ms, match) {
      holds.push({ delayMs: ms, ...(match !== undefined ? { match } : {}) });
    },
    waitForRequests: (n, timeoutMs = 10_000) =>
      waitFor(() => requests.length >= n && requests, { timeoutMs, what: `${n} request(s) at the sink` }),
    clear() {
      requests.length = 0;
      queue = [];
      holds = [];
    },
    async close() {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * What every platform peer built on one sink offers: the sink's own url, requests, script,
 * waitForRequests and close, and `messages`, what the platform accepted. A peer adds its own
 * fields (a webhook URL, rate limits, …) beside these.
 */
export interface SinkPeer<M> {
  url: string;
  requests: RecordedRequest[];
  messages: M[];
  script(...replies: ScriptedReply[]): void;
  /** Holds the answer to the next matching request for `ms` more (see HttpSink.hold). */
  hold(ms: number, match?: ScriptedReply['match']): void;
  waitForRequests: HttpSink['waitForRequests'];
  /** Forgets the requests, the script and the messages (and whatever else the peer keeps). */
  clear(): void;
  close(): Promise<void>;
}

/** The `SinkPeer` part of a peer over `sink`; `forget` clears what else the peer keeps. */
export function sinkPeer<M>(sink: HttpSink, messages: M[], forget: () => void = () => undefined): SinkPeer<M> {
  return {
    url: sink.url,
    requests: sink.requests,
    messages,
    script: (...r) => sink.script(...r),
    hold: (ms, match) => sink.hold(ms, match),
    waitForRequests: (n, t) => sink.waitForRequests(n, t),
    clear() {
      sink.clear();
      messages.length = 0;
      forget();
    },
    close: () => sink.close(),
  };
}
