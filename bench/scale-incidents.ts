/**
 * The "incidents stored" scale curve: does reading incidents stay as fast with 1M incidents in
 * Redis as with 10k, and what does an incident cost in Redis memory?
 *
 *   npx tsx bench/scale-incidents.ts [--sizes=10k,100k,1M] [--load-sec=3] [--rounds=3]
 *   incidentCurve({ sizes, redisUrl?, log? })      from bench/run.ts (`npm run bench -- --scale`)
 *
 * For each size, smallest first, the set GROWS to that size (incremental: 10k, then 90k more, then
 * 900k more, in one Redis): incidents are seeded straight through Herald's own store
 * (RedisIncidentRepo.create, src/store/incidents.ts, which commits with src/store/commit.ts: the
 * record under `inc:<id>` in its stored form and its id in its status-and-severity index),
 * many creates in flight on one connection (ioredis pipelines them), with Herald stopped. Then
 * Herald runs as it ships (`node dist/main.js`, role all) against that Redis under the same key
 * prefix and is loaded over HTTP by the load generator (bench/load.ts, its own process, 64
 * connections) on: the first page, a page 90% deep, one incident, and three filtered lists; every
 * kind once a round, 3 rounds in rotated orders, each figure the median of the rounds. Each size
 * gets a fresh Herald (its spawn → /readyz is reported too), stopped before the next seeding.
 * Beside p50/p99 and req/s, the CPU per request of Herald and of Redis: on a shared machine the
 * steadier witness of a cost that grows with the set.
 *
 * The seeded set: ids and created_at agree (a ULID of created_at, so the list order is creation
 * order), 30–150 s apart going BACK in time from now (each increment adds older incidents, so the
 * first page is the same incidents at every size and 1M incidents span ~2.9 years); statuses and
 * severities drawn with fixed weights from a seeded PRNG (same set every run), every lifecycle
 * timestamp and field made by the domain's own functions (newIncident, applyPatch, closeIncident).
 * Not seeded: timelines (`inc:<id>:events`, only the events after the implied `incident.created`,
 * which no request here reads), executes, the event outbox (create is called without events, so
 * Herald's event dispatcher has no backlog of 1M events to drain while it is being measured).
 *
 * Redis bytes per incident: INFO used_memory across each seeding (the seeding connection closed
 * before the second reading, so its buffers are not counted), summed over the increments so far,
 * divided by the incidents so far. Herald's own keys (API key, queues) are written between
 * seedings and are not counted.
 *
 * Every child (redis-server, Herald, the load generator) is stopped in `finally` and killed by
 * bench/lib.ts's exit hook if this process dies; every wait polls with a deadline.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { ulid } from 'ulid';
import { iso } from '../src/domain/common/clock.js';
import { ID_PREFIX } from '../src/domain/common/ids.js';
import { encodeCursor } from '../src/domain/common/pagination.js';
import type { Actor } from '../src/domain/common/actor.js';
import {
  applyPatch,
  closeIncident,
  newIncident,
  OPEN_STATUSES,
  type Incident,
  type IncidentStatus,
  type Severity,
} from '../src/domain/incident/incident.js';
import { RedisIncidentRepo } from '../src/store/incidents.js';
import { encodeIncident } from '../src/store/incident-record.js';
import { createKeys } from '../src/store/keys.js';
import {
  fetchWithin,
  freePort,
  median,
  onExit,
  ROOT,
  startChild,
  startTsChild,
  stopAll,
  type Child,
  cpuSeconds,
  createBenchKey,
  untilReady,
} from './lib.js';
import type { LoadResult, LoadSpec } from './load.js';
import { startPrivateRedis } from './private-redis.js';

// ---------------------------------------------------------------------------------------------
// Settings.

export const DEFAULT_SIZES = [10_000, 100_000, 1_000_000];
/**
 * Herald's HERALD_KEY_PREFIX for this curve: not bench/run.ts's `bench` (its write row creates
 * thousands of incidents there, which would change the lists), but as long, so the keys, and so
 * the bytes per incident, are the size they are in row 7.
 */
const PREFIX = 'scale';
/** As in bench/run.ts: a 500-character description. */
const DESCRIPTION = 'x'.repeat(500);
const CONNECTIONS = 64;
const WARMUP_SEC = 1;
/** Creates in flight while seeding: enough to keep Redis busy, few enough to keep the heap small. */
const SEED_WINDOW = 512;
/** The smallest size the curve takes: every filtered list then fills its page of 25. */
const MIN_SIZE = 1000;
/** The deep page starts this far into the newest-first list. */
const DEEP_FRACTION = 0.9;
export const TARGET = { p99Ratio: 1.5, bytesPerIncident: 1100 } as const;

/** How often each status and severity is drawn. Uniform over time: every index grows with the set. */
const STATUS_WEIGHTS: ReadonlyArray<readonly [IncidentStatus, number]> = [
  ['investigating', 0.04],
  ['identified', 0.03],
  ['monitoring', 0.03],
  ['resolved', 0.2],
  ['closed', 0.7],
];
const SEVERITY_WEIGHTS: ReadonlyArray<readonly [Severity, number]> = [
  ['critical', 0.05],
  ['major', 0.2],
  ['minor', 0.45],
  ['low', 0.3],
];
const SERVICES = ['Checkout API', 'Login', 'Search', 'Payments', 'Webhooks', 'Mobile app', 'EU region', 'Dashboard'];
const SYMPTOMS = ['elevated error rates', 'slow responses', 'partial outage', 'degraded performance', 'unavailable'];
const ACTORS: Actor[] = [
  { type: 'api_key', id: 'key_01JH3ZK6X2B8V4N0Q7R5T9W1YD', name: 'PagerDuty bridge' },
  { type: 'slack_user', id: 'U04BENCH01', name: 'Dana Okafor' },
  { type: 'slack_user', id: 'U04BENCH02', name: 'Lee Marchetti' },
];
const RESOLUTION = 'Rolled back the faulty deploy; error rates are back to normal.';

// ---------------------------------------------------------------------------------------------
// What is measured.

/** The requests of the curve, each loaded on its own at every size. */
const REQUESTS = [
  { kind: 'first_page', label: 'GET /v1/incidents?limit=25 (first page)' },
  { kind: 'deep_page', label: `GET /v1/incidents?limit=25&cursor=… (${DEEP_FRACTION * 100}% deep)` },
  { kind: 'get', label: 'GET /v1/incidents/{id}' },
  { kind: 'status', label: 'GET /v1/incidents?limit=25&status=investigating' },
  { kind: 'open', label: 'GET /v1/incidents?limit=25&status=investigating,identified,monitoring' },
  { kind: 'severity', label: 'GET /v1/incidents?limit=25&severity=critical' },
] as const;
export type RequestKind = (typeof REQUESTS)[number]['kind'];

export interface RequestFigure {
  p50: number;
  p99: number;
  rps: number;
  /**
   * CPU µs per request answered (warm-up included) of Herald's process and of redis-server: far
   * steadier than the p99 on a shared machine, and where a cost growing with the set would show
   * (an index lookup in Redis, a scan in either).
   */
  heraldCpuUs: number;
  redisCpuUs: number;
  /** Requests answered other than 2xx, and transport errors (both should be 0), over every round. */
  non2xx: number;
  errors: number;
  /** Each round's p99 (the figures above are medians of the rounds): how much the machine moved it. */
  p99Rounds?: number[];
}

export interface IncidentCurveRow {
  size: number;
  /** Incidents added to reach this size, and how long the store took to write them. */
  seeded: number;
  seedSec: number;
  seedSecPer10k: number;
  /** used_memory growth over every seeding so far / size (incremental; see the header). */
  bytesPerIncident: number;
  /** The stored record's own length (its stored form, store/incident-record.ts), mean over the set. */
  recordBytes: number;
  /** Herald's spawn → first 200 from /readyz with `size` incidents stored. */
  readyMs: number;
  requests: Record<RequestKind, RequestFigure>;
}

export interface IncidentCurveOptions {
  sizes: number[];
  /** A Redis to use (its `scale` prefix is emptied before and after); none: a private redis-server. */
  redisUrl?: string;
  log?: (line: string) => void;
  /** Measured seconds per request kind and round (after a 1 s warm-up); 3 by default. */
  loadSec?: number;
  /** Rounds over every request kind at each size, figures their medians; 3 by default. */
  rounds?: number;
}

// ---------------------------------------------------------------------------------------------
// The seeded incidents.

/** mulberry32: a small seeded PRNG, so every run seeds the same statuses, severities and gaps. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function pick<T>(weights: ReadonlyArray<readonly [T, number]>, r: number): T {
  let acc = 0;
  for (const [v, w] of weights) {
    acc += w;
    if (r < acc) return v;
  }
  return weights[weights.length - 1]![0];
}

/**
 * Incident i of the set (0 = the newest), made in order: each is older than the one before, so an
 * increment appends older incidents and the newest ones stay the same at every size.
 */
class IncidentMaker {
  private readonly r = prng(0x5ca1e);
  private t: number;
  private nextIndex = 0;
  /** Stored lengths of every 8th incident: the mean record, without a second encoding of each. */
  private sampledBytes = 0;
  private samples = 0;

  constructor(private readonly newestMs: number) {
    this.t = newestMs;
  }

  make(i: number): Incident {
    if (i !== this.nextIndex) throw new Error(`incidents are made in order: ${i} asked, ${this.nextIndex} next`);
    this.nextIndex++;
    const r = this.r;
    if (i > 0) this.t -= 30_000 + Math.floor(r() * 120_000);
    // The id's time is created_at (as Herald's id generator makes it): the list order is creation order.
    const id = `${ID_PREFIX.incident}_${ulid(this.t, r)}`;
    const title = `${SERVICES[Math.floor(r() * SERVICES.length)]!}: ${SYMPTOMS[Math.floor(r() * SYMPTOMS.length)]!}`;
    const input = {
      title,
      severity: pick(SEVERITY_WEIGHTS, r()),
      description: DESCRIPTION,
      impact: '',
      template_ids: [],
    };
    const actor = ACTORS[Math.floor(r() * ACTORS.length)]!;
    const created = newIncident(id, input, actor, iso(new Date(this.t)));
    const incident = this.lifecycle(created, pick(STATUS_WEIGHTS, r()));
    if (i % 8 === 0) {
      this.sampledBytes += encodeIncident(incident).length;
      this.samples++;
    }
    return incident;
  }

  /** The mean stored record (store/incident-record.ts's stored form) of the incidents made so far. */
  get meanRecordBytes(): number {
    return this.sampledBytes / this.samples;
  }

  /** Walks the incident to `status` the way the API does, each step 5 min – 3 h after the last. */
  private lifecycle(incident: Incident, status: IncidentStatus): Incident {
    let at = Date.parse(incident.created_at);
    const later = () => {
      at = Math.min(this.newestMs, at + 300_000 + Math.floor(this.r() * 10_500_000));
      return iso(new Date(at));
    };
    let cur = incident;
    for (const step of ['identified', 'monitoring', 'resolved'] as const) {
      if (cur.status === status) return cur;
      const patch = step === 'resolved' ? { status: step, resolution_summary: RESOLUTION } : { status: step };
      cur = applyPatch(cur, patch, later()).next;
    }
    return status === 'closed' ? closeIncident(cur, {}, later()) : cur;
  }
}

/** What the checks and the requests need to know of the set: ids at given positions. */
type Marks = Map<number, string>;
const deepAfter = (size: number) => Math.floor(size * DEEP_FRACTION) - 1;
const middle = (size: number) => Math.floor(size / 2);

function markPositions(sizes: number[]): Marks {
  const marks: Marks = new Map([[0, '']]);
  for (const n of sizes) for (const i of [middle(n), deepAfter(n), deepAfter(n) + 1]) marks.set(i, '');
  return marks;
}

function markOf(marks: Marks, i: number): string {
  const id = marks.get(i);
  if (id === undefined || id === '') throw new Error(`no id recorded at position ${i}`);
  return id;
}

/**
 * Incidents [from, to) through RedisIncidentRepo.create, SEED_WINDOW at once on one connection:
 * each create is one EVALSHA of the store's commit script, and ioredis writes the ones in flight
 * back to back (a pipeline) instead of waiting for each answer. Returns the seconds it took.
 */
async function seedRange(
  redisUrl: string,
  maker: IncidentMaker,
  range: { from: number; to: number },
  marks: Marks,
  log: (line: string) => void,
): Promise<number> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1, enableAutoPipelining: true });
  redis.on('error', () => undefined);
  const repo = new RedisIncidentRepo(redis, createKeys(PREFIX));
  const t0 = performance.now();
  let next = range.from;
  const worker = async (): Promise<void> => {
    while (next < range.to) {
      // Taken and made in one synchronous step: incidents are made in index order.
      const i = next++;
      const incident = maker.make(i);
      if (marks.has(i)) marks.set(i, incident.id);
      if (!(await repo.create(incident, []))) throw new Error(`seeding: ${incident.id} exists already`);
      if ((i + 1) % 100_000 === 0) log(`seeded ${(i + 1).toLocaleString('en-US')}`);
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(SEED_WINDOW, range.to - range.from) }, worker));
  } finally {
    // Closed before used_memory is read: its query buffer is not the incidents' memory.
    await redis.quit().catch(() => redis.disconnect());
  }
  return (performance.now() - t0) / 1000;
}

// ---------------------------------------------------------------------------------------------
// Redis.

async function usedMemory(admin: Redis): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await admin.info('memory'))?.[1] ?? NaN);
}

/** redis-server's user + system CPU seconds so far (INFO cpu; the private one serves only Herald meanwhile). */
async function redisCpuSeconds(admin: Redis): Promise<number> {
  const info = await admin.info('cpu');
  return (
    Number(/used_cpu_user:([\d.]+)/.exec(info)?.[1] ?? NaN) + Number(/used_cpu_sys:([\d.]+)/.exec(info)?.[1] ?? NaN)
  );
}

/** A private redis-server as bench/run.ts starts it (no persistence, noeviction), answering PING. */
async function startRedis(dir: string, env: NodeJS.ProcessEnv): Promise<{ url: string; child: Child }> {
  const r = await startPrivateRedis(dir, env);
  r.admin.disconnect();
  return { url: r.url, child: r.child };
}

/** Deletes every key under the curve's prefix (a shared Redis: a previous run's, or to give memory back). */
async function clearPrefix(admin: Redis): Promise<number> {
  let cursor = '0';
  let deleted = 0;
  do {
    const [nextCursor, keys] = await admin.scan(cursor, 'MATCH', `{${PREFIX}}:*`, 'COUNT', 10_000);
    cursor = nextCursor;
    if (keys.length > 0) deleted += await admin.unlink(...keys);
  } while (cursor !== '0');
  return deleted;
}

// ---------------------------------------------------------------------------------------------
// Herald and the load generator.

interface Env {
  redisUrl: string;
  dir: string;
  secretKey: string;
}

const baseEnv = (): NodeJS.ProcessEnv => ({ PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'production' });

/** bench/run.ts's heraldEnv, with this curve's prefix. */
function heraldEnv(e: Env, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    ...baseEnv(),
    REDIS_URL: e.redisUrl,
    HERALD_KEY_PREFIX: PREFIX,
    HERALD_SECRET_KEY: e.secretKey,
    HERALD_DATA_DIR: join(e.dir, 'data'),
    HOST: '127.0.0.1',
    HERALD_ROLE: 'all',
    HERALD_OUTBOUND_ALLOW: '127.0.0.1/32',
    HERALD_RATE_LIMIT: '1000000000',
    HERALD_EXECUTE_RATE_LIMIT: '1000000000',
    LOG_LEVEL: 'silent',
    ...extra,
  };
}

/** An API key from the CLI, as bench/run.ts gets its own. */
function createApiKey(e: Env): string {
  return createBenchKey(heraldEnv(e), 'bench-scale');
}

interface Herald {
  child: Child;
  base: string;
  readyMs: number;
}

/** `node dist/main.js`, timed from the spawn to the first 200 from /readyz. */
async function startHerald(e: Env, name: string): Promise<Herald> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const t0 = performance.now();
  const child = startChild(
    name,
    process.execPath,
    [join(ROOT, 'dist', 'main.js')],
    heraldEnv(e, { PORT: String(port) }),
  );
  try {
    await untilReady(name, child, base, { timeoutMs: 60_000, intervalMs: 5 });
  } catch (e) {
    await child.stop('SIGKILL', 5000);
    throw e;
  }
  return { child, base, readyMs: performance.now() - t0 };
}

/** bench/load.ts in its own process, one spec at a time (as bench/run.ts's runLoad). */
class Loader {
  private child: Child | null = null;
  private seq = 0;

  async run(spec: Omit<LoadSpec, 'id'>): Promise<LoadResult> {
    if (this.child === null || this.child.exit) {
      this.child = startTsChild('load generator', 'load.ts', [], baseEnv(), { stdin: true });
      await this.child.json('ready', 30_000);
    }
    const id = ++this.seq;
    this.child.proc.stdin?.write(`${JSON.stringify({ ...spec, id })}\n`);
    const answer = await this.child.line(
      `the result of load run ${id}`,
      (l) => (l.startsWith(`{"id":${id},`) ? (JSON.parse(l) as { load?: LoadResult; error?: string }) : undefined),
      (spec.warmupSec + spec.durationSec) * 1000 + 30_000,
    );
    if (answer.load === undefined) throw new Error(`load generator: ${answer.error ?? 'no result'}`);
    return answer.load;
  }

  async stop(): Promise<void> {
    await this.child?.stop('SIGTERM', 5000);
  }
}

// ---------------------------------------------------------------------------------------------
// One size.

/** The path of each request at `size`. */
function paths(marks: Marks, size: number): Record<RequestKind, string> {
  // The cursor as the API encodes it (base64url of {"after": <last id served>}), built rather
  // than walked to: walking 90% of 1M incidents 25 at a time would be 36,000 requests. The check
  // below holds it to the cursor the API itself hands out.
  const deep = encodeCursor({ after: markOf(marks, deepAfter(size)) });
  return {
    first_page: '/v1/incidents?limit=25',
    deep_page: `/v1/incidents?limit=25&cursor=${deep}`,
    get: `/v1/incidents/${markOf(marks, middle(size))}`,
    status: '/v1/incidents?limit=25&status=investigating',
    open: '/v1/incidents?limit=25&status=investigating,identified,monitoring',
    severity: '/v1/incidents?limit=25&severity=critical',
  };
}

interface ListAnswer {
  data: Array<{ id: string; status: string; severity: string; description: string }>;
  pagination: { next_cursor: string | null };
}

async function getJson<T>(base: string, token: string, path: string): Promise<T> {
  const r = await fetchWithin(`${base}${path}`, { headers: { authorization: `Bearer ${token}` }, timeoutMs: 30_000 });
  const text = await r.text();
  if (r.status !== 200) throw new Error(`GET ${path} → ${r.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

/** Each request answers what it should before it is timed: a fast wrong answer measures nothing. */
async function checkAnswers(h: Herald, token: string, marks: Marks, size: number): Promise<void> {
  const p = paths(marks, size);
  const fail = (what: string) => {
    throw new Error(`at ${size}: ${what}`);
  };
  const first = await getJson<ListAnswer>(h.base, token, p.first_page);
  if (first.data.length !== 25 || first.data[0]?.id !== markOf(marks, 0)) fail('the first page is not the newest 25');
  if (first.pagination.next_cursor !== encodeCursor({ after: first.data[24]!.id }))
    fail(`next_cursor ${first.pagination.next_cursor} is not encoded as the deep page's cursor is`);
  const deep = await getJson<ListAnswer>(h.base, token, p.deep_page);
  if (deep.data.length !== 25 || deep.data[0]?.id !== markOf(marks, deepAfter(size) + 1))
    fail(`the deep page does not start at incident ${deepAfter(size) + 1}`);
  const one = await getJson<ListAnswer['data'][number]>(h.base, token, p.get);
  if (one.id !== markOf(marks, middle(size)) || one.description.length !== 500) fail('GET by id answered another');
  const filtered: Array<[RequestKind, (i: ListAnswer['data'][number]) => boolean]> = [
    ['status', (i) => i.status === 'investigating'],
    ['open', (i) => (OPEN_STATUSES as readonly string[]).includes(i.status)],
    ['severity', (i) => i.severity === 'critical'],
  ];
  for (const [kind, ok] of filtered) {
    const page = await getJson<ListAnswer>(h.base, token, p[kind]);
    if (page.data.length !== 25 || !page.data.every(ok)) fail(`${kind}: not a full page of matches`);
  }
}

/** One load run of one request kind, with the CPU each process spent per request answered. */
async function measureOnce(run: Run, h: Herald, path: string): Promise<RequestFigure> {
  const cpu0 = cpuSeconds(h.child.pid);
  const redisCpu0 = await redisCpuSeconds(run.admin);
  const l = await run.loader.run({
    url: `${h.base}${path}`,
    method: 'GET',
    headers: { authorization: `Bearer ${run.token}` },
    connections: CONNECTIONS,
    durationSec: run.loadSec,
    warmupSec: WARMUP_SEC,
  });
  const answered = l.total + l.warmupTotal;
  return {
    p50: l.p50,
    p99: l.p99,
    rps: l.rps,
    heraldCpuUs: ((cpuSeconds(h.child.pid) - cpu0) * 1e6) / answered,
    redisCpuUs: (((await redisCpuSeconds(run.admin)) - redisCpu0) * 1e6) / answered,
    non2xx: l.non2xx,
    errors: l.errors,
  };
}

/**
 * Every request kind once a round, the order rotated each round, each figure the median of the
 * rounds (bench/run.ts's rule). On a shared 2-core machine a p99 at 64 connections moves by 2×
 * with whatever else runs for half a minute (an A/A run, 20,000 then 20,100 incidents, showed
 * 2.0× on the first page): a kind measured in one time slot only would report that as growth.
 */
async function measureRequests(run: Run, h: Herald, size: number): Promise<Record<RequestKind, RequestFigure>> {
  const p = paths(run.marks, size);
  const runs = new Map<RequestKind, RequestFigure[]>(REQUESTS.map((q) => [q.kind, []]));
  for (let round = 0; round < run.rounds; round++) {
    const shift = round % REQUESTS.length;
    for (const { kind, label } of [...REQUESTS.slice(shift), ...REQUESTS.slice(0, shift)]) {
      const f = await measureOnce(run, h, p[kind]);
      runs.get(kind)!.push(f);
      if (f.non2xx + f.errors > 0) run.log(`WARNING ${label}: ${f.non2xx} non-2xx and ${f.errors} errors`);
      run.log(
        `${size}, round ${round + 1}: ${label}: p50 ${f.p50.toFixed(2)} ms, p99 ${f.p99.toFixed(2)} ms, ` +
          `${Math.round(f.rps)}/s, CPU per request: Herald ${f.heraldCpuUs.toFixed(0)} µs, Redis ${f.redisCpuUs.toFixed(0)} µs`,
      );
    }
  }
  const out = {} as Record<RequestKind, RequestFigure>;
  for (const [kind, fs] of runs) {
    const m = (get: (f: RequestFigure) => number) => median(fs.map(get));
    out[kind] = {
      p50: m((f) => f.p50),
      p99: m((f) => f.p99),
      rps: m((f) => f.rps),
      heraldCpuUs: m((f) => f.heraldCpuUs),
      redisCpuUs: m((f) => f.redisCpuUs),
      non2xx: fs.reduce((sum, f) => sum + f.non2xx, 0),
      errors: fs.reduce((sum, f) => sum + f.errors, 0),
      p99Rounds: fs.map((f) => f.p99),
    };
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The curve.

interface Run {
  env: Env;
  admin: Redis;
  token: string;
  maker: IncidentMaker;
  marks: Marks;
  loader: Loader;
  log: (line: string) => void;
  loadSec: number;
  rounds: number;
}

/** Grows the set from `from` to `size`, then starts a Herald on it and measures. */
async function measureSize(run: Run, from: number, size: number, bytesSoFar: number): Promise<IncidentCurveRow> {
  const m0 = await usedMemory(run.admin);
  const seedSec = await seedRange(run.env.redisUrl, run.maker, { from, to: size }, run.marks, run.log);
  const seededBytes = bytesSoFar + (await usedMemory(run.admin)) - m0;
  const seeded = size - from;
  run.log(
    `${size}: seeded ${seeded} in ${seedSec.toFixed(1)} s (${Math.round(seeded / seedSec)}/s; 1M at this rate: ` +
      `${(1e6 / (seeded / seedSec) / 60).toFixed(1)} min), ${(seededBytes / size).toFixed(0)} B per incident`,
  );
  const h = await startHerald(run.env, `herald (${size})`);
  try {
    run.log(`${size}: herald ready in ${h.readyMs.toFixed(0)} ms`);
    await checkAnswers(h, run.token, run.marks, size);
    const requests = await measureRequests(run, h, size);
    return {
      size,
      seeded,
      seedSec,
      seedSecPer10k: (seedSec * 10_000) / seeded,
      bytesPerIncident: seededBytes / size,
      recordBytes: run.maker.meanRecordBytes,
      readyMs: h.readyMs,
      requests,
    };
  } finally {
    await h.child.stop('SIGTERM', 20_000);
  }
}

export async function incidentCurve(opts: IncidentCurveOptions): Promise<IncidentCurveRow[]> {
  const log = opts.log ?? ((line: string) => process.stderr.write(`[scale-incidents] ${line}\n`));
  const sizes = [...new Set(opts.sizes)].sort((a, b) => a - b);
  // Below 1,000 the rarest filter (4% investigating) may not fill a page, and the checks refuse it.
  if (sizes.length === 0 || sizes.some((n) => !Number.isInteger(n) || n < MIN_SIZE))
    throw new Error(`sizes must be whole numbers of at least ${MIN_SIZE}: ${JSON.stringify(opts.sizes)}`);
  const dir = mkdtempSync(join(os.tmpdir(), 'herald-bench-scale-'));
  onExit(() => rmSync(dir, { recursive: true, force: true }));
  const loader = new Loader();
  let admin: Redis | null = null;
  let privateRedis: Child | null = null;
  try {
    let redisUrl = opts.redisUrl;
    if (redisUrl === undefined) {
      const started = await startRedis(dir, baseEnv());
      privateRedis = started.child;
      redisUrl = started.url;
    }
    const a = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
    admin = a;
    a.on('error', () => undefined);
    const cleared = await clearPrefix(a);
    if (cleared > 0) log(`deleted ${cleared} keys left under {${PREFIX}} by an earlier run`);
    const env: Env = { redisUrl, dir, secretKey: randomBytes(32).toString('base64') };
    const run: Run = {
      env,
      admin: a,
      token: createApiKey(env),
      maker: new IncidentMaker(Date.now()),
      marks: markPositions(sizes),
      loader,
      log,
      loadSec: opts.loadSec ?? 3,
      rounds: opts.rounds ?? 3,
    };
    const rows: IncidentCurveRow[] = [];
    let from = 0;
    let bytes = 0;
    for (const size of sizes) {
      const row = await measureSize(run, from, size, bytes);
      bytes = row.bytesPerIncident * size;
      from = size;
      rows.push(row);
    }
    return rows;
  } finally {
    await loader.stop();
    // A shared Redis gets its memory back, even after a failure (a private one is simply stopped).
    if (opts.redisUrl !== undefined && admin !== null)
      await clearPrefix(admin).then(
        (n) => log(`deleted ${n} keys under {${PREFIX}}`),
        (e: unknown) => log(`could not empty {${PREFIX}}: ${e instanceof Error ? e.message : String(e)}`),
      );
    admin?.disconnect();
    // Only what this curve started: a caller's children (bench/run.ts) are its own to stop.
    await privateRedis?.stop('SIGTERM', 10_000);
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// The table.

const fmtMs = (v: number) => (!Number.isFinite(v) ? '—' : v < 10 ? `${v.toFixed(3)} ms` : `${v.toFixed(1)} ms`);
const fmtInt = (v: number, unit = '') =>
  !Number.isFinite(v) ? '—' : `${Math.round(v).toLocaleString('en-US')}${unit}`;

interface TableLine {
  figure: string;
  get: (r: IncidentCurveRow) => number;
  fmt: (v: number) => string;
  target?: string;
  /** Whether the target is met, given the largest size's row and the ratio largest / smallest. */
  met?: (last: IncidentCurveRow, ratio: number) => boolean;
}

function tableLine(rows: IncidentCurveRow[], l: TableLine): string {
  const first = rows[0]!;
  const last = rows[rows.length - 1]!;
  const ratio = l.get(last) / l.get(first);
  const met = l.met === undefined ? '—' : l.met(last, ratio) ? 'yes' : 'NO';
  const ratioText = Number.isFinite(ratio) ? `${ratio.toFixed(2)}×` : '—';
  return `| ${l.figure} | ${rows.map((r) => l.fmt(l.get(r))).join(' | ')} | ${ratioText} | ${l.target ?? '—'} | ${met} |`;
}

/** Markdown: every figure at every size, the largest size against the smallest, and the target. */
export function incidentCurveTable(rows: IncidentCurveRow[]): string {
  const first = rows[0];
  const last = rows[rows.length - 1];
  if (first === undefined || last === undefined) return '(no rows)';
  const sizes = rows.map((r) => fmtInt(r.size));
  const lines: TableLine[] = [];
  for (const { kind, label } of REQUESTS) {
    lines.push({ figure: `${label}, p50`, get: (r) => r.requests[kind].p50, fmt: fmtMs });
    lines.push({
      figure: `${label}, p99`,
      get: (r) => r.requests[kind].p99,
      fmt: fmtMs,
      target: `≤ ${TARGET.p99Ratio}× the smallest`,
      met: (_, ratio) => ratio <= TARGET.p99Ratio,
    });
    lines.push({
      figure: `${label}, req/s (${CONNECTIONS} conns)`,
      get: (r) => r.requests[kind].rps,
      fmt: (v) => fmtInt(v, '/s'),
    });
    lines.push(
      {
        figure: `${label}, CPU/request: Herald`,
        get: (r) => r.requests[kind].heraldCpuUs,
        fmt: (v) => fmtInt(v, ' µs'),
      },
      { figure: `${label}, CPU/request: Redis`, get: (r) => r.requests[kind].redisCpuUs, fmt: (v) => fmtInt(v, ' µs') },
    );
  }
  const at1M = last.size === 1_000_000 ? '' : ' (a 1M target; here at the largest size)';
  lines.push(
    {
      figure: 'Redis bytes per incident (used_memory growth / incidents, incremental)',
      get: (r) => r.bytesPerIncident,
      fmt: (v) => fmtInt(v, ' B'),
      target: `≤ ${fmtInt(TARGET.bytesPerIncident)} B${at1M}`,
      met: (r) => r.bytesPerIncident <= TARGET.bytesPerIncident,
    },
    {
      figure: '… of which the record itself (its stored form, mean)',
      get: (r) => r.recordBytes,
      fmt: (v) => fmtInt(v, ' B'),
    },
    {
      figure: 'seeding through the store, s per 10k incidents',
      get: (r) => r.seedSecPer10k,
      fmt: (v) => `${v.toFixed(2)} s`,
    },
    { figure: 'Herald spawn → /readyz', get: (r) => r.readyMs, fmt: fmtMs },
  );
  return [
    `| figure | ${sizes.join(' | ')} | ${sizes[sizes.length - 1]!} / ${sizes[0]!} | target | met? |`,
    `|---|${rows.map(() => '---:').join('|')}|---:|---|:---:|`,
    ...lines.map((l) => tableLine(rows, l)),
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------
// Alone: the build checked, a private redis-server, the curve, a table and a JSON line.

/** `10000`, `10k`, `1M`. */
function parseSize(s: string): number {
  const m = /^(\d+(?:\.\d+)?)([kKmM]?)$/.exec(s.trim());
  if (!m) throw new Error(`not a size: "${s}"`);
  const unit = m[2]!.toLowerCase();
  return Math.round(Number(m[1]) * (unit === 'k' ? 1e3 : unit === 'm' ? 1e6 : 1));
}

async function main(): Promise<void> {
  const arg = (flag: string) => process.argv.find((a) => a.startsWith(`${flag}=`))?.slice(flag.length + 1);
  const sizes = arg('--sizes')?.split(',').map(parseSize) ?? DEFAULT_SIZES;
  const loadSec = Number(arg('--load-sec') ?? 3);
  const rounds = Number(arg('--rounds') ?? 3);
  const started = performance.now();
  const log = (line: string) =>
    process.stderr.write(`[scale ${((performance.now() - started) / 1000).toFixed(1).padStart(6)} s] ${line}\n`);
  // dist/ must be what src/ says: Herald runs from dist/, the seeding from src/.
  const build = spawnSync(process.execPath, [join(ROOT, 'scripts', 'ensure-build.mjs')], {
    cwd: ROOT,
    stdio: ['ignore', 'inherit', 'inherit'],
    timeout: 300_000,
  });
  if (build.status !== 0) throw new Error(`the build failed (status ${build.status})`);
  let rows: IncidentCurveRow[];
  try {
    rows = await incidentCurve({ sizes, log, loadSec, rounds });
  } finally {
    // Alone, every child is this curve's: a backstop if one was left running.
    await stopAll(10_000);
  }
  process.stdout.write(
    `\nHerald incidents-stored curve — ${os.availableParallelism()} × ${os.cpus()[0]?.model ?? '?'}, Node ${process.version}, ` +
      `load average ${os
        .loadavg()
        .map((x) => x.toFixed(2))
        .join(
          ' ',
        )}; incremental seeding; medians of ${rounds} rounds of ${loadSec} s per request (after ${WARMUP_SEC} s of warm-up)\n\n` +
      `${incidentCurveTable(rows)}\n\n${JSON.stringify({ incidentCurve: rows, target: TARGET })}\n`,
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href)
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(
        `scale-incidents failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
      );
      process.exit(1);
    },
  );
