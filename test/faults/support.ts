import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import pino, { type Logger } from 'pino';
import { CHANNEL_TYPES } from '../../src/channels/index.js';
import type { ChannelSenders, OutboundMessage } from '../../src/ports/index.js';
import { freePort } from '../support/child.js';
import { waitForRedis } from '../support/redis.js';

/**
 * A private redis-server for destructive tests (SHUTDOWN, SIGSTOP): its own port and data
 * directory, AOF with fsync on every write so a restart on the same port and directory brings
 * back everything acknowledged. Never the shared test Redis.
 */
export interface PrivateRedis {
  port: number;
  url: string;
  proc: ChildProcess;
  /** SHUTDOWN NOSAVE: Redis stops as a crash would, keeping only what the AOF has. */
  shutdown(): Promise<void>;
  /** Starts it again on the same port and directory (resolves once it answers PING). */
  restart(): Promise<void>;
  pause(): void;
  resume(): void;
  close(): Promise<void>;
}

export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'herald-faults-redis-'));
  const url = `redis://127.0.0.1:${port}`;
  const spawnIt = () =>
    spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        dir,
        '--save',
        '',
        '--appendonly',
        'yes',
        '--appendfsync',
        'always',
        '--maxmemory-policy',
        'noeviction',
      ],
      {
        stdio: 'ignore',
      },
    );
  const ready = () => waitForRedis(url, 30_000);
  const state = { proc: spawnIt() };
  await ready();
  const exited = (p: ChildProcess) =>
    p.exitCode !== null || p.signalCode !== null
      ? Promise.resolve()
      : new Promise<void>((r) => p.once('exit', () => r()));
  const self: PrivateRedis = {
    port,
    url,
    get proc() {
      return state.proc;
    },
    async shutdown() {
      const r = new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null });
      r.on('error', () => undefined);
      await r.call('SHUTDOWN', 'NOSAVE').catch(() => undefined);
      r.disconnect();
      await exited(state.proc);
    },
    async restart() {
      state.proc = spawnIt();
      await ready();
    },
    pause() {
      state.proc.kill('SIGSTOP');
    },
    resume() {
      state.proc.kill('SIGCONT');
    },
    async close() {
      state.proc.kill('SIGCONT');
      state.proc.kill('SIGKILL');
      await exited(state.proc);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return self;
}

/**
 * A TCP relay in front of Redis that can make it unreachable: `cut()` resets every connection and
 * refuses new ones (as a dead host or a firewall change looks), `heal()` lets them through again.
 */
export interface TcpRelay {
  url: string;
  cut(): void;
  heal(): void;
  close(): Promise<void>;
}

export async function startRelay(targetPort: number): Promise<TcpRelay> {
  const sockets = new Set<Socket>();
  let open = true;
  const server: Server = createServer((client) => {
    if (!open) {
      client.destroy();
      return;
    }
    const upstream = connect(targetPort, '127.0.0.1');
    sockets.add(client).add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address();
  if (!addr || typeof addr !== 'object') throw new Error('relay has no port');
  return {
    url: `redis://127.0.0.1:${addr.port}`,
    cut() {
      open = false;
      for (const s of sockets) s.destroy();
      sockets.clear();
    },
    heal() {
      open = true;
    },
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

/** In-process senders that record every message (by delivery id) and always deliver. */
export function recordingSenders(): { senders: ChannelSenders; sent: OutboundMessage[] } {
  const sent: OutboundMessage[] = [];
  const senders = Object.fromEntries(
    CHANNEL_TYPES.map((t) => [
      t,
      {
        send: (_target: unknown, message: OutboundMessage) => {
          sent.push(message);
          return Promise.resolve({ outcome: 'delivered', httpStatus: 200, providerCode: null, latencyMs: 1 });
        },
      },
    ]),
  ) as unknown as ChannelSenders;
  return { senders, sent };
}

/** A pino logger whose JSON lines are kept in memory (to count what was logged). */
export function memoryLogger(): { log: Logger; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      chunks.push(chunk.toString('utf8'));
      done();
    },
  });
  const log = pino({ level: 'info' }, sink);
  return {
    log,
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}
