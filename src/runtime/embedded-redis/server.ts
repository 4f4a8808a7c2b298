import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { otherClients, probe, sendShutdown, serverProcessId } from './client.js';
import { EmbeddedRedisError, MISSING_REDIS_MESSAGE } from './errors.js';
import { processAlive } from './lock.js';
import { POLL_MS, type Paths } from './paths.js';

/** Runs under the lock: starts `binary` on the data directory and waits until it answers. */
export async function spawnServer(paths: Paths, binary: string, log: Logger, deadline: number): Promise<void> {
  // Nobody answers, so a socket file left by a killed server is stale: Redis would replace it anyway.
  rmSync(paths.socketPath, { force: true });
  const { child, start } = startChild(paths, binary);
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
  writeFileSync(paths.ownerFile, `${JSON.stringify({ server_pid: child.pid, owner_pid: process.pid })}\n`, {
    mode: 0o600,
  });
  log.info({ socket: paths.socketPath, pid: child.pid }, 'started the embedded Redis');
}

function serverArgs(paths: Paths): string[] {
  return [
    '--port',
    '0',
    '--unixsocket',
    paths.socketPath,
    '--unixsocketperm',
    '700',
    '--dir',
    paths.dir,
    '--appendonly',
    'yes',
    '--appendfsync',
    'everysec',
    '--maxmemory-policy',
    'noeviction',
    '--save',
    '',
    '--daemonize',
    'no',
    '--pidfile',
    paths.pidFile,
  ];
}

/** The server process, and why it failed to start once it has (checked between probes). */
function startChild(paths: Paths, binary: string): { child: ChildProcess; start: { failure: Error | null } } {
  // The server's output goes to a file, not a pipe: it outlives this process if this one dies.
  const logFd = openSync(paths.logFile, 'a');
  let child: ChildProcess;
  try {
    // Detached: its own process group, so a terminal's Ctrl-C reaches Herald, which stops it in order.
    child = spawn(binary, serverArgs(paths), { cwd: paths.dir, detached: true, stdio: ['ignore', logFd, logFd] });
  } finally {
    closeSync(logFd);
  }
  const start: { failure: Error | null } = { failure: null };
  child.on('error', (e: NodeJS.ErrnoException) => {
    start.failure =
      e.code === 'ENOENT'
        ? new EmbeddedRedisError(MISSING_REDIS_MESSAGE)
        : new EmbeddedRedisError(`Could not start redis-server: ${e.message}`);
  });
  child.on('exit', (code, signal) => {
    start.failure ??= new EmbeddedRedisError(
      `redis-server exited during start-up (${signal ?? `code ${code}`}). Its log (${paths.logFile}) ends with:\n${logTail(paths.logFile)}`,
    );
  });
  child.unref();
  return { child, start };
}

/** Runs under the lock: SHUTDOWN if this process is the one to stop the server (module comment of index.ts). */
export async function shutdown(paths: Paths, log: Logger): Promise<void> {
  const serverPid = await stoppableServer(paths);
  if (serverPid === null) return;
  const others = await otherClientsAfterGrace(paths.socketPath);
  if (others > 0) {
    log.warn(
      { socket: paths.socketPath, clients: others },
      'leaving the embedded Redis running: other processes still use it',
    );
    return;
  }
  // SHUTDOWN fsyncs the AOF before exiting (and, with save "", writes no RDB).
  await sendShutdown(paths.socketPath).catch(() => undefined);
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

/** The server's pid when this process may stop it; null when that is someone else's call. */
async function stoppableServer(paths: Paths): Promise<number | null> {
  const serverPid = await serverProcessId(paths.socketPath);
  const owner = readOwner(paths.ownerFile);
  // Not a server Herald started (or already gone): not ours to stop.
  if (serverPid === null || owner?.server_pid !== serverPid) return null;
  // Its starter still runs and decides for itself.
  if (owner.owner_pid !== process.pid && processAlive(owner.owner_pid)) return null;
  return serverPid;
}

async function otherClientsAfterGrace(socketPath: string): Promise<number> {
  // Our own clients have just quit; give the server a moment to notice before counting others.
  const deadline = Date.now() + 1000;
  let others = await otherClients(socketPath);
  while (others > 0 && Date.now() < deadline) {
    await sleep(POLL_MS);
    others = await otherClients(socketPath);
  }
  return others;
}

function readOwner(path: string): { server_pid: number; owner_pid: number } | null {
  try {
    const o = JSON.parse(readFileSync(path, 'utf8')) as { server_pid?: unknown; owner_pid?: unknown };
    return typeof o.server_pid === 'number' && typeof o.owner_pid === 'number'
      ? { server_pid: o.server_pid, owner_pid: o.owner_pid }
      : null;
  } catch {
    return null;
  }
}

function logTail(path: string): string {
  try {
    return readFileSync(path, 'utf8').trimEnd().split('\n').slice(-8).join('\n');
  } catch {
    return '(no log)';
  }
}
