import type * as Inspector from 'node:inspector';
import { performance } from 'node:perf_hooks';
import { getHeapSpaceStatistics } from 'node:v8';
import type { Logger } from 'pino';
import { loadCHeapRelease, type CHeapRelease } from './c-heap.js';

/**
 * Gives memory back to the system once a burst of work is over (HERALD_MEMORY_TRIM_IDLE_MS).
 *
 * Why: under load V8 grows its young generation for throughput (up to 32 MB on Node 20, 128 MB
 * on Node 24) and keeps it committed afterwards. Its own memory reducer does give it back, but only
 * after tens of seconds of quiet (about 27 s after 5,000 deliveries, measured with `npm run
 * bench`), so a Herald that works in bursts spends most of its life at its peak size. Capping the
 * young generation instead costs throughput in every burst (docs/performance.md).
 *
 * What: every TRIM_DEFAULTS.checkMs the event loop's utilization over the interval is read.
 * Once it has stayed under IDLE_UTILIZATION for `idleMs`, and the young generation has grown by
 * `minYoungBytes` since the last trim left it (about 1 MB: "it grew in a burst"), one
 * memory-reducing collection is asked for. That collection runs while nothing else does (a few
 * tens of ms); the next burst grows the young generation again. At most one per `minGapMs`.
 * On the next look after it, if the loop is still idle, the C library is asked to give back what
 * is free in its heaps (runtime/c-heap.ts): the collection has just freed the Buffers' memory
 * there, and V8 frees their backing stores on its own threads just after it returns.
 *
 * How: through an in-process inspector session (`node:inspector` Session, no port is opened),
 * whose HeapProfiler.collectGarbage asks V8 for the full, memory-reducing collection its memory
 * reducer would do later: it also shrinks the young generation and compacts the old one. Node
 * offers no other way to ask for it (`global.gc` needs a start-up flag and does not shrink).
 */

/** The event loop counts as idle below this utilization (a few timers and sweeps run when idle). */
export const IDLE_UTILIZATION = 0.05;

/** What the trimmer looks at and does; injected so tests can drive it without V8. */
export interface TrimParts {
  /** Event-loop utilization (0..1) since the previous call. */
  utilization(): number;
  /** Bytes committed to V8's young generation now. */
  youngBytes(): number;
  /** One memory-reducing collection; resolves when it is done. */
  collect(): Promise<void>;
  /** Gives the C library's free memory back to the system, when this process can (c-heap.ts). */
  releaseFreed?(): Promise<void>;
  /** A monotonic clock in ms. */
  now(): number;
}

export interface MemoryTrimOptions {
  /** How long the loop must have been idle (ms). */
  idleMs: number;
  /** Growth of the young generation since the last trim (from 0 before the first) worth giving back. */
  minYoungBytes: number;
  /** The shortest time between two trims (ms). */
  minGapMs: number;
  /** Told after each trim (how long it took, and the young generation's size before and after). */
  onTrim?: (t: { ms: number; youngBefore: number; youngAfter: number }) => void;
  /** Told after the C library's free memory was given back (how long that took). */
  onRelease?: (t: { ms: number }) => void;
  onError?: (err: unknown) => void;
}

export interface MemoryTrim {
  /** One look (what the timer runs): exposed for tests. Resolves when a trim it started is done. */
  check(): Promise<void>;
  stop(): void;
}

/** How often utilization is read, the growth worth giving back, and the shortest gap between trims. */
export const TRIM_DEFAULTS = { checkMs: 250, minYoungBytes: 8 * 1024 * 1024, minGapMs: 10_000 } as const;

/** The trimmer, without its timer (see startMemoryTrim). */
export function memoryTrim(parts: TrimParts, o: MemoryTrimOptions): MemoryTrim {
  let quietSince: number | null = null;
  let lastTrim = -Infinity;
  /** What the last trim left (0 before the first): growth is counted from there. */
  let floor = 0;
  let running = false;
  let stopped = false;
  /** A collection has run; the C library's free memory is given back at the next idle look. */
  let releasePending = false;
  /** Runs one step (a collection or a release) alone; a failure is reported, never thrown. */
  const alone = async (step: () => Promise<void>): Promise<void> => {
    running = true;
    try {
      await step();
    } catch (err) {
      o.onError?.(err);
    } finally {
      running = false;
      // The step itself kept the loop busy: that is not load.
      parts.utilization();
    }
  };
  return {
    async check() {
      if (stopped || running) return;
      const now = parts.now();
      if (parts.utilization() >= IDLE_UTILIZATION) {
        quietSince = null;
        return;
      }
      quietSince ??= now;
      if (releasePending && parts.releaseFreed) {
        releasePending = false;
        await alone(async () => {
          await parts.releaseFreed?.();
          o.onRelease?.({ ms: parts.now() - now });
        });
        return;
      }
      if (now - quietSince < o.idleMs || now - lastTrim < o.minGapMs) return;
      const youngBefore = parts.youngBytes();
      if (youngBefore < floor + o.minYoungBytes) return;
      lastTrim = now;
      await alone(async () => {
        await parts.collect();
        const youngAfter = parts.youngBytes();
        // A young generation held large by the operator (--min-semi-space-size) does not shrink:
        // it is not trimmed again until it grows by minYoungBytes beyond that.
        floor = youngAfter;
        releasePending = true;
        o.onTrim?.({ ms: parts.now() - now, youngBefore, youngAfter });
      });
      // Quiet starts again after a collection.
      quietSince = null;
    },
    stop() {
      stopped = true;
    },
  };
}

/**
 * Starts the trimmer on Node's own measurements (performance.eventLoopUtilization, the heap's
 * space statistics, the inspector), with glibc's malloc_trim after each collection (c-heap.ts).
 * Resolves to null when this Node has no inspector (built without it): nothing is trimmed then,
 * and Herald runs as before.
 */
export async function startMemoryTrim(o: { idleMs: number; log: Logger }): Promise<MemoryTrim | null> {
  let inspector: typeof Inspector;
  try {
    inspector = await import('node:inspector');
  } catch {
    o.log.info('memory trim off: this Node was built without the inspector');
    return null;
  }
  let last = performance.eventLoopUtilization();
  /** Loaded at the first release (runtime/c-heap.ts), so a process that never bursts never loads it. */
  let cHeap: Promise<CHeapRelease> | null = null;
  const parts: TrimParts = {
    utilization() {
      const now = performance.eventLoopUtilization();
      const u = performance.eventLoopUtilization(now, last).utilization;
      last = now;
      return u;
    },
    youngBytes: () => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0,
    collect: () => collectViaInspector(inspector),
    releaseFreed: async () => {
      cHeap ??= loadCHeapRelease().then((c) => {
        if ('unavailable' in c)
          o.log.info({ reason: c.unavailable }, "memory trim: the C library's free memory stays with it");
        return c;
      });
      const c = await cHeap;
      if ('release' in c) c.release();
    },
    now: () => performance.now(),
  };
  const trim = memoryTrim(parts, {
    idleMs: o.idleMs,
    minYoungBytes: TRIM_DEFAULTS.minYoungBytes,
    minGapMs: TRIM_DEFAULTS.minGapMs,
    onTrim: (t) =>
      o.log.debug(
        { ms: Math.round(t.ms), young_before: t.youngBefore, young_after: t.youngAfter },
        'idle: memory given back',
      ),
    onRelease: (t) =>
      o.log.debug(
        { ms: Math.round(t.ms), rss_mb: Math.round(process.memoryUsage.rss() / 1048576) },
        "idle: the C library's free memory given back",
      ),
    onError: (err) => o.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'memory trim failed'),
  });
  const timer = setInterval(() => void trim.check(), TRIM_DEFAULTS.checkMs);
  timer.unref();
  return {
    check: () => trim.check(),
    stop() {
      clearInterval(timer);
      trim.stop();
    },
  };
}

/** One HeapProfiler.collectGarbage over a session opened for it (nothing stays connected). */
export function collectViaInspector(inspector: typeof Inspector): Promise<void> {
  const session = new inspector.Session();
  session.connect();
  return new Promise<void>((resolve, reject) => {
    session.post('HeapProfiler.collectGarbage', (err) => {
      // Disconnecting inside the session's own callback hung the process here: do it just after.
      setImmediate(() => session.disconnect());
      if (err) reject(err);
      else resolve();
    });
  });
}
