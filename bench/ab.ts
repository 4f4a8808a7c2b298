/**
 * Two builds of Herald against each other, for a change to the request path whose effect is a few
 * per cent: smaller than what a machine's state moves `npm run bench` between runs.
 *
 *   npm run build && mkdir -p .ab/a && cp -r dist .ab/a/   (the build before the change)
 *   npm run build && mkdir -p .ab/b && cp -r dist .ab/b/   (the build after it)
 *   npx tsx bench/ab.ts --a=.ab/a --b=.ab/b --row=write --pairs=10
 *
 * Each build is a folder holding a `dist/`, inside the checkout so that the bundle's external
 * packages resolve from its node_modules (`.ab/` is ignored by git).
 *
 * Each pair starts a fresh Herald of each build in turn (which goes first alternates) on one
 * private Redis, loads it as rows 1–3 of `npm run bench` do (64 connections, a warm-up, then the
 * measured run) and takes its main thread's CPU per request answered: what the req/s of those
 * rows follows (docs/performance.md). The report is each pair's B/A ratio and their median. A
 * run of one build against itself (`--a=.ab/a --b=.ab/a`) shows how far single pairs spread on
 * the machine at hand.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import {
  createBenchKey,
  freePort,
  mainThreadCpuSeconds,
  median,
  onExit,
  startChild,
  startTsChild,
  type Child,
  untilReady,
} from './lib.js';
import type { LoadResult, LoadSpec } from './load.js';
import { startPrivateRedis } from './private-redis.js';

const arg = (flag: string, fallback?: string): string => {
  const a = process.argv.find((x) => x.startsWith(`--${flag}=`));
  const v = a?.slice(flag.length + 3) ?? fallback;
  if (v === undefined) throw new Error(`--${flag}= is required (see the top of bench/ab.ts)`);
  return v;
};
const builds = { a: resolve(arg('a')), b: resolve(arg('b')) } as const;
const row = arg('row', 'write');
if (!['read', 'write', 'list'].includes(row)) throw new Error('--row= is read, write or list');
const pairs = Number(arg('pairs', '10'));
const durationSec = Number(arg('seconds', '3'));

const dir = mkdtempSync(join(os.tmpdir(), 'herald-ab-'));
onExit(() => rmSync(dir, { recursive: true, force: true }));
const baseEnv: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'production' };
const redis = await startPrivateRedis(dir, baseEnv);
const env: NodeJS.ProcessEnv = {
  ...baseEnv,
  REDIS_URL: redis.url,
  HERALD_KEY_PREFIX: 'ab',
  HERALD_SECRET_KEY: randomBytes(32).toString('base64'),
  HERALD_DATA_DIR: join(dir, 'data'),
  HOST: '127.0.0.1',
  HERALD_ROLE: 'all',
  HERALD_RATE_LIMIT: '1000000000',
  LOG_LEVEL: 'silent',
};
// The key lives in Redis, so one serves both builds (the CLI of the first build makes it).
const token = createBenchKey(env, 'ab', builds.a);
const loader = startTsChild('load generator', 'load.ts', [], baseEnv, { stdin: true });
await loader.json('ready', 30_000);

async function startHerald(build: string): Promise<{ child: Child; base: string }> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const child = startChild(`herald (${build})`, process.execPath, [join(build, 'dist', 'main.js')], {
    ...env,
    PORT: String(port),
  });
  await untilReady(`herald (${build})`, child, base, { intervalMs: 5 });
  return { child, base };
}

let seq = 0;
async function load(spec: Omit<LoadSpec, 'id'>): Promise<LoadResult> {
  const id = ++seq;
  loader.proc.stdin?.write(`${JSON.stringify({ ...spec, id })}\n`);
  const answer = await loader.line(
    `load run ${id}`,
    (l) => (l.startsWith(`{"id":${id},`) ? (JSON.parse(l) as { load?: LoadResult; error?: string }) : undefined),
    (spec.warmupSec + spec.durationSec) * 1000 + 30_000,
  );
  if (answer.load === undefined) throw new Error(`load generator: ${answer.error ?? 'no result'}`);
  return answer.load;
}

/** Main-thread CPU µs per request answered (warm-up included, as the bench's rows 1b–3b). */
async function measure(build: string, readId: string): Promise<number> {
  const h = await startHerald(build);
  try {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    const common = { connections: 64, durationSec, warmupSec: 1, headers };
    const spec: Omit<LoadSpec, 'id'> =
      row === 'write'
        ? {
            ...common,
            url: `${h.base}/v1/incidents`,
            method: 'POST',
            headers: { ...headers, 'content-type': 'application/json' },
            body: JSON.stringify({ title: 'Checkout errors in EU', severity: 'major', description: 'x'.repeat(500) }),
          }
        : {
            ...common,
            url: row === 'read' ? `${h.base}/v1/incidents/${readId}` : `${h.base}/v1/incidents?limit=25`,
            method: 'GET',
          };
    const cpu0 = mainThreadCpuSeconds(h.child.pid);
    const r = await load(spec);
    const cpu = mainThreadCpuSeconds(h.child.pid) - cpu0;
    if (r.non2xx + r.errors > 0) throw new Error(`${build}: ${r.non2xx} non-2xx, ${r.errors} errors`);
    return (cpu * 1e6) / (r.total + r.warmupTotal);
  } finally {
    await h.child.stop('SIGTERM', 10_000);
  }
}

// The incident the read row reads, and the list's first page: made once, through build A.
const first = await startHerald(builds.a);
const made = await fetch(`${first.base}/v1/incidents`, {
  method: 'POST',
  headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
  body: JSON.stringify({ title: 'Checkout errors in EU', severity: 'major', description: 'x'.repeat(500) }),
});
const readId = String(((await made.json()) as { id: string }).id);
await first.child.stop('SIGTERM', 10_000);

const ratios: number[] = [];
const us = { a: [] as number[], b: [] as number[] };
for (let i = 0; i < pairs; i++) {
  const order = i % 2 === 0 ? (['a', 'b'] as const) : (['b', 'a'] as const);
  const got: Partial<Record<'a' | 'b', number>> = {};
  for (const side of order) got[side] = await measure(builds[side], readId);
  us.a.push(got.a!);
  us.b.push(got.b!);
  ratios.push(got.b! / got.a!);
  process.stderr.write(
    `pair ${i + 1}: A ${got.a!.toFixed(1)} µs, B ${got.b!.toFixed(1)} µs, B/A ${(got.b! / got.a!).toFixed(3)}\n`,
  );
}
const below = ratios.filter((r) => r < 1).length;
process.stdout.write(
  `${row}, ${pairs} pairs, main-thread CPU µs per request: A median ${median(us.a).toFixed(1)}, ` +
    `B median ${median(us.b).toFixed(1)}; B/A median ${median(ratios).toFixed(3)} ` +
    `(${below} of ${pairs} pairs below 1)\n`,
);
loader.proc.stdin?.end();
await loader.stop('SIGTERM', 5000);
redis.admin.disconnect();
await redis.child.stop('SIGTERM', 5000);
process.exit(0);
