/**
 * The load generator, always in its own process so that it never shares an event loop (or, as far
 * as the OS allows, a CPU) with the server under test or with the harness that measures.
 *   node --import tsx bench/load.ts          then one LoadSpec as JSON per line on stdin
 * For each spec: an optional warm-up, then the measured run (autocannon, one worker, no other
 * work in this process meanwhile), then one JSON line {"id": spec.id, "load": LoadResult}. One
 * process serves every run of the harness, so no run pays for a process start.
 */
import { createInterface } from 'node:readline';
import autocannon from 'autocannon';
import { exitWithParent } from './lib.js';

export interface LoadSpec {
  /** Echoed in the answer. */
  id: number;
  url: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
  connections: number;
  durationSec: number;
  warmupSec: number;
}

export interface LoadResult {
  /** Mean requests per second over the measured run (autocannon's per-second samples). */
  rps: number;
  /**
   * Latency percentiles in ms, to the microsecond: from every response's own time, as wrk
   * reports them. autocannon's histogram keeps whole milliseconds, and at a p99 of 5–9 ms a
   * ratio of two whole numbers moves by 15–20 % on one millisecond of rounding.
   */
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  /** autocannon's own p99, in whole milliseconds: kept for comparison with older results. */
  p99WholeMs: number;
  total: number;
  /** Requests answered during the warm-up (with `total`: every request the server saw). */
  warmupTotal: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  durationSec: number;
}

interface Run {
  result: autocannon.Result;
  /** Every response's latency in ms (fractional), in arrival order. */
  latencies: number[];
}

async function run(spec: LoadSpec, durationSec: number): Promise<Run> {
  const latencies: number[] = [];
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: spec.url,
        method: spec.method,
        headers: spec.headers,
        ...(spec.body === undefined ? {} : { body: spec.body }),
        connections: spec.connections,
        pipelining: 1,
        duration: durationSec,
        timeout: 10,
      },
      (err, r) => (err ? reject(err instanceof Error ? err : new Error(String(err))) : resolve(r)),
    );
    // Every response, as autocannon's own histogram counts them (error statuses included).
    instance.on('response', (_client, _status, _bytes, ms) => {
      latencies.push(ms);
    });
  });
  return { result, latencies };
}

/** The nearest-rank percentile of `sorted` (ascending); NaN when empty. */
function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

exitWithParent();
async function measure(spec: LoadSpec): Promise<LoadResult> {
  const warmup = spec.warmupSec > 0 ? await run(spec, spec.warmupSec) : null;
  const { result: r, latencies } = await run(spec, spec.durationSec);
  const sorted = Float64Array.from(latencies).sort();
  return {
    rps: r.requests.average,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    p999: percentile(sorted, 99.9),
    p99WholeMs: r.latency.p99,
    total: r.requests.total,
    warmupTotal: warmup?.result.requests.total ?? 0,
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    durationSec: r.duration,
  };
}

// One spec at a time, in order: runs never overlap.
let queue = Promise.resolve();
createInterface({ input: process.stdin })
  .on('line', (line) => {
    if (line.trim() === '') return;
    const spec = JSON.parse(line) as LoadSpec;
    queue = queue.then(async () => {
      try {
        process.stdout.write(`${JSON.stringify({ id: spec.id, load: await measure(spec) })}\n`);
      } catch (e) {
        process.stdout.write(`${JSON.stringify({ id: spec.id, error: e instanceof Error ? e.message : String(e) })}\n`);
      }
    });
  })
  // stdin closed: the harness is done (or gone).
  .on('close', () => void queue.then(() => process.exit(0)));
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
