import { sinkPeer, startHttpSink, type RecordedRequest, type Reply, type SinkPeer } from './http-sink.js';

/**
 * Discord webhooks on loopback: `POST /api[/v10]/webhooks/:id/:token` executes (204, or 200 with
 * the message when `?wait=true`), `GET` the same path returns the webhook object. Errors follow
 * Discord's JSON shape `{message, code}`; 429 carries `retry_after` in seconds (a float) and a
 * Retry-After header.
 */

export interface DiscordMessage {
  id: string;
  webhookId: string;
  threadId: string | null;
  payload: Record<string, unknown>;
}

/** `messages`: what Discord would have posted. */
export interface DiscordPeer extends SinkPeer<DiscordMessage> {
  webhookUrl(id?: string, token?: string): string;
  /** The webhook now answers 404 Unknown Webhook (it was deleted in Discord). */
  deleteWebhook(id: string): void;
  /** The next execute answers 429 with `retry_after: seconds`. */
  rateLimitNext(seconds: number, global?: boolean): void;
}

const PATH = /^\/api(?:\/v\d+)?\/webhooks\/(\d+)\/([^/]+)$/;
const MAX_CONTENT = 2000;

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

export async function startDiscord(): Promise<DiscordPeer> {
  const messages: DiscordMessage[] = [];
  const deleted = new Set<string>();
  let snowflake = 1_100_000_000_000_000_000n;

  const respond = (req: RecordedRequest): Reply => {
    const m = PATH.exec(req.path);
    if (!m) return { status: 404, body: { message: '404: Not Found', code: 0 } };
    const id = m[1]!;
    const token = m[2]!;
    if (deleted.has(id)) return { status: 404, body: { message: 'Unknown Webhook', code: 10015 } };
    if (req.method === 'GET') {
      return { body: { application_id: null, avatar: null, channel_id: '1000000000000000001', guild_id: '1000000000000000002', id, name: 'Herald', type: 1, token } };
    }
    if (req.method !== 'POST') return { status: 405, body: { message: '405: Method Not Allowed', code: 0 } };
    const p = req.body;
    if (p === null || typeof p !== 'object' || Array.isArray(p)) return { status: 400, body: { message: 'Cannot send an empty message', code: 50006 } };
    const payload = p as Record<string, unknown>;
    const content = typeof payload.content === 'string' ? payload.content : '';
    const embeds = Array.isArray(payload.embeds) ? payload.embeds : [];
    if (content.length > MAX_CONTENT) {
      return { status: 400, body: { message: 'Invalid Form Body', code: 50035, errors: { content: { _errors: [{ code: 'BASE_TYPE_MAX_LENGTH', message: `Must be ${MAX_CONTENT} or fewer in length.` }] } } } };
    }
    if (content === '' && embeds.length === 0 && payload.components === undefined) return { status: 400, body: { message: 'Cannot send an empty message', code: 50006 } };
    const msg: DiscordMessage = { id: String(++snowflake), webhookId: id, threadId: req.query.thread_id ?? null, payload };
    messages.push(msg);
    if (req.query.wait !== 'true') return { status: 204 };
    return {
      body: {
        id: msg.id,
        type: 0,
        content,
        embeds,
        channel_id: msg.threadId ?? '1000000000000000001',
        author: { bot: true, id, username: typeof payload.username === 'string' ? payload.username : 'Herald', avatar: null, discriminator: '0000' },
        timestamp: new Date().toISOString(),
        webhook_id: id,
        mentions: [],
        pinned: false,
        tts: false,
      },
    };
  };

  const sink = await startHttpSink({ respond });
  return {
    ...sinkPeer(sink, messages),
    webhookUrl: (id = '1234567890123456789', token = 'heraldTestWebhookToken_abcdefghijklmnop') => `${sink.url}/api/webhooks/${id}/${token}`,
    deleteWebhook: (id) => void deleted.add(id),
    rateLimitNext: (seconds, global) => sink.script({ ...discordRateLimit(seconds, global), match: (r) => r.method === 'POST' }),
  };
}
