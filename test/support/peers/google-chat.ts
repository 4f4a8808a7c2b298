import { sinkPeer, startHttpSink, type RecordedRequest, type Reply, type SinkPeer } from './http-sink.js';

/**
 * A Google Chat incoming webhook on loopback: `POST /v1/spaces/<space>/messages?key=…&token=…`
 * answers 200 with the created Message. `requestId` makes it idempotent as in Google's API: the
 * same requestId again returns the message already created and creates nothing. `threadKey`
 * (with `messageReplyOption`) puts messages in one thread. Errors use Google's
 * `{error: {code, message, status}}` shape.
 */
export interface GoogleChatMessage {
  name: string;
  text: string;
  thread: { name: string; threadKey?: string };
  requestId: string | null;
  payload: Record<string, unknown>;
}

/** `messages`: the messages created (a repeated requestId does not add one). */
export interface GoogleChatPeer extends SinkPeer<GoogleChatMessage> {
  webhookUrl(space?: string): string;
  /** The next post answers 429 RESOURCE_EXHAUSTED. */
  rateLimitNext(): void;
}

const PATH = /^\/v1\/spaces\/([^/]+)\/messages$/;

export const googleError = (code: number, status: string, message: string): Reply => ({ status: code, body: { error: { code, message, status } } });

export async function startGoogleChat(): Promise<GoogleChatPeer> {
  const messages: GoogleChatMessage[] = [];
  const byRequestId = new Map<string, GoogleChatMessage>();
  let counter = 0;

  const present = (m: GoogleChatMessage, space: string) => ({
    name: m.name,
    sender: { name: 'users/114022495153014004089', displayName: 'Herald', type: 'BOT' },
    text: m.text,
    cards: [],
    createTime: new Date().toISOString(),
    thread: m.thread,
    space: { name: `spaces/${space}`, type: 'ROOM', spaceType: 'SPACE' },
    argumentText: m.text,
  });

  const respond = (req: RecordedRequest): Reply => {
    const m = PATH.exec(req.path);
    if (!m || req.method !== 'POST') return googleError(404, 'NOT_FOUND', 'Requested entity was not found.');
    const space = m[1]!;
    if (!req.query.key || !req.query.token) return googleError(401, 'UNAUTHENTICATED', 'Request is missing required authentication credential.');
    const body = req.body;
    if (body === null || typeof body !== 'object' || Array.isArray(body)) return googleError(400, 'INVALID_ARGUMENT', 'Invalid JSON payload received.');
    const payload = body as Record<string, unknown>;
    if (!payload.text && !payload.cardsV2 && !payload.cards) return googleError(400, 'INVALID_ARGUMENT', 'Message cannot be empty. Discarded message.');
    const requestId = req.query.requestId ?? null;
    const existing = requestId === null ? undefined : byRequestId.get(requestId);
    if (existing) return { body: present(existing, space) };
    const id = `herald${String(++counter).padStart(6, '0')}`;
    const threadKey = req.query.threadKey ?? (payload.thread as { threadKey?: string } | undefined)?.threadKey;
    const msg: GoogleChatMessage = {
      name: `spaces/${space}/messages/${id}.${id}`,
      text: typeof payload.text === 'string' ? payload.text : '',
      thread: { name: `spaces/${space}/threads/${threadKey ?? id}`, ...(threadKey ? { threadKey } : {}) },
      requestId,
      payload,
    };
    messages.push(msg);
    if (requestId !== null) byRequestId.set(requestId, msg);
    return { body: present(msg, space) };
  };

  const sink = await startHttpSink({ respond });
  return {
    ...sinkPeer(sink, messages, () => byRequestId.clear()),
    webhookUrl: (space = 'AAAAherald') => `${sink.url}/v1/spaces/${space}/messages?key=heraldTestKey&token=heraldTestToken`,
    rateLimitNext: () => sink.script(googleError(429, 'RESOURCE_EXHAUSTED', "Resource has been exhausted (e.g. check quota).")),
  };
}
