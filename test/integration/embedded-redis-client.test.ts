import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  otherClients,
  presence,
  probe,
  sendShutdown,
  serverProcessId,
} from '../../src/runtime/embedded-redis/client.js';
import { waitFor } from '../support/wait.js';

/**
 * The embedded server's client (ioredis on a unix socket): what a probe reports for each kind of
 * thing that may or may not listen there, within its bound and without printing anything.
 */
let dir: string;
const servers: Server[] = [];
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'herald-erc-'));
});
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
  vi.restoreAllMocks();
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** A unix-socket server that does `onData` with every chunk it is sent. */
async function fake(name: string, onData: (socket: Socket) => void): Promise<string> {
  const path = join(dir, name);
  const server = createServer((socket) => {
    socket.on('error', () => undefined);
    socket.on('data', () => onData(socket));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(path, resolve));
  return path;
}
const answering = (name: string, reply: string) => fake(name, (s) => s.write(reply));

/** Fails the test if ioredis (or anything) prints while `fn` runs. */
async function quietly<T>(fn: () => Promise<T>): Promise<T> {
  const printed = [vi.spyOn(console, 'error'), vi.spyOn(console, 'warn'), vi.spyOn(console, 'log')];
  const result = await fn();
  await new Promise((r) => setTimeout(r, 20));
  for (const spy of printed) expect(spy).not.toHaveBeenCalled();
  return result;
}

describe('probe', () => {
  it('a socket with no server answers `down` at once and prints nothing', async () => {
    const t0 = Date.now();
    expect(await quietly(() => probe(join(dir, 'none.sock')))).toEqual({ kind: 'down' });
    expect(Date.now() - t0).toBeLessThan(500);
  });

  it('a socket file nobody listens on (a killed server left it) is `down` too', async () => {
    const stale = join(dir, 'stale.sock');
    writeFileSync(stale, '');
    expect(await quietly(() => probe(stale))).toEqual({ kind: 'down' });
  });

  it('PONG is `up`', async () => {
    expect(await probe(await answering('pong.sock', '+PONG\r\n'))).toEqual({ kind: 'up' });
  });

  it('a server loading its AOF, or closing without an answer, is `busy`', async () => {
    expect(await probe(await answering('loading.sock', '-LOADING Redis is loading the dataset in memory\r\n'))).toEqual(
      { kind: 'busy' },
    );
    expect(await quietly(async () => probe(await fake('closing.sock', (s) => s.end())))).toEqual({ kind: 'busy' });
  });

  it('a server that never answers is `busy` within the bound', async () => {
    const silent = await fake('silent.sock', () => undefined);
    const t0 = Date.now();
    expect(await quietly(() => probe(silent, 300))).toEqual({ kind: 'busy' });
    expect(Date.now() - t0).toBeLessThan(1000);
  });

  it('an error reply, or an answer that is not RESP, is `refused` with what was said', async () => {
    expect(await probe(await answering('noauth.sock', '-NOAUTH Authentication required.\r\n'))).toEqual({
      kind: 'refused',
      reply: 'NOAUTH Authentication required.',
    });
    expect(await probe(await answering('int.sock', ':1\r\n'))).toEqual({ kind: 'refused', reply: '1' });
    const http = await quietly(async () => probe(await answering('http.sock', 'HTTP/1.1 400 Bad Request\r\n\r\n')));
    expect(http.kind).toBe('refused');
  });
});

describe('the commands of the lifecycle, on fakes', () => {
  it('counts the other clients in CLIENT LIST, and reads the pid from INFO', async () => {
    const list = 'id=3 name=herald-1\nid=4 name=herald-2\nid=5 name=\n';
    expect(await otherClients(await answering('list.sock', `$${Buffer.byteLength(list)}\r\n${list}\r\n`))).toBe(2);
    const info = '# Server\r\nredis_version:7.0.0\r\nprocess_id:4242\r\n';
    expect(await serverProcessId(await answering('info.sock', `$${Buffer.byteLength(info)}\r\n${info}\r\n`))).toBe(
      4242,
    );
  });

  it('without a server: no clients, no pid, no presence, and nothing printed', async () => {
    const none = join(dir, 'none.sock');
    expect(await quietly(() => otherClients(none))).toBe(0);
    expect(await quietly(() => serverProcessId(none))).toBeNull();
    expect(await quietly(() => presence(none))).toBeNull();
    await quietly(() => expect(sendShutdown(none)).rejects.toThrow());
  });
});

describe('on a real redis-server', () => {
  let server: ChildProcess;
  let socket: string;
  beforeAll(async () => {
    socket = join(dir, 'real.sock');
    server = spawn(
      'redis-server',
      [
        '--port',
        '0',
        '--unixsocket',
        socket,
        '--unixsocketperm',
        '700',
        '--dir',
        dir,
        '--save',
        '',
        '--appendonly',
        'no',
      ],
      { stdio: 'ignore' },
    );
    await waitFor(async () => (await probe(socket)).kind === 'up', {
      timeoutMs: 10_000,
      what: 'redis-server to answer',
    });
  });
  afterAll(() => {
    if (server.exitCode === null) server.kill('SIGKILL');
  });

  it('sees a presence as another client until it closes, and SHUTDOWN stops the server', async () => {
    expect(await serverProcessId(socket)).toBe(server.pid);
    expect(await otherClients(socket)).toBe(0);
    const link = await presence(socket);
    expect(link).not.toBeNull();
    expect(await otherClients(socket)).toBe(1);
    link!.close();
    await waitFor(async () => (await otherClients(socket)) === 0, { timeoutMs: 2000, what: 'the presence to be gone' });

    const exited = new Promise((r) => server.once('exit', r));
    await sendShutdown(socket).catch(() => undefined);
    await exited;
    expect(await probe(socket)).toEqual({ kind: 'down' });
  });
});
