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
  p50: number;
  p99: number;
  total: number;
  /** Requests answered during the warm-up (with `total`: every request the server saw). */
  warmupTotal: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  durationSec: number;
}

function run(spec: LoadSpec, durationSec: number): Promise<autocannon.Result> {
  return autocannon({
    url: spec.url,
    method: spec.method,
    headers: spec.headers,
    ...(spec.body === undefined ? {} : { body: spec.body }),
    connections: spec.connections,
    pipelining: 1,
    duration: durationSec,
    timeout: 10,
  });
}

exitWithParent();
async function measure(spec: LoadSpec): Promise<LoadResult> {
  const warmup = spec.warmupSec > 0 ? await run(spec, spec.warmupSec) : null;
  const r = await run(spec, spec.durationSec);
  return {
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    total: r.requests.total,
    warmupTotal: warmup?.requests.total ?? 0,
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
