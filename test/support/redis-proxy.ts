import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/** What a proxy does with one connection's replies (from Redis to Herald). */
export interface ReplyShaper {
  /** A chunk from Redis: write it to `client` now, later or in pieces, in order. */
  data(chunk: Buffer): void;
  /** The connection ends: cancel what is still held. */
  closed?(): void;
  /** How long after Redis closes the client is closed (so held replies still go out); default 0. */
  closeDelayMs?: number;
}

/**
 * A TCP proxy in front of the Redis at `target` for fault tests: what Herald sends passes through
 * as it is; what Redis answers goes through the `shape` of each connection (late, in slices, …).
 */
export async function redisProxy(
  target: URL,
  shape: (client: Socket) => ReplyShaper,
): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port || 6379), target.hostname);
    sockets.add(client);
    sockets.add(upstream);
    client.pipe(upstream);
    const shaper = shape(client);
    upstream.on('data', (chunk: Buffer) => shaper.data(chunk));
    const end = () => {
      shaper.closed?.();
      client.destroy();
      upstream.destroy();
    };
    const delay = shaper.closeDelayMs ?? 0;
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', () => (delay > 0 ? setTimeout(end, delay) : end()));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `redis://127.0.0.1:${port}`,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

/**
 * A proxy in front of the test Redis whose replies can be held back: after `hold()` every reply
 * waits, in order, until `release()` (or `close()`) lets them go; as if Redis had stopped
 * answering.
 */
export async function holdingRedisProxy(
  target: URL,
): Promise<{ url: string; hold(): void; release(): void; close(): Promise<void> }> {
  let holding = false;
  const held: { client: Socket; chunk: Buffer }[] = [];
  const release = (): void => {
    holding = false;
    for (const { client, chunk } of held.splice(0)) if (!client.destroyed) client.write(chunk);
  };
  const proxy = await redisProxy(target, (client) => ({
    data(chunk) {
      if (holding) held.push({ client, chunk });
      else client.write(chunk);
    },
  }));
  return {
    url: proxy.url,
    hold: () => {
      holding = true;
    },
    release,
    close: async () => {
      release();
      await proxy.close();
    },
  };
}
