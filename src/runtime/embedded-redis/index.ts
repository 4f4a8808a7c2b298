import { mkdirSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { presence, probe, type Presence } from './client.js';
import { EmbeddedRedisError } from './errors.js';
import { readPid, serverAlive, withLock } from './lock.js';
import { embeddedPaths, POLL_MS, type Paths } from './paths.js';
import { shutdown, spawnServer } from './server.js';

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
 *
 * lock.ts holds the lock and pidfile, server.ts starts and stops the process, client.ts speaks
 * to it (over ioredis).
 */

export { EmbeddedRedisError, MISSING_REDIS_MESSAGE } from './errors.js';

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
  /** False: only reuse a running server, never start one (NotRunningError when none runs). */
  start?: boolean;
}

/** openEmbeddedRedis with `start: false` found no server running on the data directory. */
export class NotRunningError extends EmbeddedRedisError {}

/** Reuses the server answering on `<dataDir>/redis/redis.sock`, or starts one. */
export async function openEmbeddedRedis(opts: EmbeddedRedisOptions): Promise<EmbeddedRedis> {
  const paths = embeddedPaths(opts.dataDir);
  mkdirSync(paths.dir, { recursive: true, mode: 0o700 });
  const deadline = Date.now() + (opts.startTimeoutMs ?? 30_000);

  // Every decision (reuse, start, stop) is taken under the lock, so a process reusing the server
  // and one stopping it never cross: either the stopper sees the reuser's presence, or the reuser
  // finds the server gone and starts a new one.
  for (;;) {
    const opened = await withLock(paths, deadline, () => reuseOrStart(paths, opts, deadline));
    if (opened) return opened;
    if (Date.now() > deadline) {
      const pid = readPid(paths.pidFile);
      throw new EmbeddedRedisError(
        pid !== null && serverAlive(paths.pidFile)
          ? `A redis-server (pid ${pid}) runs on ${paths.dir} but does not answer on ${paths.socketPath}; stop it before starting Herald (two servers must never share one data directory).`
          : `The embedded Redis on ${paths.socketPath} did not become ready in time; see ${paths.logFile}.`,
      );
    }
    await sleep(POLL_MS);
  }
}

/** Runs under the lock: the open server, or null to look again (it is busy, or went away). */
async function reuseOrStart(paths: Paths, opts: EmbeddedRedisOptions, deadline: number): Promise<EmbeddedRedis | null> {
  const state = await probe(paths.socketPath);
  if (state.kind === 'refused') {
    throw new EmbeddedRedisError(
      `Something answers on ${paths.socketPath} but not as Herald's Redis (${state.reply}); stop it or set REDIS_URL.`,
    );
  }
  if (state.kind === 'up') {
    const link = await presence(paths.socketPath);
    if (link) opts.log.info({ socket: paths.socketPath }, 'reusing the Redis already running on the data directory');
    return link && handle(paths, false, link, opts.log);
  }
  // busy: a server loading its AOF (or shutting down) is waited for, never replaced.
  if (state.kind === 'down' && !serverAlive(paths.pidFile)) {
    if (opts.start === false) throw new NotRunningError(`No Redis runs on ${paths.socketPath}.`);
    await spawnServer(paths, opts.binary ?? 'redis-server', opts.log, deadline);
    const link = await presence(paths.socketPath);
    return link && handle(paths, true, link, opts.log);
  }
  return null;
}

/**
 * The open server. `link` is this process's presence: a connection held open for as long as the
 * process uses the server, so another process deciding whether to stop it counts this one.
 */
function handle(paths: Paths, started: boolean, link: Presence, log: Logger): EmbeddedRedis {
  let stopping: Promise<void> | null = null;
  return {
    socketPath: paths.socketPath,
    started,
    stop() {
      link.close();
      stopping ??= withLock(paths, Date.now() + 5000, () => shutdown(paths, log)).catch((err: unknown) => {
        log.warn({ err }, 'could not stop the embedded Redis; it is left running');
      });
      return stopping;
    },
  };
}
