import { join, resolve } from 'node:path';
import { EmbeddedRedisError } from './errors.js';

/** sun_path is 108 bytes on Linux, including the terminating NUL. */
const SOCKET_PATH_MAX = 107;
/** How often a waiter looks again: for the lock, a starting server, a stopping one. */
export const POLL_MS = 50;

export interface Paths {
  dir: string;
  socketPath: string;
  pidFile: string;
  lockFile: string;
  logFile: string;
  /** `{server_pid, owner_pid}`: which server Herald started, and which process started it. */
  ownerFile: string;
}

/** The files of the server under `<dataDir>/redis`; refuses a socket path the kernel would not take. */
export function embeddedPaths(dataDir: string): Paths {
  const dir = resolve(dataDir, 'redis');
  const socketPath = join(dir, 'redis.sock');
  if (Buffer.byteLength(socketPath) > SOCKET_PATH_MAX) {
    throw new EmbeddedRedisError(
      `The embedded Redis socket path ${socketPath} is ${Buffer.byteLength(socketPath)} bytes; unix sockets allow at most ${SOCKET_PATH_MAX}. ` +
        'Set HERALD_DATA_DIR to a shorter path (e.g. /var/lib/herald) or set REDIS_URL.',
    );
  }
  return {
    dir,
    socketPath,
    pidFile: join(dir, 'redis.pid'),
    lockFile: join(dir, 'start.lock'),
    logFile: join(dir, 'redis.log'),
    ownerFile: join(dir, 'owner.json'),
  };
}
