/**
 * `npm run bench` (full: 3 rounds) and `npm run bench -- --quick` (1 round, short loads, < 90 s);
 * `npm run bench -- --scale` runs the scale curves instead (bench/scale.ts, docs/scaling.md).
 *
 * A black-box, comparative benchmark. Herald is built (`npm run build`) and run as it ships,
 * `node dist/main.js`, in its own process, against a PRIVATE redis-server on a random port (no
 * persistence, noeviction), configured only through its environment and spoken to only over HTTP;
 * its API key comes from the CLI (`node dist/cli/main.js keys create --json`); it is stopped with
 * SIGTERM. Each figure is compared with a baseline in its own process where one makes sense:
 *   bench/baseline-app.ts     bare Express 5 + ioredis serving the same API paths;
 *   bench/static-baseline.ts  a plain static file server with the status page's bytes as files;
 *   bench/fanout-baseline.ts  a bare Node loop posting the same webhooks at the same concurrency;
 *   bench/queue-floor.ts      the same posts as BullMQ jobs, one each, at Herald's concurrency,
 *                             nothing else: a queue job per delivery (row 5c, no target);
 *   bench/record-floor.ts     the same posts, each with a delivery record read and written by
 *                             compare-and-set, one at a time or 25 at a time (rows 6d, 6e, no target;
 *                             6f sets row 6 against 6d);
 *   bench/sink.ts             the webhook receiver (and a fake Slack Web API), its own process;
 *   bench/load.ts             the load generator, its own process (never sharing an event loop
 *                             with the server under test or with this harness).
 * Herald and its baseline run one after the other, never at once, alternating which goes first
 * from round to round; each figure is the median of the rounds (the table: bench/report.ts). Every
 * figure, with the machine and a timestamp, goes to bench/results.json (gitignored).
 *
 * Why the `autocannon` dev dependency: a load generator must keep many keep-alive connections
 * busy and report latency percentiles from an HDR histogram; hand-rolling that in fetch() would
 * measure the generator as much as the server, and wrk is not installed on a new machine.
 * autocannon (github.com/mcollina/autocannon) is actively maintained, pure JavaScript (nothing to
 * compile), MIT, has a programmatic API, and runs one worker by default: exactly the "one
 * thread, N connections" load. It is a devDependency only; Herald's runtime does not change.
 *
 * Every wait has a deadline (polls, no fixed sleeps); every child process and the private Redis
 * are stopped in `finally`, and killed by an exit hook if the harness dies (bench/lib.ts).
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import {
  epochMs,
  fetchWithin,
  freePort,
  median,
  onExit,
  ROOT,
  startChild,
  startTsChild,
  stopAll,
  waitFor,
  type Child,
  cpuSeconds,
  mainThreadCpuSeconds,
  pool,
  createBenchKey,
  untilReady,
} from './lib.js';
import type { LoadResult, LoadSpec } from './load.js';
import { createMemoryCgroup, type MemoryCgroup } from './cgroup.js';
import { startPrivateRedis } from './private-redis.js';
import { subscriberRows } from './subscribers.js';
import { buildReport, newSamples, type ApiRow, type Figure, type Samples, type Side } from './report.js';

const QUICK = process.argv.includes('--quick');
/**
 * `--only=read,deliveries,...` runs only the named rows (read, write, list, status, memory,
 * fanout, deliveries, events, slack, cli, subscribers): for profiling one thing. `--profile=DIR` starts every Herald with
 * `--cpu-prof --cpu-prof-dir=DIR`, `--monitor` adds Redis' MONITOR log (docs/performance.md,
 * "Finding where the time goes"). They are for the people looking for where the time goes; a run
 * with any of them is not a benchmark result.
 */
const ONLY = argValue('--only')?.split(',') ?? null;
/**
 * `--cgroup-mb=256`: every Herald of the rounds runs inside a memory cgroup with that limit
 * (bench/cgroup.ts), as in a container with a memory limit; the report adds the cgroup's peak
 * charge, its OOM kills and how often it hit the limit. Compare its rows with a run without.
 */
const CGROUP_MB = argValue('--cgroup-mb') === undefined ? null : Number(argValue('--cgroup-mb'));
let cgroup: MemoryCgroup | null = null;
/** The private Redis' process, whose CPU per request rows 1c–3c report. */
let redisPid = 0;
const PROFILE_DIR = argValue('--profile');
const MONITOR = PROFILE_DIR !== undefined && process.argv.includes('--monitor');
if (PROFILE_DIR !== undefined) mkdirSync(PROFILE_DIR, { recursive: true });
function argValue(flag: string): string | undefined {
  const a = process.argv.find((x) => x.startsWith(`${flag}=`));
  return a?.slice(flag.length + 1);
}
const wanted = (name: string) => ONLY === null || ONLY.includes(name);
const ROUNDS = QUICK ? 1 : 3;
const LOAD_SEC = QUICK ? 3 : 10;
const WARMUP_SEC = QUICK ? 1 : 2;
const API_CONNECTIONS = 64;
const SLACK_CONNECTIONS = 20;
const FANOUT = 200;
const EXECUTES = 25;
/** Incident updates whose events the events row delivers to one event endpoint (docs/events.md). */
const EVENTS = QUICK ? 1000 : 3000;
/** Herald's default HERALD_WORKER_CONCURRENCY: the baseline loop uses the same. */
const WORKER_CONCURRENCY = 50;
/**
 * When "after the run" is: this long after the last delivery arrived. V8 gives back what a burst
 * grew on its own schedule (its memory reducer, tens of seconds later), so this figure is
 * informational; the peak under load (8b) and the memory cgroup run (8c, --cgroup-mb) are what
 * size a container.
 */
const REST_MS = 5_000;
const MEMORY_INCIDENTS = QUICK ? 300 : 1000;
const CLI_RUNS = 7;
/** Status page row: components on the page (in groups of 4), and publishes timed to the page. */
const STATUS_COMPONENTS = 12;
const STATUS_PUBLISHES = 5;
const DESCRIPTION = 'x'.repeat(500);
/** The whole run, as a backstop: the exit hook then kills every child. */
const RUN_DEADLINE_MS = QUICK ? 170_000 : 25 * 60_000;

const log = (msg: string) =>
  process.stderr.write(`[bench ${((performance.now() - started) / 1000).toFixed(1).padStart(5)} s] ${msg}\n`);
const started = performance.now();

// ---------------------------------------------------------------------------------------------
// What is measured, per round.

const samples: Samples = newSamples();
const problems: string[] = [];
/** The subscriber rows (bench/subscribers.ts): run once, after the rounds. */
let subscriberFigures: Figure[] = [];

// ---------------------------------------------------------------------------------------------
// Processes.

const dir = mkdtempSync(join(os.tmpdir(), 'herald-bench-'));
onExit(() => rmSync(dir, { recursive: true, force: true }));
const secretKey = randomBytes(32).toString('base64');
const slackSigningSecret = randomBytes(16).toString('hex');
const baseEnv: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'production' };
let redisUrl = '';
let sinkUrl = '';

function heraldEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    ...baseEnv,
    REDIS_URL: redisUrl,
    HERALD_KEY_PREFIX: 'bench',
    HERALD_SECRET_KEY: secretKey,
    HERALD_DATA_DIR: join(dir, 'data'),
    HOST: '127.0.0.1',
    HERALD_ROLE: 'all',
    HERALD_OUTBOUND_ALLOW: '127.0.0.1/32',
    HERALD_RATE_LIMIT: '1000000000',
    HERALD_EXECUTE_RATE_LIMIT: '1000000000',
    LOG_LEVEL: 'silent',
    ...extra,
  };
}

interface Herald {
  child: Child;
  base: string;
  readyMs: number;
}

/** Spawns `node dist/main.js` and times it from the spawn to the first 200 from /readyz. */
async function startHerald(name: string, extra: NodeJS.ProcessEnv = {}): Promise<Herald> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const t0 = performance.now();
  const nodeArgs = PROFILE_DIR === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`];
  // `--node-arg=--max-semi-space-size=16` (repeatable): flags for Herald's node, to compare settings.
  nodeArgs.push(...process.argv.filter((a) => a.startsWith('--node-arg=')).map((a) => a.slice('--node-arg='.length)));
  // `--herald-env=MALLOC_ARENA_MAX=2` (repeatable): environment for Herald, to compare settings.
  const envArgs = process.argv.filter((a) => a.startsWith('--herald-env=')).map((a) => a.slice('--herald-env='.length));
  const settings = Object.fromEntries(
    envArgs.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
  const argv = [...nodeArgs, join(ROOT, 'dist', 'main.js')];
  const run = cgroup === null ? { command: process.execPath, args: argv } : cgroup.wrap(process.execPath, argv);
  const child = startChild(name, run.command, run.args, heraldEnv({ PORT: String(port), ...settings, ...extra }));
  await untilReady(name, child, base, { intervalMs: 5 });
  return { child, base, readyMs: performance.now() - t0 };
}

/**
 * Herald's own account of its memory (V8's heap spaces in MB, `size_total`) and the kernel's
 * (anonymous and file-backed resident), kept in bench/results.json for every run: what an RSS
 * figure is made of. With --profile, also every heap and memory line, to `memory-<when>.txt`.
 */
async function memoryShape(h: Herald, token: string, when: string): Promise<Record<string, number>> {
  const r = await fetchWithin(`${h.base}/metrics`, {
    headers: { authorization: `Bearer ${token}` },
    timeoutMs: 10_000,
  });
  const lines = (await r.text())
    .split('\n')
    .filter((l) => /^herald_(nodejs_heap|nodejs_external|process_resident)/.test(l));
  const rollup = readFileSync(`/proc/${h.child.pid}/smaps_rollup`, 'utf8');
  if (PROFILE_DIR !== undefined)
    writeFileSync(join(PROFILE_DIR, `memory-${when}.txt`), `${lines.join('\n')}\n\n${rollup}`);
  const shape: Record<string, number> = {};
  for (const l of lines) {
    const m = /^herald_nodejs_heap_space_size_total_bytes\{space="(\w+)"\} (\d+)/.exec(l);
    if (m && Number(m[2]) > 0) shape[`heap_${m[1]}`] = +(Number(m[2]) / 1e6).toFixed(1);
  }
  for (const [key, field] of [
    ['anon', 'Anonymous'],
    ['rss', 'Rss'],
  ] as const) {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(rollup);
    if (m) shape[key] = +((Number(m[1]) * 1024) / 1e6).toFixed(1);
  }
  return shape;
}

async function redisCpuSeconds(admin: Redis): Promise<number> {
  const info = await admin.info('cpu');
  return (
    Number(/used_cpu_user:([\d.]+)/.exec(info)?.[1] ?? NaN) + Number(/used_cpu_sys:([\d.]+)/.exec(info)?.[1] ?? NaN)
  );
}

function rssMB(pid: number, field: 'VmRSS' | 'VmHWM' = 'VmRSS'): number {
  const m = new RegExp(`${field}:\\s+(\\d+)\\s+kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? (Number(m[1]) * 1024) / 1e6 : NaN;
}

/** The load generator's process (bench/load.ts), started once; it runs one spec at a time. */
let loader: Child | null = null;
let loadSeq = 0;

async function runLoad(name: string, spec: Omit<LoadSpec, 'id'>): Promise<LoadResult> {
  if (loader === null || loader.exit) {
    loader = startTsChild('load generator', 'load.ts', [], baseEnv, { stdin: true });
    await loader.json('ready', 30_000);
  }
  const id = ++loadSeq;
  loader.proc.stdin?.write(`${JSON.stringify({ ...spec, id })}\n`);
  const answer = await loader.line(
    `the result of load run ${id} (${name})`,
    (l) => {
      if (!l.startsWith(`{"id":${id},`)) return undefined;
      return JSON.parse(l) as { load?: LoadResult; error?: string };
    },
    (spec.warmupSec + spec.durationSec) * 1000 + 30_000,
  );
  if (answer.load === undefined) throw new Error(`load generator: ${answer.error ?? 'no result'}`);
  const load = answer.load;
  const bad = load.non2xx + load.errors;
  if (bad > 0) problems.push(`${name}: ${load.non2xx} non-2xx and ${load.errors} errors out of ${load.total}`);
  return load;
}

// ---------------------------------------------------------------------------------------------
// HTTP helpers.

async function call(
  base: string,
  token: string | null,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; text: string; json: Record<string, unknown> }> {
  const headers: Record<string, string> = {};
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const r = await fetchWithin(`${base}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    timeoutMs: 15_000,
  });
  const text = await r.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // Not JSON: the caller looks at the status.
  }
  return { status: r.status, text, json };
}

async function must(
  base: string,
  token: string | null,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ text: string; json: Record<string, unknown> }> {
  const r = await call(base, token, method, path, body);
  if (r.status >= 300) throw new Error(`${method} ${path} → ${r.status} ${r.text.slice(0, 300)}`);
  return r;
}

interface SinkStats {
  count: number;
  first: number;
  last: number;
  bodyBytes: number;
  slackApiCalls: number;
}
const sinkStats = async (): Promise<SinkStats> =>
  (await (await fetchWithin(`${sinkUrl}/__stats`, { timeoutMs: 5000 })).json()) as SinkStats;
const sinkReset = async (): Promise<void> => {
  await (await fetchWithin(`${sinkUrl}/__reset`, { method: 'POST', timeoutMs: 5000 })).body?.cancel();
};
const sinkReached = (n: number, timeoutMs: number) =>
  waitFor(
    `the sink to receive ${n} deliveries`,
    async () => {
      const s = await sinkStats();
      return s.count >= n ? s : undefined;
    },
    { timeoutMs, intervalMs: 10 },
  );

// ---------------------------------------------------------------------------------------------
// The rows.

interface Setup {
  token: string;
  baselineUrl: string;
  baselinePid: number;
  readId: string;
}

function apiSpec(row: ApiRow, side: Side, s: Setup, herald: Herald): Omit<LoadSpec, 'id'> {
  const base = side === 'herald' ? herald.base : s.baselineUrl;
  const headers: Record<string, string> = side === 'herald' ? { authorization: `Bearer ${s.token}` } : {};
  const common = { connections: API_CONNECTIONS, durationSec: LOAD_SEC, warmupSec: WARMUP_SEC };
  switch (row) {
    case 'read':
      return { ...common, url: `${base}/v1/incidents/${s.readId}`, method: 'GET', headers };
    case 'write':
      return {
        ...common,
        url: `${base}/v1/incidents`,
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify({ title: 'Checkout errors in EU', severity: 'major', description: DESCRIPTION }),
      };
    case 'list':
      return { ...common, url: `${base}/v1/incidents?limit=25`, method: 'GET', headers };
  }
}

async function heraldFanout(
  h: Herald,
  token: string,
): Promise<{ seconds: number; firstSeconds: number; acceptMs: number; bodyBytes: number }> {
  const inc = await must(h.base, token, 'POST', '/v1/incidents', { title: 'Fan-out', severity: 'major' });
  await sinkReset();
  const t0 = epochMs();
  const exe = await call(h.base, token, 'POST', `/v1/incidents/${String(inc.json.id)}/execute`, {});
  const t202 = epochMs();
  if (exe.status !== 202) throw new Error(`execute → ${exe.status} ${exe.text.slice(0, 300)}`);
  const s = await sinkReached(FANOUT, 60_000);
  return {
    seconds: (s.last - t202) / 1000,
    firstSeconds: (s.first - t202) / 1000,
    acceptMs: t202 - t0,
    bodyBytes: s.bodyBytes,
  };
}

/**
 * Gives a waiting fan-out helper (bench/fanout-baseline.ts, bench/queue-floor.ts) its go — the
 * body size on stdin — and times it from the moment it reports (`t0`) to the sink's first and
 * last arrivals. The helper is stopped afterwards: each is good for one fan-out.
 */
async function timedFanout(
  child: Child,
  bodyBytes: number,
  count = FANOUT,
): Promise<{ seconds: number; firstSeconds: number }> {
  await sinkReset();
  try {
    child.proc.stdin?.write(`${bodyBytes}\n`);
    const out = await child.json<{ t0: number; ok: number }>('t0', 180_000);
    if (out.ok !== count) problems.push(`${child.name}: ${out.ok} of ${count} answered 2xx`);
    const s = await sinkReached(count, 10_000);
    return { seconds: (s.last - out.t0) / 1000, firstSeconds: (s.first - out.t0) / 1000 };
  } finally {
    await child.stop('SIGKILL', 2000);
  }
}

/** A fan-out helper, started and waiting on stdin (its start-up is not timed). */
async function startFanoutHelper(name: string, file: string, args: string[], count = FANOUT): Promise<Child> {
  const child = startTsChild(name, file, [...args, String(count), String(WORKER_CONCURRENCY)], baseEnv, {
    stdin: true,
  });
  await child.json('ready', 30_000);
  return child;
}

/** Started before either side runs; it waits on stdin meanwhile. */
const startFanoutBaseline = (count = FANOUT): Promise<Child> =>
  startFanoutHelper('fan-out baseline', 'fanout-baseline.ts', [sinkUrl], count);

/**
 * Row 6's yardstick: the bare loop posting as many webhooks as row 6 delivers, at the worker's
 * concurrency, to the same sink, right after Herald's run: what this machine allows for the work.
 */
async function loopPostsPerSec(bodyBytes: number): Promise<number> {
  const n = EXECUTES * FANOUT;
  const loop = await startFanoutBaseline(n);
  return n / (await timedFanout(loop, bodyBytes, n)).seconds;
}

/**
 * Beside row 6's yardstick: the same posts, each kept in a record in Redis with the least a
 * delivery sent once needs (bench/record-floor.ts), one at a time or 25 at a time.
 */
async function floorPostsPerSec(bodyBytes: number, mode: 'each' | 'batch'): Promise<number> {
  const n = EXECUTES * FANOUT;
  const floor = await startFanoutHelper(`bookkeeping floor (${mode})`, 'record-floor.ts', [redisUrl, sinkUrl, mode], n);
  return n / (await timedFanout(floor, bodyBytes, n)).seconds;
}

/**
 * A queue job per delivery (bench/queue-floor.ts), in a fresh process as the bare loop is: BullMQ
 * jobs at Herald's concurrency that only POST, timed from its jobs being added.
 */
async function queueFloorFanout(bodyBytes: number): Promise<number> {
  const child = await startFanoutHelper('queue floor', 'queue-floor.ts', [redisUrl, sinkUrl]);
  return (await timedFanout(child, bodyBytes)).seconds;
}

async function deliveries(h: Herald, token: string): Promise<number> {
  const inc = await must(h.base, token, 'POST', '/v1/incidents', { title: 'Deliveries', severity: 'major' });
  await sinkReset();
  const t0 = epochMs();
  for (let i = 0; i < EXECUTES; i++) {
    const r = await call(h.base, token, 'POST', `/v1/incidents/${String(inc.json.id)}/execute`, {
      variables: { round: String(i) },
    });
    if (r.status !== 202) throw new Error(`execute ${i} → ${r.status} ${r.text.slice(0, 300)}`);
  }
  const s = await sinkReached(EXECUTES * FANOUT, 180_000);
  return (EXECUTES * FANOUT) / ((s.last - t0) / 1000);
}

/**
 * Events for integrators, the worker's delivery rate: EVENTS updates spread over 50 incidents
 * (50 at once) are logged first, while the only endpoint subscribes to something else (events are
 * kept while an endpoint exists); then an endpoint on the sink is created and replays them. The
 * rate is from the replay's answer to the last event's arrival: the worker's dispatcher alone,
 * not the API's writes (which the update rows measure). Both endpoints are deleted after, so no
 * other row sends events.
 */
async function eventsRow(h: Herald, token: string, admin: Redis): Promise<number> {
  const keeper = await must(h.base, token, 'POST', '/v1/event-endpoints', {
    url: `${sinkUrl}/h/events-keeper`,
    event_types: ['incident.closed'],
  });
  const ids: string[] = [];
  for (let i = 0; i < 50; i++)
    ids.push(
      String((await must(h.base, token, 'POST', '/v1/incidents', { title: `Events ${i}`, severity: 'minor' })).json.id),
    );
  const sinceMs = Date.now();
  await pool(EVENTS, 50, async (i) => {
    // A 503 (Redis slow to answer on a loaded machine) is retried, as the API guide advises.
    for (let attempt = 0; ; attempt++) {
      const r = await call(h.base, token, 'PATCH', `/v1/incidents/${ids[i % ids.length]!}`, {
        description: `update ${i}`,
      });
      if (r.status === 200) return;
      if (r.status !== 503 || attempt === 5) throw new Error(`update ${i} → ${r.status} ${r.text.slice(0, 300)}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  });
  // The worker moves committed events into the log a batch at a time: the replay waits for all.
  await waitFor(
    'the updates in the event log',
    async () => (await admin.zcount('{bench}:evt-log-time', sinceMs, '+inf')) >= EVENTS,
    { timeoutMs: 60_000, intervalMs: 20 },
  );
  const since = new Date(sinceMs).toISOString();
  const ep = await must(h.base, token, 'POST', '/v1/event-endpoints', {
    url: `${sinkUrl}/h/events`,
    event_types: ['incident.updated'],
  });
  await sinkReset();
  const cpu0 = cpuSeconds(h.child.pid);
  const replay = await must(h.base, token, 'POST', `/v1/event-endpoints/${String(ep.json.id)}/replay`, { since });
  const t0 = epochMs();
  if (replay.json.replayed !== EVENTS) throw new Error(`replay queued ${JSON.stringify(replay.json)}, not ${EVENTS}`);
  const s = await sinkReached(EVENTS, 180_000);
  log(`events: Herald's CPU per event delivered ${(((cpuSeconds(h.child.pid) - cpu0) * 1000) / EVENTS).toFixed(3)} ms`);
  for (const e of [ep, keeper]) await must(h.base, token, 'DELETE', `/v1/event-endpoints/${String(e.json.id)}`);
  return EVENTS / ((s.last - t0) / 1000);
}

async function memoryPerIncident(
  h: Herald,
  token: string,
  admin: Redis,
): Promise<{ perIncident: number; raw: number }> {
  const used = async () => Number(/used_memory:(\d+)/.exec(await admin.info('memory'))?.[1] ?? NaN);
  const m0 = await used();
  let lastId = '';
  await pool(MEMORY_INCIDENTS, 4, async (i) => {
    const r = await must(h.base, token, 'POST', '/v1/incidents', {
      title: `Incident ${i}`,
      severity: 'major',
      description: DESCRIPTION,
    });
    lastId = String(r.json.id);
  });
  const m1 = await used();
  const one = await must(h.base, token, 'GET', `/v1/incidents/${lastId}`);
  return { perIncident: (m1 - m0) / MEMORY_INCIDENTS, raw: Buffer.byteLength(one.text) };
}

async function slackRow(round: number): Promise<void> {
  const h = await startHerald(`herald+slack ${round + 1}`, {
    SLACK_BOT_TOKEN: 'xoxb-bench',
    SLACK_SIGNING_SECRET: slackSigningSecret,
    SLACK_API_URL: `${sinkUrl}/slack-api/`,
  });
  try {
    const body = new URLSearchParams({
      token: 'unused',
      team_id: 'T0BENCH',
      team_domain: 'bench',
      channel_id: 'C0BENCH',
      channel_name: 'incidents',
      user_id: 'U0BENCH',
      user_name: 'bench',
      command: '/incident',
      text: 'help',
      api_app_id: 'A0BENCH',
      response_url: 'https://hooks.slack.com/commands/T0BENCH/1/x',
      trigger_id: '1.2.3',
    }).toString();
    // One timestamp for the run: Slack's window is ±5 minutes, and a replayed signed body is valid within it.
    const ts = Math.floor(Date.now() / 1000);
    const headers = {
      'content-type': 'application/x-www-form-urlencoded',
      'x-slack-request-timestamp': String(ts),
      'x-slack-signature': `v0=${createHmac('sha256', slackSigningSecret).update(`v0:${ts}:${body}`).digest('hex')}`,
    };
    const probe = await fetchWithin(`${h.base}/slack/events`, { method: 'POST', headers, body, timeoutMs: 10_000 });
    const text = await probe.text();
    if (probe.status !== 200 || !text.includes('ephemeral'))
      throw new Error(`/incident help → ${probe.status} ${text.slice(0, 200)}`);
    samples.slack.push(
      await runLoad('slack', {
        url: `${h.base}/slack/events`,
        method: 'POST',
        headers,
        body,
        connections: SLACK_CONNECTIONS,
        durationSec: LOAD_SEC,
        warmupSec: WARMUP_SEC,
      }),
    );
    samples.slackRssMB.push(rssMB(h.child.pid));
    // `help` is answered in the ack: the fake Web API should see no call at all.
    samples.slackApiCalls.push((await sinkStats()).slackApiCalls);
  } finally {
    await h.child.stop('SIGTERM', 15_000);
  }
}

function timeNode(args: string[], env: NodeJS.ProcessEnv): number {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'], timeout: 30_000 });
  const ms = performance.now() - t0;
  if (r.status !== 0)
    throw new Error(
      `node ${args.join(' ')} → status ${r.status} ${r.signal ?? ''} ${r.stderr.toString().slice(0, 300)}`,
    );
  return ms;
}

function cliRow(): void {
  const cli: number[] = [];
  const bare: number[] = [];
  for (let i = 0; i < CLI_RUNS; i++) {
    bare.push(timeNode(['-e', ''], baseEnv));
    cli.push(timeNode([join(ROOT, 'dist', 'cli', 'main.js'), 'keys', 'list'], heraldEnv()));
  }
  samples.cliMs.push(median(cli));
  samples.nodeMs.push(median(bare));
}

/**
 * With --monitor: every command the row sent, as Redis' MONITOR saw it (`[0 lua]` = inside a
 * script). Its own flag, because MONITOR slows Redis (a commit script costs several times as
 * much) and with it the rates and the CPU profiles taken beside it.
 */
function startMonitor(name: string): ReturnType<typeof spawn> {
  const out = openSync(join(PROFILE_DIR ?? '.', `monitor-${name.replace(/[^a-z0-9]+/gi, '-')}.txt`), 'w');
  return spawn('redis-cli', ['-u', redisUrl, 'monitor'], { stdio: ['ignore', out, 'ignore'] });
}

/** With --profile: the private Redis, whose command counts each row writes to the profile folder. */
let profileRedis: Redis | null = null;

/** The status_page connection's id, once made (the private Redis outlives each round's Herald). */
let statusPageId: string | null = null;

/**
 * Row 11: the public status page. Components and a status_page connection are made once; each
 * round publishes STATUS_PUBLISHES updates (an execute to the page's connection) and times each
 * from its 202 to its text in /status/api/v2/summary.json, then loads summary.json and the HTML
 * page against a static file server holding the bytes Herald answered.
 */
async function statusRow(h: Herald, token: string, round: number, order: Side[]): Promise<void> {
  if (statusPageId === null) {
    const ids: string[] = [];
    for (let i = 0; i < STATUS_COMPONENTS; i++) {
      const c = await must(h.base, token, 'POST', '/v1/components', {
        name: `Service ${i}`,
        description: 'A part of the product customers use.',
        group: `Region ${Math.floor(i / 4)}`,
      });
      ids.push(String(c.json.id));
    }
    const page = await must(h.base, token, 'POST', '/v1/connections', {
      name: 'Status page',
      type: 'status_page',
      config: { title: 'Bench', public_url: 'https://status.bench.test', time_zone: 'Europe/Berlin' },
    });
    statusPageId = String(page.json.id);
    const inc = await must(h.base, token, 'POST', '/v1/incidents', { title: 'Bench status', severity: 'major' });
    await must(h.base, token, 'PATCH', `/v1/incidents/${String(inc.json.id)}`, {
      components: [
        { id: ids[0], status: 'partial_outage' },
        { id: ids[5], status: 'degraded_performance' },
      ],
    });
  }
  const summaryUrl = `${h.base}/status/api/v2/summary.json`;
  // The page's first read (its polling starts with the first request).
  await must(h.base, null, 'GET', '/status/api/v2/summary.json');
  const visible: number[] = [];
  for (let i = 0; i < STATUS_PUBLISHES; i++) {
    const title = `Bench publish ${round}-${i}-${randomBytes(4).toString('hex')}`;
    const inc = await must(h.base, token, 'POST', '/v1/incidents', { title, severity: 'minor' });
    const r = await call(h.base, token, 'POST', `/v1/incidents/${String(inc.json.id)}/execute`, {
      connection_ids: [statusPageId],
    });
    if (r.status !== 202) throw new Error(`execute → ${r.status} ${r.text.slice(0, 300)}`);
    const accepted = performance.now();
    await waitFor(
      `"${title}" on the status page`,
      async () => (await call(h.base, null, 'GET', '/status/api/v2/summary.json')).text.includes(title),
      { timeoutMs: 10_000, intervalMs: 5 },
    );
    visible.push(performance.now() - accepted);
  }
  samples.statusVisibleMs.push(median(visible));

  // The same bytes as files: what Herald answers now, as a static server would serve it.
  const files = join(dir, `status-${round}`);
  mkdirSync(files, { recursive: true });
  const summary = await must(h.base, null, 'GET', '/status/api/v2/summary.json');
  writeFileSync(join(files, 'summary.json'), summary.text);
  const html = await must(h.base, null, 'GET', '/status');
  writeFileSync(join(files, 'index.html'), html.text);
  const server = startTsChild('static-baseline', 'static-baseline.ts', [], { ...baseEnv, STATIC_DIR: files });
  try {
    const base = `http://127.0.0.1:${(await server.json<{ listening: number }>('listening', 20_000)).listening}`;
    const common = {
      connections: API_CONNECTIONS,
      durationSec: LOAD_SEC,
      warmupSec: WARMUP_SEC,
      method: 'GET' as const,
      headers: {},
    };
    for (const side of order) {
      samples.status.summary[side].push(
        await runLoad(`status summary.json ${side}`, {
          ...common,
          url: side === 'herald' ? summaryUrl : `${base}/summary.json`,
        }),
      );
      samples.status.page[side].push(
        await runLoad(`status page ${side}`, {
          ...common,
          url: side === 'herald' ? `${h.base}/status` : `${base}/index.html`,
        }),
      );
    }
  } finally {
    await server.stop('SIGTERM', 5000);
  }
}

/** Runs `fn`, recording (not rethrowing) a failure: one broken row must not hide the others. */
async function row(name: string, fn: () => Promise<void> | void): Promise<void> {
  const t0 = performance.now();
  try {
    await profileRedis?.config('RESETSTAT');
    const monitor = profileRedis !== null && MONITOR ? startMonitor(name) : null;
    try {
      await fn();
    } finally {
      monitor?.kill();
    }
    if (profileRedis !== null && PROFILE_DIR !== undefined) {
      const stats = await profileRedis.info('commandstats');
      const lines = [...stats.matchAll(/cmdstat_(\S+):calls=(\d+),usec=(\d+)/g)]
        .map((m) => ({ cmd: m[1], calls: Number(m[2]), usec: Number(m[3]) }))
        .sort((x, y) => y.calls - x.calls);
      const file = join(PROFILE_DIR, `redis-${name.replace(/[^a-z0-9]+/gi, '-')}.txt`);
      writeFileSync(
        file,
        lines
          .map((l) => `${String(l.calls).padStart(9)} calls ${String(l.usec).padStart(10)} µs  ${l.cmd}`)
          .join('\n') + '\n',
      );
      log(`${name}: Redis command counts in ${file}`);
    }
    log(`${name}: done in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  } catch (e) {
    const msg = `${name} failed: ${e instanceof Error ? e.message : String(e)}`;
    problems.push(msg);
    log(msg);
  }
}

// ---------------------------------------------------------------------------------------------
// Main.

async function main(): Promise<void> {
  const backstop = setTimeout(() => {
    log(`the whole run passed its ${RUN_DEADLINE_MS / 1000} s deadline: stopping`);
    process.exit(1);
  }, RUN_DEADLINE_MS);
  backstop.unref();
  const loadavgStart = os.loadavg().map((x) => +x.toFixed(2));
  log(`${QUICK ? 'quick' : 'full'} run: ${ROUNDS} round(s), ${LOAD_SEC} s loads after ${WARMUP_SEC} s warm-up`);

  // The full run always compiles; the quick one only when src/ changed since the last build
  // (scripts/ensure-build.mjs, the check `npm start` makes, runs the same build: tsc, then the bundle).
  const build = QUICK
    ? spawnSync(process.execPath, [join(ROOT, 'scripts', 'ensure-build.mjs')], {
        cwd: ROOT,
        stdio: ['ignore', 'inherit', 'inherit'],
        timeout: 300_000,
      })
    : spawnSync('npm', ['run', '--silent', 'build'], {
        cwd: ROOT,
        stdio: ['ignore', 'inherit', 'inherit'],
        timeout: 300_000,
      });
  if (build.status !== 0) throw new Error(`the build failed (status ${build.status})`);
  log(QUICK ? 'dist/ is current (scripts/ensure-build.mjs)' : 'npm run build: done');

  let admin: Redis | null = null;
  try {
    const privateRedis = await startPrivateRedis(dir, baseEnv);
    const redisPort = privateRedis.port;
    redisPid = privateRedis.child.pid;
    redisUrl = privateRedis.url;
    const a = privateRedis.admin;
    admin = a;
    if (PROFILE_DIR !== undefined) profileRedis = a;
    const redisVersion = /redis_version:(\S+)/.exec(await a.info('server'))?.[1] ?? '?';

    const sink = startTsChild('sink', 'sink.ts', [], baseEnv);
    sinkUrl = `http://127.0.0.1:${(await sink.json<{ listening: number }>('listening', 20_000)).listening}`;
    // With --profile the bare app is profiled too (DIR/baseline), for a side-by-side comparison.
    // As node arguments: Node 20 refuses --cpu-prof in NODE_OPTIONS.
    const baselineProfile =
      PROFILE_DIR === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${join(PROFILE_DIR, 'baseline')}`];
    const baseline = startTsChild(
      'baseline-app',
      'baseline-app.ts',
      [],
      { ...baseEnv, REDIS_URL: redisUrl, BASELINE_PREFIX: 'baseline' },
      { nodeArgs: baselineProfile },
    );
    const baselineUrl = `http://127.0.0.1:${(await baseline.json<{ listening: number }>('listening', 20_000)).listening}`;

    const token = createBenchKey(heraldEnv(), 'bench');
    log(
      `private Redis ${redisVersion} on ${redisPort}; sink ${sinkUrl}; baseline ${baselineUrl}; API key from the CLI`,
    );

    if (CGROUP_MB !== null) {
      cgroup = createMemoryCgroup(CGROUP_MB * 2 ** 20, `herald-bench-${process.pid}`);
      const c = cgroup;
      onExit(() => c.remove());
      log(`Herald runs in a memory cgroup (v${c.version}) limited to ${CGROUP_MB} MiB: ${c.path}`);
    }
    let setup: Setup | null = null;
    let fanoutBodyBytes = 600;
    for (let round = 0; round < ROUNDS; round++) {
      log(`round ${round + 1} of ${ROUNDS}`);
      cgroup?.resetPeak();
      const h = await startHerald(`herald ${round + 1}`);
      samples.readyMs.push(h.readyMs);
      log(`herald ready in ${h.readyMs.toFixed(0)} ms (pid ${h.child.pid})`);
      try {
        if (setup === null) {
          await pool(FANOUT, 8, async (i) => {
            await must(h.base, token, 'POST', '/v1/connections', {
              name: `sink ${i}`,
              type: 'webhook',
              config: { url: `${sinkUrl}/h/${i}` },
            });
          });
          // The same incidents on both sides: the read row serves identical bytes.
          let readId = '';
          for (let i = 0; i < 30; i++) {
            const r = await must(h.base, token, 'POST', '/v1/incidents', {
              title: `Seed ${i}`,
              severity: 'major',
              description: DESCRIPTION,
            });
            readId = String(r.json.id);
            const stored = await must(h.base, token, 'GET', `/v1/incidents/${readId}`);
            await a
              .multi()
              .set(`baseline:incident:${readId}`, stored.text)
              .zadd('baseline:incidents', Date.now(), readId)
              .exec();
          }
          setup = { token, baselineUrl, baselinePid: baseline.pid, readId };
          log(`set up ${FANOUT} webhook connections and 30 incidents on each side`);
        }
        const s = setup;
        // Herald first in odd rounds, the baseline first in even ones.
        const order: Side[] = round % 2 === 0 ? ['herald', 'baseline'] : ['baseline', 'herald'];
        for (const r of ['read', 'write', 'list'] as const) {
          if (!wanted(r)) continue;
          await row(`${r} (${order.join(', then ')})`, async () => {
            for (const side of order) {
              const pid = side === 'herald' ? h.child.pid : s.baselinePid;
              const cpu0 = cpuSeconds(pid);
              const main0 = mainThreadCpuSeconds(pid);
              const redis0 = cpuSeconds(redisPid);
              const load = await runLoad(`${r} ${side}`, apiSpec(r, side, s, h));
              const perRequestUs = (seconds: number) => (seconds * 1e6) / (load.total + load.warmupTotal);
              samples.api[r][side].push(load);
              samples.apiCpuUs[r][side].push(perRequestUs(cpuSeconds(pid) - cpu0));
              samples.apiMainCpuUs[r][side].push(perRequestUs(mainThreadCpuSeconds(pid) - main0));
              samples.apiRedisCpuUs[r][side].push(perRequestUs(cpuSeconds(redisPid) - redis0));
            }
          });
        }
        if (wanted('status'))
          await row(`status page (${order.join(', then ')})`, async () => {
            await statusRow(h, token, round, order);
          });
        if (wanted('memory'))
          await row('Redis bytes per incident', async () => {
            const m = await memoryPerIncident(h, token, a);
            samples.bytesPerIncident.push(m.perIncident);
            samples.rawIncidentBytes.push(m.raw);
          });
        if (wanted('fanout'))
          await row(`execute → ${FANOUT} webhooks (${order.join(', then ')})`, async () => {
            const loop = await startFanoutBaseline();
            try {
              for (const side of order) {
                if (side === 'herald') {
                  const f = await heraldFanout(h, token);
                  // The baseline posts bodies the size of Herald's (the last one seen; 600 B before any).
                  fanoutBodyBytes = f.bodyBytes;
                  samples.fanout.herald.push(f.seconds);
                  samples.fanoutFirst.herald.push(f.firstSeconds);
                  samples.executeAcceptMs.push(f.acceptMs);
                } else {
                  const b = await timedFanout(loop, fanoutBodyBytes);
                  samples.fanout.baseline.push(b.seconds);
                  samples.fanoutFirst.baseline.push(b.firstSeconds);
                }
              }
            } finally {
              await loop.stop('SIGKILL', 2000);
            }
            samples.fanoutFloor.push(await queueFloorFanout(fanoutBodyBytes));
          });
        if (wanted('deliveries'))
          await row(`${EXECUTES} executes × ${FANOUT}, twice (warm-up, then measured)`, async () => {
            // A warm-up of the same work, as the API rows have theirs: a worker runs for days, and
            // the first thousands of deliveries after start run partly before V8 has optimized the
            // delivery path (about a quarter more CPU per delivery). Its rate is reported too.
            samples.coldDeliveriesPerSec.push(await deliveries(h, token));
            const cpu0 = cpuSeconds(h.child.pid);
            const redisCpu0 = await redisCpuSeconds(a);
            samples.deliveriesPerSec.push(await deliveries(h, token));
            // CPU per delivery (Herald's process, and Redis'): steadier than the rate on a busy
            // machine, so it is what to compare when changing the delivery path.
            samples.deliveryCpuMs.push(((cpuSeconds(h.child.pid) - cpu0) * 1000) / (EXECUTES * FANOUT));
            samples.deliveryRedisCpuMs.push((((await redisCpuSeconds(a)) - redisCpu0) * 1000) / (EXECUTES * FANOUT));
            samples.loopPostsPerSec.push(await loopPostsPerSec(fanoutBodyBytes));
            samples.floorEachPerSec.push(await floorPostsPerSec(fanoutBodyBytes, 'each'));
            samples.floorBatchPerSec.push(await floorPostsPerSec(fanoutBodyBytes, 'batch'));
          });
        if (wanted('events'))
          await row(`${EVENTS} incident events to one event endpoint`, async () => {
            samples.eventsPerSec.push(await eventsRow(h, token, a));
          });
        samples.rssUnderLoadMB.push(rssMB(h.child.pid));
        samples.memoryShape.push({ when: 'under load', ...(await memoryShape(h, token, 'under-load')) });
        await new Promise((r) => setTimeout(r, REST_MS));
        samples.rssMB.push(rssMB(h.child.pid));
        samples.memoryShape.push({ when: 'at rest', ...(await memoryShape(h, token, 'at-rest')) });
        samples.peakRssMB.push(rssMB(h.child.pid, 'VmHWM'));
        if (cgroup !== null) {
          samples.cgroupPeakMB.push(cgroup.peakBytes() / 1e6);
          samples.cgroupOomKills.push(cgroup.oomKills());
          samples.cgroupLimitHits.push(cgroup.limitHits());
        }
      } finally {
        const stop = await h.child.stop('SIGTERM', 20_000);
        samples.stopMs.push(stop.ms);
        if (stop.code !== 0)
          problems.push(
            `herald ${round + 1}: exit status ${stop.code} after SIGTERM${stop.killed ? ' (killed: did not stop in 20 s)' : ''}`,
          );
      }
      if (wanted('slack')) await row('Slack /incident help', () => slackRow(round));
      if (wanted('cli')) await row('CLI keys list', () => cliRow());
    }

    if (wanted('subscribers'))
      await row('subscribers (bench/subscribers.ts)', async () => {
        subscriberFigures = await subscriberRows({
          redisUrl,
          env: heraldEnv(),
          quick: QUICK,
          asDeployedOnly: QUICK,
          log,
        });
      });

    const report = buildReport(samples, {
      apiConnections: API_CONNECTIONS,
      slackConnections: SLACK_CONNECTIONS,
      fanout: FANOUT,
      executes: EXECUTES,
      events: EVENTS,
      restMs: REST_MS,
      cliRuns: CLI_RUNS,
      statusPublishes: STATUS_PUBLISHES,
      cgroupMb: CGROUP_MB,
      extra: subscriberFigures,
    });
    const machine = {
      cpu_model: os.cpus()[0]?.model ?? '?',
      cpus: os.cpus().length,
      nproc: os.availableParallelism(),
      total_mem_gib: +(os.totalmem() / 2 ** 30).toFixed(1),
      os: `${os.type()} ${os.release()}`,
      node: process.version,
      redis: redisVersion,
      loadavg_start: loadavgStart,
      loadavg_end: os.loadavg().map((x) => +x.toFixed(2)),
    };
    const results = {
      timestamp: new Date().toISOString(),
      mode: QUICK ? 'quick' : 'full',
      machine,
      settings: {
        rounds: ROUNDS,
        load_sec: LOAD_SEC,
        warmup_sec: WARMUP_SEC,
        api_connections: API_CONNECTIONS,
        slack_connections: SLACK_CONNECTIONS,
        fanout: FANOUT,
        executes: EXECUTES,
        worker_concurrency: WORKER_CONCURRENCY,
        memory_incidents: MEMORY_INCIDENTS,
        cli_runs: CLI_RUNS,
      },
      figures: report.figures,
      samples,
      problems,
      duration_sec: +((performance.now() - started) / 1000).toFixed(1),
    };
    writeFileSync(join(ROOT, 'bench', 'results.json'), `${JSON.stringify(results, null, 2)}\n`);
    process.stdout.write(
      `\nHerald benchmark (${results.mode}, ${ROUNDS} round${ROUNDS > 1 ? 's' : ''}, medians) — ${machine.nproc} × ${machine.cpu_model}, ${machine.total_mem_gib} GiB, Node ${machine.node}, Redis ${machine.redis}, load average ${machine.loadavg_start.join(' ')} at the start, ${machine.loadavg_end.join(' ')} at the end\n\n`,
    );
    process.stdout.write(`${report.table}\n`);
    if (problems.length > 0) process.stdout.write(`\nProblems:\n${problems.map((p) => `- ${p}`).join('\n')}\n`);
    process.stdout.write(`\nEvery figure: bench/results.json (${results.duration_sec} s)\n`);
  } finally {
    await stopAll(10_000);
    cgroup?.remove();
    admin?.disconnect();
    rmSync(dir, { recursive: true, force: true });
  }
}

// `--scale`: the scale curves (bench/scale.ts) instead of the rows above.
const SCALE = process.argv.some((a) => a === '--scale' || a.startsWith('--scale='));
(SCALE ? (async () => (await import('./scale.js')).runScale(log))() : main()).then(
  () => process.exit(0),
  (err: unknown) => {
    log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    process.exit(1);
  },
);
