import { sinkPeer, startHttpSink, type RecordedRequest, type Reply, type SinkPeer } from './http-sink.js';

/**
 * The Telegram Bot API on loopback (point TELEGRAM_API_URL at `url`): `/bot<token>/<method>` with
 * arguments in the query, a JSON body or a form (object arguments such as `reply_parameters` as
 * JSON text there, as Telegram takes them). `sendMessage` → `{ok: true, result: Message}` with
 * `chat: {id, type, username?}` (a `@name` chat is a public channel with a stable id of its own),
 * `editMessageText` → the edited Message, `deleteMessage` → `true`, `getMe` → the bot. Replies:
 * `reply_parameters` (or the older `reply_to_message_id`) to a message of the same chat; one that
 * is not there is dropped with `allow_sending_without_reply`, else refused.
 *
 * Errors are Telegram's: `{ok: false, error_code, description}` with its real descriptions
 * ("Bad Request: message to edit not found", "Bad Request: message is not modified: …",
 * "Bad Request: message to delete not found", "Bad Request: message can't be deleted" for a
 * message `expire`d past the 48 hours a bot may delete it in). A token not accepted → 401
 * `Unauthorized`; 429 carries `parameters.retry_after` (seconds) in the body, as Telegram does.
 */
export interface TelegramCall {
  token: string;
  method: string;
  args: Record<string, unknown>;
  request: RecordedRequest;
}

/** A message sent with sendMessage (an accepted one). */
export interface TelegramMessage {
  /** The chat as the request named it (`-100…` or `@name`). */
  chatId: string;
  /** The chat's numeric id, what the answer said (`chat.id`). */
  chat: number;
  /** The current text (after edits). */
  text: string;
  args: Record<string, unknown>;
  messageId: number;
  /** The message it replies to (from `reply_parameters` or `reply_to_message_id`); null when none. */
  replyTo: number | null;
  /** The text of each edit, oldest first. */
  edits: string[];
  deleted: boolean;
}

export interface TelegramPeer extends SinkPeer<TelegramMessage> {
  calls: TelegramCall[];
  /** The next call of `method` answers 429 with `retry_after`. */
  rateLimitNext(method: string, retryAfterSeconds: number): void;
  /** A message by its id (ids are unique across the peer's chats); undefined when none was sent. */
  message(messageId: number): TelegramMessage | undefined;
  /** A person deleted the message in Telegram: edits and deletes of it answer "not found". */
  deleteMessage(messageId: number): void;
  /** The message is older than the 48 hours a bot may delete it in: deleteMessage answers "message can't be deleted". */
  expire(messageId: number): void;
}

export interface TelegramPeerOptions {
  /** Tokens accepted; default any `<digits>:<secret>` token. */
  tokens?: string[];
}

const PATH = /^\/bot([^/]+)\/([A-Za-z]+)$/;
const fail = (code: number, description: string, extra: Record<string, unknown> = {}): Reply => ({
  status: code,
  body: { ok: false, error_code: code, description, ...extra },
});
const ok = (result: unknown): Reply => ({ body: { ok: true, result } });

export const telegramRateLimit = (seconds: number): Reply =>
  fail(429, `Too Many Requests: retry after ${seconds}`, { parameters: { retry_after: seconds } });

/** Telegram's texts for edits and deletes. */
export const TELEGRAM_ERRORS = {
  editNotFound: 'Bad Request: message to edit not found',
  notModified:
    'Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message',
  deleteNotFound: 'Bad Request: message to delete not found',
  cantDelete: "Bad Request: message can't be deleted",
  replyNotFound: 'Bad Request: message to be replied not found',
} as const;

/** A chat as Telegram describes it in a Message. */
interface Chat {
  id: number;
  type: 'private' | 'group' | 'supergroup' | 'channel';
  title?: string;
  username?: string;
}

/** An object argument (JSON bodies carry objects, queries and forms carry JSON text). */
function objectArg(v: unknown): Record<string, unknown> | null {
  let value = v;
  if (typeof v === 'string') {
    try {
      value = JSON.parse(v) as unknown;
    } catch {
      return null;
    }
  }
  return value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : null;
}

export async function startTelegram(opts: TelegramPeerOptions = {}): Promise<TelegramPeer> {
  const calls: TelegramCall[] = [];
  const messages: TelegramMessage[] = [];
  const expired = new Set<number>();
  /** Numeric ids of the `@name` channels seen, by lower-case name. */
  const channelIds = new Map<string, number>();
  let messageId = 0;

  const record = (req: RecordedRequest): void => {
    const m = PATH.exec(req.path);
    if (!m) return;
    const args: Record<string, unknown> = { ...req.query };
    if (req.body !== null && typeof req.body === 'object' && !Array.isArray(req.body)) Object.assign(args, req.body);
    calls.push({ token: m[1]!, method: m[2]!, args, request: req });
  };

  /** The chat a `chat_id` names: `@name` a public channel (its own stable id), `-100…` a supergroup, another negative id a group, else a private chat. */
  const chatOf = (chatId: unknown): Chat | null => {
    const raw = String(chatId);
    if (raw.startsWith('@')) {
      const name = raw.slice(1);
      const key = name.toLowerCase();
      if (!channelIds.has(key)) channelIds.set(key, -1001000000000 - channelIds.size);
      return { id: channelIds.get(key)!, type: 'channel', title: 'Incidents', username: name };
    }
    if (!/^-?\d+$/.test(raw)) return null;
    const id = Number(raw);
    if (raw.startsWith('-100')) return { id, type: 'supergroup', title: 'Incidents' };
    return id < 0 ? { id, type: 'group', title: 'Incidents' } : { id, type: 'private' };
  };

  /** A live message of the chat `chatId` names, by `message_id`; undefined when there is none. */
  const find = (chatId: unknown, id: unknown): TelegramMessage | undefined => findIn(chatOf(chatId), id);
  const findIn = (chat: Chat | null, id: unknown): TelegramMessage | undefined => {
    const msg = messages.find((m) => m.messageId === Number(id));
    return chat !== null && msg !== undefined && msg.chat === chat.id && !msg.deleted ? msg : undefined;
  };

  const asMessage = (msg: TelegramMessage, botId: number, edited: boolean): Record<string, unknown> => {
    const chat = chatOf(msg.chatId)!;
    return {
      message_id: msg.messageId,
      from: { id: botId, is_bot: true, first_name: 'Herald Test', username: 'herald_test_bot' },
      chat,
      date: Math.floor(Date.now() / 1000),
      ...(edited ? { edit_date: Math.floor(Date.now() / 1000) } : {}),
      ...(msg.replyTo !== null ? { reply_to_message: { message_id: msg.replyTo, chat } } : {}),
      text: msg.text,
    };
  };

  /** The message a send replies to, null for none, or the refusal when it is not there and must be. */
  const replyOf = (args: Record<string, unknown>, chat: Chat): number | null | Reply => {
    const params = objectArg(args.reply_parameters);
    const wanted = params?.message_id ?? args.reply_to_message_id;
    if (wanted === undefined) return null;
    const target = findIn(chat, wanted);
    if (target !== undefined) return target.messageId;
    const allow = params?.allow_sending_without_reply ?? args.allow_sending_without_reply;
    return allow === true || allow === 'true' ? null : fail(400, TELEGRAM_ERRORS.replyNotFound);
  };

  const sendMessage = (args: Record<string, unknown>, botId: number): Reply => {
    const text = args.text;
    if (args.chat_id === undefined || args.chat_id === '') return fail(400, 'Bad Request: chat_id is empty');
    const chat = chatOf(args.chat_id);
    if (chat === null) return fail(400, 'Bad Request: chat not found');
    if (typeof text !== 'string' || text === '') return fail(400, 'Bad Request: message text is empty');
    if (text.length > 4096) return fail(400, 'Bad Request: message is too long');
    const replyTo = replyOf(args, chat);
    if (replyTo !== null && typeof replyTo === 'object') return replyTo;
    const msg: TelegramMessage = {
      chatId: String(args.chat_id),
      chat: chat.id,
      text,
      args,
      messageId: ++messageId,
      replyTo,
      edits: [],
      deleted: false,
    };
    messages.push(msg);
    return ok(asMessage(msg, botId, false));
  };

  const editMessageText = (args: Record<string, unknown>, botId: number): Reply => {
    const text = args.text;
    if (typeof text !== 'string' || text === '') return fail(400, 'Bad Request: message text is empty');
    if (text.length > 4096) return fail(400, 'Bad Request: MESSAGE_TOO_LONG');
    const msg = find(args.chat_id, args.message_id);
    if (msg === undefined) return fail(400, TELEGRAM_ERRORS.editNotFound);
    if (msg.text === text) return fail(400, TELEGRAM_ERRORS.notModified);
    msg.text = text;
    msg.edits.push(text);
    return ok(asMessage(msg, botId, true));
  };

  const deleteMessage = (args: Record<string, unknown>): Reply => {
    const msg = find(args.chat_id, args.message_id);
    if (msg === undefined) return fail(400, TELEGRAM_ERRORS.deleteNotFound);
    if (expired.has(msg.messageId)) return fail(400, TELEGRAM_ERRORS.cantDelete);
    msg.deleted = true;
    return ok(true);
  };

  const respond = (req: RecordedRequest): Reply => {
    const call = calls.find((c) => c.request === req);
    if (!call) return fail(404, 'Not Found');
    const valid = opts.tokens ? opts.tokens.includes(call.token) : /^\d+:[A-Za-z0-9_-]{10,}$/.test(call.token);
    if (!valid) return fail(401, 'Unauthorized');
    const botId = Number(call.token.split(':')[0]);
    switch (call.method) {
      case 'getMe':
        return ok({
          id: botId,
          is_bot: true,
          first_name: 'Herald Test',
          username: 'herald_test_bot',
          can_join_groups: true,
          can_read_all_group_messages: false,
          supports_inline_queries: false,
        });
      case 'sendMessage':
        return sendMessage(call.args, botId);
      case 'editMessageText':
        return editMessageText(call.args, botId);
      case 'deleteMessage':
        return deleteMessage(call.args);
      default:
        return fail(404, 'Not Found');
    }
  };

  const sink = await startHttpSink({
    annotate(req) {
      record(req);
      return {};
    },
    respond,
  });
  return {
    ...sinkPeer(sink, messages, () => {
      calls.length = 0;
      expired.clear();
    }),
    calls,
    rateLimitNext: (method, seconds) =>
      sink.script({ ...telegramRateLimit(seconds), match: (r) => r.path.endsWith(`/${method}`) }),
    message: (id) => messages.find((m) => m.messageId === id),
    deleteMessage(id) {
      const msg = messages.find((m) => m.messageId === id);
      if (msg !== undefined) msg.deleted = true;
    },
    expire: (id) => void expired.add(id),
  };
}
