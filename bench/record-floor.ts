/**
 * The bookkeeping floor: the bare loop's posts (bench/fanout-baseline.ts), each kept in a record in
 * Redis as a delivery that must be sent once has to be — read it, mark it `sending` by
 * compare-and-set, POST, record the outcome by compare-and-set — and nothing else: no queue, no
 * pacing, no conversation, no outbound guard, no signing. What any design that keeps a delivery's
 * state in Redis pays on this machine, beside what the loop pays.
 *   node --import tsx bench/record-floor.ts <redisUrl> <sinkBaseUrl> <each|batch> <requests> <concurrency>
 * `each`: one delivery at a time per slot, three commands each (auto-pipelined, as Herald's are).
 * `batch`: slots take `concurrency / 2` deliveries at once, two slots: one MGET, one script that
 * marks them all `sending`, their POSTs, one script that records every outcome.
 * Prints {"ready":true}, waits for a line on stdin (the go: the body size in bytes), writes the
 * records in one pipeline (as an execute commits its deliveries), sends them, then prints
 * {"t0","t1","ok"} as the bare loop does.
 */
import { createHash } from 'node:crypto';
import { Agent } from 'node:http';
import { Redis } from 'ioredis';
import { epochMs, exitWithParent, onGo, postWebhook } from './lib.js';

const [redisUrl = '', base = '', mode = 'each', nArg = '200', cArg = '50'] = process.argv.slice(2);
const n = Number(nArg);
const concurrency = Number(cArg);
const agent = new Agent({ keepAlive: true });
let body: Buffer = Buffer.alloc(0);

exitWithParent();
setTimeout(() => process.exit(2), 300_000).unref();
const prefix = `{bench-floor-${process.pid}}`;
const redis = new Redis(redisUrl, { enableAutoPipelining: true });
const key = (i: number): string => `${prefix}:dlv:${i}`;

/** Compare-and-set of each KEYS[i] from the text whose SHA-1 is ARGV[2i-1] to ARGV[2i]; how many were set. */
const CAS = `
local set = 0
for i, k in ipairs(KEYS) do
  local cur = redis.call('GET', k)
  if cur and redis.sha1hex(cur) == ARGV[2 * i - 1] then
    redis.call('SET', k, ARGV[2 * i])
    set = set + 1
  end
end
return set`;
redis.defineCommand('casAll', { lua: CAS });
/** Runs CAS over `keys` with `args` (two per key); how many were set. */
const cas = (keys: string[], args: string[]): Promise<number> =>
  (redis as unknown as { casAll: (count: number, ...a: string[]) => Promise<number> }).casAll(
    keys.length,
    ...keys,
    ...args,
  );

interface DeliveryRecord {
  id: string;
  status: string;
  attempts: { at: string; outcome: string }[];
  content: string;
  sending_since: string | null;
}

const sha1 = (s: string): string => createHash('sha1').update(s).digest('hex');

/** The sending and the recorded versions of one record, as Herald writes each step whole. */
function steps(text: string): { sending: string; done: (ok: boolean) => string } {
  const r = JSON.parse(text) as DeliveryRecord;
  const at = new Date().toISOString();
  const sending = JSON.stringify({ ...r, status: 'sending', sending_since: at });
  return {
    sending,
    done: (ok) =>
      JSON.stringify({
        ...r,
        status: ok ? 'delivered' : 'failed',
        sending_since: null,
        attempts: [...r.attempts, { at, outcome: ok ? 'delivered' : 'failed' }],
      }),
  };
}

async function each(i: number): Promise<boolean> {
  const text = await redis.get(key(i));
  if (text === null) return false;
  const s = steps(text);
  if ((await cas([key(i)], [sha1(text), s.sending])) !== 1) return false;
  const ok = await postWebhook(base, i, body, agent);
  await cas([key(i)], [sha1(s.sending), s.done(ok)]);
  return ok;
}

async function batch(from: number, to: number): Promise<number> {
  const ids = Array.from({ length: to - from }, (_, j) => from + j);
  const keys = ids.map(key);
  const texts = await redis.mget(keys);
  const ready = ids.flatMap((i, j) => (texts[j] ? [{ i, text: texts[j], s: steps(texts[j]) }] : []));
  await cas(
    ready.map((r) => key(r.i)),
    ready.flatMap((r) => [sha1(r.text), r.s.sending]),
  );
  const oks = await Promise.all(ready.map((r) => postWebhook(base, r.i, body, agent)));
  await cas(
    ready.map((r) => key(r.i)),
    ready.flatMap((r, j) => [sha1(r.s.sending), r.s.done(oks[j] ?? false)]),
  );
  return oks.filter(Boolean).length;
}

/** Sends every delivery, `concurrency` at once, one at a time each; how many were answered 2xx. */
async function sendEach(): Promise<number> {
  let next = 0;
  let ok = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, n) }, async () => {
      while (next < n) if (await each(next++)) ok++;
    }),
  );
  return ok;
}

/** Sends every delivery in batches of `concurrency / 2`, two at once; how many were answered 2xx. */
async function sendInBatches(): Promise<number> {
  const size = Math.max(1, Math.floor(concurrency / 2));
  let next = 0;
  let ok = 0;
  await Promise.all(
    [0, 1].map(async () => {
      while (next < n) {
        const from = next;
        next = Math.min(n, next + size);
        const got = await batch(from, next);
        ok += got;
      }
    }),
  );
  return ok;
}

/** Writes the records, as an execute commits its deliveries (one pipeline). */
async function writeRecords(): Promise<void> {
  // Herald's size: a 600-character message and the fields around it.
  const seed = redis.pipeline();
  for (let i = 0; i < n; i++)
    seed.set(
      key(i),
      JSON.stringify({
        id: `dlv_${String(i).padStart(26, '0')}`,
        status: 'pending',
        attempts: [],
        content: 'x'.repeat(600),
        sending_since: null,
        connection_id: `con_${String(i).padStart(26, '0')}`,
        incident_id: 'inc_00000000000000000000000000',
        execution_id: 'exe_00000000000000000000000000',
        created_at: new Date().toISOString(),
      }),
    );
  await seed.exec();
}

onGo(async (b) => {
  body = b;
  const t0 = epochMs();
  await writeRecords();
  const ok = mode === 'batch' ? await sendInBatches() : await sendEach();
  const t1 = epochMs();
  const del = redis.pipeline();
  for (let i = 0; i < n; i++) del.del(key(i));
  await del.exec();
  process.stdout.write(`${JSON.stringify({ t0, t1, ok })}\n`);
  process.exit(0);
});
