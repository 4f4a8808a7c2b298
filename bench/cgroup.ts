import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A memory cgroup of its own for Herald during `npm run bench -- --cgroup-mb=N`: the limit a
 * container runtime (`docker run -m`, a Kubernetes memory limit) puts on the process, so the bench
 * shows whether Herald keeps its throughput inside it and is never OOM-killed.
 *
 * It is created under the harness's own cgroup, through whichever memory controller the machine
 * mounts: cgroup v2 (`memory.max`, `memory.swap.max`, `memory.peak`, `memory.events`) or v1
 * (`memory.limit_in_bytes`, `memory.memsw.limit_in_bytes`, `memory.max_usage_in_bytes`,
 * `memory.oom_control`). Swap is limited too, where the kernel accounts it, so the limit is not
 * met by paging out. Only Herald goes in: its Redis, sink and load generator run outside, as they
 * would in other containers. What the kernel charges is Herald's resident memory plus the page
 * cache it touches (its own files), as in a container.
 */
export interface MemoryCgroup {
  readonly version: 1 | 2;
  readonly path: string;
  readonly limitBytes: number;
  /** A command line that joins the cgroup and then execs `command` (same pid, so /proc figures hold). */
  wrap(command: string, args: string[]): { command: string; args: string[] };
  /** The highest charge since creation (or the last `resetPeak`), in bytes; NaN if not kept. */
  peakBytes(): number;
  /** Resets the peak where the kernel allows it (v1 always; v2 from Linux 6.12 by writing to memory.peak). */
  resetPeak(): void;
  /** Processes the kernel's OOM killer has killed in the cgroup. */
  oomKills(): number;
  /** Times the charge hit the limit and the kernel had to reclaim (v1 failcnt, v2 `max` events). */
  limitHits(): number;
  remove(): void;
}

function ownCgroupPath(controller: 'memory' | ''): string | null {
  for (const line of readFileSync('/proc/self/cgroup', 'utf8').split('\n')) {
    const [, controllers, path] = /^\d+:([^:]*):(.*)$/.exec(line) ?? [];
    if (controllers === undefined || path === undefined) continue;
    if (controller === '' ? controllers === '' : controllers.split(',').includes(controller)) return path;
  }
  return null;
}

/** Where a v2 hierarchy with the memory controller is mounted, if one is. */
function v2Root(): string | null {
  for (const root of ['/sys/fs/cgroup', '/sys/fs/cgroup/unified']) {
    const controllers = join(root, 'cgroup.controllers');
    if (existsSync(controllers) && readFileSync(controllers, 'utf8').split(/\s+/).includes('memory')) return root;
  }
  return null;
}

const swapBytes = (): number =>
  Number(/^SwapTotal:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1] ?? 0) * 1024;
const read = (file: string): string => readFileSync(file, 'utf8').trim();
const field = (text: string, name: string): number =>
  Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1] ?? NaN);

export function createMemoryCgroup(limitBytes: number, name: string): MemoryCgroup {
  const v2 = v2Root();
  const own = v2 === null ? ownCgroupPath('memory') : ownCgroupPath('');
  if (own === null) throw new Error('this process is in no memory cgroup this harness can see (/proc/self/cgroup)');
  const path = v2 === null ? join('/sys/fs/cgroup/memory', own, name) : join(v2, own, name);
  mkdirSync(path);
  const write = (file: string, value: string): void => writeFileSync(join(path, file), value);
  if (v2 !== null) {
    write('memory.max', String(limitBytes));
    if (existsSync(join(path, 'memory.swap.max'))) write('memory.swap.max', '0');
  } else {
    write('memory.limit_in_bytes', String(limitBytes));
    // Only with swap to limit: with none, a memsw limit also stops the kernel counting failcnt.
    if (swapBytes() > 0 && existsSync(join(path, 'memory.memsw.limit_in_bytes')))
      write('memory.memsw.limit_in_bytes', String(limitBytes));
  }
  return {
    version: v2 === null ? 1 : 2,
    path,
    limitBytes,
    wrap: (command, args) => ({
      command: '/bin/sh',
      args: ['-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', path, command, ...args],
    }),
    peakBytes: () => {
      const file = join(path, v2 === null ? 'memory.max_usage_in_bytes' : 'memory.peak');
      return existsSync(file) ? Number(read(file)) : NaN;
    },
    resetPeak: () => {
      try {
        write(v2 === null ? 'memory.max_usage_in_bytes' : 'memory.peak', '0');
      } catch {
        // v2 before Linux 6.12 keeps the peak since creation.
      }
    },
    oomKills: () =>
      v2 === null
        ? field(read(join(path, 'memory.oom_control')), 'oom_kill')
        : field(read(join(path, 'memory.events')), 'oom_kill'),
    limitHits: () => {
      if (v2 !== null) return field(read(join(path, 'memory.events')), 'max');
      // With swap accounted, the combined limit is the one hit first: count both.
      const memsw = join(path, 'memory.memsw.failcnt');
      return Number(read(join(path, 'memory.failcnt'))) + (existsSync(memsw) ? Number(read(memsw)) : 0);
    },
    remove: () => {
      try {
        rmdirSync(path);
      } catch {
        // Still has a process in it (a child that did not exit): the kernel removes nothing then.
      }
    },
  };
}
