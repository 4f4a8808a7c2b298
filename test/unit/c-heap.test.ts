import { readFileSync } from 'node:fs';
import * as inspector from 'node:inspector';
import { Writable } from 'node:stream';
import { getHeapSpaceStatistics } from 'node:v8';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { loadCHeapRelease } from '../../src/runtime/c-heap.js';
import { collectViaInspector, startMemoryTrim, type MemoryTrim } from '../../src/runtime/memory-trim.js';

const MB = 1024 * 1024;

/** This process's resident memory (MB), from the kernel. */
function rssMB(): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
  if (!m) throw new Error('no VmRSS in /proc/self/status');
  return Number(m[1]) / 1024;
}

/**
 * Leaves ~80 MB free in the middle of the C heap, as a burst does: 4 KB Buffers (from malloc's
 * heap, below its mmap threshold) with a small Buffer kept after every 50, then all the big ones
 * dropped and collected. glibc can give none of it back by itself: small blocks still in use lie
 * above every free run. Returns the survivors (keep them alive) and the RSS before and after.
 */
async function fragmentTheCHeap(): Promise<{ survivors: Buffer[]; grownMB: number; heldMB: number }> {
  const before = rssMB();
  const survivors: Buffer[] = [];
  let big: Buffer[] | null = [];
  for (let i = 0; i < 20_000; i++) {
    big.push(Buffer.allocUnsafeSlow(4096).fill(1));
    if (i % 50 === 0) survivors.push(Buffer.allocUnsafeSlow(64).fill(2));
  }
  const grownMB = rssMB() - before;
  big = null;
  await collectViaInspector(inspector);
  await collectViaInspector(inspector);
  return { survivors, grownMB, heldMB: rssMB() - before };
}

describe('the C heap given back (runtime/c-heap.ts)', () => {
  let trim: MemoryTrim | null = null;
  afterEach(() => {
    trim?.stop();
    trim = null;
  });

  it.runIf(process.platform === 'linux')(
    'gives back the free pages in the middle of the heap, which glibc keeps by itself',
    async () => {
      const c = await loadCHeapRelease();
      if (!('release' in c)) throw new Error(`expected malloc_trim on this glibc machine: ${c.unavailable}`);
      const { survivors, grownMB, heldMB } = await fragmentTheCHeap();
      expect(grownMB).toBeGreaterThan(60);
      expect(heldMB).toBeGreaterThan(grownMB - 15); // collected, and still resident
      const held = rssMB();
      c.release();
      expect(held - rssMB()).toBeGreaterThan(40);
      expect(survivors).toHaveLength(400);
    },
  );

  it('says why, instead of throwing, where there is no glibc', async () => {
    const platform = Object.getOwnPropertyDescriptor(process, 'platform');
    if (!platform) throw new Error('process.platform has no descriptor');
    Object.defineProperty(process, 'platform', { ...platform, value: 'darwin' });
    try {
      expect(await loadCHeapRelease()).toEqual({ unavailable: 'not Linux (darwin): there is no glibc to ask' });
    } finally {
      Object.defineProperty(process, 'platform', platform);
    }
  });

  it.runIf(process.platform === 'linux')(
    "Herald's idle trimmer gives it back after its collection (startMemoryTrim)",
    async () => {
      const lines: string[] = [];
      const log = createLogger(
        'debug',
        new Writable({
          write(chunk: Buffer, _enc, done) {
            lines.push(chunk.toString());
            done();
          },
        }),
      );
      const started = await startMemoryTrim({ idleMs: 0, log });
      if (!started) throw new Error('this Node has an inspector: the trimmer must start');
      trim = started;
      const { survivors, heldMB } = await fragmentTheCHeap();
      expect(heldMB).toBeGreaterThan(45);
      const held = rssMB();
      // The trimmer collects only after the young generation grew by 8 MB: grow it as a burst does.
      const young = () => getHeapSpaceStatistics().find((x) => x.space_name === 'new_space')?.space_size ?? 0;
      let keep: { i: number }[] = [];
      const floor = young();
      while (young() < floor + 9 * MB) {
        for (let i = 0; i < 100_000; i++) {
          keep.push({ i });
          if (keep.length > 50_000) keep = [];
        }
      }
      keep = [];
      // Then idle: each look measures the loop since the previous one, so pause between looks.
      const deadline = Date.now() + 60_000;
      while (!lines.some((l) => l.includes("the C library's free memory given back"))) {
        if (Date.now() > deadline) throw new Error(`no release logged; the log: ${lines.join('')}`);
        await new Promise((r) => setTimeout(r, 100));
        await started.check();
      }
      expect(lines.some((l) => l.includes('idle: memory given back'))).toBe(true);
      expect(held - rssMB()).toBeGreaterThan(30);
      expect(survivors).toHaveLength(400);
    },
  );
});
