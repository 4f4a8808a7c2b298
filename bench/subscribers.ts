/**
 * Subscriber mail at scale (docs/subscribers.md), black box like bench/run.ts: `node dist/main.js`
 * as an API process and, separately, one worker process (HERALD_ROLE=worker), over a private
 * redis-server, spoken to over HTTP only, with HERALD_SMTP_URL pointing at a minimal SMTP sink in
 * its own process (a minimal SMTP sink that accepts every mail, counts it and drops it).
 *
 * Rows:
 *   - notify N confirmed e-mail subscribers (100,000; 20,000 with --quick) of one status page
 *     update: the execute's 202 → the sink's last mail, and mails/s of the one worker, run as it is
 *     deployed (deployedWorker: the image's NODE_OPTIONS, in a memory cgroup of the worker
 *     manifest's limit, bench/cgroup.ts);
 *   - the worker's peak RSS growth while it sends (VmHWM, reset before the run, against its RSS
 *     just before the execute; sampled VmRSS as a fallback where clear_refs is refused);
 *   - the same again with a worker started bare (no limit, no flags), for comparison: on a machine
 *     with memory to spare V8 lets the heap grow far before it collects the old generation, which
 *     is no figure of what the worker needs (S1d, S1e);
 *   - Redis bytes per subscriber: INFO used_memory before and after importing the N subscribers
 *     (POST /v1/subscribers/import, ≤ 10,000 a request), divided by N.
 *
 *   npx tsx bench/subscribers.ts [--quick] [--smtp-pool=4]   alone, with a redis-server of its own
 *   npm run bench -- --only=subscribers [--quick]            as rows of the benchmark (bench/run.ts)
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import type { Figure } from './report.js';
import {
  epochMs,
  exitWithParent,
  fetchWithin,
  freePort,
  onExit,
  ROOT,
  startChild,
  startTsChild,
  stopAll,
  waitFor,
  type Child,
  cpuSeconds,
  createBenchKey,
  untilReady,
} from './lib.js';
import { createMemoryCgroup, type MemoryCgroup } from './cgroup.js';
import { startPrivateRedis } from './private-redis.js';

/** A row as bench/run.ts's table prints it (its `Figure`). */

const TARGET = { mailsPerSec: 2000, rssGrowthMB: 50, bytesPerSubscriber: 300 } as const;
/** The import's bound per request (docs/subscribers.md). */
const IMPORT_CHUNK = 10_000;

// ---------------------------------------------------------------------------------------------
// The SMTP sink (this file again, with --smtp-sink): counts, never parses.
//
// A few lines of SMTP over a plain socket, not smtp-server: on a small machine the sink shares the
// cores with the worker it measures, and smtp-server's parsing of every command and every message
// costs about as much CPU per mail as the worker's whole send (its CPU per mail is logged). A real
// relay runs elsewhere; what is measured is the worker. The tests talk to smtp-server, the real peer.

/** One SMTP session: answers every command, counts each message at its terminating dot. */
function sinkSession(sock: Socket, counted: () => void): void {
  sock.setNoDelay(true);
  let inData = false;
  let lines = '';
  // The last bytes seen in DATA, for a terminator split across two reads.
  let tail = '';
  sock.write('220 bench sink ESMTP\r\n');
  sock.on('data', (chunk: Buffer) => {
    let rest = chunk.toString('latin1');
    let out = '';
    while (rest.length > 0) {
      if (inData) {
        const joined = tail + rest;
        const end = joined.indexOf('\r\n.\r\n');
        if (end < 0) {
          tail = joined.slice(-4);
          break;
        }
        rest = joined.slice(end + 5);
        inData = false;
        counted();
        out += '250 2.0.0 queued\r\n';
        continue;
      }
      lines += rest;
      rest = '';
      for (let nl = lines.indexOf('\r\n'); nl >= 0 && !inData; nl = lines.indexOf('\r\n')) {
        const verb = lines.slice(0, 4).toUpperCase();
        lines = lines.slice(nl + 2);
        if (verb === 'EHLO') out += '250-bench\r\n250-8BITMIME\r\n250 AUTH PLAIN\r\n';
        else if (verb === 'AUTH') out += '235 2.7.0 accepted\r\n';
        else if (verb === 'QUIT') return void sock.end(`${out}221 bye\r\n`);
        else if (verb === 'DATA') {
          out += '354 go on\r\n';
          inData = true;
          // The message starts right after DATA's line: a lone "." is an empty message.
          tail = '\r\n';
          rest = lines;
          lines = '';
        } else out += '250 ok\r\n';
      }
    }
    if (out !== '') sock.write(out);
  });
  sock.on('error', () => undefined);
}

function runSink(): void {
  exitWithParent();
  let count = 0;
  let first = 0;
  let last = 0;
  const smtp = createNetServer((sock) =>
    sinkSession(sock, () => {
      const t = epochMs();
      if (count === 0) first = t;
      last = t;
      count++;
    }),
  );
  const stats = createServer((req, res) => {
    if (req.method === 'POST') count = first = last = 0;
    res.setHeader('content-type', 'application/json');
    // The sink's own CPU so far (µs): what the SMTP peer costs per mail on this machine.
    const { user, system } = process.cpuUsage();
    res.end(JSON.stringify({ count, first, last, cpuUs: user + system }));
  });
  smtp.listen(0, '127.0.0.1', () => {
    stats.listen(0, '127.0.0.1', () => {
      const smtpPort = (smtp.address() as AddressInfo).port;
      const statsPort = (stats.address() as AddressInfo).port;
      process.stdout.write(`${JSON.stringify({ listening: smtpPort, stats: statsPort })}\n`);
    });
  });
}

// ---------------------------------------------------------------------------------------------
// The rows.

export interface SubscriberRowOptions {
  redisUrl: string;
  /** The environment Herald runs with (bench/run.ts's heraldEnv()); prefix, role and port are set here. */
  env: NodeJS.ProcessEnv;
  quick: boolean;
  log(msg: string): void;
  /** HERALD_SMTP_POOL of the worker (Herald's default: 4). */
  pool?: number;
  /** Subscribers to notify, when not the row's own (100,000; 20,000 quick): the scale curve's sizes. */
  count?: number;
  /** Only the worker as deployed (no second run without a limit or flags, S1d). */
  asDeployedOnly?: boolean;
}

interface Api {
  base: string;
  token: string;
}

async function call(
  api: Api,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: any; text: string }> {
  const r = await fetchWithin(`${api.base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${api.token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    timeoutMs: 120_000,
  });
  const text = await r.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    // Not JSON: the caller looks at the status.
  }
  return { status: r.status, json, text };
}

async function must(api: Api, method: string, path: string, body?: unknown): Promise<any> {
  const r = await call(api, method, path, body);
  if (r.status >= 300) throw new Error(`${method} ${path} → ${r.status} ${r.text.slice(0, 300)}`);
  return r.json;
}

function procStatusKB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const m = new RegExp(`${field}:\\s+(\\d+)\\s+kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

async function redisCpuSeconds(admin: Redis): Promise<number> {
  const info = await admin.info('cpu');
  return (
    Number(/used_cpu_user:([\d.]+)/.exec(info)?.[1] ?? NaN) + Number(/used_cpu_sys:([\d.]+)/.exec(info)?.[1] ?? NaN)
  );
}

/** Redis' calls so far by command (INFO commandstats). */
async function commandCalls(admin: Redis): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const m of (await admin.info('commandstats')).matchAll(/cmdstat_([\w|]+):calls=(\d+)/g))
    out.set(m[1]!, Number(m[2]));
  return out;
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
 * How the worker runs in production: the image's NODE_OPTIONS (the Dockerfile's ENV) inside the
 * memory limit of the worker's Kubernetes manifest. Read from those files, so the row follows them.
 */
export function deployedWorker(): { nodeOptions: string; limitMiB: number } {
  const docker = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  const opts = /NODE_OPTIONS=(?:"([^"]*)"|(\S+))/.exec(docker);
  const manifest = readFileSync(join(ROOT, 'deploy', 'kubernetes', 'worker.yaml'), 'utf8');
  const limit = /limits:\s*\{\s*memory:\s*(\d+)Mi\s*\}/.exec(manifest);
  if (!opts || !limit)
    throw new Error('the Dockerfile NODE_OPTIONS or the worker manifest memory limit is not where the bench reads it');
  return { nodeOptions: (opts[1] ?? opts[2])!, limitMiB: Number(limit[1]) };
}

/** What every notification of one subscriberRows call shares. */
interface NotifySetup {
  api: Api;
  env: NodeJS.ProcessEnv;
  admin: Redis;
  n: number;
  quick: boolean;
  statsUrl: string;
  sinkStats(): Promise<{ count: number; first: number; last: number; cpuUs: number }>;
  pageId: string;
  templateId: string;
  componentId: string;
  log(msg: string): void;
  problems: string[];
}

interface NotifyRun {
  wallSec: number;
  cpuMsPerMail: number;
  redisCpuMsPerMail: number;
  growthMB: number;
  peakReset: boolean;
  /** The memory cgroup's limit it ran in; null: none (asked for none, or the machine gave none). */
  limitMiB: number | null;
}

/**
 * One worker process started `how` (NODE_OPTIONS, a memory cgroup of `limitMiB`), one new incident
 * executed to the page, timed to the sink's N-th mail more than it had; the worker is stopped after.
 */
async function notifyOnce(s: NotifySetup, how: { nodeOptions: string; limitMiB: number | null }): Promise<NotifyRun> {
  // BENCH_WORKER_NODE_ARGS: node flags for the worker alone, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`.
  const nodeArgs = (process.env.BENCH_WORKER_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const argv = [...nodeArgs, join(ROOT, 'dist', 'main.js')];
  let cgroup: MemoryCgroup | null = null;
  if (how.limitMiB !== null) {
    try {
      cgroup = createMemoryCgroup(how.limitMiB * 2 ** 20, `herald-bench-subs-${process.pid}-${Date.now()}`);
    } catch (err) {
      s.log(
        `subscribers: no memory cgroup (${err instanceof Error ? err.message : String(err)}); the worker runs unlimited`,
      );
    }
  }
  const cmd = cgroup === null ? { command: process.execPath, args: argv } : cgroup.wrap(process.execPath, argv);
  const worker = startChild('herald worker (subscribers)', cmd.command, cmd.args, {
    ...s.env,
    HERALD_ROLE: 'worker',
    LOG_LEVEL: 'info',
    ...(how.nodeOptions === '' ? {} : { NODE_OPTIONS: how.nodeOptions }),
  });
  try {
    await worker.line(
      'the worker running',
      (l) => (l.includes('Herald running (role worker') ? true : undefined),
      30_000,
    );
    return { ...(await measureNotice(s, worker)), limitMiB: cgroup === null ? null : how.limitMiB };
  } finally {
    await worker.stop('SIGTERM', 15_000);
    cgroup?.remove();
  }
}

/** One update to every subscriber, sent by `worker`: the figures of one run. */
async function measureNotice(s: NotifySetup, worker: Child): Promise<Omit<NotifyRun, 'limitMiB'>> {
  const inc = await must(s.api, 'POST', '/v1/incidents', {
    title: 'Bench subscribers',
    severity: 'major',
    template_ids: [s.templateId],
    components: [{ id: s.componentId, status: 'partial_outage' }],
  });
  await (await fetchWithin(s.statsUrl, { method: 'POST', timeoutMs: 5000 })).body?.cancel();

  // Idle before the run: the RSS it starts from, and its peak from here on.
  const rssBeforeKB = procStatusKB(worker.pid, 'VmRSS');
  const peakReset = resetPeak(worker.pid);
  let sampledPeakKB = rssBeforeKB;
  const sampler = setInterval(() => {
    const v = procStatusKB(worker.pid, 'VmRSS');
    if (v > sampledPeakKB) sampledPeakKB = v;
  }, 20);
  let wallSec = NaN;
  let hwmKB = NaN;
  // Where a mail's cost goes (steadier than the rate on a busy machine): the worker's CPU and Redis'.
  const cpu0 = cpuSeconds(worker.pid);
  const redisCpu0 = await redisCpuSeconds(s.admin);
  const sinkCpu0 = (await s.sinkStats()).cpuUs;
  const calls0 = await commandCalls(s.admin);
  let cpuMsPerMail = NaN;
  let redisCpuMsPerMail = NaN;
  try {
    const exe = await call(s.api, 'POST', `/v1/incidents/${String(inc.id)}/execute`, {
      connection_ids: [s.pageId],
      variables: { message: 'We are investigating errors on the API. Next update in 30 minutes.' },
      public_status: 'investigating',
    });
    const t202 = epochMs();
    if (exe.status !== 202) throw new Error(`execute → ${exe.status} ${exe.text.slice(0, 300)}`);
    const done = await waitFor(
      `the sink to take ${s.n} mails`,
      async () => {
        if (worker.exit) throw new Error(`the worker exited: ${worker.stderrTail()}`);
        const st = await s.sinkStats();
        return st.count >= s.n ? st : undefined;
      },
      { timeoutMs: s.quick ? 300_000 : 900_000, intervalMs: 50 },
    );
    wallSec = (done.last - t202) / 1000;
    hwmKB = procStatusKB(worker.pid, 'VmHWM');
    cpuMsPerMail = ((cpuSeconds(worker.pid) - cpu0) * 1000) / s.n;
    redisCpuMsPerMail = (((await redisCpuSeconds(s.admin)) - redisCpu0) * 1000) / s.n;
    const sinkCpuMsPerMail = ((await s.sinkStats()).cpuUs - sinkCpu0) / 1000 / s.n;
    const calls1 = await commandCalls(s.admin);
    const perMail = [...calls1]
      .map(([c, v]) => [c, (v - (calls0.get(c) ?? 0)) / s.n] as const)
      .filter(([, v]) => v >= 0.01)
      .sort((a, b) => b[1] - a[1])
      .map(([c, v]) => `${c} ${v.toFixed(2)}`);
    s.log(`subscribers: Redis commands per mail (all clients): ${perMail.join(', ')}`);
    s.log(
      `subscribers: CPU per mail: worker ${cpuMsPerMail.toFixed(3)} ms, Redis ${redisCpuMsPerMail.toFixed(3)} ms, the SMTP sink ${sinkCpuMsPerMail.toFixed(3)} ms`,
    );
    const tally = await waitFor(
      'the tally complete',
      async () => {
        const e = await must(s.api, 'GET', `/v1/incidents/${String(inc.id)}/executions/${String(exe.json.id)}`);
        return e.subscribers?.complete === true ? e.subscribers : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    if (tally.delivered !== s.n) s.problems.push(`tally: ${JSON.stringify(tally)}`);
    const extra = (await s.sinkStats()).count - s.n;
    if (extra > 0) s.problems.push(`the sink took ${extra} mails more than there are subscribers`);
  } finally {
    clearInterval(sampler);
  }
  const peakKB = peakReset && Number.isFinite(hwmKB) ? Math.max(hwmKB, sampledPeakKB) : sampledPeakKB;
  const growthMB = ((peakKB - rssBeforeKB) * 1024) / 1e6;
  return { wallSec, cpuMsPerMail, redisCpuMsPerMail, growthMB, peakReset };
}

export async function subscriberRows(o: SubscriberRowOptions): Promise<Figure[]> {
  const n = o.count ?? (o.quick ? 20_000 : 100_000);
  const pool = o.pool ?? 4;
  const problems: string[] = [];
  const sink = startTsChild('smtp sink', 'subscribers.ts', ['--smtp-sink'], {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
  });
  const children: Child[] = [sink];
  const admin = new Redis(o.redisUrl, { maxRetriesPerRequest: 1, lazyConnect: true });
  admin.on('error', () => undefined);
  try {
    const ports = await sink.json<{ listening: number; stats: number }>('listening', 30_000);
    const statsUrl = `http://127.0.0.1:${ports.stats}/`;
    const sinkStats = async () =>
      (await (await fetchWithin(statsUrl, { timeoutMs: 5000 })).json()) as {
        count: number;
        first: number;
        last: number;
        cpuUs: number;
      };
    const env: NodeJS.ProcessEnv = {
      ...o.env,
      REDIS_URL: o.redisUrl,
      // A prefix of its own: the main rows' Herald has a status page already (one per Herald).
      HERALD_KEY_PREFIX: 'bench-subs',
      HERALD_SMTP_URL: `smtp://bench:bench@127.0.0.1:${ports.listening}`,
      HERALD_SMTP_FROM: 'Bench Status <status@bench.test>',
      // As fast as the relay takes them: what is measured is the worker.
      HERALD_SMTP_RATE: '100000',
      HERALD_SMTP_POOL: String(pool),
      LOG_LEVEL: 'warn',
    };

    const token = createBenchKey(env, 'bench-subs');

    const port = await freePort();
    const apiChild = startChild('herald api (subscribers)', process.execPath, [join(ROOT, 'dist', 'main.js')], {
      ...env,
      HERALD_ROLE: 'api',
      PORT: String(port),
      HOST: '127.0.0.1',
    });
    children.push(apiChild);
    const api: Api = { base: `http://127.0.0.1:${port}`, token };
    await untilReady('the API', apiChild, api.base, { intervalMs: 20 });

    // --- Redis bytes per subscriber.
    await admin.connect();
    const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await admin.info('memory'))?.[1] ?? NaN);
    const component = await must(api, 'POST', '/v1/components', { name: 'API' });
    const m0 = await usedMemory();
    const t0 = performance.now();
    let chunk = IMPORT_CHUNK;
    for (let i = 0; i < n;) {
      const rows = Array.from({ length: Math.min(chunk, n - i) }, (_, k) => ({
        email: `subscriber-${i + k}@bench.example.com`,
        confirmed: true,
      }));
      const r = await call(api, 'POST', '/v1/subscribers/import', { source: 'bench', subscribers: rows });
      if (r.status === 413 && chunk > 500) {
        // The design allows 10,000 a request; a smaller body limit is reported, and halves are sent.
        problems.push(`import: ${rows.length} rows answered 413`);
        chunk = Math.floor(chunk / 2);
        continue;
      }
      if (r.status >= 300) throw new Error(`import → ${r.status} ${r.text.slice(0, 300)}`);
      i += rows.length;
    }
    const importSec = (performance.now() - t0) / 1000;
    const m1 = await usedMemory();
    const bytesPerSubscriber = (m1 - m0) / n;
    o.log(
      `subscribers: imported ${n} in ${importSec.toFixed(1)} s (chunks of ${chunk}), ${bytesPerSubscriber.toFixed(0)} B each`,
    );

    // --- The page, then one update to everyone per way of running the worker.
    const page = await must(api, 'POST', '/v1/connections', {
      name: 'Status page',
      type: 'status_page',
      config: { title: 'Bench', public_url: 'https://status.bench.test', time_zone: 'Europe/Berlin' },
    });
    const template = await must(api, 'POST', '/v1/templates', { name: 'update', body: '{{message}}' });
    const setup: NotifySetup = {
      api,
      env,
      admin,
      n,
      quick: o.quick,
      statsUrl,
      sinkStats,
      pageId: page.id,
      templateId: template.id,
      componentId: component.id,
      log: (m) => o.log(m),
      problems,
    };
    const deployed = deployedWorker();
    const asDeployed = await notifyOnce(setup, { nodeOptions: deployed.nodeOptions, limitMiB: deployed.limitMiB });
    const bare = o.asDeployedOnly ? null : await notifyOnce(setup, { nodeOptions: '', limitMiB: null });
    const { wallSec, cpuMsPerMail, redisCpuMsPerMail, growthMB, peakReset } = asDeployed;
    const mailsPerSec = Math.round(n / wallSec);
    for (const p of problems) o.log(`subscribers: ${p}`);
    const how = asDeployed.limitMiB === null ? 'no memory cgroup here' : `in ${asDeployed.limitMiB} MiB`;
    const k = `${(n / 1000).toFixed(0)}k`;
    return [
      {
        figure: `S1. notify ${k} e-mail subscribers, one worker as deployed (pool ${pool}, ${how}, NODE_OPTIONS=${deployed.nodeOptions}): execute's 202 → last mail at the sink`,
        herald: wallSec,
        baseline: null,
        ratio: null,
        unit: 's',
        target: '—',
        met: null,
      },
      {
        figure: 'S1a. … mails/s per worker',
        herald: mailsPerSec,
        baseline: null,
        ratio: null,
        unit: 'mails/s',
        target: `≥ ${TARGET.mailsPerSec.toLocaleString('en-US')}/s`,
        met: Number.isFinite(mailsPerSec) ? mailsPerSec >= TARGET.mailsPerSec : null,
      },
      {
        figure: "S1b. … CPU per mail: the worker (Redis's as baseline)",
        herald: cpuMsPerMail,
        baseline: redisCpuMsPerMail,
        ratio: null,
        unit: 'ms',
        target: '—',
        met: null,
      },
      {
        figure: `S1c. … worker peak RSS growth while sending (${peakReset ? 'VmHWM' : 'sampled VmRSS'})`,
        herald: growthMB,
        baseline: null,
        ratio: null,
        unit: 'MB',
        target: `≤ ${TARGET.rssGrowthMB} MB`,
        met: Number.isFinite(growthMB) ? growthMB <= TARGET.rssGrowthMB : null,
      },
      {
        figure: 'S1d. … the same worker with no memory limit and no flags: peak RSS growth',
        herald: bare?.growthMB ?? null,
        baseline: null,
        ratio: null,
        unit: 'MB',
        target: '—',
        met: null,
      },
      {
        figure: 'S1e. … and its mails/s',
        herald: bare === null ? null : Math.round(n / bare.wallSec),
        baseline: null,
        ratio: null,
        unit: 'mails/s',
        target: '—',
        met: null,
      },
      {
        figure: `S2. Redis bytes per subscriber (used_memory across the import of ${k})`,
        herald: bytesPerSubscriber,
        baseline: null,
        ratio: null,
        unit: 'B',
        target: `≤ ${TARGET.bytesPerSubscriber} B`,
        met: Number.isFinite(bytesPerSubscriber) ? bytesPerSubscriber <= TARGET.bytesPerSubscriber : null,
      },
    ];
  } finally {
    for (const c of children.reverse()) await c.stop('SIGTERM', 15_000);
    admin.disconnect();
  }
}

// ---------------------------------------------------------------------------------------------
// Alone: a private redis-server, the build checked, the rows, a table.

async function main(): Promise<void> {
  const quick = process.argv.includes('--quick');
  const poolArg = process.argv.find((a) => a.startsWith('--smtp-pool='));
  const started = performance.now();
  const log = (msg: string) =>
    process.stderr.write(`[bench ${((performance.now() - started) / 1000).toFixed(1).padStart(5)} s] ${msg}\n`);
  const build = spawnSync(process.execPath, [join(ROOT, 'scripts', 'ensure-build.mjs')], {
    cwd: ROOT,
    stdio: ['ignore', 'inherit', 'inherit'],
    timeout: 300_000,
  });
  if (build.status !== 0) throw new Error(`the build failed (status ${build.status})`);
  const dir = mkdtempSync(join(os.tmpdir(), 'herald-bench-subs-'));
  onExit(() => rmSync(dir, { recursive: true, force: true }));
  const baseEnv: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'production' };
  try {
    const redis = await startPrivateRedis(dir, baseEnv);
    redis.admin.disconnect();
    const redisUrl = redis.url;
    const figures = await subscriberRows({
      redisUrl,
      quick,
      log,
      ...(poolArg === undefined ? {} : { pool: Number(poolArg.split('=')[1]) }),
      env: {
        ...baseEnv,
        HERALD_SECRET_KEY: randomBytes(32).toString('base64'),
        HERALD_DATA_DIR: join(dir, 'data'),
        HERALD_OUTBOUND_ALLOW: '127.0.0.1/32',
        HERALD_RATE_LIMIT: '1000000000',
        HERALD_EXECUTE_RATE_LIMIT: '1000000000',
      },
    });
    const fmt = (v: number | null, unit: string) =>
      v === null || !Number.isFinite(v)
        ? '—'
        : unit === 's'
          ? `${v.toFixed(2)} s`
          : unit === 'MB'
            ? `${v.toFixed(1)} MB`
            : unit === 'B'
              ? `${Math.round(v)} B`
              : unit === 'ms'
                ? `${v.toFixed(3)} ms`
                : `${Math.round(v).toLocaleString('en-US')}/s`;
    const lines = ['| figure | Herald | baseline | target | met? |', '|---|---:|---:|---|:---:|'];
    for (const f of figures)
      lines.push(
        `| ${f.figure} | ${fmt(f.herald, f.unit)} | ${fmt(f.baseline, f.unit)} | ${f.target} | ${f.met === null ? '—' : f.met ? 'yes' : 'NO'} |`,
      );
    process.stdout.write(
      `\nHerald subscriber benchmark (${quick ? 'quick' : 'full'}) — ${os.availableParallelism()} × ${os.cpus()[0]?.model ?? '?'}, load average ${os
        .loadavg()
        .map((x) => x.toFixed(2))
        .join(' ')}\n\n${lines.join('\n')}\n`,
    );
  } finally {
    await stopAll(10_000);
  }
}

const self = import.meta.url === pathToFileURL(process.argv[1] ?? '').href;
if (self && process.argv.includes('--smtp-sink')) runSink();
else if (self)
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(
        `bench subscribers failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
      );
      process.exit(1);
    },
  );
