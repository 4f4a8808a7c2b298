import { Redis } from 'ioredis';

/**
 * The few commands the embedded server's lifecycle needs (PING, INFO, CLIENT LIST, SHUTDOWN, and
 * a named presence connection), over ioredis. Each answers what it found, once: a short-lived
 * connection per command, bounded, never queued, retried or reconnected, and always closed.
 */

const COMMAND_MS = 1000;
const SHUTDOWN_MS = 3000;

/**
 * up: answers PONG. down: nobody listening. busy: a server is there but not ready (loading its
 * AOF, shutting down, slow): waited for, never replaced. refused: something else answers.
 */
export type Probe = { kind: 'up' } | { kind: 'down' } | { kind: 'busy' } | { kind: 'refused'; reply: string };

/** `timeoutMs` bounds the whole exchange, connect included. */
export async function probe(socketPath: string, timeoutMs = COMMAND_MS): Promise<Probe> {
  try {
    // call(), not ping(): the reply of something that is not Redis need not be PONG.
    const reply = await withConnection(socketPath, timeoutMs, (redis) => redis.call('PING'));
    return reply === 'PONG'
      ? { kind: 'up' }
      : { kind: 'refused', reply: typeof reply === 'string' ? reply : JSON.stringify(reply) };
  } catch (e) {
    return probeFailure(e);
  }
}

function probeFailure(e: unknown): Probe {
  if (e instanceof NotResp) return { kind: 'refused', reply: e.message };
  if (e instanceof Error && e.name === 'ReplyError')
    return e.message.startsWith('LOADING') ? { kind: 'busy' } : { kind: 'refused', reply: e.message };
  const code = (e as NodeJS.ErrnoException).code;
  if (code === 'ENOENT' || code === 'ECONNREFUSED') return { kind: 'down' };
  if (code === 'EACCES') return { kind: 'refused', reply: 'permission denied: the socket belongs to another user' };
  return { kind: 'busy' };
}

/** This process's presence on the server: see `presence`. */
export interface Presence {
  close(): void;
}

/**
 * Opens this process's presence connection, named `herald-<pid>` in CLIENT LIST; it never keeps
 * the process alive. Null when the server went away in between.
 */
export async function presence(socketPath: string): Promise<Presence | null> {
  const link = connection(socketPath, COMMAND_MS, `herald-${process.pid}`);
  // Once open, its only errors are the server going away, which stop() does not need to hear of.
  link.on('error', () => undefined);
  try {
    await link.connect();
  } catch {
    link.disconnect();
    return null;
  }
  link.stream.unref();
  return { close: () => link.disconnect() };
}

/** The pid the server itself reports (INFO server), so a stale pidfile cannot mislead. */
export async function serverProcessId(socketPath: string): Promise<number | null> {
  try {
    const m = /^process_id:(\d+)/m.exec(await withConnection(socketPath, COMMAND_MS, (redis) => redis.info('server')));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/** Connections to the server other than the one asking; 0 when it cannot tell. */
export async function otherClients(socketPath: string): Promise<number> {
  try {
    const list = await withConnection(socketPath, COMMAND_MS, (redis) => redis.client('LIST'));
    // ioredis types CLIENT's replies as unknown; LIST's is one string.
    if (typeof list !== 'string') return 0;
    // One line per connection, ours included.
    return Math.max(0, list.split('\n').filter((l) => l.trim() !== '').length - 1);
  } catch {
    return 0;
  }
}

/**
 * SHUTDOWN, which fsyncs the AOF before the server exits. The server closes the connection
 * instead of answering, so this rejects even when it worked: the caller watches the process.
 */
export async function sendShutdown(socketPath: string): Promise<void> {
  await withConnection(socketPath, SHUTDOWN_MS, (redis) => redis.shutdown());
}

/** The answer on the socket is not RESP: something other than Redis listens there. */
class NotResp extends Error {}

/**
 * Runs `fn` on a fresh connection within one `timeoutMs` budget, connect included, then closes
 * it. Rejects with the socket's own error when the connection fails (so its errno code, ENOENT,
 * ECONNREFUSED or EACCES, tells why), NotResp for an answer that is not Redis's, ETIMEDOUT at the
 * bound, and ioredis's ReplyError for an error reply.
 */
async function withConnection<T>(socketPath: string, timeoutMs: number, fn: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = connection(socketPath, timeoutMs);
  // ioredis reports why a connection failed only as an 'error' event (the promise just says it
  // closed); listening also keeps it from printing every refused probe as an unhandled error.
  const seen: { failure: Error | null } = { failure: null };
  redis.on('error', (e: NodeJS.ErrnoException) => {
    seen.failure ??= e.code === undefined ? new NotResp(e.message.replace(/\. Please report this\.$/, '')) : e;
  });
  const timer = setTimeout(() => {
    seen.failure ??= Object.assign(new Error(`no answer on ${socketPath} within ${timeoutMs} ms`), {
      code: 'ETIMEDOUT',
    });
    redis.disconnect();
  }, timeoutMs);
  try {
    await redis.connect();
    return await fn(redis);
  } catch (e) {
    throw seen.failure ?? e;
  } finally {
    clearTimeout(timer);
    redis.disconnect();
  }
}

function connection(socketPath: string, timeoutMs: number, connectionName?: string): Redis {
  return new Redis({
    path: socketPath,
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    // Nothing but our own commands go on the wire (no HELLO, CLIENT SETINFO, or INFO ready check):
    // a server loading its AOF must answer PING with LOADING rather than be waited for by
    // ioredis, and a socket that may not be Redis's is sent one command only.
    protocol: 2,
    enableReadyCheck: false,
    disableClientInfo: true,
    connectionName,
  });
}
