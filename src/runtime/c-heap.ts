/**
 * Gives the C library's free memory back to the system: glibc's `malloc_trim(0)`, called through
 * koffi (a foreign-function interface for Node, shipped with prebuilt binaries: nothing is
 * compiled at install time, and `npm ci --ignore-scripts` installs it as it is).
 *
 * Why: everything outside V8's own heap — Buffers' backing stores, sockets' read buffers, the
 * working memory of V8's compiler threads — comes from glibc's malloc. Freed, that memory stays
 * with glibc: it gives back only what is free at the very top of a heap, and after a burst most of
 * it lies below a few small blocks still in use. On Node 24 that was 20–30 MB at rest after
 * `npm run bench` (docs/performance.md). `malloc_trim(0)` hands every whole free page back to the
 * kernel, wherever it lies, in a few ms. No Node API calls it, and glibc's tunables
 * (`MALLOC_TRIM_THRESHOLD_`) only move the top-of-heap threshold.
 *
 * Only the memory trimmer calls it (runtime/memory-trim.ts), once the process is idle, and it is
 * loaded on that first call: a Herald that never works in bursts never loads it. Where there is no
 * glibc (musl, macOS) or koffi does not load, Herald runs as before and says so once in its log.
 */

import type Koffi from 'koffi';

/** The C library's free memory, given back (`release`), or why this process cannot. */
export type CHeapRelease = { release(): void } | { unavailable: string };

/** Loads `malloc_trim` from this process's glibc; never throws. */
export async function loadCHeapRelease(): Promise<CHeapRelease> {
  if (process.platform !== 'linux') return { unavailable: `not Linux (${process.platform}): there is no glibc to ask` };
  let koffi: typeof Koffi;
  try {
    koffi = (await import('koffi')).default;
  } catch (err) {
    return { unavailable: `koffi did not load (${reason(err)})` };
  }
  try {
    // Already mapped into every glibc process: loading it again opens nothing new.
    const trim = koffi.load('libc.so.6').func('int malloc_trim(size_t pad)');
    return {
      release() {
        // pad 0: keep nothing spare at the top of the heap. It returns 1 when it gave pages back.
        trim(0);
      },
    };
  } catch (err) {
    return { unavailable: `this C library has no malloc_trim (${reason(err)})` };
  }
}

function reason(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
