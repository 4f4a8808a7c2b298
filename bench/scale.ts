/**
 * `npm run bench -- --scale`: how Herald's costs grow with the work (docs/scaling.md). The long
 * rows, run only when asked for:
 *   - incidents stored, 10k → 100k → 1M (bench/scale-incidents.ts): list, deep page, one
 *     incident and filtered lists, p50/p99 at each size; Redis bytes per incident;
 *   - one execute to 200 → 2,000 → 10,000 connections (bench/scale-fanout.ts): the 202, the last
 *     delivery, peak RSS, Redis commands per delivery, a concurrent reader's p99;
 *   - Redis commands per API request and per delivery, and the projection to Redis primaries;
 *   - worker processes 1 → 2: deliveries/s per process and in total;
 *   - subscribers notified, 1k → 10k → 100k (bench/subscribers.ts).
 * `--scale=incidents,fanout,commands,workers,subscribers` picks parts; `--sizes-incidents=`,
 * `--sizes-fanout=`, `--sizes-subscribers=` change the sizes (comma-separated, `k`/`M` allowed).
 * Each part starts its own private Redis and Herald processes and stops them; every figure goes
 * to bench/scale-results.json (gitignored) beside the printed tables.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { ROOT } from './lib.js';
import { startPrivateRedis } from './private-redis.js';
import { commandCosts, commandsTable, fanoutCurve, fanoutTable, workerScaling, workersTable } from './scale-fanout.js';
import { DEFAULT_SIZES as INCIDENT_SIZES, incidentCurve, incidentCurveTable } from './scale-incidents.js';
import type { Figure } from './report.js';
import { subscriberRows } from './subscribers.js';

const PARTS = ['incidents', 'fanout', 'commands', 'workers', 'subscribers'] as const;
type Part = (typeof PARTS)[number];

function sizesArg(flag: string, fallback: number[]): number[] {
  const raw = process.argv.find((a) => a.startsWith(`${flag}=`))?.slice(flag.length + 1);
  if (raw === undefined) return fallback;
  return raw.split(',').map((x) => {
    const m = /^(\d+(?:\.\d+)?)([kKmM]?)$/.exec(x.trim());
    if (!m) throw new Error(`${flag}: not a size: ${x}`);
    const unit = m[2]?.toLowerCase();
    return Math.round(Number(m[1]) * (unit === 'k' ? 1e3 : unit === 'm' ? 1e6 : 1));
  });
}

/** A private redis-server for one subscriber size: each size imports into an empty Redis. */
async function privateRedis(dir: string, env: NodeJS.ProcessEnv): Promise<{ url: string; stop(): Promise<void> }> {
  const r = await startPrivateRedis(dir, env);
  r.admin.disconnect();
  return { url: r.url, stop: async () => void (await r.child.stop('SIGTERM', 10_000)) };
}

async function subscriberCurve(sizes: number[], log: (msg: string) => void): Promise<Figure[][]> {
  const baseEnv: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'production' };
  const out: Figure[][] = [];
  for (const count of sizes) {
    const dir = mkdtempSync(join(os.tmpdir(), 'herald-scale-subs-'));
    const redis = await privateRedis(dir, baseEnv);
    try {
      out.push(
        await subscriberRows({
          redisUrl: redis.url,
          quick: false,
          count,
          log,
          env: {
            ...baseEnv,
            HERALD_SECRET_KEY: randomBytes(32).toString('base64'),
            HERALD_DATA_DIR: join(dir, 'data'),
            HERALD_OUTBOUND_ALLOW: '127.0.0.1/32',
            HERALD_RATE_LIMIT: '1000000000',
            HERALD_EXECUTE_RATE_LIMIT: '1000000000',
          },
        }),
      );
    } finally {
      await redis.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return out;
}

/** The subscriber rows at every size, one column per size, with the growth of the largest over the smallest. */
function subscriberTable(sizes: number[], runs: Figure[][]): string {
  const lines = [
    `| figure | ${sizes.map((n) => n.toLocaleString('en-US')).join(' | ')} | growth | target |`,
    `|---|${sizes.map(() => '---:').join('|')}|---:|---|`,
  ];
  const names = (runs[0] ?? []).map((f) =>
    f.figure.replace(/\d[\d,.]*[kM]? e-mail subscribers/, 'N e-mail subscribers'),
  );
  names.forEach((name, i) => {
    const values = runs.map((r) => r[i]?.herald ?? null);
    const first = values[0];
    const last = values[values.length - 1];
    const growth = first && last ? `${(last / first).toFixed(2)}×` : '—';
    const unit = runs[0]?.[i]?.unit ?? '';
    const cells = values.map((v) =>
      v === null ? '—' : `${v < 10 ? v.toFixed(3) : Math.round(v).toLocaleString('en-US')} ${unit}`,
    );
    lines.push(
      `| ${name.replace(/\(used_memory across the import of [^)]*\)/, '')} | ${cells.join(' | ')} | ${growth} | ${runs[0]?.[i]?.target ?? ''} |`,
    );
  });
  return lines.join('\n');
}

export async function runScale(log: (msg: string) => void): Promise<void> {
  const flag = process.argv.find((a) => a === '--scale' || a.startsWith('--scale='));
  const asked = flag?.includes('=') ? (flag.slice('--scale='.length).split(',') as Part[]) : [...PARTS];
  const unknown = asked.filter((p) => !PARTS.includes(p));
  if (unknown.length > 0) throw new Error(`--scale: unknown part(s) ${unknown.join(', ')}; known: ${PARTS.join(', ')}`);
  const build = spawnSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
  if (build.status !== 0) throw new Error(`the build failed (status ${build.status})`);
  const results: Record<string, unknown> = { timestamp: new Date().toISOString(), node: process.version };
  const tables: string[] = [];
  const opts = { log };
  if (asked.includes('incidents')) {
    const rows = await incidentCurve({ sizes: sizesArg('--sizes-incidents', INCIDENT_SIZES), log });
    results.incidents = rows;
    tables.push(`### Incidents stored\n\n${incidentCurveTable(rows)}`);
  }
  const fanout = asked.includes('fanout')
    ? await fanoutCurve({ ...opts, sizes: sizesArg('--sizes-fanout', [200, 2000, 10_000]) })
    : [];
  if (fanout.length > 0) {
    results.fanout = fanout;
    tables.push(`### One execute to N connections\n\n${fanoutTable(fanout)}`);
  }
  if (asked.includes('commands')) {
    const costs = await commandCosts(opts);
    results.commands = costs;
    tables.push(`### Redis commands per unit of work\n\n${commandsTable(costs, fanout)}`);
  }
  if (asked.includes('workers')) {
    const rows = await workerScaling(opts);
    results.workers = rows;
    tables.push(`### Worker processes\n\n${workersTable(rows)}`);
  }
  if (asked.includes('subscribers')) {
    const sizes = sizesArg('--sizes-subscribers', [1000, 10_000, 100_000]);
    const runs = await subscriberCurve(sizes, log);
    results.subscribers = runs;
    tables.push(`### Subscribers notified\n\n${subscriberTable(sizes, runs)}`);
  }
  writeFileSync(join(ROOT, 'bench', 'scale-results.json'), `${JSON.stringify(results, null, 2)}\n`);
  process.stdout.write(
    `\nHerald scale curves — ${os.availableParallelism()} × ${os.cpus()[0]?.model ?? '?'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}\n\n${tables.join('\n\n')}\n\nEvery figure: bench/scale-results.json\n`,
  );
}
