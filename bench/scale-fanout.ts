/**
 * How Herald's fan-out scales: `npx tsx bench/scale-fanout.ts [--sizes=200,2000,10000]
 * [--only=fanout,commands,workers] [--executes=25] [--no-build] [--herald=<dir>]` (wired into
 * `npm run bench -- --scale` through the exported functions). Prints a Markdown table per part and
 * one JSON line. `--executes` sets part 3's executes (25 as row 6; fewer for a quick check);
 * `--herald` measures another checkout's built dist/ (a change tried elsewhere) with this harness.
 *
 * 1. fanout — one execute to 200 → 2,000 → 10,000 webhook connections, all on bench/sink.ts as
 *    row 5's are (an execute with no `connection_ids` and no audiences goes to every enabled
 *    connection; there is no bulk create, so connections are made over the API, 16 at once, and
 *    that is not timed). Per size: the execute request → its 202 (the whole answer read); 202 →
 *    first and last arrival; Herald's peak RSS over the fan-out (VmHWM after `clear_refs` 5, else
 *    VmRSS sampled every 50 ms); Redis commands per delivery (INFO commandstats before and after,
 *    the execution's tally at zero open and Redis quiet again, Herald's idle rate and the
 *    concurrent reads subtracted); and a concurrent reader — this file with `--reader`, its own
 *    process, so the harness's event loop never delays it — doing `GET /v1/incidents/{id}` on two
 *    keep-alive connections, each paced to one request per 5 ms (a flat-out loop would load the
 *    two cores it measures), with its p99 and max over execute → last arrival. Where a stall comes
 *    from: Herald's event-loop delay max over the fan-out (its /metrics) and Redis' longest single
 *    commands (SLOWLOG, ≥ 2 ms); and how much CPU other work on the machine took meanwhile. One
 *    unreported fan-out at the first size warms the delivery path first. A size that fails (a 5xx)
 *    is a row of its own, with Herald's logged error, and ends the curve.
 * 2. commands — Redis commands per API request (read, write with a 500-char description, list of
 *    25) and per delivery (5 executes × 200, its share of the execute included): N requests,
 *    commandstats deltas over N, after an idle interval of the same length is subtracted (role
 *    `all` runs its sweeps and BullMQ's housekeeping meanwhile). Commands run inside Lua scripts
 *    are counted by Redis as well as the EVALSHA itself; the script calls are shown beside.
 *    Then the projection: what one primary carries at ~100k ops/s, and at one Redis core (the
 *    measured Redis CPU per unit, the steadier figure), and how many a stated load needs.
 * 3. workers — API in one process (HERALD_ROLE=api), 1 then 2 worker processes
 *    (HERALD_ROLE=worker), 25 executes × 200 = 5,000 deliveries as row 6 (after a warm-up run of
 *    the same): deliveries/s in total and per worker, and CPU (in cores) of every process on the
 *    machine's two cores: workers, API, sink, Redis, this harness, and what else ran meanwhile
 *    (/proc/stat). Which worker sent a delivery is read from the TCP connection it came on: the
 *    sink here is this file with `--sink` (bench/sink.ts plus a count per client port), and the
 *    harness maps client ports to worker pids from /proc/net/tcp and /proc/<pid>/fd every 100 ms.
 *
 * Every part has its own private redis-server and children, stopped in `finally` and killed by
 * bench/lib.ts's exit hook; every wait polls with a deadline. The only timed pauses are
 * measurement windows (the idle interval) and the reader's pacing.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, createServer, request } from 'node:http';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import {
  epochMs,
  exitWithParent,
  fetchWithin,
  freePort,
  ROOT,
  startChild,
  startTsChild,
  stopAll,
  waitFor,
  type Child,
  cpuSeconds,
  pool,
  createBenchKey,
  untilReady,
} from './lib.js';
import { startPrivateRedis } from './private-redis.js';

const DEFAULT_SIZES = [200, 2_000, 10_000];
/** Row 5's and row 6's fan-out, and row 6's executes. */
const FANOUT = 200;
const EXECUTES = 25;
/** Part 2's deliveries: enough for steady per-delivery counts, short enough to run every time. */
const COST_EXECUTES = 5;
const WORKER_COUNTS = [1, 2];
/** Connections created at once: the API's create is a small commit, 16 keep Herald busy. */
const CREATE_CONCURRENCY = 16;
const REQUESTS = { read: 1000, write: 500, list: 500 } as const;
const REQUEST_CONCURRENCY = 8;
const READER_LOOPS = 2;
const READER_PACE_MS = 5;
const RSS_SAMPLE_MS = 50;
const OWNER_SAMPLE_MS = 100;
/** How long the idle rate is measured when nothing else fixes its length. */
const IDLE_MS = 3_000;
const DESCRIPTION = 'x'.repeat(500);
const PREFIX = 'bench';

/** Targets (the brief): a 202 at most linear in N and under 2 s at 10,000; per delivery flat; reads ≤ 250 ms. */
const ACCEPT_TARGET_MS = 2_000;
const READ_STALL_MS = 250;
/** "Flat": a shared 2-core VM moves a figure by this much between runs with nothing changed. */
const FLAT = 1.2;

/** The projection's yardsticks and the load it sizes (docs/scaling.md). */
const OPS_PER_PRIMARY = 100_000;
const HEADROOM = 0.7;
const STATED = { executesPerMin: 1_000, connections: 200, apiRps: 5_000 } as const;
/** The API requests of the stated load: mostly reads, as dashboards and integrations poll. */
const API_MIX = { read: 0.8, list: 0.1, write: 0.1 } as const;

/**
 * `--herald=<dir>`: the checkout whose dist/ is measured (default: this one), to compare a change
 * built elsewhere with the same harness. Its dist/ must be built.
 */
const HERALD_ROOT = resolve(process.argv.find((x) => x.startsWith('--herald='))?.slice('--herald='.length) ?? ROOT);

const started = performance.now();
const defaultLog = (msg: string): void => {
  process.stderr.write(`[scale ${((performance.now() - started) / 1000).toFixed(1).padStart(6)} s] ${msg}\n`);
};

// ---------------------------------------------------------------------------------------------
// What the parts return.

export interface ScaleOptions {
  log?: (msg: string) => void;
}

export interface ReadFigures {
  /** Requests whose start fell between the execute request and the last arrival. */
  count: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Answers other than 200 (0 = a network error or time-out). */
  non200: number;
}

export interface FanoutRow {
  connections: number;
  /** The execute request → its 202, the whole answer read. */
  acceptMs: number;
  /** The 202's body (it lists every delivery). */
  responseBytes: number;
  firstArrivalSec: number;
  lastArrivalSec: number;
  deliveriesPerSec: number;
  rssBeforeMB: number;
  peakRssMB: number;
  peakMethod: 'VmHWM' | 'sampled VmRSS';
  redisCommandsPerDelivery: number;
  scriptCallsPerDelivery: number;
  topCommandsPerDelivery: Record<string, number>;
  heraldCpuMsPerDelivery: number;
  /** Redis' CPU over the fan-out, less its idle rate and the concurrent reads' share. */
  redisCpuMsPerDelivery: number;
  reads: ReadFigures;
  /** Herald's event-loop delay, max over the fan-out (prom-client's monitor, 10 ms resolution). */
  eventLoopMaxMs: number;
  /** The longest single commands Redis ran over the fan-out (SLOWLOG, ≥ 2 ms). */
  slowestRedis: SlowCommand[];
  /** Busy CPU (cores) over execute → last arrival that none of this part's processes used: other work. */
  otherCores: number;
  /** Set when this size failed (e.g. the execute answered 5xx); the figures are then NaN. */
  error?: string;
  problems: string[];
}

export interface SlowCommand {
  ms: number;
  /** Its first arguments (a script's keys name the script), as SLOWLOG keeps them. */
  command: string;
  client: string;
}

export interface RequestCost {
  request: string;
  /** The API request measured (absent for deliveries). */
  kind?: 'read' | 'write' | 'list';
  n: number;
  /** Every command Redis ran per unit: sent by a client or run inside a script. */
  commands: number;
  /** EVALSHA / EVAL / FCALL per unit (each also counted in `commands`, as are the calls it made). */
  scriptCalls: number;
  perCommand: Record<string, number>;
  redisCpuUs: number;
  heraldCpuUs: number;
  seconds: number;
}

export interface ProjectionRow {
  unit: string;
  commands: number;
  redisCpuUs: number;
  /** Units per second one primary carries at OPS_PER_PRIMARY commands/s. */
  perSecAtOps: number;
  /** Units per second one Redis core carries, from the measured CPU per unit. */
  perSecAtCore: number;
}

export interface StatedLoad {
  description: string;
  deliveriesPerSec: number;
  apiRps: number;
  opsPerSec: number;
  redisCores: number;
  primariesByOps: number;
  primariesByCpu: number;
}

export interface CommandCosts {
  idleCommandsPerSec: number;
  /** What Herald at rest sends, per second, by command. */
  idleTop: Record<string, number>;
  requests: RequestCost[];
  delivery: RequestCost;
  projection: ProjectionRow[];
  stated: StatedLoad;
  problems: string[];
}

export interface WorkerProcessFigures {
  pid: number;
  deliveries: number;
  deliveriesPerSec: number;
  cpuCores: number;
  cpuMsPerDelivery: number;
}

export interface WorkerRow {
  workers: number;
  deliveries: number;
  seconds: number;
  deliveriesPerSec: number;
  perWorker: WorkerProcessFigures[];
  /** Deliveries whose client port was never seen on a worker's socket (closed between samples). */
  unattributed: number;
  /** CPU in cores (1 = one core busy) over the measured run. */
  cpuCores: { api: number; sink: number; redis: number; harness: number };
  machineBusyCores: number;
  /** Busy CPU that none of the processes above used (other work on the shared machine). */
  otherCores: number;
  stealCores: number;
  cores: number;
  problems: string[];
}

// ---------------------------------------------------------------------------------------------
// /proc.

function statusMB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const m = new RegExp(`${field}:\\s+(\\d+)\\s+kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? (Number(m[1]) * 1024) / 1e6 : NaN;
}

/** Resets the process's VmHWM to its RSS now (Linux clear_refs "5"); false where not allowed. */
function resetPeak(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/**
 * The peak RSS from now on: VmHWM once reset, and VmRSS sampled every 50 ms meanwhile (the
 * figure where clear_refs is refused, and a floor under VmHWM where it is not).
 */
function watchPeak(pid: number): { before: number; stop(): { peak: number; method: FanoutRow['peakMethod'] } } {
  const before = statusMB(pid, 'VmRSS');
  const reset = resetPeak(pid);
  let sampled = before;
  const timer = setInterval(() => {
    const v = statusMB(pid, 'VmRSS');
    if (v > sampled) sampled = v;
  }, RSS_SAMPLE_MS);
  return {
    before,
    stop() {
      clearInterval(timer);
      const hwm = reset ? statusMB(pid, 'VmHWM') : NaN;
      return reset && Number.isFinite(hwm)
        ? { peak: Math.max(hwm, sampled), method: 'VmHWM' }
        : { peak: sampled, method: 'sampled VmRSS' };
    },
  };
}

interface MachineCpu {
  busy: number;
  total: number;
  steal: number;
}

/** The machine's CPU time so far, all cores (/proc/stat's first line, in ticks). */
function machineCpu(): MachineCpu {
  const f = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = f;
  const total = user + nice + system + idle + iowait + irq + softirq + steal;
  return { busy: total - idle - iowait, total, steal };
}

/**
 * Which process holds each TCP client port connected to the sink: the socket inodes in each
 * pid's /proc/<pid>/fd, matched against /proc/net/tcp. Sampled while deliveries run (Herald keeps
 * a socket open for 1 s of idleness, so every socket lives through several samples).
 */
class PortOwners {
  readonly owner = new Map<number, number>();

  constructor(
    private readonly sinkPort: number,
    private readonly pids: number[],
  ) {}

  sample(): void {
    const inodes = new Map<string, number>();
    for (const pid of this.pids) {
      let fds: string[] = [];
      try {
        fds = readdirSync(`/proc/${pid}/fd`);
      } catch {
        continue;
      }
      for (const fd of fds) {
        try {
          const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
          if (m) inodes.set(m[1]!, pid);
        } catch {
          // Closed between the listing and the read.
        }
      }
    }
    for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
      const [, local, remote, , , , , , , inode] = line.trim().split(/\s+/);
      if (local === undefined || remote === undefined || inode === undefined) continue;
      if (parseInt(remote.split(':')[1] ?? '', 16) !== this.sinkPort) continue;
      const pid = inodes.get(inode);
      if (pid !== undefined) this.owner.set(parseInt(local.split(':')[1] ?? '', 16), pid);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The private Redis and its counters.

type Calls = Map<string, number>;

interface PrivateRedis {
  child: Child;
  url: string;
  admin: Redis;
  /** Commands this harness sent (other than INFO) since the start: taken out of every count. */
  mine: Calls;
}

async function startRedis(dir: string, env: NodeJS.ProcessEnv): Promise<PrivateRedis> {
  // SLOWLOG keeps every command of 2 ms or more: where a stall of other clients comes from.
  const r = await startPrivateRedis(dir, env, ['--slowlog-log-slower-than', '2000', '--slowlog-max-len', '1024']);
  return { child: r.child, url: r.url, admin: r.admin, mine: new Map() };
}

/** Redis' calls so far by command, less this harness's own (INFO, the only one it sends often, left out). */
async function commandCalls(r: PrivateRedis): Promise<Calls> {
  const out: Calls = new Map();
  for (const m of (await r.admin.info('commandstats')).matchAll(/cmdstat_([\w|-]+):calls=(\d+)/g))
    if (m[1] !== 'info') out.set(m[1]!, Number(m[2]));
  for (const [c, n] of r.mine) out.set(c, (out.get(c) ?? 0) - n);
  return out;
}

async function redisCpuSeconds(r: PrivateRedis): Promise<number> {
  const info = await r.admin.info('cpu');
  const user = Number(/used_cpu_user:([\d.]+)/.exec(info)?.[1] ?? NaN);
  return user + Number(/used_cpu_sys:([\d.]+)/.exec(info)?.[1] ?? NaN);
}

/** The longest commands since the last call (which empties the log), longest first. */
async function slowest(r: PrivateRedis, n = 3): Promise<SlowCommand[]> {
  const raw = (await r.admin.call('SLOWLOG', 'GET', '1024')) as Array<
    [number, number, number, string[], string, string]
  >;
  await r.admin.call('SLOWLOG', 'RESET');
  return raw
    .map(([, , us, args, , client]) => {
      const more = args[args.length - 1]?.startsWith('... (') ? ` ${args[args.length - 1]}` : '';
      const shown = args.slice(0, 4).map((a) => (a.length > 48 ? `${a.slice(0, 45)}...` : a));
      return { ms: us / 1000, command: `${shown.join(' ')}${more}`, client };
    })
    .sort((a, b) => b.ms - a.ms)
    .slice(0, n);
}

/** Herald's event-loop delay max since the last scrape (prom-client resets its histogram on each). */
async function eventLoopMaxMs(h: Herald): Promise<number> {
  const text = await (await fetchWithin(`${h.base}/metrics`, { timeoutMs: 10_000 })).text();
  return Number(/^herald_nodejs_eventloop_lag_max_seconds(?:\{[^}]*\})? ([\d.e+-]+)/m.exec(text)?.[1] ?? NaN) * 1000;
}

/** An HGET of this harness's (counted, so it is not taken for Herald's). */
async function hgetMine(r: PrivateRedis, key: string, field: string): Promise<string | null> {
  r.mine.set('hget', (r.mine.get('hget') ?? 0) + 1);
  return r.admin.hget(key, field);
}

const totalOf = (m: Calls): number => [...m.values()].reduce((a, b) => a + b, 0);
const scriptCallsOf = (m: Calls): number => (m.get('evalsha') ?? 0) + (m.get('eval') ?? 0) + (m.get('fcall') ?? 0);

/** b − a − Σ k·m, per command. */
function deltaOf(a: Calls, b: Calls, less: Array<[Calls, number]> = []): Calls {
  const out: Calls = new Map();
  for (const [c, n] of b) out.set(c, n - (a.get(c) ?? 0));
  for (const [m, k] of less) for (const [c, n] of m) out.set(c, (out.get(c) ?? 0) - n * k);
  return out;
}

const scaled = (m: Calls, k: number): Calls => new Map([...m].map(([c, n]) => [c, n * k]));

/** The largest per-unit counts (at least 0.05 a unit), rounded. */
function topOf(m: Calls, n = 8): Record<string, number> {
  const top = [...m].filter(([, v]) => v >= 0.05).sort((x, y) => y[1] - x[1]);
  return Object.fromEntries(top.slice(0, n).map(([c, v]) => [c, +v.toFixed(2)]));
}

// ---------------------------------------------------------------------------------------------
// A part's processes: the private Redis, a sink, Herald.

interface Stack {
  dir: string;
  baseEnv: NodeJS.ProcessEnv;
  secretKey: string;
  redis: PrivateRedis;
  sink: Child;
  sinkUrl: string;
  sinkPort: number;
  token: string;
  children: Child[];
  /** What counts as "Redis is quiet": commands per 100 ms (from the idle rate, once measured). */
  quietPer100ms: number;
  problems: string[];
  log: (msg: string) => void;
}

interface Herald {
  child: Child;
  base: string;
}

/** Its private Redis, a sink (bench/sink.ts, or this file's counting one) and an API key from the CLI. */
async function openStack(name: string, sink: 'bench' | 'counting', log: (msg: string) => void): Promise<Stack> {
  const dir = mkdtempSync(join(os.tmpdir(), `herald-scale-${name}-`));
  const baseEnv: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'production' };
  const children: Child[] = [];
  try {
    const redis = await startRedis(dir, baseEnv);
    children.push(redis.child);
    const sinkChild =
      sink === 'bench'
        ? startTsChild('sink', 'sink.ts', [], baseEnv)
        : startTsChild('counting sink', 'scale-fanout.ts', ['--sink'], baseEnv);
    children.push(sinkChild);
    const sinkPort = (await sinkChild.json<{ listening: number }>('listening', 20_000)).listening;
    const s: Stack = {
      dir,
      baseEnv,
      secretKey: randomBytes(32).toString('base64'),
      redis,
      sink: sinkChild,
      sinkUrl: `http://127.0.0.1:${sinkPort}`,
      sinkPort,
      token: '',
      children,
      quietPer100ms: 20,
      problems: [],
      log,
    };
    s.token = createToken(s);
    return s;
  } catch (e) {
    for (const c of children.reverse()) await c.stop('SIGKILL', 2000);
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}

/** Stops what the part started, newest first (Herald before its Redis). */
async function closeStack(s: Stack): Promise<void> {
  for (const c of [...s.children].reverse()) {
    const stop = await c.stop('SIGTERM', 20_000);
    if (stop.killed) s.problems.push(`${c.name} did not stop within 20 s of SIGTERM (killed)`);
  }
  s.redis.admin.disconnect();
  rmSync(s.dir, { recursive: true, force: true });
}

function heraldEnv(s: Stack, extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return {
    ...s.baseEnv,
    REDIS_URL: s.redis.url,
    HERALD_KEY_PREFIX: PREFIX,
    HERALD_SECRET_KEY: s.secretKey,
    HERALD_DATA_DIR: join(s.dir, 'data'),
    HOST: '127.0.0.1',
    HERALD_ROLE: 'all',
    HERALD_OUTBOUND_ALLOW: '127.0.0.1/32',
    HERALD_RATE_LIMIT: '1000000000',
    HERALD_EXECUTE_RATE_LIMIT: '1000000000',
    // Errors only: none in a clean run, and a 5xx then says why (see timedExecute).
    LOG_LEVEL: 'error',
    ...extra,
  };
}

function createToken(s: Stack): string {
  return createBenchKey(heraldEnv(s, {}), 'bench-scale', HERALD_ROOT);
}

/** `node dist/main.js` serving HTTP (role all or api), ready once /readyz answers 200. */
async function startHerald(s: Stack, name: string, role: 'all' | 'api'): Promise<Herald> {
  const port = await freePort();
  const child = startChild(
    name,
    process.execPath,
    [join(HERALD_ROOT, 'dist', 'main.js')],
    heraldEnv(s, { HERALD_ROLE: role, PORT: String(port) }),
  );
  s.children.push(child);
  const base = `http://127.0.0.1:${port}`;
  await untilReady(name, child, base);
  return { child, base };
}

/** A worker process (no HTTP): running once it logs so (its only info line; it logs no deliveries). */
async function startWorker(s: Stack, name: string): Promise<Child> {
  const child = startChild(
    name,
    process.execPath,
    [join(HERALD_ROOT, 'dist', 'main.js')],
    heraldEnv(s, { HERALD_ROLE: 'worker', LOG_LEVEL: 'info' }),
  );
  s.children.push(child);
  await child.line('the worker running', (l) => (l.includes('Herald running (role worker') ? true : undefined), 30_000);
  return child;
}

// ---------------------------------------------------------------------------------------------
// HTTP.

interface Reply {
  status: number;
  text: string;
  json: Record<string, unknown>;
}

async function call(h: Herald, token: string, method: string, path: string, body?: unknown): Promise<Reply> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const r = await fetchWithin(`${h.base}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    timeoutMs: 120_000,
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

async function must(h: Herald, token: string, method: string, path: string, body?: unknown): Promise<Reply> {
  const r = await call(h, token, method, path, body);
  if (r.status >= 300) throw new Error(`${method} ${path} → ${r.status} ${r.text.slice(0, 300)}`);
  return r;
}

interface SinkStats {
  count: number;
  first: number;
  last: number;
  ports?: Record<string, number>;
}

const sinkStats = async (s: Stack): Promise<SinkStats> =>
  (await (await fetchWithin(`${s.sinkUrl}/__stats`, { timeoutMs: 5000 })).json()) as SinkStats;

async function sinkReset(s: Stack): Promise<void> {
  await (await fetchWithin(`${s.sinkUrl}/__reset`, { method: 'POST', timeoutMs: 5000 })).body?.cancel();
}

const sinkReached = (s: Stack, n: number, timeoutMs: number): Promise<SinkStats> =>
  waitFor(
    `the sink to receive ${n} deliveries`,
    async () => {
      const st = await sinkStats(s);
      return st.count >= n ? st : undefined;
    },
    { timeoutMs, intervalMs: 10 },
  );

/** Webhook connections `from`..`to`-1 on the sink (the API has no bulk create). */
async function growConnections(s: Stack, h: Herald, from: number, to: number): Promise<void> {
  const t0 = performance.now();
  await pool(to - from, CREATE_CONCURRENCY, async (i) => {
    const n = from + i;
    await must(h, s.token, 'POST', '/v1/connections', {
      name: `sink ${n}`,
      type: 'webhook',
      config: { url: `${s.sinkUrl}/h/${n}` },
    });
  });
  s.log(`connections ${from} → ${to} created in ${((performance.now() - t0) / 1000).toFixed(1)} s (not measured)`);
}

async function newIncident(s: Stack, h: Herald, title: string, description?: string): Promise<string> {
  const r = await must(h, s.token, 'POST', '/v1/incidents', {
    title,
    severity: 'major',
    ...(description === undefined ? {} : { description }),
  });
  return String(r.json.id);
}

interface Executed {
  id: string;
  t0: number;
  t202: number;
  bytes: number;
}

/** One execute to every enabled connection, timed from the request to the whole 202 read. */
async function timedExecute(s: Stack, h: Herald, incidentId: string): Promise<Executed> {
  const t0 = epochMs();
  const r = await call(h, s.token, 'POST', `/v1/incidents/${incidentId}/execute`, {});
  const t202 = epochMs();
  if (r.status !== 202) {
    // pino writes asynchronously: the line may come a moment after the answer.
    const errors = () => h.child.lines.filter((l) => l.includes('"level":"error"'));
    await waitFor("Herald's error line", () => errors().length > 0, { timeoutMs: 2000 }).catch(() => undefined);
    const logged = errors().slice(-2);
    throw new Error(`execute → ${r.status} ${r.text.slice(0, 300)}; Herald logged: ${logged.join('\n') || 'nothing'}`);
  }
  return { id: String(r.json.id), t0, t202, bytes: Buffer.byteLength(r.text) };
}

/**
 * Every delivery of the execution final: its tally (the worker updates it in each delivery's own
 * write), read from Herald's key as bench/run.ts's events row reads the event log. The sink's
 * last arrival comes before the last deliveries' final writes, which the counts must include.
 */
async function tallyDone(s: Stack, executionId: string, timeoutMs: number): Promise<void> {
  await waitFor(
    `execution ${executionId} to have no open delivery`,
    async () => (await hgetMine(s.redis, `{${PREFIX}}:exe:${executionId}:tally`, 'open')) === '0',
    { timeoutMs, intervalMs: 20 },
  );
}

// ---------------------------------------------------------------------------------------------
// Counting: snapshots, idle rate, quiet.

interface Snapshot {
  calls: Calls;
  redisCpuS: number;
  heraldCpuS: number;
  at: number;
}

async function snapshot(s: Stack, heraldPid: number): Promise<Snapshot> {
  const calls = await commandCalls(s.redis);
  return { calls, redisCpuS: await redisCpuSeconds(s.redis), heraldCpuS: cpuSeconds(heraldPid), at: epochMs() };
}

/** Herald at rest, per ms: its sweeps, BullMQ's housekeeping, and their CPU. */
interface Idle {
  perMs: Calls;
  redisCpuSPerMs: number;
  heraldCpuSPerMs: number;
}

async function measureIdle(s: Stack, heraldPid: number, ms: number): Promise<Idle> {
  const a = await snapshot(s, heraldPid);
  // A measurement window, not a wait for something: what Herald does on its own meanwhile is the figure.
  await new Promise((r) => setTimeout(r, ms));
  const b = await snapshot(s, heraldPid);
  const dt = b.at - a.at;
  const perMs = scaled(deltaOf(a.calls, b.calls), 1 / dt);
  s.quietPer100ms = Math.max(10, Math.ceil(totalOf(perMs) * 200) + 5);
  return {
    perMs,
    redisCpuSPerMs: (b.redisCpuS - a.redisCpuS) / dt,
    heraldCpuSPerMs: (b.heraldCpuS - a.heraldCpuS) / dt,
  };
}

/** Polls until Redis has been quiet (idle rate) for three 100 ms polls in a row; a problem past 30 s. */
async function settle(s: Stack): Promise<void> {
  let prev = totalOf(await commandCalls(s.redis));
  let quiet = 0;
  try {
    await waitFor(
      'Redis to go quiet',
      async () => {
        const now = totalOf(await commandCalls(s.redis));
        quiet = now - prev <= s.quietPer100ms ? quiet + 1 : 0;
        prev = now;
        return quiet >= 3;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
  } catch {
    s.problems.push(`Redis did not go quiet (≤ ${s.quietPer100ms} commands per 100 ms) within 30 s`);
  }
}

/** What each unit cost between two snapshots, the idle rate and `less` (other work counted meanwhile) taken out. */
function unitCost(
  label: string,
  units: number,
  a: Snapshot,
  b: Snapshot,
  idle: Idle,
  less: { cost: RequestCost; times: number } | null = null,
): RequestCost {
  const dt = b.at - a.at;
  const other: Array<[Calls, number]> = [[idle.perMs, dt]];
  if (less) other.push([new Map(Object.entries(less.cost.perCommand)), less.times]);
  const per = scaled(deltaOf(a.calls, b.calls, other), 1 / units);
  const lessRedisUs = less ? less.cost.redisCpuUs * less.times : 0;
  const lessHeraldUs = less ? less.cost.heraldCpuUs * less.times : 0;
  return {
    request: label,
    n: units,
    commands: totalOf(per),
    scriptCalls: scriptCallsOf(per),
    perCommand: Object.fromEntries([...per].filter(([, v]) => Math.abs(v) >= 0.001)),
    redisCpuUs: ((b.redisCpuS - a.redisCpuS - idle.redisCpuSPerMs * dt) * 1e6 - lessRedisUs) / units,
    heraldCpuUs: ((b.heraldCpuS - a.heraldCpuS - idle.heraldCpuSPerMs * dt) * 1e6 - lessHeraldUs) / units,
    seconds: dt / 1000,
  };
}

type ApiKind = keyof typeof REQUESTS;

function apiRequest(kind: ApiKind, readId: string): { method: string; path: string; body?: unknown } {
  switch (kind) {
    case 'read':
      return { method: 'GET', path: `/v1/incidents/${readId}` };
    case 'write':
      return {
        method: 'POST',
        path: '/v1/incidents',
        body: { title: 'Checkout errors in EU', severity: 'major', description: DESCRIPTION },
      };
    case 'list':
      return { method: 'GET', path: '/v1/incidents?limit=25' };
  }
}

/**
 * N requests (8 at once), Redis quiet before and after (a write's events are moved on by the
 * worker after its answer: part of its cost), then an idle interval of the same length (at most
 * 10 s), whose counts are taken out.
 */
async function requestCost(
  s: Stack,
  h: Herald,
  kind: ApiKind,
  readId: string,
  n: number = REQUESTS[kind],
): Promise<RequestCost> {
  const spec = apiRequest(kind, readId);
  await settle(s);
  const a = await snapshot(s, h.child.pid);
  await pool(n, REQUEST_CONCURRENCY, async () => {
    await must(h, s.token, spec.method, spec.path, spec.body);
  });
  await settle(s);
  const b = await snapshot(s, h.child.pid);
  const idle = await measureIdle(s, h.child.pid, Math.min(b.at - a.at, 10_000));
  const label = `${spec.method} ${spec.path.replace(readId, '{id}')}${kind === 'write' ? ' (500-char description)' : ''}`;
  return { ...unitCost(label, n, a, b, idle), kind };
}

// ---------------------------------------------------------------------------------------------
// The concurrent reader (this file with --reader, its own process).

interface ReadSample {
  t: number;
  ms: number;
  status: number;
}

class Reader {
  private seq = 0;

  constructor(readonly child: Child) {}

  static async start(s: Stack, h: Herald, readId: string): Promise<Reader> {
    const child = startTsChild(
      'reader',
      'scale-fanout.ts',
      ['--reader'],
      { ...s.baseEnv, SCALE_READER_URL: `${h.base}/v1/incidents/${readId}`, SCALE_READER_TOKEN: s.token },
      { stdin: true },
    );
    s.children.push(child);
    await child.json('ready', 30_000);
    return new Reader(child);
  }

  /** Starts the loops; resolves once the first answer came back. */
  async begin(): Promise<number> {
    const id = ++this.seq;
    this.child.proc.stdin?.write(`start ${id}\n`);
    await this.child.line(`run ${id} started`, (l) => (l === `{"started":${id}}` ? true : undefined), 15_000);
    return id;
  }

  async end(id: number): Promise<ReadSample[]> {
    this.child.proc.stdin?.write(`stop ${id}\n`);
    const flat = await this.child.line(
      `run ${id}'s samples`,
      (l) => (l.startsWith(`{"stopped":${id},`) ? (JSON.parse(l) as { samples: number[] }).samples : undefined),
      30_000,
    );
    const out: ReadSample[] = [];
    for (let i = 0; i + 2 < flat.length; i += 3) out.push({ t: flat[i]!, ms: flat[i + 1]!, status: flat[i + 2]! });
    return out;
  }
}

/** The nearest-rank percentile of `sorted` (ascending); NaN when empty. */
function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

function readFigures(samples: ReadSample[], from: number, to: number): ReadFigures {
  const during = samples.filter((x) => x.t >= from && x.t <= to);
  const ms = during.map((x) => x.ms).sort((a, b) => a - b);
  return {
    count: during.length,
    p50Ms: percentile(ms, 50),
    p99Ms: percentile(ms, 99),
    maxMs: ms.length === 0 ? NaN : ms[ms.length - 1]!,
    non200: during.filter((x) => x.status !== 200).length,
  };
}

function runReader(): void {
  exitWithParent();
  const url = process.env.SCALE_READER_URL ?? '';
  const headers = { authorization: `Bearer ${process.env.SCALE_READER_TOKEN ?? ''}` };
  const agent = new Agent({ keepAlive: true, maxSockets: READER_LOOPS });
  let samples: number[] = [];
  let running = false;
  let loops: Promise<void>[] = [];
  const once = (): Promise<number> =>
    new Promise((done) => {
      const req = request(url, { agent, headers, timeout: 10_000 }, (res) => {
        res.resume();
        res.on('end', () => done(res.statusCode ?? 0));
      });
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', () => done(0));
      req.end();
    });
  const loop = async (first: () => void): Promise<void> => {
    while (running) {
      const t = epochMs();
      const status = await once();
      const now = epochMs();
      samples.push(+t.toFixed(1), +(now - t).toFixed(2), status);
      first();
      // Pacing, not waiting for anything: one request per READER_PACE_MS per loop at most.
      if (t + READER_PACE_MS > now) await new Promise((r) => setTimeout(r, t + READER_PACE_MS - now));
    }
  };
  createInterface({ input: process.stdin })
    .on('line', (line) => {
      const [cmd, id] = line.trim().split(' ');
      if (cmd === 'start' && !running) {
        running = true;
        samples = [];
        let told = false;
        const first = () => {
          if (!told) process.stdout.write(`{"started":${id}}\n`);
          told = true;
        };
        loops = Array.from({ length: READER_LOOPS }, () => loop(first));
      } else if (cmd === 'stop') {
        running = false;
        void Promise.all(loops).then(() =>
          process.stdout.write(`${JSON.stringify({ stopped: Number(id), samples })}\n`),
        );
      }
    })
    .on('close', () => process.exit(0));
  process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
}

// ---------------------------------------------------------------------------------------------
// The counting sink (this file with --sink, its own process): bench/sink.ts plus a count per client port.

function runCountingSink(): void {
  exitWithParent();
  let count = 0;
  let first = 0;
  let last = 0;
  let ports = new Map<number, number>();
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const url = req.url ?? '/';
      if (url.startsWith('/h/')) {
        const t = epochMs();
        if (count === 0) first = t;
        last = t;
        count++;
        const port = req.socket.remotePort ?? 0;
        ports.set(port, (ports.get(port) ?? 0) + 1);
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      } else if (url === '/__reset') {
        [count, first, last, ports] = [0, 0, 0, new Map()];
        res.writeHead(204).end();
      } else if (url === '/__stats') {
        const body = JSON.stringify({ count, first, last, ports: Object.fromEntries(ports) });
        res.writeHead(200, { 'content-type': 'application/json' }).end(body);
      } else {
        res.writeHead(404).end();
      }
    });
  });
  server.keepAliveTimeout = 30_000;
  server.listen(0, '127.0.0.1', () => {
    const addr = server.address();
    process.stdout.write(
      `${JSON.stringify({ listening: typeof addr === 'object' && addr !== null ? addr.port : 0 })}\n`,
    );
  });
  process.on('SIGTERM', () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  });
}

// ---------------------------------------------------------------------------------------------
// Part 1: the fan-out curve.

interface FanoutContext {
  s: Stack;
  h: Herald;
  reader: Reader;
  idle: Idle;
  /** What one of the reader's requests costs Redis (taken out of the per-delivery counts). */
  perRead: RequestCost;
}

/** One execute to every connection (`size` of them), with the reader running throughout. */
async function oneFanout(f: FanoutContext, size: number): Promise<FanoutRow> {
  const { s, h, reader } = f;
  const problems: string[] = [];
  const incidentId = await newIncident(s, h, `Fan-out ${size}`);
  await sinkReset(s);
  await settle(s);
  // Both outside the counted window: they empty the slow log and the event-loop histogram.
  await slowest(s.redis);
  await eventLoopMaxMs(h);
  const a = await snapshot(s, h.child.pid);
  const run = await reader.begin();
  const peak = watchPeak(h.child.pid);
  const ours = [h.child.pid, s.redis.child.pid, s.sink.pid, reader.child.pid];
  const c0 = cpuSnap(ours.map((pid) => [String(pid), pid]));
  let exe: Executed;
  let arrived: SinkStats;
  let rss: ReturnType<ReturnType<typeof watchPeak>['stop']>;
  try {
    exe = await timedExecute(s, h, incidentId);
    arrived = await sinkReached(s, size, 30_000 + size * 10);
  } finally {
    rss = peak.stop();
  }
  const otherCores = otherWork(c0, cpuSnap(ours.map((pid) => [String(pid), pid])));
  await tallyDone(s, exe.id, 30_000 + size * 5);
  const samples = await reader.end(run);
  await settle(s);
  const b = await snapshot(s, h.child.pid);
  const loopMax = await eventLoopMaxMs(h);
  const slow = await slowest(s.redis);
  const extra = (await sinkStats(s)).count - size;
  if (extra > 0) problems.push(`the sink received ${extra} deliveries more than ${size}`);
  const cost = unitCost(`delivery (one execute to ${size})`, size, a, b, f.idle, {
    cost: f.perRead,
    times: samples.length,
  });
  const reads = readFigures(samples, exe.t0, arrived.last);
  if (reads.non200 > 0) problems.push(`${reads.non200} concurrent reads answered other than 200`);
  return {
    connections: size,
    acceptMs: exe.t202 - exe.t0,
    responseBytes: exe.bytes,
    firstArrivalSec: (arrived.first - exe.t202) / 1000,
    lastArrivalSec: (arrived.last - exe.t202) / 1000,
    deliveriesPerSec: size / ((arrived.last - exe.t202) / 1000),
    rssBeforeMB: peak.before,
    peakRssMB: rss.peak,
    peakMethod: rss.method,
    redisCommandsPerDelivery: cost.commands,
    scriptCallsPerDelivery: cost.scriptCalls,
    topCommandsPerDelivery: topOf(new Map(Object.entries(cost.perCommand))),
    heraldCpuMsPerDelivery: cost.heraldCpuUs / 1000,
    redisCpuMsPerDelivery: cost.redisCpuUs / 1000,
    reads,
    eventLoopMaxMs: loopMax,
    slowestRedis: slow,
    otherCores,
    problems,
  };
}

function failedRow(size: number, error: string): FanoutRow {
  const reads = { count: NaN, p50Ms: NaN, p99Ms: NaN, maxMs: NaN, non200: NaN };
  return {
    connections: size,
    ...{ acceptMs: NaN, responseBytes: NaN, firstArrivalSec: NaN, lastArrivalSec: NaN, deliveriesPerSec: NaN },
    ...{ rssBeforeMB: NaN, peakRssMB: NaN, peakMethod: 'sampled VmRSS', redisCommandsPerDelivery: NaN },
    ...{ scriptCallsPerDelivery: NaN, topCommandsPerDelivery: {}, heraldCpuMsPerDelivery: NaN },
    ...{ redisCpuMsPerDelivery: NaN, reads, eventLoopMaxMs: NaN, slowestRedis: [], otherCores: NaN },
    error: error.slice(0, 2000),
    problems: [`${size}: ${error.slice(0, 2000)}`],
  };
}

/**
 * Part 1. Sizes run in ascending order on one Herald (role all, as row 5), the connections of
 * the smaller sizes kept: each execute goes to every connection there is.
 */
export async function fanoutCurve(o: ScaleOptions & { sizes?: number[] } = {}): Promise<FanoutRow[]> {
  const log = o.log ?? defaultLog;
  const sizes = [...new Set(o.sizes ?? DEFAULT_SIZES)].sort((x, y) => x - y);
  const s = await openStack('fanout', 'bench', log);
  try {
    const h = await startHerald(s, 'herald (fan-out)', 'all');
    const readId = await newIncident(s, h, 'Read while fanning out', DESCRIPTION);
    await settle(s);
    const idle = await measureIdle(s, h.child.pid, IDLE_MS);
    const perRead = await requestCost(s, h, 'read', readId, 500);
    log(`idle: ${(totalOf(idle.perMs) * 1000).toFixed(1)} commands/s; a read: ${perRead.commands.toFixed(2)} commands`);
    const reader = await Reader.start(s, h, readId);
    const rows: FanoutRow[] = [];
    let have = 0;
    for (const size of sizes) {
      await growConnections(s, h, have, size);
      const f = { s, h, reader, idle, perRead };
      // A warm-up at the first size, not reported: the first deliveries after start run before V8
      // has optimized the delivery path (twice the CPU), which would flatter every later growth.
      const first = have === 0;
      have = size;
      let row: FanoutRow;
      try {
        if (first) await oneFanout(f, size);
        row = await oneFanout(f, size);
      } catch (e) {
        // A size that fails is a result (the table shows it); a larger one would fail the same way.
        rows.push(failedRow(size, e instanceof Error ? e.message : String(e)));
        log(`fan-out ${size} failed: ${rows[rows.length - 1]!.error}`);
        break;
      }
      log(
        `fan-out ${size}: 202 in ${row.acceptMs.toFixed(0)} ms, last arrival ${row.lastArrivalSec.toFixed(2)} s after it, ` +
          `${row.redisCommandsPerDelivery.toFixed(1)} commands/delivery, reads p99 ${row.reads.p99Ms.toFixed(1)} ms max ${row.reads.maxMs.toFixed(1)} ms`,
      );
      rows.push(row);
    }
    for (const r of rows) r.problems.push(...s.problems);
    return rows;
  } finally {
    await closeStack(s);
  }
}

// ---------------------------------------------------------------------------------------------
// Part 2: Redis commands per request and per delivery, and the projection.

/** COST_EXECUTES executes to FANOUT connections, one after the other (row 6's way), no reader. */
async function deliveryCost(s: Stack, h: Herald, executes: number): Promise<RequestCost> {
  const incidentId = await newIncident(s, h, 'Delivery cost');
  await sinkReset(s);
  await settle(s);
  const a = await snapshot(s, h.child.pid);
  const ids: string[] = [];
  for (let i = 0; i < executes; i++) ids.push((await timedExecute(s, h, incidentId)).id);
  await sinkReached(s, executes * FANOUT, 120_000);
  for (const id of ids) await tallyDone(s, id, 60_000);
  await settle(s);
  const b = await snapshot(s, h.child.pid);
  const idle = await measureIdle(s, h.child.pid, Math.min(b.at - a.at, 10_000));
  return unitCost(
    `delivery (${executes} executes × ${FANOUT}, the execute's share included)`,
    executes * FANOUT,
    a,
    b,
    idle,
  );
}

function projection(requests: RequestCost[], delivery: RequestCost): ProjectionRow[] {
  return [delivery, ...requests].map((c) => ({
    unit: c.request,
    commands: c.commands,
    redisCpuUs: c.redisCpuUs,
    perSecAtOps: OPS_PER_PRIMARY / c.commands,
    perSecAtCore: 1e6 / c.redisCpuUs,
  }));
}

function statedLoad(requests: RequestCost[], delivery: RequestCost): StatedLoad {
  const byKind = (k: ApiKind) => requests.find((r) => r.kind === k);
  let apiOps = 0;
  let apiCpuUs = 0;
  for (const [k, share] of Object.entries(API_MIX) as Array<[ApiKind, number]>) {
    apiOps += share * STATED.apiRps * (byKind(k)?.commands ?? NaN);
    apiCpuUs += share * STATED.apiRps * (byKind(k)?.redisCpuUs ?? NaN);
  }
  const deliveriesPerSec = (STATED.executesPerMin / 60) * STATED.connections;
  const opsPerSec = deliveriesPerSec * delivery.commands + apiOps;
  const redisCores = (deliveriesPerSec * delivery.redisCpuUs + apiCpuUs) / 1e6;
  return {
    description:
      `${STATED.executesPerMin.toLocaleString('en-US')} executes/min × ${STATED.connections} connections + ` +
      `${STATED.apiRps.toLocaleString('en-US')} API req/s (${API_MIX.read * 100} % reads, ${API_MIX.list * 100} % lists, ${API_MIX.write * 100} % writes)`,
    deliveriesPerSec,
    apiRps: STATED.apiRps,
    opsPerSec,
    redisCores,
    primariesByOps: Math.ceil(opsPerSec / (OPS_PER_PRIMARY * HEADROOM)),
    primariesByCpu: Math.ceil(redisCores / HEADROOM),
  };
}

/** Part 2, on its own Herald (role all) with 30 incidents and FANOUT connections. */
export async function commandCosts(o: ScaleOptions & { executes?: number } = {}): Promise<CommandCosts> {
  const log = o.log ?? defaultLog;
  const s = await openStack('commands', 'bench', log);
  try {
    const h = await startHerald(s, 'herald (commands)', 'all');
    let readId = '';
    for (let i = 0; i < 30; i++) readId = await newIncident(s, h, `Seed ${i}`, DESCRIPTION);
    await growConnections(s, h, 0, FANOUT);
    await settle(s);
    const idle = await measureIdle(s, h.child.pid, IDLE_MS);
    const requests: RequestCost[] = [];
    for (const kind of ['write', 'read', 'list'] as const) {
      const c = await requestCost(s, h, kind, readId);
      log(`${c.request}: ${c.commands.toFixed(2)} commands, Redis ${c.redisCpuUs.toFixed(0)} µs a request`);
      requests.push(c);
    }
    const delivery = await deliveryCost(s, h, o.executes ?? COST_EXECUTES);
    log(`${delivery.request}: ${delivery.commands.toFixed(2)} commands, Redis ${delivery.redisCpuUs.toFixed(0)} µs`);
    return {
      idleCommandsPerSec: totalOf(idle.perMs) * 1000,
      idleTop: topOf(scaled(idle.perMs, 1000)),
      requests,
      delivery,
      projection: projection(requests, delivery),
      stated: statedLoad(requests, delivery),
      problems: s.problems,
    };
  } finally {
    await closeStack(s);
  }
}

// ---------------------------------------------------------------------------------------------
// Part 3: worker processes.

/** `executes` executes to the FANOUT connections, one after the other; t0 = the first request. */
async function runExecutes(
  s: Stack,
  api: Herald,
  incidentId: string,
  executes: number,
): Promise<{ t0: number; stats: SinkStats; ids: string[] }> {
  await sinkReset(s);
  const t0 = epochMs();
  const ids: string[] = [];
  for (let i = 0; i < executes; i++) ids.push((await timedExecute(s, api, incidentId)).id);
  return { t0, stats: await sinkReached(s, executes * FANOUT, 60_000 + executes * FANOUT * 5), ids };
}

interface CpuSnap {
  procs: Map<string, number>;
  harness: number;
  machine: MachineCpu;
  at: number;
}

function cpuSnap(procs: Array<[string, number]>): CpuSnap {
  const u = process.cpuUsage();
  return {
    procs: new Map(procs.map(([name, pid]) => [name, cpuSeconds(pid)])),
    harness: (u.user + u.system) / 1e6,
    machine: machineCpu(),
    at: epochMs(),
  };
}

/** Busy cores between two snapshots that neither the listed processes nor this harness used. */
function otherWork(c0: CpuSnap, c1: CpuSnap): number {
  const ticks = c1.machine.total - c0.machine.total;
  const wall = (c1.at - c0.at) / 1000;
  const busy = ((c1.machine.busy - c0.machine.busy) / ticks) * os.availableParallelism();
  let ours = (c1.harness - c0.harness) / wall;
  for (const [name, v] of c1.procs) ours += (v - (c0.procs.get(name) ?? v)) / wall;
  return busy - ours;
}

/** One measured run with `workers` fresh worker processes (after a warm-up run of the same work). */
async function workerRound(
  s: Stack,
  api: Herald,
  incidentId: string,
  workers: number,
  executes: number,
): Promise<WorkerRow> {
  const children: Child[] = [];
  try {
    for (let i = 0; i < workers; i++) children.push(await startWorker(s, `herald worker ${i + 1} of ${workers}`));
    // The warm-up: V8 optimizes the delivery path over the first thousands (row 6 does the same).
    // Its last writes (each delivery's final record) done before the measured run starts.
    for (const id of (await runExecutes(s, api, incidentId, executes)).ids) await tallyDone(s, id, 60_000);
    const owners = new PortOwners(
      s.sinkPort,
      children.map((c) => c.pid),
    );
    const procs: Array<[string, number]> = [
      ['api', api.child.pid],
      ['sink', s.sink.pid],
      ['redis', s.redis.child.pid],
      ...children.map((c, i): [string, number] => [`worker ${i + 1}`, c.pid]),
    ];
    const c0 = cpuSnap(procs);
    const sampler = setInterval(() => owners.sample(), OWNER_SAMPLE_MS);
    let run: { t0: number; stats: SinkStats };
    try {
      run = await runExecutes(s, api, incidentId, executes);
      owners.sample();
    } finally {
      clearInterval(sampler);
    }
    const c1 = cpuSnap(procs);
    return workerRow(s, children, owners, run, c0, c1, executes * FANOUT);
  } finally {
    for (const c of children) {
      await c.stop('SIGTERM', 20_000);
      const at = s.children.indexOf(c);
      if (at >= 0) s.children.splice(at, 1);
    }
  }
}

function workerRow(
  s: Stack,
  children: Child[],
  owners: PortOwners,
  run: { t0: number; stats: SinkStats },
  c0: CpuSnap,
  c1: CpuSnap,
  deliveries: number,
): WorkerRow {
  const seconds = (run.stats.last - run.t0) / 1000;
  const wall = (c1.at - c0.at) / 1000;
  const cores = (name: string) => ((c1.procs.get(name) ?? NaN) - (c0.procs.get(name) ?? NaN)) / wall;
  const byPid = new Map<number, number>();
  let unattributed = 0;
  for (const [port, n] of Object.entries(run.stats.ports ?? {})) {
    const pid = owners.owner.get(Number(port));
    if (pid === undefined) unattributed += n;
    else byPid.set(pid, (byPid.get(pid) ?? 0) + n);
  }
  const ncpu = os.availableParallelism();
  const ticks = c1.machine.total - c0.machine.total;
  const machineBusyCores = ((c1.machine.busy - c0.machine.busy) / ticks) * ncpu;
  const perWorker = children.map((c, i): WorkerProcessFigures => {
    const n = byPid.get(c.pid) ?? 0;
    const cpu = cores(`worker ${i + 1}`);
    return {
      pid: c.pid,
      deliveries: n,
      deliveriesPerSec: n / seconds,
      cpuCores: cpu,
      cpuMsPerDelivery: (cpu * wall * 1000) / n,
    };
  });
  const cpuCores = {
    api: cores('api'),
    sink: cores('sink'),
    redis: cores('redis'),
    harness: (c1.harness - c0.harness) / wall,
  };
  const ours = Object.values(cpuCores).reduce((x, y) => x + y, 0) + perWorker.reduce((x, w) => x + w.cpuCores, 0);
  const problems = [...s.problems];
  if (run.stats.count > deliveries)
    problems.push(`the sink received ${run.stats.count - deliveries} more than ${deliveries}`);
  return {
    workers: children.length,
    deliveries,
    seconds,
    deliveriesPerSec: deliveries / seconds,
    perWorker,
    unattributed,
    cpuCores,
    machineBusyCores,
    otherCores: machineBusyCores - ours,
    stealCores: ((c1.machine.steal - c0.machine.steal) / ticks) * ncpu,
    cores: ncpu,
    problems,
  };
}

/** Part 3: one API process (role api) and, in turn, each count of worker processes. */
export async function workerScaling(
  o: ScaleOptions & { executes?: number; workers?: number[] } = {},
): Promise<WorkerRow[]> {
  const log = o.log ?? defaultLog;
  const executes = o.executes ?? EXECUTES;
  const s = await openStack('workers', 'counting', log);
  try {
    const api = await startHerald(s, 'herald api', 'api');
    await growConnections(s, api, 0, FANOUT);
    const incidentId = await newIncident(s, api, 'Worker scaling');
    const rows: WorkerRow[] = [];
    for (const k of o.workers ?? WORKER_COUNTS) {
      const row = await workerRound(s, api, incidentId, k, executes);
      log(
        `${k} worker(s): ${row.deliveriesPerSec.toFixed(0)} deliveries/s (${row.perWorker.map((w) => w.deliveriesPerSec.toFixed(0)).join(' + ')}), ` +
          `machine busy ${row.machineBusyCores.toFixed(2)} of ${row.cores} cores`,
      );
      rows.push(row);
    }
    return rows;
  } finally {
    await closeStack(s);
  }
}

// ---------------------------------------------------------------------------------------------
// Tables.

const num = (v: number, digits = 0): string =>
  Number.isFinite(v)
    ? v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
    : '—';
const growth = (xs: number[]): number[] => xs.slice(1).map((x, i) => x / xs[i]!);
const times = (xs: number[]): string => (xs.length === 0 ? '—' : xs.map((x) => `×${num(x, 2)}`).join(', '));
const verdict = (ok: boolean | null): string => (ok === null ? '—' : ok ? 'yes' : 'NO');

/** A row of part 1's table: the figure at each size, its format, and the target with its check. */
interface FanoutFigure {
  label: string;
  pick: (r: FanoutRow) => number;
  fmt: (v: number) => string;
  target?: string;
  /** Given the figure at each size, its growth per step, and the sizes' growth per step. */
  check?: (xs: number[], g: number[], steps: number[], rows: FanoutRow[]) => boolean;
  /** A size that failed fails this target (the others are judged on the sizes that ran). */
  failsWithSize?: boolean;
}

const ms0 = (v: number) => `${num(v)} ms`;
const ms1 = (v: number) => `${num(v, 1)} ms`;
const mb = (v: number) => `${num(v, 1)} MB`;

const FANOUT_FIGURES: FanoutFigure[] = [
  {
    label: 'execute → 202',
    failsWithSize: true,
    pick: (r) => r.acceptMs,
    fmt: ms0,
    target: `growth ≤ size growth (×${FLAT} for noise); < ${ACCEPT_TARGET_MS / 1000} s at 10,000`,
    check: (_xs, g, steps, rows) =>
      g.every((x, i) => x <= steps[i]! * FLAT) &&
      rows.every((r) => r.connections < 10_000 || r.acceptMs < ACCEPT_TARGET_MS),
  },
  {
    label: '… the 202 body (every delivery listed)',
    pick: (r) => r.responseBytes / 1e6,
    fmt: (v) => `${num(v, 2)} MB`,
  },
  // Negative when the workers' first send beats the end of a large 202 body.
  {
    label: '202 → first arrival (< 0: before the 202 was read)',
    pick: (r) => r.firstArrivalSec,
    fmt: (v) => `${num(v, 3)} s`,
  },
  { label: '202 → last arrival', pick: (r) => r.lastArrivalSec, fmt: (v) => `${num(v, 2)} s` },
  { label: '… deliveries/s (202 → last)', pick: (r) => r.deliveriesPerSec, fmt: (v) => num(v) },
  {
    label: 'Redis commands per delivery',
    pick: (r) => r.redisCommandsPerDelivery,
    fmt: (v) => num(v, 1),
    target: `flat (each step ≤ ×${FLAT})`,
    check: (_xs, g) => g.every((x) => x <= FLAT),
  },
  { label: '… of which script calls', pick: (r) => r.scriptCallsPerDelivery, fmt: (v) => num(v, 2) },
  {
    label: 'Redis CPU per delivery',
    pick: (r) => r.redisCpuMsPerDelivery * 1000,
    fmt: (v) => `${num(v)} µs`,
    target: `flat (each step ≤ ×${FLAT})`,
    check: (_xs, g) => g.every((x) => x <= FLAT),
  },
  { label: 'Herald CPU per delivery', pick: (r) => r.heraldCpuMsPerDelivery * 1000, fmt: (v) => `${num(v)} µs` },
  { label: 'Herald RSS before the execute', pick: (r) => r.rssBeforeMB, fmt: mb },
  { label: 'Herald peak RSS over the fan-out', pick: (r) => r.peakRssMB, fmt: mb },
  { label: 'concurrent GET /v1/incidents/{id}: requests', pick: (r) => r.reads.count, fmt: (v) => num(v) },
  { label: '… p99', pick: (r) => r.reads.p99Ms, fmt: ms1 },
  {
    label: '… max',
    pick: (r) => r.reads.maxMs,
    fmt: ms1,
    target: `≤ ${READ_STALL_MS} ms`,
    check: (xs) => xs.every((v) => v <= READ_STALL_MS),
  },
  { label: "Herald's event-loop delay, max (10 ms resolution)", pick: (r) => r.eventLoopMaxMs, fmt: ms1 },
  { label: 'longest single Redis command (SLOWLOG)', pick: (r) => r.slowestRedis[0]?.ms ?? NaN, fmt: ms1 },
  { label: 'other work on the machine meanwhile (cores)', pick: (r) => r.otherCores, fmt: (v) => num(v, 2) },
];

/** Part 1's table: a figure a row, one column per size, the growth from each size to the next. */
export function fanoutTable(rows: FanoutRow[]): string {
  const sizes = rows.map((r) => r.connections);
  const steps = growth(sizes);
  const lines = [
    `| figure | ${sizes.map((n) => `${num(n)} conns`).join(' | ')} | growth per step (size ${times(steps)}) | target | met? |`,
    `|---|${sizes.map(() => '---:').join('|')}|---|---|:---:|`,
  ];
  const ran = rows.filter((r) => r.error === undefined);
  for (const f of FANOUT_FIGURES) {
    const xs = rows.map(f.pick);
    const g = growth(xs);
    const judged = f.failsWithSize ? rows : ran;
    const jx = judged.map(f.pick);
    const ok = f.check ? f.check(jx, growth(jx), growth(judged.map((r) => r.connections)), judged) : null;
    lines.push(`| ${f.label} | ${xs.map(f.fmt).join(' | ')} | ${times(g)} | ${f.target ?? '—'} | ${verdict(ok)} |`);
  }
  lines.push(
    '',
    `Peak RSS from ${rows.find((r) => r.error === undefined)?.peakMethod ?? '—'}. Redis commands per delivery, largest first:`,
    '',
  );
  for (const r of rows) {
    const top = Object.entries(r.topCommandsPerDelivery).map(([c, v]) => `${c} ${v}`);
    lines.push(`- ${num(r.connections)}: ${top.join(', ')}`);
  }
  for (const r of rows) if (r.error !== undefined) lines.push('', `**${num(r.connections)} failed:** ${r.error}`);
  lines.push('', 'The longest Redis commands (SLOWLOG):', '');
  for (const r of rows)
    for (const c of r.slowestRedis)
      lines.push(`- ${num(r.connections)}: ${num(c.ms, 1)} ms \`${c.command}\` (${c.client})`);
  return lines.join('\n');
}

/** Part 2's tables: the costs, what one primary carries, and the stated load. */
export function commandsTable(c: CommandCosts, fanout: FanoutRow[] = []): string {
  const lines = [
    `Herald at rest (role all): ${num(c.idleCommandsPerSec, 1)} Redis commands/s (${Object.entries(c.idleTop)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}), taken out of every figure below.`,
    '',
    '| unit | N | Redis commands (scripts' +
      "' calls included) | of which script calls | Redis CPU µs | Herald CPU µs | top commands |",
    '|---|---:|---:|---:|---:|---:|---|',
  ];
  const fmtTop = (m: Record<string, number>) =>
    Object.entries(topOf(new Map(Object.entries(m)), 6))
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
  for (const r of [...c.requests, c.delivery])
    lines.push(
      `| ${r.request} | ${num(r.n)} | ${num(r.commands, 2)} | ${num(r.scriptCalls, 2)} | ${num(r.redisCpuUs)} | ${num(r.heraldCpuUs)} | ${fmtTop(r.perCommand)} |`,
    );
  for (const f of fanout)
    lines.push(
      `| delivery (one execute to ${num(f.connections)}, part 1) | ${num(f.connections)} | ${num(f.redisCommandsPerDelivery, 2)} | ${num(f.scriptCallsPerDelivery, 2)} | ${num(f.redisCpuMsPerDelivery * 1000)} | ${num(f.heraldCpuMsPerDelivery * 1000)} | ${fmtTop(f.topCommandsPerDelivery)} |`,
    );
  lines.push(
    '',
    `| unit | commands | Redis CPU µs | per second at ${num(OPS_PER_PRIMARY)} commands/s | per second at one Redis core |`,
    '|---|---:|---:|---:|---:|',
  );
  for (const p of c.projection)
    lines.push(
      `| ${p.unit} | ${num(p.commands, 2)} | ${num(p.redisCpuUs)} | ${num(p.perSecAtOps)} | ${num(p.perSecAtCore)} |`,
    );
  const st = c.stated;
  lines.push(
    '',
    `| stated load | deliveries/s | API req/s | Redis commands/s | Redis cores | primaries (≤ ${HEADROOM * 100} % of ${num(OPS_PER_PRIMARY)} ops/s) | primaries (≤ ${HEADROOM * 100} % of a core) |`,
    '|---|---:|---:|---:|---:|---:|---:|',
    `| ${st.description} | ${num(st.deliveriesPerSec)} | ${num(st.apiRps)} | ${num(st.opsPerSec)} | ${num(st.redisCores, 2)} | ${num(st.primariesByOps)} | ${num(st.primariesByCpu)} |`,
  );
  lines.push(
    '',
    `"Commands" count what runs inside a script as well as the EVALSHA (INFO commandstats counts both), so ` +
      `the ${num(OPS_PER_PRIMARY)} ops/s yardstick, which assumes a network round trip per command, is the ` +
      'pessimistic one; the Redis core column is from the CPU Redis measured per unit. One Herald deployment keeps ' +
      'every key under one hash tag, so on one primary (docs/operations.md): more than one primary means one ' +
      'deployment per HERALD_KEY_PREFIX (a shard per tenant).',
  );
  return lines.join('\n');
}

/** Part 3's table: a figure a row, one column per worker count. */
export function workersTable(rows: WorkerRow[]): string {
  const lines = [
    `| figure | ${rows.map((r) => `${r.workers} worker${r.workers > 1 ? 's' : ''}`).join(' | ')} | growth | target |`,
    `|---|${rows.map(() => '---:').join('|')}|---|---|`,
  ];
  const add = (label: string, cells: string[], xs: number[] | null = null) =>
    lines.push(`| ${label} | ${cells.join(' | ')} | ${xs ? times(growth(xs)) : '—'} | — |`);
  const each = (f: (w: WorkerProcessFigures) => string) => rows.map((r) => r.perWorker.map(f).join(' + '));
  add(
    `deliveries/s, total (${num(rows[0]?.deliveries ?? NaN)} deliveries)`,
    rows.map((r) => num(r.deliveriesPerSec)),
    rows.map((r) => r.deliveriesPerSec),
  );
  add(
    'deliveries/s, each worker',
    each((w) => num(w.deliveriesPerSec)),
  );
  add(
    'CPU per delivery, each worker',
    each((w) => `${num(w.cpuMsPerDelivery, 3)} ms`),
  );
  add(
    'CPU (cores), each worker',
    each((w) => num(w.cpuCores, 2)),
    rows.map((r) => r.perWorker.reduce((x, w) => x + w.cpuCores, 0)),
  );
  add(
    'CPU (cores), API process',
    rows.map((r) => num(r.cpuCores.api, 2)),
  );
  add(
    'CPU (cores), sink',
    rows.map((r) => num(r.cpuCores.sink, 2)),
  );
  add(
    'CPU (cores), Redis',
    rows.map((r) => num(r.cpuCores.redis, 2)),
  );
  add(
    'CPU (cores), this harness',
    rows.map((r) => num(r.cpuCores.harness, 2)),
  );
  add(
    'machine busy (cores)',
    rows.map((r) => `${num(r.machineBusyCores, 2)} of ${r.cores}`),
  );
  add(
    '… outside these processes',
    rows.map((r) => num(r.otherCores, 2)),
  );
  add(
    '… steal',
    rows.map((r) => num(r.stealCores, 2)),
  );
  add(
    'deliveries not attributed to a worker',
    rows.map((r) => num(r.unattributed)),
  );
  return lines.join('\n');
}

// ---------------------------------------------------------------------------------------------
// Standalone.

function argValue(flag: string): string | undefined {
  return process.argv.find((x) => x.startsWith(`${flag}=`))?.slice(flag.length + 1);
}

interface Results {
  fanout?: FanoutRow[];
  commands?: CommandCosts;
  workers?: WorkerRow[];
}

async function main(): Promise<void> {
  const sizes = (argValue('--sizes') ?? DEFAULT_SIZES.join(',')).split(',').map(Number);
  if (sizes.some((n) => !Number.isInteger(n) || n < 1))
    throw new Error(`--sizes: whole numbers ≥ 1, not ${argValue('--sizes')}`);
  const only = argValue('--only')?.split(',') ?? ['fanout', 'commands', 'workers'];
  const executes = Number(argValue('--executes') ?? EXECUTES);
  // A backstop for the whole run: the exit hook then kills every child.
  setTimeout(() => {
    defaultLog('the run passed its 60 min deadline: stopping');
    process.exit(1);
  }, 60 * 60_000).unref();
  if (!process.argv.includes('--no-build')) {
    // The check `npm start` makes: builds only when src/ is newer than dist/.
    const build = spawnSync(process.execPath, [join(ROOT, 'scripts', 'ensure-build.mjs')], {
      cwd: ROOT,
      stdio: ['ignore', 'inherit', 'inherit'],
      timeout: 300_000,
    });
    if (build.status !== 0) throw new Error(`the build failed (status ${build.status})`);
  }
  const results: Results = {};
  const load0 = os.loadavg().map((x) => +x.toFixed(2));
  try {
    if (only.includes('fanout')) results.fanout = await fanoutCurve({ sizes });
    if (only.includes('commands')) results.commands = await commandCosts();
    if (only.includes('workers')) results.workers = await workerScaling({ executes });
  } finally {
    await stopAll(10_000);
  }
  const measured = HERALD_ROOT === ROOT ? '' : `, Herald from ${HERALD_ROOT}`;
  const machine = `${os.availableParallelism()} × ${os.cpus()[0]?.model ?? '?'}, Node ${process.version}, load average ${load0.join(' ')} → ${os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}${measured}`;
  const out: string[] = [`\nHerald at scale — ${machine}\n`];
  if (results.fanout) out.push(`## 1. One execute to N webhook connections\n\n${fanoutTable(results.fanout)}\n`);
  if (results.commands)
    out.push(
      `## 2. Redis commands per request and per delivery\n\n${commandsTable(results.commands, results.fanout)}\n`,
    );
  if (results.workers)
    out.push(`## 3. Worker processes (${executes} executes × ${FANOUT})\n\n${workersTable(results.workers)}\n`);
  const problems = [
    ...(results.fanout ?? []).flatMap((r) => r.problems),
    ...(results.commands?.problems ?? []),
    ...(results.workers ?? []).flatMap((r) => r.problems),
  ];
  if (problems.length > 0) out.push(`Problems:\n${[...new Set(problems)].map((p) => `- ${p}`).join('\n')}\n`);
  process.stdout.write(
    `${out.join('\n')}\n${JSON.stringify({ scale_fanout: { timestamp: new Date().toISOString(), machine, ...results } })}\n`,
  );
}

const self = process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (self && process.argv.includes('--reader')) runReader();
else if (self && process.argv.includes('--sink')) runCountingSink();
else if (self)
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      defaultLog(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      process.exit(1);
    },
  );
