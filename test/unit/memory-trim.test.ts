import * as inspector from 'node:inspector';
import { getHeapSpaceStatistics } from 'node:v8';
import { describe, expect, it } from 'vitest';
import { collectViaInspector, IDLE_UTILIZATION, memoryTrim, type TrimParts } from '../../src/runtime/memory-trim.js';

const MB = 1024 * 1024;

/** Parts whose clock, utilization and young generation the test sets; collections are counted. */
function fakeParts(young = 32 * MB) {
  const s = { t: 0, busy: 0, young, collections: 0, fail: false };
  const parts: TrimParts = {
    utilization: () => s.busy,
    youngBytes: () => s.young,
    collect: () => {
      s.collections++;
      if (s.fail) return Promise.reject(new Error('inspector refused'));
      s.young = 1 * MB;
      return Promise.resolve();
    },
    now: () => s.t,
  };
  return { s, parts };
}

const opts = { idleMs: 1000, minYoungBytes: 8 * MB, minGapMs: 10_000 };

/** Runs checks every 250 ms of the fake clock (the timer's TRIM_DEFAULTS.checkMs) up to `untilMs`. */
async function tick(trim: { check(): Promise<void> }, s: { t: number }, untilMs: number): Promise<void> {
  while (s.t < untilMs) {
    s.t += 250;
    await trim.check();
  }
}

describe('memory trim (runtime/memory-trim.ts)', () => {
  it('collects once after the loop has been idle for idleMs with a grown young generation', async () => {
    const { s, parts } = fakeParts();
    const trims: { youngBefore: number; youngAfter: number }[] = [];
    const trim = memoryTrim(parts, { ...opts, onTrim: (t) => trims.push(t) });
    await tick(trim, s, 750);
    expect(s.collections).toBe(0); // idle since 250 ms: not yet 1 s
    await tick(trim, s, 1250);
    expect(s.collections).toBe(1);
    expect(trims).toEqual([{ ms: 0, youngBefore: 32 * MB, youngAfter: 1 * MB }]);
    await tick(trim, s, 60_000);
    expect(s.collections).toBe(1); // nothing grew since: nothing to give back
  });

  it('never collects while the loop is busy, and busy time restarts the idle count', async () => {
    const { s, parts } = fakeParts();
    const trim = memoryTrim(parts, opts);
    s.busy = 0.6;
    await tick(trim, s, 30_000);
    expect(s.collections).toBe(0);
    s.busy = 0.01;
    await tick(trim, s, 30_750);
    s.busy = IDLE_UTILIZATION; // at the threshold counts as busy
    await tick(trim, s, 31_000);
    s.busy = 0;
    await tick(trim, s, 31_750);
    expect(s.collections).toBe(0);
    await tick(trim, s, 32_250);
    expect(s.collections).toBe(1);
  });

  it('leaves a young generation that has not grown alone', async () => {
    const { s, parts } = fakeParts(4 * MB);
    const trim = memoryTrim(parts, opts);
    await tick(trim, s, 60_000);
    expect(s.collections).toBe(0);
  });

  it('trims a young generation held large (a start-up flag) once, not every time the loop idles', async () => {
    const { s, parts } = fakeParts();
    parts.collect = () => {
      s.collections++;
      return Promise.resolve(); // --min-semi-space-size: V8 keeps it at 32 MB
    };
    const trim = memoryTrim(parts, opts);
    await tick(trim, s, 60_000);
    expect(s.collections).toBe(1);
    s.young = 40 * MB; // grown by the minimum beyond what the trim left
    await tick(trim, s, 62_000);
    expect(s.collections).toBe(2);
  });

  it('trims at most once per minGapMs, however bursty the work', async () => {
    const { s, parts } = fakeParts();
    const trim = memoryTrim(parts, opts);
    await tick(trim, s, 2_000);
    expect(s.collections).toBe(1);
    // A burst grows it again and ends: the next trim waits for the gap.
    s.young = 32 * MB;
    await tick(trim, s, 9_000);
    expect(s.collections).toBe(1);
    await tick(trim, s, 12_500);
    expect(s.collections).toBe(2);
  });

  it('reports a failed collection, keeps running, and stops when told', async () => {
    const { s, parts } = fakeParts();
    const errors: unknown[] = [];
    const trim = memoryTrim(parts, { ...opts, minGapMs: 0, onError: (e) => errors.push(e) });
    s.fail = true;
    await tick(trim, s, 1_500);
    expect(errors).toHaveLength(1);
    s.fail = false;
    await tick(trim, s, 3_000);
    expect(s.collections).toBe(2);
    s.young = 32 * MB;
    trim.stop();
    await tick(trim, s, 60_000);
    expect(s.collections).toBe(2);
  });

  it("really shrinks this V8's young generation through the inspector (Node 20 and 24)", async () => {
    const young = () => getHeapSpaceStatistics().find((x) => x.space_name === 'new_space')?.space_size ?? 0;
    // Grow it the way a burst does: many short-lived objects, some surviving a while.
    const deadline = Date.now() + 60_000;
    let keep: { i: number; s: string }[] = [];
    while (young() < 8 * MB) {
      if (Date.now() > deadline) throw new Error(`the young generation did not grow past 8 MB (${young()} B)`);
      for (let i = 0; i < 200_000; i++) {
        keep.push({ i, s: `x${i}` });
        if (keep.length > 50_000) keep = [];
      }
    }
    keep = [];
    await collectViaInspector(inspector);
    expect(young()).toBeLessThan(8 * MB);
  });
});

describe("memory trim: the C library's free memory (releaseFreed)", () => {
  /** Fake parts that also count releases, and the order of what happened. */
  function withRelease(young = 32 * MB) {
    const { s, parts: base } = fakeParts(young);
    const events: string[] = [];
    const r = { fail: false };
    const parts: TrimParts = {
      ...base,
      collect: async () => {
        events.push(`collect@${s.t}`);
        await base.collect();
      },
      releaseFreed: () => {
        events.push(`release@${s.t}`);
        return r.fail ? Promise.reject(new Error('no malloc_trim')) : Promise.resolve();
      },
    };
    const f = { s, parts };
    return { ...f, events, r };
  }

  it('gives it back at the idle look after each collection, never before one', async () => {
    const { s, parts, events } = withRelease();
    const released: number[] = [];
    const trim = memoryTrim(parts, { ...opts, onRelease: (t) => released.push(t.ms) });
    await tick(trim, s, 1_000);
    expect(events).toEqual([]); // nothing collected yet: nothing to give back
    await tick(trim, s, 5_000);
    expect(events).toEqual(['collect@1250', 'release@1500']);
    expect(released).toEqual([0]);
    s.young = 32 * MB; // the next burst
    await tick(trim, s, 15_000);
    expect(events).toEqual(['collect@1250', 'release@1500', 'collect@11250', 'release@11500']);
  });

  it('waits while the loop is busy, and gives nothing back after a failed collection', async () => {
    const { s, parts, events } = withRelease();
    const errors: unknown[] = [];
    const trim = memoryTrim(parts, { ...opts, onError: (e) => errors.push(e) });
    await tick(trim, s, 1_250);
    expect(events).toEqual(['collect@1250']);
    s.busy = 0.5; // a burst starts right after the collection
    await tick(trim, s, 3_000);
    expect(events).toEqual(['collect@1250']);
    s.busy = 0;
    await tick(trim, s, 3_250);
    expect(events).toEqual(['collect@1250', 'release@3250']);

    s.young = 32 * MB;
    s.fail = true;
    await tick(trim, s, 20_000);
    expect(errors).toHaveLength(1);
    expect(events.filter((e) => e.startsWith('release'))).toHaveLength(1);
  });

  it('reports a failed release and goes on trimming', async () => {
    const { s, parts, events, r } = withRelease();
    const errors: unknown[] = [];
    const trim = memoryTrim(parts, { ...opts, onError: (e) => errors.push(e) });
    r.fail = true;
    await tick(trim, s, 2_000);
    expect(errors).toEqual([new Error('no malloc_trim')]);
    r.fail = false;
    s.young = 32 * MB;
    await tick(trim, s, 12_000);
    expect(events).toEqual(['collect@1250', 'release@1500', 'collect@11250', 'release@11500']);
  });
});
