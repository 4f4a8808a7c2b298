import express, { Router, type NextFunction, type Request, type Response } from 'express';
import ipaddr from 'ipaddr.js';
import type { Logger } from 'pino';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { DomainError } from '../../domain/common/errors.js';
import type { PublicComponent, PublicPageConfig } from '../../domain/status/public.js';
import { fromInfrastructureError, sendProblem, STATUS_BY_CODE } from '../../http/middleware/problem.js';
import type { SubscriptionService, SubscriptionThrottle } from '../../services/subscriptions.js';
import type { Keys } from '../../store/keys.js';
import type { RedisClient as Redis } from '../../store/redis-connect.js';
import { negotiateLocale, type StatusLocale } from '../i18n.js';
import { fieldMessage, renderSubscriptionPage, type SubscriptionPage } from './pages.js';
import { subscriptionStrings } from './strings.js';

/**
 * The public subscription routes, mounted at `<status base>/subscriptions` before the status
 * site (which answers only GET): subscribe, confirm, manage, unsubscribe. Browsers and form posts
 * get HTML; a request whose body or Accept is JSON gets JSON (problem+json on errors).
 *
 * Every answer: no-store (they carry tokens and personal choices), the status site's CSP but
 * framed by nobody (each page is a button that changes something), and no Referrer (the token is
 * in the URL). There are no cookies and no sessions: every change needs a token from a mail, so
 * there is nothing for a cross-site request to ride on.
 */

export interface SubscriptionRouterDeps {
  service: SubscriptionService;
  page(): Promise<PublicPageConfig | null>;
  components(): Promise<PublicComponent[]>;
  log: Logger;
  /** HERALD_TRUST_PROXY: the client's IP is the app's req.ip (X-Forwarded-For); else the socket's. */
  trustProxy: boolean;
}

/** Small bodies only: a subscribe form or a manage form with a few hundred component ids. */
const BODY_LIMIT = '16kb';

const SECURITY_HEADERS: Record<string, string> = {
  'Cache-Control': 'no-store',
  'Content-Security-Policy':
    "default-src 'none'; style-src 'self'; img-src 'self' https: data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  Vary: 'Accept, Accept-Language, Content-Type',
};

export const SUBSCRIBE_IP_POINTS = 10;
export const SUBSCRIBE_IP_WINDOW_S = 600;
export const SUBSCRIBE_ADDRESS_WINDOW_S = 900;

/** Per client IP 10 subscribe requests per 10 minutes; per subscriber one mail per 15 minutes; shared by every instance. */
export function createSubscriptionThrottle(redis: Redis, keys: Keys): SubscriptionThrottle {
  const ip = new RateLimiterRedis({
    storeClient: redis,
    keyPrefix: keys.rateLimitPrefix('subscribe-ip'),
    points: SUBSCRIBE_IP_POINTS,
    duration: SUBSCRIBE_IP_WINDOW_S,
  });
  const address = new RateLimiterRedis({
    storeClient: redis,
    keyPrefix: keys.rateLimitPrefix('subscribe-address'),
    points: 1,
    duration: SUBSCRIBE_ADDRESS_WINDOW_S,
  });
  return {
    async ip(client) {
      try {
        await ip.consume(ipKey(client));
        return { ok: true };
      } catch (e) {
        // The library rejects with a RateLimiterRes when the limit is hit, and with an Error otherwise.
        if (e instanceof RateLimiterRes) return { ok: false, retryAfterMs: e.msBeforeNext };
        throw e;
      }
    },
    async address(subscriberId) {
      try {
        await address.consume(subscriberId);
        return true;
      } catch (e) {
        if (e instanceof RateLimiterRes) return false;
        throw e;
      }
    },
  };
}

/**
 * The throttle's key for a client IP: an IPv4 address as it is, an IPv6 one by its /64 (one
 * customer's network, where one host may take any of 2^64 addresses at will).
 */
export function ipKey(ip: string): string {
  if (!ipaddr.isValid(ip)) return ip;
  const a = ipaddr.process(ip);
  if (a.kind() === 'ipv4') return a.toString();
  const parts = (a as ipaddr.IPv6).parts.slice(0, 4);
  return `${parts.map((p) => p.toString(16)).join(':')}::/64`;
}

interface Frame {
  locale: StatusLocale;
  base: string;
  page: PublicPageConfig | null;
}

interface Ctx extends Frame {
  json: boolean;
  page: PublicPageConfig;
}

type Handler = (req: Request, res: Response, ctx: Ctx) => Promise<void>;

export function subscriptionRouter(d: SubscriptionRouterDeps): Router {
  const router = Router();
  router.use((_req, res, next) => {
    res.set(SECURITY_HEADERS);
    next();
  });
  router.use(express.urlencoded({ extended: false, limit: BODY_LIMIT, parameterLimit: 500 }));
  router.use(express.json({ limit: BODY_LIMIT }));
  const a = new Answers(d);
  subscribeRoutes(router, d, a);
  confirmRoutes(router, d, a);
  manageRoutes(router, d, a);
  unsubscribeRoutes(router, d, a);
  router.use(
    a.route((req) =>
      Promise.reject(
        new DomainError(
          req.method === 'GET' || req.method === 'POST' ? 'not_found' : 'method_not_allowed',
          'There is nothing here.',
        ),
      ),
    ),
  );
  // Body parser failures (too large, malformed JSON) arrive here, before any route ran.
  router.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const frame = {
      locale: negotiateLocale(req.query.locale, req.headers['accept-language'], 'en'),
      base: baseOf(req),
      page: null,
    };
    a.error(req, res, err, wantsJson(req), frame);
  });
  return router;
}

/** How the routes answer: HTML pages, JSON, and errors in the request's kind. */
class Answers {
  constructor(private readonly d: SubscriptionRouterDeps) {}

  html(res: Response, frame: Frame, status: number, p: SubscriptionPage): void {
    res.status(status).type('html').send(renderSubscriptionPage(frame, p));
  }

  /** A confirmation link past its 48 h, used, or replaced by a newer one: "subscribe again". */
  expired(req: Request, res: Response, ctx: Ctx): void {
    if (ctx.json)
      return sendProblem(req, res, new DomainError('not_found', 'This link has expired or was used; subscribe again.'));
    this.html(res, ctx, 404, { kind: 'expired' });
  }

  /** A link that is not (or no longer) valid: the same answer whatever the reason. */
  invalidLink(req: Request, res: Response, ctx: Ctx): void {
    if (ctx.json)
      return sendProblem(req, res, new DomainError('not_found', 'This link is no longer valid; subscribe again.'));
    this.html(res, ctx, 404, { kind: 'invalid' });
  }

  /** Reads the page and the request's language, then runs `h`; answers its errors in the request's kind. */
  route(h: Handler) {
    return async (req: Request, res: Response): Promise<void> => {
      const json = wantsJson(req);
      let frame: Frame = {
        locale: negotiateLocale(req.query.locale, req.headers['accept-language'], 'en'),
        base: baseOf(req),
        page: null,
      };
      try {
        const page = await this.d.page();
        frame = {
          ...frame,
          page,
          locale: negotiateLocale(req.query.locale, req.headers['accept-language'], page?.locale ?? 'en'),
        };
        if (page === null) {
          if (json) return sendProblem(req, res, new DomainError('not_found', 'The status page is not set up.'));
          return this.html(res, frame, 404, { kind: 'not_set_up' });
        }
        await h(req, res, { ...frame, json, page });
      } catch (err) {
        this.error(req, res, err, json, frame);
      }
    };
  }

  error(req: Request, res: Response, err: unknown, json: boolean, frame: Frame): void {
    if (res.headersSent) return;
    const domain = err instanceof DomainError ? err : (fromParserError(err) ?? fromInfrastructureError(err));
    if (domain === null) this.d.log.error({ err }, 'subscription route failed');
    const e = domain ?? new DomainError('internal_error', 'Something went wrong on our side.');
    if (e.code === 'method_not_allowed') e.meta.allow = 'GET, POST';
    if (json) return sendProblem(req, res, e);
    const s = subscriptionStrings(frame.locale);
    const status = STATUS_BY_CODE[e.code];
    switch (e.code) {
      case 'rate_limited': {
        const retryAfterS = Number(e.meta.retryAfter ?? 60);
        res.setHeader('Retry-After', String(retryAfterS));
        return this.html(res, frame, status, { kind: 'throttled', retryAfterS });
      }
      case 'service_unavailable':
        res.setHeader('Retry-After', String(e.meta.retryAfter ?? 2));
        return this.html(res, frame, status, { kind: 'unavailable' });
      case 'internal_error':
        return this.html(res, frame, status, { kind: 'unavailable' });
      case 'method_not_allowed':
        res.setHeader('Allow', 'GET, POST');
        break;
      default:
        if (e.errors.some((f) => f.code === 'email_subscriptions_off'))
          return this.html(res, frame, status, { kind: 'email_off' });
    }
    const errors = [...new Set(e.errors.map((f) => fieldMessage(s, f.field, f.code)))];
    this.html(res, frame, status, { kind: 'invalid_request', errors: errors.length > 0 ? errors : [s.error_other] });
  }
}

function subscribeRoutes(router: Router, d: SubscriptionRouterDeps, a: Answers): void {
  router.post(
    '/',
    a.route(async (req, res, ctx) => {
      const body = formOf(req);
      const { email, url, locale, website } = body;
      const components = listOf(body.components);
      await d.service.subscribe(
        { email, url, components, locale, website },
        { ip: clientIp(req, d.trustProxy), locale: ctx.locale },
      );
      const webhook = filled(url) && !filled(email);
      const s = subscriptionStrings(ctx.locale);
      if (!ctx.json) return a.html(res, ctx, 200, { kind: 'inbox', webhook });
      res.status(202).json({ status: 'accepted', message: webhook ? s.accepted_webhook_message : s.accepted_message });
    }),
  );
}

function confirmRoutes(router: Router, d: SubscriptionRouterDeps, a: Answers): void {
  // GET changes nothing (mail scanners follow links): it shows the button that POSTs.
  router.get(
    '/confirm',
    a.route(async (req, res, ctx) => {
      const token = tokenOf(req);
      const state = await d.service.confirmable(token);
      if (state.result === 'expired') return a.expired(req, res, ctx);
      if (ctx.json) {
        res.json({ status: state.result === 'ok' ? 'pending' : state.result });
        return;
      }
      if (state.result === 'already_confirmed')
        return a.html(res, ctx, 200, { kind: 'confirmed', already: true, manageToken: state.manageToken });
      a.html(res, ctx, 200, { kind: 'confirm', token: token ?? '' });
    }),
  );
  router.post(
    '/confirm',
    a.route(async (req, res, ctx) => {
      const out = await d.service.confirm(tokenOf(req));
      if (out.result === 'expired') return a.expired(req, res, ctx);
      if (ctx.json) {
        res.json({ status: out.result });
        return;
      }
      const already = out.result === 'already_confirmed';
      a.html(res, ctx, 200, { kind: 'confirmed', already, manageToken: out.manageToken });
    }),
  );
}

function manageRoutes(router: Router, d: SubscriptionRouterDeps, a: Answers): void {
  router.get(
    '/manage',
    a.route(async (req, res, ctx) => {
      const token = tokenOf(req);
      const view = await d.service.manage(token);
      if (view === null) return a.invalidLink(req, res, ctx);
      if (ctx.json) {
        res.json(manageJson(view));
        return;
      }
      const components = await d.components();
      a.html(res, ctx, 200, { kind: 'manage', view, token: token ?? '', components, saved: false });
    }),
  );
  router.post(
    '/manage',
    a.route(async (req, res, ctx) => {
      const token = tokenOf(req);
      const body = formOf(req);
      const components = ctx.json ? body.components : listOf(body.components);
      const view = await d.service.update(token, { components, locale: body.locale });
      if (view === null) return a.invalidLink(req, res, ctx);
      if (ctx.json) {
        res.json(manageJson(view));
        return;
      }
      const all = await d.components();
      a.html(res, ctx, 200, { kind: 'manage', view, token: token ?? '', components: all, saved: true });
    }),
  );
}

function unsubscribeRoutes(router: Router, d: SubscriptionRouterDeps, a: Answers): void {
  router.get(
    '/unsubscribe',
    a.route(async (req, res, ctx) => {
      const token = tokenOf(req);
      const p = await d.service.unsubscribePreview(token);
      if (p.result === 'invalid') return a.invalidLink(req, res, ctx);
      if (ctx.json) {
        res.json(p.result === 'ask' ? { status: 'subscribed', address: p.address } : { status: 'unsubscribed' });
        return;
      }
      if (p.result === 'unsubscribed') return a.html(res, ctx, 200, { kind: 'unsubscribed' });
      a.html(res, ctx, 200, { kind: 'unsubscribe', address: p.address, token: token ?? '' });
    }),
  );
  // RFC 8058 one-click: the mail client POSTs `List-Unsubscribe=One-Click` to the link itself,
  // without cookies. The token is the proof; the page's own button sends it in the form instead.
  router.post(
    '/unsubscribe',
    a.route(async (req, res, ctx) => {
      const out = await d.service.unsubscribe(tokenOf(req));
      if (out === 'invalid') return a.invalidLink(req, res, ctx);
      if (ctx.json) {
        res.json({ status: 'unsubscribed' });
        return;
      }
      a.html(res, ctx, 200, { kind: 'unsubscribed' });
    }),
  );
}

const filled = (v: unknown): boolean => typeof v === 'string' && v.trim() !== '';

function manageJson(v: {
  kind: string;
  address: string;
  state: string;
  components: string[];
  locale: string;
}): Record<string, unknown> {
  return { kind: v.kind, address: v.address, state: v.state, components: v.components, locale: v.locale };
}

/** JSON when the body is JSON, or when Accept prefers it to HTML. */
function wantsJson(req: Request): boolean {
  if (req.is('application/json') === 'application/json') return true;
  return req.accepts(['html', 'json']) === 'json';
}

/** The status page's mount: what precedes `/subscriptions` in the router's own base. */
function baseOf(req: Request): string {
  const b = req.baseUrl;
  return b.endsWith('/subscriptions') ? b.slice(0, -'/subscriptions'.length) : '';
}

function clientIp(req: Request, trustProxy: boolean): string {
  return (trustProxy ? req.ip : req.socket.remoteAddress) ?? 'unknown';
}

/** The parsed body as an object (a JSON array or scalar reads as empty: the schema then names what is missing). */
function formOf(req: Request): Record<string, unknown> {
  const b: unknown = req.body;
  return typeof b === 'object' && b !== null && !Array.isArray(b) ? (b as Record<string, unknown>) : {};
}

/** A form's repeated field: absent, one value or many. */
function listOf(v: unknown): unknown {
  if (v === undefined || v === '') return [];
  return typeof v === 'string' ? [v] : v;
}

/** The link's token: in the query (a mail's link, RFC 8058's POST to it) or the form (the pages' buttons). */
function tokenOf(req: Request): string | undefined {
  const q = req.query.token;
  if (typeof q === 'string' && q !== '') return q;
  const b = formOf(req).token;
  return typeof b === 'string' && b !== '' ? b : undefined;
}

/** Body-parser failures arrive as errors with a `type`. */
function fromParserError(err: unknown): DomainError | null {
  if (!err || typeof err !== 'object' || !('type' in err)) return null;
  switch (err.type) {
    case 'entity.parse.failed':
      return new DomainError('invalid_json', 'The body is not valid JSON.');
    case 'entity.too.large':
      return new DomainError('payload_too_large', 'The body is too large.');
    case 'parameters.too.many':
      return new DomainError('payload_too_large', 'The form has too many fields.');
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new DomainError('unsupported_media_type', 'Send the body as UTF-8.');
    case 'request.aborted':
      return new DomainError('bad_request', 'The request body was cut off.');
    default:
      return null;
  }
}
