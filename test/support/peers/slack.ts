import { checkApiCall, describeViolations, type Violation } from '../slack-limits.js';
import { waitFor } from '../wait.js';
import { startHttpSink, type RecordedRequest, type Reply, type ScriptedReply } from './http-sink.js';

/**
 * Slack on loopback: incoming webhooks under `/services/…` and the Web API under `/api/<method>`
 * (point SLACK_API_URL at `apiUrl`). Answers the way Slack does: webhooks reply in plain text
 * (`ok`, `invalid_payload`, `no_text`, 404 `no_service`, 410 `channel_is_archived`); the Web API
 * replies HTTP 200 `{ok: true, …}` or `{ok: false, error}`, and 429 + Retry-After when rate limited.
 * The Web API keeps the messages it was given (per channel, with their threads), so chat.update,
 * chat.delete and chat.getPermalink act on them and fail with `message_not_found` as Slack would.
 */

/** One Web API call as Slack would see it. */
export interface SlackApiCall {
  /** e.g. `chat.postMessage`. */
  method: string;
  /** Form or JSON arguments; form fields holding JSON (blocks, view, …) are parsed. */
  args: Record<string, unknown>;
  /** Bearer token, or the `token` argument. */
  token: string | null;
  request: RecordedRequest;
  /** views.open/push/update/publish: the id of the view as answered. */
  viewId?: string;
  /** When the call arrived (ms). */
  at: number;
}

export interface SlackPeer {
  url: string;
  /** For SLACK_API_URL: `<url>/api/`. */
  apiUrl: string;
  /** An incoming-webhook URL on this peer (`/services/<path>`). */
  webhookUrl(path?: string): string;
  /** Every HTTP request (webhooks and API). */
  requests: RecordedRequest[];
  /** Every Web API call, oldest first. */
  calls: SlackApiCall[];
  /** Calls of one method. */
  callsTo(method: string): SlackApiCall[];
  /** Payloads accepted by incoming webhooks (200 ok). */
  webhookMessages: { path: string; payload: Record<string, unknown> }[];
  /** The Web API messages of a channel, oldest first: top-level ones and replies, deleted ones flagged. */
  messagesIn(channel: string): SlackMessage[];
  /** One message by channel and ts (deleted ones too); undefined when it was never posted. */
  messageAt(channel: string, ts: string): SlackMessage | undefined;
  /** The replies under the message `ts` of `channel`, oldest first (the root itself excluded). */
  threadOf(channel: string, ts: string): SlackMessage[];
  /** Makes a webhook path answer 410 channel_is_archived (or 404 no_service when removed). */
  setWebhookState(path: string, state: 'ok' | 'archived' | 'removed'): void;
  /** Raw scripting (see http-sink). */
  script(...replies: ScriptedReply[]): void;
  /**
   * Holds the answer to the next Web API call of `method` (to `channel`, when given) for `ms`
   * more: Slack has done it (a post is in the channel) but answers late, as under load.
   */
  hold(method: string, ms: number, channel?: string): void;
  /** The next call of `method` answers `{ok: false, error}`. */
  failNext(method: string, error: string): void;
  /** The next call of `method` (or the next webhook post when method is 'webhook') answers 429. */
  rateLimitNext(method: string, retryAfterSeconds: number): void;
  waitForCalls(method: string, n: number, timeoutMs?: number): Promise<SlackApiCall[]>;
  /**
   * Calls that broke one of Slack's documented limits (slack-limits.ts). Each was answered with
   * the error real Slack gives (`invalid_blocks`, `expired_trigger_id`, …), and `close()` fails
   * while any is listed, so no test passes with a payload Slack would refuse.
   */
  violations: Violation[];
  /** Throws, listing them, when a call broke a limit. */
  assertNoViolations(): void;
  clear(): void;
  close(): Promise<void>;
}

/**
 * A message the Web API holds (chat.postMessage), as later chat.update / chat.delete left it.
 * Kept across `clear()`: it is the workspace's state, not a record of calls.
 */
export interface SlackMessage {
  channel: string;
  ts: string;
  text: string;
  blocks: unknown;
  /** The root's ts for a reply; null for a top-level message. */
  thread_ts: string | null;
  reply_broadcast: boolean;
  /** Changed by chat.update at least once. */
  edited: boolean;
  /** Removed by chat.delete: chat.update and chat.delete then answer `message_not_found`. */
  deleted: boolean;
}

export interface SlackPeerOptions {
  /** Tokens that authenticate; others get `invalid_auth`. Default: any `xox…` token. */
  tokens?: string[];
  teamId?: string;
  botUserId?: string;
  /** Socket Mode: the WebSocket URL `apps.connections.open` answers with (see slack-socket.ts). */
  socketModeUrl?: () => string | null;
  /** A test that sends invalid payloads on purpose: violations are recorded and answered, but close() does not fail. */
  expectViolations?: boolean;
  /** The workspace's subdomain in permalinks (`https://<workspace>.slack.com/…`). Default `herald-test`. */
  workspace?: string;
}

const JSON_FIELDS = new Set(['blocks', 'attachments', 'view', 'metadata']);

function argsOf(req: RecordedRequest): Record<string, unknown> {
  const args: Record<string, unknown> = { ...req.query };
  if (req.body !== null && typeof req.body === 'object' && !Array.isArray(req.body)) Object.assign(args, req.body);
  for (const [k, v] of Object.entries(args)) {
    if (JSON_FIELDS.has(k) && typeof v === 'string') {
      try {
        args[k] = JSON.parse(v) as unknown;
      } catch {
        // leave as sent: a malformed field is what the test wants to see
      }
    }
  }
  return args;
}

function tokenOf(req: RecordedRequest, args: Record<string, unknown>): string | null {
  const auth = req.headers.authorization;
  if (auth?.startsWith('Bearer ')) return auth.slice(7);
  return typeof args.token === 'string' ? args.token : null;
}

const WEBHOOK_PREFIX = '/services/';
const API_PREFIX = '/api/';

export async function startSlack(opts: SlackPeerOptions = {}): Promise<SlackPeer> {
  const calls: SlackApiCall[] = [];
  const violations: Violation[] = [];
  const webhookMessages: SlackPeer['webhookMessages'] = [];
  const webhookStates = new Map<string, 'ok' | 'archived' | 'removed'>();
  const teamId = opts.teamId ?? 'T0HERALD';
  const botUserId = opts.botUserId ?? 'U0HERALDBOT';
  // Like Slack's: epoch seconds and six digits of fraction (`1732500000.000100`), from the clock
  // in microseconds, but always at least 100 µs past the last one: unique and increasing in this
  // peer, so comparing two ts (as strings or numbers) orders the messages.
  let lastMicros = 0;
  const nextTs = (): string => {
    lastMicros = Math.max(lastMicros + 100, Date.now() * 1000);
    return `${Math.floor(lastMicros / 1e6)}.${String(lastMicros % 1e6).padStart(6, '0')}`;
  };
  let viewCounter = 0;
  const store = messageStore(opts.workspace ?? 'herald-test');

  const webhook = (req: RecordedRequest): Reply => {
    const path = req.path.slice(WEBHOOK_PREFIX.length);
    const state = webhookStates.get(path) ?? 'ok';
    if (state === 'removed') return { status: 404, body: 'no_service', headers: { 'content-type': 'text/html' } };
    if (state === 'archived')
      return { status: 410, body: 'channel_is_archived', headers: { 'content-type': 'text/html' } };
    if (req.method !== 'POST') return { status: 405, body: 'invalid_method', headers: { 'content-type': 'text/html' } };
    // Slack takes a JSON body, or a form with the JSON in `payload`.
    let payload: unknown = req.body;
    if (typeof payload === 'string') payload = tryJson(payload);
    else if (isRecord(payload) && typeof payload.payload === 'string' && /form/.test(req.headers['content-type'] ?? ''))
      payload = tryJson(payload.payload);
    if (!isRecord(payload)) return { status: 400, body: 'invalid_payload', headers: { 'content-type': 'text/html' } };
    const p = payload;
    if (!p.text && !p.blocks && !p.attachments)
      return { status: 400, body: 'no_text', headers: { 'content-type': 'text/html' } };
    // The same limits as chat.postMessage; a webhook answers the error word as text.
    const broken = checkApiCall('chat.postMessage', p);
    if (broken.length > 0) {
      violations.push(...broken.map(({ refusal: _refusal, ...v }) => ({ ...v, where: `webhook ${path}` })));
      return { status: 400, body: broken[0]!.refusal, headers: { 'content-type': 'text/html' } };
    }
    webhookMessages.push({ path, payload: p });
    return { status: 200, body: 'ok', headers: { 'content-type': 'text/html' } };
  };

  /** Records every Web API call, scripted or not (runs before the reply is chosen). */
  const record = (req: RecordedRequest): void => {
    if (!req.path.startsWith(API_PREFIX)) return;
    const args = argsOf(req);
    calls.push({
      method: req.path.slice(API_PREFIX.length),
      args,
      token: tokenOf(req, args),
      request: req,
      at: Date.now(),
    });
  };

  const api = (req: RecordedRequest): Reply => {
    const call = calls.find((c) => c.request === req)!;
    const { args, token } = call;
    const method = req.path.slice(API_PREFIX.length);
    if (token === null) return { body: { ok: false, error: 'not_authed' } };
    // Bot and user tokens (xox…) for the Web API; an app-level token (xapp-…) opens Socket Mode.
    const valid = opts.tokens
      ? opts.tokens.includes(token)
      : method === 'apps.connections.open'
        ? token.startsWith('xapp-')
        : token.startsWith('xox');
    if (!valid) return { body: { ok: false, error: 'invalid_auth' } };
    // Real Slack refuses what breaks its limits; so does this fake, and it keeps a list.
    const broken = checkApiCall(method, args, call.at);
    if (broken.length > 0) {
      violations.push(...broken.map(({ refusal: _refusal, ...v }) => v));
      return {
        body: {
          ok: false,
          error: broken[0]!.refusal,
          response_metadata: { messages: broken.map((v) => `[ERROR] ${v.path} ${v.rule}`) },
        },
      };
    }
    const channel = typeof args.channel === 'string' ? args.channel : 'C0HERALD';
    switch (method) {
      case 'auth.test':
        return {
          body: {
            ok: true,
            url: 'https://herald-test.slack.com/',
            team: 'Herald Test',
            user: 'herald',
            team_id: teamId,
            user_id: botUserId,
            bot_id: 'B0HERALD',
            is_enterprise_install: false,
          },
        };
      case 'chat.postMessage': {
        if (!args.text && !args.blocks && !args.attachments) return { body: { ok: false, error: 'no_text' } };
        const m = store.post(channel, nextTs(), args);
        const message = {
          type: 'message',
          subtype: 'bot_message',
          text: m.text,
          ts: m.ts,
          bot_id: 'B0HERALD',
          blocks: args.blocks,
          ...(m.thread_ts !== null ? { thread_ts: m.thread_ts } : {}),
        };
        return { body: { ok: true, channel, ts: m.ts, message } };
      }
      case 'chat.update': {
        const m = store.update(channel, args);
        if (m === null) return { body: { ok: false, error: 'message_not_found' } };
        return { body: { ok: true, channel, ts: m.ts, text: m.text, message: { text: m.text, blocks: m.blocks } } };
      }
      case 'chat.delete': {
        const m = store.remove(channel, args.ts);
        return { body: m === null ? { ok: false, error: 'message_not_found' } : { ok: true, channel, ts: m.ts } };
      }
      case 'chat.getPermalink': {
        const permalink = store.permalink(channel, args.message_ts);
        return {
          body: permalink === null ? { ok: false, error: 'message_not_found' } : { ok: true, channel, permalink },
        };
      }
      case 'chat.postEphemeral':
        return { body: { ok: true, message_ts: nextTs() } };
      case 'views.open':
      case 'views.update':
      case 'views.push':
      case 'views.publish': {
        const view = (args.view ?? {}) as Record<string, unknown>;
        const id = typeof args.view_id === 'string' ? args.view_id : `V${String(++viewCounter).padStart(8, '0')}`;
        call.viewId = id;
        return { body: { ok: true, view: { ...view, id, team_id: teamId, hash: `${Date.now()}.hash` } } };
      }
      case 'apps.connections.open': {
        const url = opts.socketModeUrl?.() ?? null;
        return { body: url === null ? { ok: true } : { ok: true, url } };
      }
      case 'conversations.open': {
        // A DM with one user: its own channel id, the same each time (as Slack's `D…` ids).
        const users = typeof args.users === 'string' ? args.users : '';
        if (!/^[UW][A-Z0-9]+$/.test(users)) return { body: { ok: false, error: 'user_not_found' } };
        return { body: { ok: true, channel: { id: `D${users}` } } };
      }
      case 'conversations.info':
        return {
          body: {
            ok: true,
            channel: { id: channel, name: 'incidents', is_channel: true, is_archived: false, is_member: true },
          },
        };
      default:
        return { body: { ok: true } };
    }
  };

  const sink = await startHttpSink({
    annotate(req) {
      record(req);
      return {};
    },
    respond(req) {
      if (req.path.startsWith(WEBHOOK_PREFIX)) return webhook(req);
      if (req.path.startsWith(API_PREFIX)) return api(req);
      return { status: 404, body: 'not_found' };
    },
  });

  const apiPath = (method: string) => `${API_PREFIX}${method}`;
  return {
    url: sink.url,
    apiUrl: `${sink.url}${API_PREFIX}`,
    webhookUrl: (path = 'T0HERALD/B0HERALD/abcdefghijklmnopqrstuvwx') => `${sink.url}${WEBHOOK_PREFIX}${path}`,
    requests: sink.requests,
    calls,
    callsTo: (method) => calls.filter((c) => c.method === method),
    webhookMessages,
    messagesIn: (channel) => store.inChannel(channel),
    messageAt: (channel, ts) => store.find(channel, ts),
    threadOf: (channel, ts) => store.inChannel(channel).filter((m) => m.thread_ts === ts && m.ts !== ts),
    setWebhookState: (path, state) => void webhookStates.set(path, state),
    script: (...replies) => sink.script(...replies),
    hold(method, ms, channel) {
      sink.hold(ms, (req) => {
        if (req.path !== apiPath(method)) return false;
        return channel === undefined || calls.find((c) => c.request === req)?.args.channel === channel;
      });
    },
    failNext(method, error) {
      sink.script({ match: apiPath(method), body: { ok: false, error } });
    },
    rateLimitNext(method, retryAfterSeconds) {
      const webhookPost = method === 'webhook';
      sink.script({
        match: webhookPost ? (r) => r.path.startsWith(WEBHOOK_PREFIX) : apiPath(method),
        status: 429,
        headers: {
          'retry-after': String(retryAfterSeconds),
          'content-type': webhookPost ? 'text/html' : 'application/json; charset=utf-8',
        },
        body: webhookPost ? 'rate_limited' : { ok: false, error: 'ratelimited' },
      });
    },
    waitForCalls: (method, n, timeoutMs = 10_000) =>
      waitFor(
        () => {
          const c = calls.filter((x) => x.method === method);
          return c.length >= n && c;
        },
        { timeoutMs, what: `${n} Slack ${method} call(s)` },
      ),
    violations,
    assertNoViolations() {
      if (violations.length > 0)
        throw new Error(
          `Herald sent Slack ${violations.length} payload(s) that break Slack's limits:\n${describeViolations(violations)}`,
        );
    },
    clear() {
      sink.clear();
      calls.length = 0;
      webhookMessages.length = 0;
    },
    async close() {
      await sink.close();
      if (!opts.expectViolations && violations.length > 0)
        throw new Error(
          `Herald sent Slack ${violations.length} payload(s) that break Slack's limits:\n${describeViolations(violations)}`,
        );
    },
  };
}

/**
 * The messages of the Web API, per channel, and what chat.update / chat.delete / getPermalink do
 * with them as Slack does: an unknown or deleted ts is `message_not_found` (null here).
 */
function messageStore(workspace: string) {
  const channels = new Map<string, SlackMessage[]>();
  const inChannel = (channel: string): SlackMessage[] => channels.get(channel) ?? [];
  const find = (channel: string, ts: unknown): SlackMessage | undefined => inChannel(channel).find((m) => m.ts === ts);
  const live = (channel: string, ts: unknown): SlackMessage | null => {
    const m = find(channel, ts);
    return m === undefined || m.deleted ? null : m;
  };
  return {
    inChannel,
    find,
    post(channel: string, ts: string, args: Record<string, unknown>): SlackMessage {
      const thread = typeof args.thread_ts === 'string' && args.thread_ts !== '' ? args.thread_ts : null;
      // Slack takes a boolean in JSON and 'true' in a form.
      const broadcast = thread !== null && (args.reply_broadcast === true || args.reply_broadcast === 'true');
      const m: SlackMessage = {
        channel,
        ts,
        text: typeof args.text === 'string' ? args.text : '',
        blocks: args.blocks,
        thread_ts: thread,
        reply_broadcast: broadcast,
        edited: false,
        deleted: false,
      };
      channels.set(channel, [...inChannel(channel), m]);
      return m;
    },
    update(channel: string, args: Record<string, unknown>): SlackMessage | null {
      const m = live(channel, args.ts);
      if (m === null) return null;
      // As Slack: a field left out of chat.update keeps its value.
      if (typeof args.text === 'string') m.text = args.text;
      if (args.blocks !== undefined) m.blocks = args.blocks;
      m.edited = true;
      return m;
    },
    remove(channel: string, ts: unknown): SlackMessage | null {
      const m = live(channel, ts);
      if (m !== null) m.deleted = true;
      return m;
    },
    /** Slack's form: `p` + the ts without its dot; a reply adds its thread and channel. */
    permalink(channel: string, ts: unknown): string | null {
      const m = live(channel, ts);
      if (m === null) return null;
      const base = `https://${workspace}.slack.com/archives/${channel}/p${m.ts.replace('.', '')}`;
      return m.thread_ts === null ? base : `${base}?thread_ts=${m.thread_ts}&cid=${channel}`;
    },
  };
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function tryJson(s: string): unknown {
  try {
    return JSON.parse(s) as unknown;
  } catch {
    return null;
  }
}
