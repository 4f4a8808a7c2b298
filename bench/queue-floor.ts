/**
 * A queue job per delivery, for the fan-out row: what one execute's 200 webhooks cost when each is
 * a BullMQ job — the queue Herald's worker runs on, with the same concurrency and job options — and
 * the job does nothing but POST a body of Herald's size with node:http (keep-alive agent). None of
 * Herald's own work: no delivery record, no pacing, no signing, no outbound guard. It is the queue
 * work Herald's fan-out paid alone while each delivery was its own job, before dispatch jobs
 * (docs/performance.md, row 5c).
 *   node --import tsx bench/queue-floor.ts <redisUrl> <sinkBaseUrl> <jobs> <concurrency>
 * Prints {"ready":true} once its worker is connected, waits for a line on stdin (the go: the body
 * size in bytes), adds the jobs in one addBulk as Herald's execute does, then prints
 * {"t0": epoch ms once the jobs were added (as Herald's 202), "ok": answers with 2xx}.
 */
import { Agent } from 'node:http';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { epochMs, exitWithParent, onGo, postWebhook } from './lib.js';

const [redisUrl = '', base = '', nArg = '200', cArg = '50'] = process.argv.slice(2);
const n = Number(nArg);
const concurrency = Number(cArg);
const agent = new Agent({ keepAlive: true });
let body: Buffer = Buffer.alloc(0);

exitWithParent();
setTimeout(() => process.exit(2), 120_000).unref();
// A prefix of its own (a hash tag, as Herald's): nothing it writes meets Herald's keys.
const prefix = `{bench-floor-${process.pid}}`;
const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
const queue = new Queue<{ i: number }>('deliveries', {
  connection,
  prefix,
  defaultJobOptions: { removeOnComplete: true, removeOnFail: 1000 },
});
let ok = 0;
let finished = 0;
let allDone: () => void = () => undefined;
const worker = new Worker<{ i: number }>(
  'deliveries',
  async (job) => {
    if (await postWebhook(base, job.data.i, body, agent)) ok++;
    if (++finished === n) allDone();
  },
  { connection, prefix, concurrency },
);
await worker.waitUntilReady();
onGo(async (b) => {
  body = b;
  const done = new Promise<void>((resolve) => (allDone = resolve));
  await queue.addBulk(
    Array.from({ length: n }, (_, i) => ({ name: 'deliver', data: { i }, opts: { jobId: `floor-${i}` } })),
  );
  const t0 = epochMs();
  await done;
  process.stdout.write(`${JSON.stringify({ t0, ok })}\n`);
  process.exit(0);
});
