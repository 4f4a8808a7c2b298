import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { Request, RequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import type { Clock } from '../domain/common/clock.js';
import type { PublicPageConfig, StatusSnapshot } from '../domain/status/public.js';
import { badgeSvg, shieldsJson } from './badge.js';
import { feedOf } from './feeds.js';
import { isStatusLocale, negotiateLocale, type StatusLocale } from './i18n.js';
import type { SnapshotSource } from './source.js';
import { isV2File, v2Document } from './statuspage-v2.js';
import { STYLE, STYLE_FILE } from './style.js';
import {
  renderBare,
  renderHistory,
  renderIncident,
  renderIndex,
  renderMaintenance,
  renderMessage,
  type RenderContext,
} from './view.js';

/**
 * The public status page as one request handler: HTML pages, feeds, the Statuspage-compatible
 * JSON, the badge. Every answer is rendered from the source's in-memory snapshot and kept per
 * (snapshot version, minute, where it is mounted, route, locale) with a strong ETag, so a request
 * for a page already rendered is a map lookup and a write: no Redis, no template. The minute is
 * in the key because what a page shows also moves with time (the 90-day bars, "upcoming").
 */

export interface StatusSiteOptions {
  source: SnapshotSource;
  clock: Clock;
  log: Logger;
  /** Most answers kept at once (per version and minute); past it, answers are rendered but not kept. */
  maxCached?: number;
  /** E-mail subscriptions are on (HERALD_SMTP_URL): the index page shows the subscribe form. */
  emailSubscriptions?: boolean;
}

export interface StatusSite {
  /**
   * The handler for the page mounted at `base` (`/status`: `app.use('/status', …)`; `` for a host
   * of its own, where it answers every path). It never calls `next`: whatever it does not serve
   * is its own 404 page.
   */
  handler(base: string): RequestHandler;
  close(): Promise<void>;
}

export const PAGE_CACHE_CONTROL = 'public, max-age=10, stale-while-revalidate=30';
const ASSET_CACHE_CONTROL = 'public, max-age=31536000, immutable';
const ERROR_CACHE_CONTROL = 'public, max-age=10';
const MAX_ID = 128;

const TYPES = {
  html: 'text/html; charset=utf-8',
  json: 'application/json; charset=utf-8',
  atom: 'application/atom+xml; charset=utf-8',
  rss: 'application/rss+xml; charset=utf-8',
  svg: 'image/svg+xml; charset=utf-8',
  css: 'text/css; charset=utf-8',
} as const;

interface Answer {
  status: number;
  headers: OutgoingHttpHeaders;
  /** What a 304 repeats of `headers` (ETag, caching, Vary and the security headers). */
  notModified: OutgoingHttpHeaders;
  body: Buffer;
  etag: string;
}

/** A route's rendering: what it answers, or null for this site's 404. */
interface Rendered {
  type: keyof typeof TYPES;
  body: string;
  status?: number;
  /** Answers that differ by Accept-Language. */
  localized?: boolean;
  /** Read by browsers of other origins too (JSON, badge): CORS open, like Statuspage's. */
  open?: boolean;
}

/** The route a path names (relative to the mount), with its id or page when it has one. */
type Route =
  | { kind: 'index' }
  | { kind: 'history'; page: number }
  | { kind: 'incident'; id: string }
  | { kind: 'maintenance'; id: string }
  | { kind: 'feed'; format: 'atom' | 'rss'; componentId?: string }
  | { kind: 'v2'; file: string }
  | { kind: 'badge' }
  | { kind: 'shields' }
  | { kind: 'style' }
  | { kind: 'not_found' };

export function createStatusSite(opts: StatusSiteOptions): StatusSite {
  const cache = new AnswerCache(opts.maxCached ?? 2000);
  const styleAnswer = answer(200, TYPES.css, STYLE, ASSET_CACHE_CONTROL, securityHeaders(null), false, false);

  const serve = (req: Request, res: Response, base: string, snap: StatusSnapshot | null): void => {
    const { route, query } = routeOf(req.url);
    if (route.kind === 'style') return send(req, res, styleAnswer);
    const locale0 = snap?.page?.locale ?? 'en';
    const htmlLocale = () => negotiateLocale(query.get('locale') ?? undefined, req.headers['accept-language'], locale0);
    if (snap === null) {
      const body = renderBare(htmlLocale(), base, 'unavailable');
      const a = answer(503, TYPES.html, body, 'no-store', securityHeaders(null), true, false);
      res.setHeader('Retry-After', '5');
      return send(req, res, a);
    }
    const page = snap.page;
    if (page === null) {
      const body = renderBare(htmlLocale(), base, 'not_set_up');
      return send(req, res, answer(404, TYPES.html, body, ERROR_CACHE_CONTROL, securityHeaders(null), true, false));
    }
    const nowMs = opts.clock.now().getTime();
    const epoch = `${snap.version}|${Math.floor(nowMs / 60_000)}`;
    const locale: StatusLocale = HTML_ROUTES.has(route.kind)
      ? htmlLocale()
      : isStatusLocale(page.locale)
        ? page.locale
        : 'en';
    const a = cache.get(`${base}|${locale}|${routeKey(route)}`, epoch, () =>
      renderAnswer({ snap, page, locale, base, nowMs, emailSubscriptions: opts.emailSubscriptions }, route),
    );
    send(req, res, a);
  };

  return {
    handler(base: string): RequestHandler {
      return (req, res, next) => {
        if (req.method !== 'GET' && req.method !== 'HEAD') {
          res.writeHead(405, {
            Allow: 'GET, HEAD',
            'Content-Type': 'text/plain; charset=utf-8',
            ...securityHeaders(null),
          });
          res.end('Method not allowed\n');
          return;
        }
        let got: ReturnType<SnapshotSource['current']>;
        try {
          got = opts.source.current();
        } catch (err) {
          next(err);
          return;
        }
        if (got === null || !(got instanceof Promise)) {
          serve(req, res, base, got);
          return;
        }
        got.then((snap) => serve(req, res, base, snap)).catch(next);
      };
    },
    close: () => opts.source.close(),
  };
}

/** Answers of one epoch (snapshot version and minute): a new epoch starts empty. */
class AnswerCache {
  private epoch = '';
  private map = new Map<string, Answer>();

  constructor(private readonly max: number) {}

  /** Only 200s are kept: hostile requests for made-up ids must not fill the cache. */
  get(key: string, epoch: string, make: () => Answer): Answer {
    if (epoch !== this.epoch) {
      this.epoch = epoch;
      this.map = new Map();
    }
    let a = this.map.get(key);
    if (a === undefined) {
      a = make();
      if (a.status === 200 && this.map.size < this.max) this.map.set(key, a);
    }
    return a;
  }
}

const HTML_ROUTES: ReadonlySet<Route['kind']> = new Set(['index', 'history', 'incident', 'maintenance', 'not_found']);

function renderAnswer(ctx: RenderContext, route: Route): Answer {
  const r = render(ctx, route) ?? {
    type: 'html' as const,
    body: renderMessage(ctx, 'not_found'),
    status: 404,
    localized: true,
  };
  const status = r.status ?? 200;
  return answer(
    status,
    TYPES[r.type],
    r.body,
    status === 200 ? PAGE_CACHE_CONTROL : ERROR_CACHE_CONTROL,
    securityHeaders(ctx.page),
    r.localized === true,
    r.open === true,
  );
}

function render(ctx: RenderContext, route: Route): Rendered | null {
  const { snap, page } = ctx;
  switch (route.kind) {
    case 'index':
      return { type: 'html', body: renderIndex(ctx), localized: true };
    case 'history': {
      const body = renderHistory(ctx, route.page);
      return body === null ? null : { type: 'html', body, localized: true };
    }
    case 'incident': {
      const body = renderIncident(ctx, route.id);
      return body === null ? null : { type: 'html', body, localized: true };
    }
    case 'maintenance': {
      const body = renderMaintenance(ctx, route.id);
      return body === null ? null : { type: 'html', body, localized: true };
    }
    case 'feed': {
      const body = feedOf({ snap, page, locale: ctx.locale, componentId: route.componentId }, route.format);
      return body === null ? null : { type: route.format, body, open: true };
    }
    case 'v2':
      return isV2File(route.file)
        ? { type: 'json', body: JSON.stringify(v2Document({ snap, page }, route.file)), open: true }
        : null;
    case 'badge':
      return { type: 'svg', body: badgeSvg(snap, page.title), open: true };
    case 'shields':
      return { type: 'json', body: JSON.stringify(shieldsJson(snap)), open: true };
    case 'style':
    case 'not_found':
      return null;
  }
}

function routeKey(r: Route): string {
  switch (r.kind) {
    case 'history':
      return `history:${r.page}`;
    case 'incident':
    case 'maintenance':
      return `${r.kind}:${r.id}`;
    case 'feed':
      return `feed:${r.format}:${r.componentId ?? ''}`;
    case 'v2':
      return `v2:${r.file}`;
    default:
      return r.kind;
  }
}

/** `req.url` inside the mount: its path (relative) and query. */
export function routeOf(url: string): { route: Route; query: URLSearchParams } {
  const q = url.indexOf('?');
  const rawPath = q < 0 ? url : url.slice(0, q);
  const query = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
  let path: string;
  try {
    path = decodeURIComponent(rawPath);
  } catch {
    return { route: { kind: 'not_found' }, query };
  }
  if (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1);
  const parts = path.split('/').slice(1);
  const id = (s: string | undefined) => (s !== undefined && s.length > 0 && s.length <= MAX_ID ? s : null);
  const route = ((): Route => {
    if (path === '/' || path === '') return { kind: 'index' };
    if (path === '/history') {
      const p = query.get('page');
      const n = p === null ? 1 : /^[1-9]\d{0,5}$/.test(p) ? Number(p) : 0;
      return n > 0 ? { kind: 'history', page: n } : { kind: 'not_found' };
    }
    if (path === '/feed.atom') return { kind: 'feed', format: 'atom' };
    if (path === '/feed.rss') return { kind: 'feed', format: 'rss' };
    if (path === '/badge.svg') return { kind: 'badge' };
    if (path === '/shields.json') return { kind: 'shields' };
    if (path === `/assets/${STYLE_FILE}`) return { kind: 'style' };
    if (parts.length === 2 && parts[0] === 'incidents' && id(parts[1])) return { kind: 'incident', id: parts[1]! };
    if (parts.length === 2 && parts[0] === 'maintenances' && id(parts[1]))
      return { kind: 'maintenance', id: parts[1]! };
    if (parts.length === 3 && parts[0] === 'components' && id(parts[1]) && /^feed\.(atom|rss)$/.test(parts[2]!))
      return { kind: 'feed', format: parts[2] === 'feed.atom' ? 'atom' : 'rss', componentId: parts[1]! };
    if (parts[0] === 'api' && parts[1] === 'v2' && parts.length >= 3 && isV2File(parts.slice(2).join('/')))
      return { kind: 'v2', file: parts.slice(2).join('/') };
    return { kind: 'not_found' };
  })();
  return { route, query };
}

/**
 * The headers every answer of the page carries: a CSP without inline script (the page has none)
 * or inline style (the stylesheet is a file), framing only by the configured origins, no MIME
 * sniffing, and the page's address kept to itself when a visitor follows a link out.
 */
function securityHeaders(page: PublicPageConfig | null): OutgoingHttpHeaders {
  const ancestors = (page?.frame_ancestors ?? []).filter((o) => /^(https?:\/\/)?[A-Za-z0-9.*:[\]-]+$/.test(o));
  return {
    'Content-Security-Policy':
      "default-src 'none'; style-src 'self'; img-src 'self' https: data:; " +
      `frame-ancestors ${ancestors.length > 0 ? ancestors.join(' ') : "'none'"}; base-uri 'none'; form-action 'self'`,
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'strict-origin-when-cross-origin',
  };
}

function answer(
  status: number,
  type: string,
  text: string,
  cacheControl: string,
  security: OutgoingHttpHeaders,
  localized: boolean,
  open: boolean,
): Answer {
  const body = Buffer.from(text, 'utf8');
  const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
  const common: OutgoingHttpHeaders = {
    ETag: etag,
    'Cache-Control': cacheControl,
    ...(localized ? { Vary: 'Accept-Language' } : {}),
    ...(open ? { 'Access-Control-Allow-Origin': '*' } : {}),
    ...security,
  };
  return {
    status,
    body,
    etag,
    notModified: common,
    headers: { ...common, 'Content-Type': type, 'Content-Length': body.length },
  };
}

/** Whether If-None-Match names this ETag (weak comparison, as RFC 9110 asks for it). */
export function matchesEtag(header: IncomingHttpHeaders['if-none-match'], etag: string): boolean {
  if (header === undefined) return false;
  if (header.trim() === '*') return true;
  for (const tag of header.split(',')) {
    const t = tag.trim();
    if ((t.startsWith('W/') ? t.slice(2) : t) === etag) return true;
  }
  return false;
}

function send(req: Request, res: Response, a: Answer): void {
  if (a.status === 200 && matchesEtag(req.headers['if-none-match'], a.etag)) {
    res.writeHead(304, a.notModified);
    res.end();
    return;
  }
  res.writeHead(a.status, a.headers);
  if (req.method === 'HEAD') res.end();
  else res.end(a.body);
}
