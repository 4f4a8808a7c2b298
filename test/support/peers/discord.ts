import { sinkPeer, startHttpSink, type RecordedRequest, type Reply, type SinkPeer } from './http-sink.js';

/**
 * Discord webhooks on loopback: `POST /api[/v10]/webhooks/:id/:token` executes (204, or 200 with
 * the message when `?wait=true`), `GET` the same path returns the webhook object (with its
 * `guild_id` and `channel_id`). `PATCH` / `DELETE` / `GET …/messages/:mid` edit (200 + message),
 * delete (204) and read a message the webhook posted; a message that is not there — never posted
 * by this webhook, deleted, or in a thread other than `?thread_id=` says (Discord finds a thread's
 * message only with it) — answers 404 `{message: 'Unknown Message', code: 10008}`.
 *
 * Threads: `?thread_id=` posts into that thread (`channel_id` in the answer is the thread's id). A
 * webhook made a forum (`makeForum`) needs `thread_name` (which opens a post: a NEW thread whose id
 * is the starter message's id, as in Discord) or `thread_id` (400 220001 otherwise); `thread_name`
 * on a channel webhook answers 400 220003. A thread deleted with `deleteThread` answers 404
 * `{code: 10003}` (Unknown Channel).
 *
 * Errors follow Discord's JSON shape `{message, code}`; 429 carries `retry_after` in seconds (a
 * float) and a Retry-After header.
 */

export interface DiscordMessage {
  id: string;
  webhookId: string;
  /** The thread it is in: `?thread_id=`, or the post its `thread_name` opened; null in the webhook's channel. */
  threadId: string | null;
  /** The `thread_name` that opened a forum post with this message; null otherwise. */
  threadName: string | null;
  /** What the execute sent, with later edits merged in (content, embeds, allowed_mentions, components). */
  payload: Record<string, unknown>;
  /** The body of each PATCH, oldest first. */
  edits: Record<string, unknown>[];
  edited: boolean;
  deleted: boolean;
}

/** `messages`: what Discord would have posted (deleted ones stay, marked `deleted`). */
export interface DiscordPeer extends SinkPeer<DiscordMessage> {
  webhookUrl(id?: string, token?: string): string;
  /** The webhook now answers 404 Unknown Webhook (it was deleted in Discord). */
  deleteWebhook(id: string): void;
  /** The next execute answers 429 with `retry_after: seconds`. */
  rateLimitNext(seconds: number, global?: boolean): void;
  /** The webhook posts into a forum channel: a post needs `thread_name` (a new post) or `thread_id`. */
  makeForum(id: string): void;
  /** A message by id (deleted ones too); undefined when none was posted with that id. */
  message(id: string): DiscordMessage | undefined;
  /** A person deleted the message in Discord: later edits and deletes of it answer 10008. */
  deleteMessage(id: string): void;
  /** A person deleted the thread in Discord: posts to it answer 404 10003. */
  deleteThread(id: string): void;
  /** The messages in one thread, oldest first. */
  threadMessages(threadId: string): DiscordMessage[];
}

/** What every webhook of the peer answers as its guild and channel. */
export const DISCORD_PEER_GUILD_ID = '1000000000000000002';
export const DISCORD_PEER_CHANNEL_ID = '1000000000000000001';

const PATH = /^\/api(?:\/v\d+)?\/webhooks\/(\d+)\/([^/]+)(?:\/messages\/([^/]+))?$/;
const MAX_CONTENT = 2000;
const MAX_THREAD_NAME = 100;
/** The fields of a message an edit changes. */
const EDITABLE = ['content', 'embeds', 'allowed_mentions', 'components'] as const;

const discordError = (status: number, code: number, message: string, extra: Record<string, unknown> = {}): Reply => ({
  status,
  body: { message, code, ...extra },
});
const unknownMessage = (): Reply => discordError(404, 10008, 'Unknown Message');

/** Discord's 429 body and headers. */
export function discordRateLimit(seconds: number, global = false): Reply {
  return {
    status: 429,
    headers: {
      'retry-after': String(Math.ceil(seconds)),
      'x-ratelimit-limit': '5',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset-after': String(seconds),
      'x-ratelimit-scope': global ? 'global' : 'shared',
      ...(global ? { 'x-ratelimit-global': 'true' } : {}),
    },
    body: { message: 'You are being rate limited.', retry_after: seconds, global },
  };
}

/** Why a message's content is refused (Discord's 400s), or null. */
function invalidContent(payload: Record<string, unknown>): Reply | null {
  const content = typeof payload.content === 'string' ? payload.content : '';
  const embeds = Array.isArray(payload.embeds) ? payload.embeds : [];
  if (content.length > MAX_CONTENT) {
    return discordError(400, 50035, 'Invalid Form Body', {
      errors: {
        content: { _errors: [{ code: 'BASE_TYPE_MAX_LENGTH', message: `Must be ${MAX_CONTENT} or fewer in length.` }] },
      },
    });
  }
  if (content === '' && embeds.length === 0 && payload.components === undefined)
    return discordError(400, 50006, 'Cannot send an empty message');
  return null;
}

const objectBody = (body: unknown): Record<string, unknown> | null =>
  body !== null && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : null;

export async function startDiscord(): Promise<DiscordPeer> {
  const messages: DiscordMessage[] = [];
  const byId = new Map<string, DiscordMessage>();
  const created = new Map<string, string>();
  const deleted = new Set<string>();
  const forums = new Set<string>();
  const deletedThreads = new Set<string>();
  let snowflake = 1_100_000_000_000_000_000n;

  /** The message object Discord answers. */
  const answer = (msg: DiscordMessage): Reply => ({
    body: {
      id: msg.id,
      type: 0,
      content: typeof msg.payload.content === 'string' ? msg.payload.content : '',
      embeds: Array.isArray(msg.payload.embeds) ? msg.payload.embeds : [],
      channel_id: msg.threadId ?? DISCORD_PEER_CHANNEL_ID,
      author: {
        bot: true,
        id: msg.webhookId,
        username: typeof msg.payload.username === 'string' ? msg.payload.username : 'Herald',
        avatar: null,
        discriminator: '0000',
      },
      timestamp: created.get(msg.id),
      edited_timestamp: msg.edited ? new Date().toISOString() : null,
      webhook_id: msg.webhookId,
      mentions: [],
      pinned: false,
      tts: false,
    },
  });

  /** Where an execute goes: the thread it names or opens, or a 400/404 as Discord answers it. */
  const placeOf = (
    webhookId: string,
    req: RecordedRequest,
    payload: Record<string, unknown>,
  ): { threadId: string | null; threadName: string | null } | Reply => {
    const threadId = req.query.thread_id ?? null;
    const threadName = typeof payload.thread_name === 'string' ? payload.thread_name : null;
    if (threadId !== null && deletedThreads.has(threadId)) return discordError(404, 10003, 'Unknown Channel');
    if (threadName !== null && !forums.has(webhookId))
      return discordError(400, 220003, 'Webhooks can only create threads in forum channels');
    if (threadName !== null && (threadName.trim() === '' || threadName.length > MAX_THREAD_NAME)) {
      return discordError(400, 50035, 'Invalid Form Body', {
        errors: {
          thread_name: {
            _errors: [{ code: 'BASE_TYPE_BAD_LENGTH', message: `Must be between 1 and ${MAX_THREAD_NAME} in length.` }],
          },
        },
      });
    }
    if (forums.has(webhookId) && threadId === null && threadName === null)
      return discordError(400, 220001, 'Webhooks posted to forum channels must have a thread_name or thread_id');
    return { threadId, threadName };
  };

  const execute = (webhookId: string, req: RecordedRequest): Reply => {
    const payload = objectBody(req.body);
    if (payload === null) return discordError(400, 50006, 'Cannot send an empty message');
    const invalid = invalidContent(payload);
    if (invalid !== null) return invalid;
    const place = placeOf(webhookId, req, payload);
    if (!('threadId' in place)) return place;
    const id = String(++snowflake);
    // A forum post's thread has its starter message's id.
    const threadId = place.threadName !== null ? id : place.threadId;
    const msg: DiscordMessage = {
      id,
      webhookId,
      threadId,
      threadName: place.threadName,
      payload,
      edits: [],
      edited: false,
      deleted: false,
    };
    messages.push(msg);
    byId.set(id, msg);
    created.set(id, new Date().toISOString());
    return req.query.wait === 'true' ? answer(msg) : { status: 204 };
  };

  /** GET, PATCH or DELETE of one message of the webhook. */
  const onMessage = (webhookId: string, messageId: string, req: RecordedRequest): Reply => {
    const msg = byId.get(messageId);
    if (
      msg === undefined ||
      msg.deleted ||
      msg.webhookId !== webhookId ||
      (req.query.thread_id ?? null) !== msg.threadId
    )
      return unknownMessage();
    if (req.method === 'GET') return answer(msg);
    if (req.method === 'DELETE') {
      msg.deleted = true;
      return { status: 204 };
    }
    if (req.method !== 'PATCH') return discordError(405, 0, '405: Method Not Allowed');
    const patch = objectBody(req.body);
    if (patch === null) return discordError(400, 50109, 'The request body contains invalid JSON.');
    const next = { ...msg.payload };
    for (const k of EDITABLE) if (k in patch) next[k] = patch[k];
    const invalid = invalidContent(next);
    if (invalid !== null) return invalid;
    msg.payload = next;
    msg.edits.push(patch);
    msg.edited = true;
    return answer(msg);
  };

  const respond = (req: RecordedRequest): Reply => {
    const m = PATH.exec(req.path);
    if (!m) return discordError(404, 0, '404: Not Found');
    const id = m[1]!;
    const token = m[2]!;
    if (deleted.has(id)) return discordError(404, 10015, 'Unknown Webhook');
    if (m[3] !== undefined) return onMessage(id, m[3], req);
    if (req.method === 'GET') {
      return {
        body: {
          application_id: null,
          avatar: null,
          channel_id: DISCORD_PEER_CHANNEL_ID,
          guild_id: DISCORD_PEER_GUILD_ID,
          id,
          name: 'Herald',
          type: 1,
          token,
        },
      };
    }
    if (req.method !== 'POST') return discordError(405, 0, '405: Method Not Allowed');
    return execute(id, req);
  };

  const sink = await startHttpSink({ respond });
  return {
    ...sinkPeer(sink, messages, () => {
      byId.clear();
      created.clear();
    }),
    webhookUrl: (id = '1234567890123456789', token = 'heraldTestWebhookToken_abcdefghijklmnop') =>
      `${sink.url}/api/webhooks/${id}/${token}`,
    deleteWebhook: (id) => void deleted.add(id),
    rateLimitNext: (seconds, global) =>
      sink.script({ ...discordRateLimit(seconds, global), match: (r) => r.method === 'POST' }),
    makeForum: (id) => void forums.add(id),
    message: (id) => byId.get(id),
    deleteMessage(id) {
      const msg = byId.get(id);
      if (msg !== undefined) msg.deleted = true;
    },
    deleteThread: (id) => void deletedThreads.add(id),
    threadMessages: (threadId) => messages.filter((m) => m.threadId === threadId),
  };
}
