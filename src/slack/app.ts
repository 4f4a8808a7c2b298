import {
  App,
  ExpressReceiver,
  HTTPModuleFunctions,
  LogLevel,
  SocketModeReceiver,
  type Logger as BoltLogger,
  type ReceiverProcessEventErrorHandlerArgs,
} from '@slack/bolt';
import { WebClient } from '@slack/web-api';
import express, { type Express, type RequestHandler } from 'express';
import type { Logger } from 'pino';
import type { IdempotencyStore, Pacer } from '../ports/index.js';
import type { AccessPolicy } from '../services/access.js';
import { registerActions } from './listeners/actions.js';
import { registerApprovalActions } from './listeners/approvals.js';
import { SlackApprovalNotifier } from './approvals.js';
import { SlackAdminNotifier } from './admin-notices.js';
import type { ApprovalMessageLog } from '../ports/notices.js';
import { Announcer } from './announcer.js';
import { registerCommands } from './listeners/commands.js';
import { slackListeners } from './listeners/dispatch.js';
import type { SlackDeps, SlackServices, SlackSettings } from './deps.js';
import { publishHome } from './listeners/home.js';
import { registerSubmissions } from './listeners/submissions.js';
import { registerTemplateOptions } from './listeners/template-options.js';
import { checkSlackPayload } from './payload-guard.js';
import { verifySlackRequest } from './verify-request.js';

/** Where Slack posts commands, interactivity and events in HTTP mode (see slack-app-manifest.yml). */
export const SLACK_EVENTS_PATH = '/slack/events';

const WEB_API_TIMEOUT_MS = 10_000;

/** Slack payloads are small; a modal submission with 50 variables stays far below this. */
const BODY_LIMIT = '1mb';

export interface SlackEdgeOptions {
  /** HTTP mode: verifies every request. Not needed in Socket Mode. */
  signingSecret?: string;
  /**
   * Neither a signing secret nor an app token: a worker process that only keeps announcements
   * current (receipts) through the Web API and receives no Slack requests.
   */
  botToken: string;
  /** Socket Mode when set (xapp-…): no public URL needed. */
  appToken?: string;
  /** SLACK_API_URL: Slack's Web API, or the local fake in tests. */
  apiUrl: string;
  settings: SlackSettings;
  services: SlackServices;
  /** Who may do admin work: built by the composition root from the same settings. */
  access: AccessPolicy;
  idempotency: IdempotencyStore;
  /** Shares announcement pacing (posts per channel, updates per announcement) across processes. */
  pacer: Pacer;
  /** The approval DMs and thread lines posted (so notifying again updates instead of posting). */
  approvalMessages: ApprovalMessageLog;
  log: Logger;
  now(): Date;
}

export interface SlackEdge {
  /** `outbound`: no listeners, only the announcer (a worker's delivery receipts). */
  mode: 'http' | 'socket' | 'outbound';
  /** The hooks the composition root connects to incident and delivery changes. */
  announcer: Announcer;
  /** Tells approvers (DMs with Approve / Reject) and the announcement's thread about approvals. */
  approvals: SlackApprovalNotifier;
  /** Tells the admins (DMs, and HERALD_SLACK_CHANNEL) what Herald did on its own: a disabled event endpoint. */
  admins: SlackAdminNotifier;
  /** Connects Socket Mode (a no-op in HTTP mode, where Express carries the requests). */
  start(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The Slack app (Bolt 5). In HTTP mode it is mounted on Herald's own Express app at
 * /slack/events, behind a signature check that also refuses timestamps from the future; in
 * Socket Mode it connects out with the app token. Listeners only translate: they parse the
 * payload, call one service and present the answer.
 */
export function createSlackEdge(opts: SlackEdgeOptions, expressApp: Express): SlackEdge {
  const log = opts.log.child({ component: 'slack' });
  const client = new WebClient(opts.botToken, {
    slackApiUrl: opts.apiUrl,
    logger: boltLogger(log),
    // A few quick retries on network errors and 5xx; announcements are refreshed again on the
    // next change anyway, so holding a promise open for Slack's default half hour buys nothing.
    retryConfig: { retries: 2, factor: 2, minTimeout: 200, maxTimeout: 2000 },
    // A Slack that hangs must not hold an announcement refresh (and its claim) for long.
    timeout: WEB_API_TIMEOUT_MS,
  });
  const now = () => opts.now();
  const deps: SlackDeps = {
    services: opts.services,
    access: opts.access,
    settings: opts.settings,
    client,
    idempotency: opts.idempotency,
    log,
    now,
  };
  const announcer = new Announcer(deps, { pacer: opts.pacer });
  // In every mode: a worker expires approvals and sweeps unsent notices, so it DMs too.
  const approvals = new SlackApprovalNotifier({
    client,
    messages: opts.approvalMessages,
    services: opts.services,
    receipts: announcer,
    log,
  });
  const admins = new SlackAdminNotifier({ client, settings: opts.settings, log });

  // A fixed authorization: Herald is installed in one workspace with one bot token. Returning it
  // here (instead of passing `token`) keeps Bolt from calling auth.test on every request.
  const authorize = () => Promise.resolve({ botToken: opts.botToken });
  const common = {
    authorize,
    logger: boltLogger(log),
    ignoreSelf: false,
    convoStore: false as const,
    clientOptions: { slackApiUrl: opts.apiUrl, retryConfig: { retries: 0 } },
  };

  let app: App | null = null;
  let mode: SlackEdge['mode'];
  if (opts.appToken !== undefined) {
    mode = 'socket';
    // SLACK_API_URL applies here too: apps.connections.open goes to the configured Web API.
    const receiver = new SocketModeReceiver({
      appToken: opts.appToken,
      logger: boltLogger(log),
      installerOptions: { clientOptions: { slackApiUrl: opts.apiUrl } },
    });
    app = new App({ ...common, receiver });
  } else if (opts.signingSecret !== undefined) {
    mode = 'http';
    // Bolt's router answers on the same Express app (no second server, no global body parser), as
    // the last handler of the one Slack route, after the body and the signature are checked: not
    // mounted on the app itself, where every API request would pass through it (the receiver
    // mounts it on an app of its own, never served).
    const boltRouter = express.Router();
    expressApp.post(SLACK_EVENTS_PATH, readRawBody(log), verifyRequests(opts.signingSecret, now, log), boltRouter);
    const receiver = new ExpressReceiver({
      signingSecret: opts.signingSecret,
      // verifyRequests (above, on the same path, before Bolt's router) has checked the signature
      // already, and more strictly (future timestamps too); it is the one check. Bolt's second one
      // compared in a way that drew fresh randomness per request: ~3 % of an ack's CPU.
      signatureVerification: false,
      app: express(),
      router: boltRouter,
      endpoints: SLACK_EVENTS_PATH,
      logger: boltLogger(log),
      processBeforeResponse: false,
      processEventErrorHandler: answerListenerFailure(log),
    });
    app = new App({ ...common, receiver });
  } else {
    mode = 'outbound';
  }

  if (app !== null) registerListeners(app, deps, announcer, log);
  const socket = mode === 'socket' ? app : null;

  return {
    mode,
    announcer,
    approvals,
    admins,
    async start() {
      await socket?.start();
    },
    async stop() {
      await socket?.stop().catch((err: unknown) => log.warn({ err }, 'Socket Mode did not stop cleanly'));
      await announcer.idle();
    },
  };
}

function registerListeners(app: App, deps: SlackDeps, announcer: Announcer, log: Logger): void {
  registerCommands(app, deps);
  const listeners = slackListeners(app);
  registerActions(listeners, deps);
  registerApprovalActions(listeners, deps);
  registerSubmissions(listeners, deps, announcer);
  registerTemplateOptions(app, deps);
  app.event('app_home_opened', async ({ event }) => {
    if (event.tab !== 'home') return;
    await publishHome(deps, event.user);
  });
  app.error(async (err) => {
    log.error({ err }, 'Slack listener failed');
    return Promise.resolve();
  });
}

/**
 * The raw body, as Slack sent it. A body that cannot be read — over the limit (413), in an
 * encoding Node cannot decode (415), or not decoding as its Content-Encoding says (400) — is
 * answered here, empty, with a warn line: it is the sender's, never a 500.
 */
function readRawBody(log: Logger): RequestHandler {
  const parse = express.raw({ type: () => true, limit: BODY_LIMIT });
  return (req, res, next) => {
    parse(req, res, (err?: unknown) => {
      if (err === undefined || err === null) {
        next();
        return;
      }
      const status = err !== null && typeof err === 'object' && 'status' in err ? Number(err.status) : NaN;
      if (!(status >= 400 && status < 500)) {
        next(err);
        return;
      }
      log.warn(
        { status, reason: (err as Error).message.slice(0, 200) },
        'refused a Slack request body that could not be read',
      );
      res.status(status).end();
    });
  };
}

/**
 * Verifies Slack's signature and timestamp (±5 minutes) over the raw bytes before Bolt runs, then
 * the payload's shape (payload-guard.ts): the only signature check (Bolt's own is off). Bolt
 * parses the same raw body, which this hands on as `req.rawBody`; it decodes it as UTF-8 first,
 * which is exact here because a body that is not valid UTF-8 never gets past the guard. Slack
 * sends forms as exactly `application/x-www-form-urlencoded`; a charset suffix from a proxy is
 * normalised so Bolt parses the form instead of failing on it as JSON.
 */
function verifyRequests(signingSecret: string, now: () => Date, log: Logger): RequestHandler {
  return (req, res, next) => {
    const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const result = verifySlackRequest({
      signingSecret,
      timestamp: req.get('x-slack-request-timestamp'),
      signature: req.get('x-slack-signature'),
      rawBody: raw,
      nowMs: now().getTime(),
    });
    if (!result.ok) {
      log.warn({ reason: result.reason }, 'refused a Slack request');
      res.status(401).type('text/plain').send('invalid Slack request signature or timestamp\n');
      return;
    }
    // Signed is not the same as well-formed: a payload Herald cannot act on is answered here,
    // with a warn line, instead of failing inside Bolt as a 500.
    const shape = checkSlackPayload(raw, req.get('content-type'));
    if (shape.verdict !== 'pass') {
      log.warn(
        { reason: shape.reason },
        shape.verdict === 'ignore'
          ? 'ignored a Slack request Herald has no listener for'
          : 'refused a malformed Slack payload',
      );
      res.status(shape.verdict === 'ignore' ? 200 : 400).end();
      return;
    }
    (req as typeof req & { rawBody?: Buffer }).rawBody = raw;
    const type = req.headers['content-type'];
    if (type !== undefined && /^application\/x-www-form-urlencoded\s*;/i.test(type))
      req.headers['content-type'] = 'application/x-www-form-urlencoded';
    next();
  };
}

/**
 * Bolt's answer when a listener (or Bolt's routing) throws before acknowledging. A TypeError or
 * RangeError there means the payload had a shape the listener did not expect — past the payload
 * guard, still the sender's input — so it is a 400 no-op with a warn line. Anything else (Redis
 * down, a Slack API failure) keeps Bolt's own answer: a 500, which makes Slack retry.
 */
function answerListenerFailure(log: Logger): (args: ReceiverProcessEventErrorHandlerArgs) => Promise<boolean> {
  return async (args) => {
    const { error, response } = args;
    if (
      !response.headersSent &&
      (error instanceof TypeError || error instanceof RangeError || error instanceof SyntaxError)
    ) {
      log.warn(
        { err_message: error.message },
        'a Slack payload did not have the shape its listener reads; answered 400',
      );
      response.writeHead(400);
      response.end();
      return true;
    }
    return HTTPModuleFunctions.defaultProcessEventErrorHandler(args);
  };
}

/** Bolt and the Web API client log through Herald's pino logger. */
function boltLogger(log: Logger): BoltLogger {
  let level = LogLevel.INFO;
  const text = (msg: unknown[]) => msg.map(show).join(' ');
  return {
    debug: (...msg: unknown[]) => log.debug(text(msg)),
    info: (...msg: unknown[]) => log.info(text(msg)),
    warn: (...msg: unknown[]) => log.warn(text(msg)),
    error: (...msg: unknown[]) => log.error(text(msg)),
    setLevel: (l: LogLevel) => {
      level = l;
    },
    getLevel: () => level,
    setName: () => undefined,
  };
}

function show(m: unknown): string {
  if (typeof m === 'string') return m;
  if (m instanceof Error) return m.message;
  try {
    return JSON.stringify(m);
  } catch {
    return String(m);
  }
}
