import { closeSync, existsSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { EmbeddedRedisError } from './errors.js';
import { POLL_MS, type Paths } from './paths.js';

/** Runs `fn` holding the data directory's lock, waiting for another holder until the deadline. */
export async function withLock<T>(paths: Paths, deadline: number, fn: () => Promise<T>): Promise<T> {
  while (!acquireLock(paths.lockFile)) {
    if (Date.now() > deadline)
      throw new EmbeddedRedisError(
        `${paths.lockFile} stayed locked by another Herald process; if none is running, delete it.`,
      );
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

export function readPid(path: string): number | null {
  try {
    const pid = Number.parseInt(readFileSync(path, 'utf8').trim(), 10);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A live redis-server named by the pidfile (a pid reused by another program does not count). */
export function serverAlive(pidFile: string): boolean {
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
