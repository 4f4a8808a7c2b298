/**
 * The fan-out baseline: a bare Node loop that POSTs the same number of webhook requests to the sink
 * as Herald's execute produces, at the same concurrency (Herald's HERALD_WORKER_CONCURRENCY), with
 * a body of the same size. Node's http module with its default agent; nothing else.
 *   node --import tsx bench/fanout-baseline.ts <sinkBaseUrl> <requests> <concurrency>
 * Prints {"ready":true}, waits for a line on stdin (the go: the body size in bytes), then prints
 * {"t0": epoch ms at the go, "t1": epoch ms after the last response, "ok": responses with 2xx}.
 */
import { createInterface } from 'node:readline';
import { epochMs, exitWithParent, postWebhook } from './lib.js';

const [base = '', nArg = '200', cArg = '50'] = process.argv.slice(2);
const n = Number(nArg);
const concurrency = Number(cArg);
let pad = 560;

const post = (i: number): Promise<boolean> =>
  postWebhook(base, i, Buffer.from(JSON.stringify({ event: 'incident.executed', i, text: 'x'.repeat(pad) })));

exitWithParent();
// Bounded: without a go within two minutes, give up.
setTimeout(() => process.exit(2), 120_000).unref();
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
const rl = createInterface({ input: process.stdin });
rl.once('line', (line) => {
  rl.close();
  pad = Math.max(0, (Number(line) || 600) - 40);
  void (async () => {
    const t0 = epochMs();
    let next = 0;
    let ok = 0;
    await Promise.all(
      Array.from({ length: Math.min(concurrency, n) }, async () => {
        while (next < n) {
          const i = next++;
          if (await post(i)) ok++;
        }
      }),
    );
    process.stdout.write(`${JSON.stringify({ t0, t1: epochMs(), ok })}\n`);
    process.exit(0);
  })();
});
