import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { createConnection, type Socket } from 'node:net';
import { join, resolve } from 'node:path';
import type { Logger } from 'pino';

/**
 * The embedded default of README "Quick start": without REDIS_URL, Herald runs a private `redis-server` under
 * `<HERALD_DATA_DIR>/redis`, reachable only through a unix socket (no TCP port), with AOF
 * `everysec` and `noeviction`. One data directory never gets two servers: a server already
 * answering on the socket (a running Herald, or a CLI command) is reused, and every decision to
 * reuse, start or stop is taken under a lock file, so two processes never both spawn one.
 *
 * Stopping: the process that started the server stops it on exit, unless other clients still use
 * it (a CLI command while Herald runs, or Herald started during a CLI command); then it is left
 * running, and whoever is last out stops it. A server whose starter is still running is never
 * stopped by anyone else, and a server Herald did not start (an operator's) never at all.
 */

/** sun_path is 108 bytes on Linux, including the terminating NUL. */
const SOCKET_PATH_MAX = 107;
const POLL_MS = 50;

export class EmbeddedRedisError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EmbeddedRedisError';
  }
}

export interface EmbeddedRedis {
  /** The unix socket, usable as an ioredis URL. */
  socketPath: string;
  /** True when this process started the server; false when it reused a running one. */
  started: boolean;
  /**
   * Stops the server (SHUTDOWN, so the AOF is flushed) if this process is the one to: see the
   * module comment. Call it after this process's own Redis connections are closed.
   */
  stop(): Promise<void>;
}

export interface EmbeddedRedisOptions {
  dataDir: string;
  log: Logger;
  /** The server binary; `redis-server` from PATH by default. */
  binary?: string;
  /** How long to wait for the server to answer (AOF loading included). */
  startTimeoutMs?: number;
}

export const MISSING_REDIS_MESSAGE =
  'Herald needs Redis: REDIS_URL is not set and no redis-server was found on PATH for the embedded default. ' +
  'Either install redis-server (apt-get install redis-server, or brew install redis) or set REDIS_URL=redis://host:6379.';

/** Reuses the server answering on `<dataDir>/redis/redis.sock`, or starts one. */
export async function openEmbeddedRedis(opts: EmbeddedRedisOptions): Promise<EmbeddedRedis> {
  const dir = resolve(opts.dataDir, 'redis');
  const socketPath = join(dir, 'redis.sock');
  if (Buffer.byteLength(socketPath) > SOCKET_PATH_MAX) {
    throw new EmbeddedRedisError(
      `The embedded Redis socket path ${socketPath} is ${Buffer.byteLength(socketPath)} bytes; unix sockets allow at most ${SOCKET_PATH_MAX}. ` +
        'Set HERALD_DATA_DIR to a shorter path (e.g. /var/lib/herald) or set REDIS_URL.',
    );
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const deadline = Date.now() + (opts.startTimeoutMs ?? 30_000);
  const paths: Paths = {
    dir,
    socketPath,
    pidFile: join(dir, 'redis.pid'),
    lockFile: join(dir, 'start.lock'),
    logFile: join(dir, 'redis.log'),
    ownerFile: join(dir, 'owner.json'),
  };

  // Every decision (reuse, start, stop) is taken under the lock, so a process reusing the server
  // and one stopping it never cross: either the stopper sees the reuser's presence, or the reuser
  // finds the server gone and starts a new one.
  for (;;) {
    const opened = await withLock(paths, deadline, async (): Promise<EmbeddedRedis | null> => {
      const state = await probe(socketPath);
      if (state.kind === 'refused') {
        throw new EmbeddedRedisError(`Something answers on ${socketPath} but not as Herald's Redis (${state.reply}); stop it or set REDIS_URL.`);
      }
      if (state.kind === 'up') {
        const link = await presence(socketPath);
        if (link) opts.log.info({ socket: socketPath }, 'reusing the Redis already running on the data directory');
        return link && handle(paths, false, link, opts.log);
      }
      // busy: a server loading its AOF (or shutting down) is waited for, never replaced.
      if (state.kind === 'down' && !serverAlive(paths.pidFile)) {
        await spawnServer(paths, opts, deadline);
        const link = await presence(socketPath);
        return link && handle(paths, true, link, opts.log);
      }
      return null;
    });
    if (opened) return opened;
    if (Date.now() > deadline) {
      const pid = readPid(paths.pidFile);
      throw new EmbeddedRedisError(
        pid !== null && serverAlive(paths.pidFile)
          ? `A redis-server (pid ${pid}) runs on ${dir} but does not answer on ${socketPath}; stop it before starting Herald (two servers must never share one data directory).`
          : `The embedded Redis on ${socketPath} did not become ready in time; see ${paths.logFile}.`,
      );
    }
    await sleep(POLL_MS);
  }
}

interface Paths {
  dir: string;
  socketPath: string;
  pidFile: string;
  lockFile: string;
  logFile: string;
  /** `{server_pid, owner_pid}`: which server Herald started, and which process started it. */
  ownerFile: string;
}

async function spawnServer(paths: Paths, opts: EmbeddedRedisOptions, deadline: number): Promise<void> {
  // Nobody answers, so a socket file left by a killed server is stale: Redis would replace it anyway.
  rmSync(paths.socketPath, { force: true });
  const args = [
    '--port', '0',
    '--unixsocket', paths.socketPath,
    '--unixsocketperm', '700',
    '--dir', paths.dir,
    '--appendonly', 'yes',
    '--appendfsync', 'everysec',
    '--maxmemory-policy', 'noeviction',
    '--save', '',
    '--daemonize', 'no',
    '--pidfile', paths.pidFile,
  ];
  // The server's output goes to a file, not a pipe: it outlives this process if this one dies.
  const logFd = openSync(paths.logFile, 'a');
  let child: ChildProcess;
  try {
    // Detached: its own process group, so a terminal's Ctrl-C reaches Herald, which stops it in order.
    child = spawn(opts.binary ?? 'redis-server', args, { cwd: paths.dir, detached: true, stdio: ['ignore', logFd, logFd] });
  } finally {
    closeSync(logFd);
  }
  const start: { failure: Error | null } = { failure: null };
  child.on('error', (e: NodeJS.ErrnoException) => {
    start.failure = e.code === 'ENOENT' ? new EmbeddedRedisError(MISSING_REDIS_MESSAGE) : new EmbeddedRedisError(`Could not start redis-server: ${e.message}`);
  });
  child.on('exit', (code, signal) => {
    start.failure ??= new EmbeddedRedisError(`redis-server exited during start-up (${signal ?? `code ${code}`}). Its log (${paths.logFile}) ends with:\n${logTail(paths.logFile)}`);
  });
  child.unref();
  for (;;) {
    if (start.failure) throw start.failure;
    const state = await probe(paths.socketPath);
    if (state.kind === 'up') break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new EmbeddedRedisError(`redis-server did not answer on ${paths.socketPath} in time; see ${paths.logFile}.`);
    }
    await sleep(POLL_MS);
  }
  writeFileSync(paths.ownerFile, `${JSON.stringify({ server_pid: child.pid, owner_pid: process.pid })}\n`, { mode: 0o600 });
  opts.log.info({ socket: paths.socketPath, pid: child.pid }, 'started the embedded Redis');
}

/**
 * The open server. `link` is this process's presence: a connection held open for as long as the
 * process uses the server, so another process deciding whether to stop it counts this one.
 */
function handle(paths: Paths, started: boolean, link: Socket, log: Logger): EmbeddedRedis {
  let stopping: Promise<void> | null = null;
  return {
    socketPath: paths.socketPath,
    started,
    stop() {
      link.destroy();
      stopping ??= withLock(paths, Date.now() + 5000, () => shutdown(paths, log)).catch((err: unknown) => {
        log.warn({ err }, 'could not stop the embedded Redis; it is left running');
      });
      return stopping;
    },
  };
}

/** Runs under the lock: SHUTDOWN if this process is the one to stop the server (module comment). */
async function shutdown(paths: Paths, log: Logger): Promise<void> {
  const serverPid = await serverProcessId(paths.socketPath);
  const owner = readOwner(paths.ownerFile);
  // Not a server Herald started (or already gone): not ours to stop.
  if (serverPid === null || owner?.server_pid !== serverPid) return;
  // Its starter still runs and decides for itself.
  if (owner.owner_pid !== process.pid && processAlive(owner.owner_pid)) return;

  // Our own clients have just quit; give the server a moment to notice before counting others.
  const deadline = Date.now() + 1000;
  let others = await otherClients(paths.socketPath);
  while (others > 0 && Date.now() < deadline) {
    await sleep(POLL_MS);
    others = await otherClients(paths.socketPath);
  }
  if (others > 0) {
    log.warn({ socket: paths.socketPath, clients: others }, 'leaving the embedded Redis running: other processes still use it');
    return;
  }
  // SHUTDOWN fsyncs the AOF before exiting (and, with save "", writes no RDB).
  await command(paths.socketPath, ['SHUTDOWN'], 3000).catch(() => undefined);
  const gone = Date.now() + 5000;
  while (Date.now() < gone) {
    if (!processAlive(serverPid)) {
      rmSync(paths.ownerFile, { force: true });
      log.info({ socket: paths.socketPath }, 'stopped the embedded Redis');
      return;
    }
    await sleep(POLL_MS);
  }
  log.error({ socket: paths.socketPath, pid: serverPid }, 'the embedded Redis did not stop in time; sending SIGTERM');
  process.kill(serverPid, 'SIGTERM');
}

function readOwner(path: string): { server_pid: number; owner_pid: number } | null {
  try {
    const o = JSON.parse(readFileSync(path, 'utf8')) as { server_pid?: unknown; owner_pid?: unknown };
    return typeof o.server_pid === 'number' && typeof o.owner_pid === 'number' ? { server_pid: o.server_pid, owner_pid: o.owner_pid } : null;
  } catch {
    return null;
  }
}

// ── lock, owner and pidfile ──────────────────────────────────────────────────────────────────

/** Runs `fn` holding the data directory's lock, waiting for another holder until the deadline. */
async function withLock<T>(paths: Paths, deadline: number, fn: () => Promise<T>): Promise<T> {
  while (!acquireLock(paths.lockFile)) {
    if (Date.now() > deadline) throw new EmbeddedRedisError(`${paths.lockFile} stayed locked by another Herald process; if none is running, delete it.`);
    await sleep(POLL_MS);
  }
  try {
    return await fn();
  } finally {
    rmSync(paths.lockFile, { force: true });
  }
}

/** Exclusive create of the lock file; a lock whose holder died is broken. */
function acquireLock(path: string): boolean {
  for (let i = 0; i < 2; i++) {
    try {
      const fd = openSync(path, 'wx', 0o600);
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const holder = readPid(path);
      if (holder !== null && processAlive(holder)) return false;
      rmSync(path, { force: true });
    }
  }
  return false;
}

function readPid(path: string): number | null {
  try {
    const pid = Number.parseInt(readFileSync(path, 'utf8').trim(), 10);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A live redis-server named by the pidfile (a pid reused by another program does not count). */
function serverAlive(pidFile: string): boolean {
  const pid = readPid(pidFile);
  if (pid === null || !processAlive(pid)) return false;
  const cmdline = `/proc/${pid}/cmdline`;
  if (!existsSync('/proc/self')) return true;
  try {
    return readFileSync(cmdline, 'utf8').includes('redis');
  } catch {
    return false;
  }
}

function logTail(path: string): string {
  try {
    return readFileSync(path, 'utf8').trimEnd().split('\n').slice(-8).join('\n');
  } catch {
    return '(no log)';
  }
}

// ── a minimal RESP client: PING, INFO, CLIENT LIST, SHUTDOWN; no retries, no reconnects ──────

type Probe = { kind: 'up' } | { kind: 'down' } | { kind: 'busy' } | { kind: 'refused'; reply: string };

/**
 * up: answers PONG. down: nobody listening. busy: a server is there but not ready (loading its
 * AOF, shutting down, slow): waited for, never replaced. refused: something else answers.
 */
async function probe(socketPath: string): Promise<Probe> {
  try {
    const reply = await command(socketPath, ['PING'], 1000);
    if (reply === 'PONG') return { kind: 'up' };
    if (reply === '' || reply.startsWith('LOADING')) return { kind: 'busy' };
    return { kind: 'refused', reply };
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ECONNREFUSED') return { kind: 'down' };
    if (code === 'EACCES') return { kind: 'refused', reply: 'permission denied: the socket belongs to another user' };
    return { kind: 'busy' };
  }
}

/**
 * Opens this process's presence connection, named `herald-<pid>` in CLIENT LIST; it never keeps
 * the process alive. Null when the server went away in between.
 */
function presence(socketPath: string): Promise<Socket | null> {
  return new Promise((resolvePromise) => {
    const socket = createConnection(socketPath);
    socket.once('error', () => resolvePromise(null));
    socket.once('connect', () => {
      socket.on('error', () => undefined);
      socket.on('data', () => undefined);
      socket.write(encode(['CLIENT', 'SETNAME', `herald-${process.pid}`]));
      socket.unref();
      resolvePromise(socket);
    });
  });
}

/** The pid the server itself reports (INFO server), so a stale pidfile cannot mislead. */
async function serverProcessId(socketPath: string): Promise<number | null> {
  try {
    const m = /^process_id:(\d+)/m.exec(await command(socketPath, ['INFO', 'server'], 1000));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

async function otherClients(socketPath: string): Promise<number> {
  try {
    const list = await command(socketPath, ['CLIENT', 'LIST'], 1000);
    // One line per connection, ours included.
    return Math.max(0, list.split('\n').filter((l) => l.trim() !== '').length - 1);
  } catch {
    return 0;
  }
}

/**
 * Sends one command and returns the reply's text (simple string, error or bulk string). Rejects
 * on a connection error or timeout; a connection closed without a reply (SHUTDOWN) resolves ''.
 */
function command(socketPath: string, args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const socket = createConnection(socketPath);
    let buf = Buffer.alloc(0);
    const done = (fn: () => void) => {
      clearTimeout(timer);
      socket.destroy();
      fn();
    };
    const timer = setTimeout(() => done(() => reject(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' }))), timeoutMs);
    socket.on('connect', () => {
      socket.write(encode(args));
    });
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const reply = parseReply(buf);
      if (reply !== null) done(() => resolvePromise(reply));
    });
    socket.on('error', (e) => done(() => reject(e)));
    socket.on('close', () => done(() => resolvePromise('')));
  });
}

function encode(args: string[]): string {
  return `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
}

/** The text of one complete reply in `buf`, or null while incomplete. */
function parseReply(buf: Buffer): string | null {
  const eol = buf.indexOf('\r\n');
  if (eol < 0) return null;
  const head = buf.subarray(1, eol).toString('utf8');
  switch (String.fromCharCode(buf[0] ?? 0)) {
    case '+':
    case '-':
    case ':':
      return head;
    case '$': {
      const len = Number(head);
      if (len < 0) return '';
      if (buf.length < eol + 2 + len + 2) return null;
      return buf.subarray(eol + 2, eol + 2 + len).toString('utf8');
    }
    default:
      return head;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
