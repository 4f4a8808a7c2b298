import { sinkPeer, startHttpSink, type RecordedRequest, type Reply, type SinkPeer } from './http-sink.js';

/**
 * A Google Chat incoming webhook on loopback: `POST /v1/spaces/<space>/messages?key=…&token=…`
 * answers 200 with the created Message. `requestId` makes it idempotent as in Google's API: the
 * same requestId again returns the message already created and creates nothing. Threads follow
 * Google's `messageReplyOption`: without it (MESSAGE_REPLY_OPTION_UNSPECIFIED) every message
 * starts a new thread and a `threadKey` is ignored; with REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD or
 * REPLY_MESSAGE_OR_FAIL the message replies in the thread of its `threadKey` (query parameter, or
 * `thread.threadKey` in the body), the first one under a key (per space) starting it, or in the
 * thread named by `thread.name` (FALLBACK starts a new thread when that one does not exist, OR_FAIL
 * answers 404). Thread names are opaque (`spaces/<space>/threads/<id>`), as Google's are, so a
 * test cannot pass by deriving one from the key. Errors use Google's
 * `{error: {code, message, status}}` shape.
 */
export interface GoogleChatMessage {
  name: string;
  text: string;
  /** The thread it is in; `threadKey` when the message was threaded by one. */
  thread: { name: string; threadKey?: string };
  requestId: string | null;
  payload: Record<string, unknown>;
}

/** `messages`: the messages created (a repeated requestId does not add one). */
export interface GoogleChatPeer extends SinkPeer<GoogleChatMessage> {
  webhookUrl(space?: string): string;
  /** The next post answers 429 RESOURCE_EXHAUSTED. */
  rateLimitNext(): void;
  /** The messages created in each thread, by thread name, threads and messages in creation order. */
  threads(): Map<string, GoogleChatMessage[]>;
  /** The messages created in one thread (by its name), oldest first. */
  threadMessages(threadName: string): GoogleChatMessage[];
}

const REPLY_OPTIONS = new Set([
  'MESSAGE_REPLY_OPTION_UNSPECIFIED',
  'REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD',
  'REPLY_MESSAGE_OR_FAIL',
]);

const PATH = /^\/v1\/spaces\/([^/]+)\/messages$/;

export const googleError = (code: number, status: string, message: string): Reply => ({
  status: code,
  body: { error: { code, message, status } },
});

export async function startGoogleChat(): Promise<GoogleChatPeer> {
  const messages: GoogleChatMessage[] = [];
  const byRequestId = new Map<string, GoogleChatMessage>();
  /** Thread names by `<space> <threadKey>`, and every thread name ever created. */
  const threadOfKey = new Map<string, string>();
  const threadNames = new Set<string>();
  let counter = 0;
  let threadCounter = 0;

  const newThread = (space: string): string => {
    const name = `spaces/${space}/threads/thr${String(++threadCounter).padStart(6, '0')}`;
    threadNames.add(name);
    return name;
  };

  /** Where a new message goes, as Google decides it from messageReplyOption; a Reply is an error. */
  const placeIn = (
    space: string,
    option: string,
    payload: Record<string, unknown>,
    queryKey: string | undefined,
  ): GoogleChatMessage['thread'] | Reply => {
    if (!REPLY_OPTIONS.has(option))
      return googleError(400, 'INVALID_ARGUMENT', `Invalid value at 'message_reply_option' (${option}).`);
    // The default starts a new thread and ignores any thread key or name given.
    if (option === 'MESSAGE_REPLY_OPTION_UNSPECIFIED') return { name: newThread(space) };
    const asked =
      payload.thread !== null && typeof payload.thread === 'object'
        ? (payload.thread as { name?: unknown; threadKey?: unknown })
        : {};
    const key = queryKey ?? (typeof asked.threadKey === 'string' ? asked.threadKey : undefined);
    if (key !== undefined) {
      const id = `${space} ${key}`;
      const name = threadOfKey.get(id) ?? newThread(space);
      threadOfKey.set(id, name);
      return { name, threadKey: key };
    }
    if (typeof asked.name === 'string' && threadNames.has(asked.name)) return { name: asked.name };
    if (typeof asked.name === 'string' && option === 'REPLY_MESSAGE_OR_FAIL')
      return googleError(404, 'NOT_FOUND', 'Requested entity was not found.');
    return { name: newThread(space) };
  };

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
    if (!req.query.key || !req.query.token)
      return googleError(401, 'UNAUTHENTICATED', 'Request is missing required authentication credential.');
    const body = req.body;
    if (body === null || typeof body !== 'object' || Array.isArray(body))
      return googleError(400, 'INVALID_ARGUMENT', 'Invalid JSON payload received.');
    const payload = body as Record<string, unknown>;
    if (!payload.text && !payload.cardsV2 && !payload.cards)
      return googleError(400, 'INVALID_ARGUMENT', 'Message cannot be empty. Discarded message.');
    const requestId = req.query.requestId ?? null;
    const existing = requestId === null ? undefined : byRequestId.get(requestId);
    if (existing) return { body: present(existing, space) };
    const thread = placeIn(
      space,
      req.query.messageReplyOption ?? 'MESSAGE_REPLY_OPTION_UNSPECIFIED',
      payload,
      req.query.threadKey,
    );
    if (!('name' in thread)) return thread;
    const id = `herald${String(++counter).padStart(6, '0')}`;
    const msg: GoogleChatMessage = {
      name: `spaces/${space}/messages/${id}.${id}`,
      text: typeof payload.text === 'string' ? payload.text : '',
      thread,
      requestId,
      payload,
    };
    messages.push(msg);
    if (requestId !== null) byRequestId.set(requestId, msg);
    return { body: present(msg, space) };
  };

  const threads = (): Map<string, GoogleChatMessage[]> => {
    const out = new Map<string, GoogleChatMessage[]>();
    for (const msg of messages) out.set(msg.thread.name, [...(out.get(msg.thread.name) ?? []), msg]);
    return out;
  };

  const sink = await startHttpSink({ respond });
  const forget = () => {
    byRequestId.clear();
    threadOfKey.clear();
    threadNames.clear();
  };
  return {
    ...sinkPeer(sink, messages, forget),
    webhookUrl: (space = 'AAAAherald') =>
      `${sink.url}/v1/spaces/${space}/messages?key=heraldTestKey&token=heraldTestToken`,
    rateLimitNext: () =>
      sink.script(googleError(429, 'RESOURCE_EXHAUSTED', 'Resource has been exhausted (e.g. check quota).')),
    threads,
    threadMessages: (threadName) => threads().get(threadName) ?? [],
  };
}
