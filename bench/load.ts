/**
 * The load generator, always in its own process so that it never shares an event loop (or, as far
 * as the OS allows, a CPU) with the server under test or with the harness that measures.
 *   node --import tsx bench/load.ts '<LoadSpec as JSON>'
 * Runs an optional warm-up, then the measured run (autocannon, one worker), and prints one JSON
 * line: {"load": LoadResult}.
 */
import autocannon from 'autocannon';
import { exitWithParent } from './lib.js';

export interface LoadSpec {
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
const spec = JSON.parse(process.argv[2] ?? '{}') as LoadSpec;
if (spec.warmupSec > 0) await run(spec, spec.warmupSec);
const r = await run(spec, spec.durationSec);
const result: LoadResult = {
  rps: r.requests.average,
  p50: r.latency.p50,
  p99: r.latency.p99,
  total: r.requests.total,
  non2xx: r.non2xx,
  errors: r.errors,
  timeouts: r.timeouts,
  durationSec: r.duration,
};
process.stdout.write(`${JSON.stringify({ load: result })}\n`);
process.exit(0);
