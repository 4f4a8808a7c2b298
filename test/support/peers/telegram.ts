import { sinkPeer, startHttpSink, type RecordedRequest, type Reply, type SinkPeer } from './http-sink.js';

/**
 * The Telegram Bot API on loopback (point TELEGRAM_API_URL at `url`): `/bot<token>/<method>` with
 * arguments in the query, a JSON body or a form. `sendMessage` → `{ok: true, result: Message}`,
 * `getMe` → the bot. A token not accepted → 401 `Unauthorized`; 429 carries
 * `parameters.retry_after` (seconds) in the body, as Telegram does.
 */
export interface TelegramCall {
  token: string;
  method: string;
  args: Record<string, unknown>;
  request: RecordedRequest;
}

/** A message sent with sendMessage (an accepted one). */
export interface TelegramMessage {
  chatId: string;
  text: string;
  args: Record<string, unknown>;
  messageId: number;
}

export interface TelegramPeer extends SinkPeer<TelegramMessage> {
  calls: TelegramCall[];
  /** The next call of `method` answers 429 with `retry_after`. */
  rateLimitNext(method: string, retryAfterSeconds: number): void;
}

export interface TelegramPeerOptions {
  /** Tokens accepted; default any `<digits>:<secret>` token. */
  tokens?: string[];
}

const PATH = /^\/bot([^/]+)\/([A-Za-z]+)$/;
const fail = (code: number, description: string, extra: Record<string, unknown> = {}): Reply => ({ status: code, body: { ok: false, error_code: code, description, ...extra } });

export const telegramRateLimit = (seconds: number): Reply => fail(429, `Too Many Requests: retry after ${seconds}`, { parameters: { retry_after: seconds } });

export async function startTelegram(opts: TelegramPeerOptions = {}): Promise<TelegramPeer> {
  const calls: TelegramCall[] = [];
  const messages: TelegramMessage[] = [];
  let messageId = 0;

  const record = (req: RecordedRequest): void => {
    const m = PATH.exec(req.path);
    if (!m) return;
    const args: Record<string, unknown> = { ...req.query };
    if (req.body !== null && typeof req.body === 'object' && !Array.isArray(req.body)) Object.assign(args, req.body);
    calls.push({ token: m[1]!, method: m[2]!, args, request: req });
  };

  const respond = (req: RecordedRequest): Reply => {
    const call = calls.find((c) => c.request === req);
    if (!call) return fail(404, 'Not Found');
    const valid = opts.tokens ? opts.tokens.includes(call.token) : /^\d+:[A-Za-z0-9_-]{10,}$/.test(call.token);
    if (!valid) return fail(401, 'Unauthorized');
    const botId = Number(call.token.split(':')[0]);
    switch (call.method) {
      case 'getMe':
        return { body: { ok: true, result: { id: botId, is_bot: true, first_name: 'Herald Test', username: 'herald_test_bot', can_join_groups: true, can_read_all_group_messages: false, supports_inline_queries: false } } };
      case 'sendMessage': {
        const chatId = call.args.chat_id;
        const text = call.args.text;
        if (chatId === undefined || chatId === '') return fail(400, 'Bad Request: chat_id is empty');
        if (typeof text !== 'string' || text === '') return fail(400, 'Bad Request: message text is empty');
        if (text.length > 4096) return fail(400, 'Bad Request: message is too long');
        const id = ++messageId;
        messages.push({ chatId: String(chatId), text, args: call.args, messageId: id });
        const numericChat = Number(chatId);
        return {
          body: {
            ok: true,
            result: {
              message_id: id,
              from: { id: botId, is_bot: true, first_name: 'Herald Test', username: 'herald_test_bot' },
              chat: Number.isNaN(numericChat) ? { id: -1001000000000, title: 'Incidents', username: String(chatId), type: 'channel' } : { id: numericChat, title: 'Incidents', type: numericChat < 0 ? 'supergroup' : 'private' },
              date: Math.floor(Date.now() / 1000),
              text,
            },
          },
        };
      }
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
    }),
    calls,
    rateLimitNext: (method, seconds) => sink.script({ ...telegramRateLimit(seconds), match: (r) => r.path.endsWith(`/${method}`) }),
  };
}
