/**
 * Heap settings for a long-running Herald, applied before anything else is loaded (main.ts
 * imports this module first: an ES module's imports run in order, before its own body).
 *
 * Why: V8 sizes its young generation for throughput — each semi-space doubles, under load, up to
 * 16 MB (32 MB of new space), and it grows the old space to a multiple of what was alive at the
 * last full collection. For a service whose live data is a few tens of MB that is most of its
 * resident memory after a burst (README "Benchmarks": 200 MB after 5,000 deliveries with V8's
 * defaults). Node reads `--max-semi-space-size` only at start-up (setting it later changes
 * nothing), but the growth factor is read whenever the young generation would grow: once it is as
 * large as YOUNG_TARGET_BYTES, the factor becomes 1 and it grows no more (it is looked at after
 * each collection, asynchronously, so two quick doublings can take it to twice that: 16 MB, still
 * half of V8's default). (A young generation of
 * 2 MB, the size it has when this module runs, doubled the time spent collecting garbage during a
 * fan-out; 8 MB cost about a tenth more than V8's default 32 MB — README "Benchmarks".) The old
 * space grows by a quarter of what is alive instead of up to four times. The heap's maximum is
 * unchanged, so a large fan-out still fits.
 *
 * Sizes an operator gives Node (`node --max-semi-space-size=16 …`, or NODE_OPTIONS) win: a
 * setting named there is left alone.
 */
import { PerformanceObserver } from 'node:perf_hooks';
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';

/** Both semi-spaces of the young generation together. */
const YOUNG_TARGET_BYTES = 8 * 1024 * 1024;

const given = `${process.execArgv.join(' ')} ${process.env.NODE_OPTIONS ?? ''}`;
if (!/heap-growing-percent/.test(given)) setFlagsFromString('--heap-growing-percent=25');
if (!/semi-space/.test(given)) capYoungGeneration();

function capYoungGeneration(): void {
  const youngBytes = () => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0;
  const growthFactor = (n: number) => setFlagsFromString(`--semi-space-growth-factor=${n}`);
  // Loading the modules allocates fast enough to double it past the target before any callback
  // could look, so it does not grow while they load; from the first turn of the event loop it
  // may, and after each collection (it grows only then) it is checked until large enough.
  growthFactor(1);
  setImmediate(() => {
    if (youngBytes() >= YOUNG_TARGET_BYTES) return;
    growthFactor(2);
    const watch = new PerformanceObserver(() => {
      if (youngBytes() < YOUNG_TARGET_BYTES) return;
      growthFactor(1);
      watch.disconnect();
    });
    watch.observe({ entryTypes: ['gc'] });
  });
}
