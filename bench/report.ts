/**
 * What `npm run bench` keeps of each round (Samples) and the table made of it (buildReport): the
 * figures, their baselines, ratios and targets. bench/run.ts runs the rows and fills the samples.
 */
import { median } from './lib.js';
import type { LoadResult } from './load.js';

export type Side = 'herald' | 'baseline';
export type ApiRow = 'read' | 'write' | 'list';
export interface Samples {
  api: Record<ApiRow, Record<Side, LoadResult[]>>;
  /**
   * CPU µs of the serving process (Herald's, or the bare app's) per request answered, over the
   * warm-up and the measured run: what a request costs, much steadier than req/s on a shared machine.
   */
  apiCpuUs: Record<ApiRow, Record<Side, number[]>>;
  apiMainCpuUs: Record<ApiRow, Record<Side, number[]>>;
  apiRedisCpuUs: Record<ApiRow, Record<Side, number[]>>;
  slack: LoadResult[];
  /** The public status page (row 11): summary.json and the HTML page against the same bytes served as files. */
  status: Record<'summary' | 'page', Record<Side, LoadResult[]>>;
  /** An execute's 202 → its update in the page's JSON, ms (median of STATUS_PUBLISHES a round). */
  statusVisibleMs: number[];
  fanout: Record<Side, number[]>;
  executeAcceptMs: number[];
  /** 202 (Herald) or the go (the bare loop) → the first webhook's arrival, s. */
  fanoutFirst: Record<Side, number[]>;
  /** A queue job per delivery (bench/queue-floor.ts): jobs added → the last arrival, s. */
  fanoutFloor: number[];
  deliveriesPerSec: number[];
  /** The bare loop posting row 6's number of webhooks right after it, per second. */
  loopPostsPerSec: number[];
  /** The bookkeeping floor (bench/record-floor.ts): the loop's posts with a record each, posts/s. */
  floorEachPerSec: number[];
  /** … with the records read and written 25 at a time. */
  floorBatchPerSec: number[];
  /** Incident events delivered to one event endpoint by one worker, per second (row 6c). */
  eventsPerSec: number[];
  /** The same work run first, as the warm-up of the figure above (the delivery path still cold). */
  coldDeliveriesPerSec: number[];
  /** Herald's and Redis' CPU ms per delivery over the deliveries row. */
  deliveryCpuMs: number[];
  deliveryRedisCpuMs: number[];
  bytesPerIncident: number[];
  rawIncidentBytes: number[];
  /** At rest: REST_MS after the last row, once Herald has had time to be idle. */
  rssMB: number[];
  /** Right after the last delivery arrived, under load. */
  rssUnderLoadMB: number[];
  /** VmHWM: the peak RSS of the process over the round. */
  peakRssMB: number[];
  /** With --cgroup-mb: the cgroup's peak charge over each round (MB), OOM kills and limit hits so far. */
  cgroupPeakMB: number[];
  cgroupOomKills: number[];
  cgroupLimitHits: number[];
  /** What the RSS was made of, under load and at rest (MB): V8's heap spaces, anonymous memory. */
  memoryShape: Array<Record<string, number | string>>;
  slackApiCalls: number[];
  slackRssMB: number[];
  readyMs: number[];
  stopMs: number[];
  cliMs: number[];
  nodeMs: number[];
}
function sidesPerApiRow<T>(): Record<ApiRow, Record<Side, T[]>> {
  return {
    read: { herald: [], baseline: [] },
    write: { herald: [], baseline: [] },
    list: { herald: [], baseline: [] },
  };
}
/** Every figure's list of samples, empty. */
export function newSamples(): Samples {
  return {
    api: sidesPerApiRow(),
    apiCpuUs: sidesPerApiRow(),
    apiMainCpuUs: sidesPerApiRow(),
    apiRedisCpuUs: sidesPerApiRow(),
    slack: [],
    status: { summary: { herald: [], baseline: [] }, page: { herald: [], baseline: [] } },
    statusVisibleMs: [],
    fanout: { herald: [], baseline: [] },
    executeAcceptMs: [],
    fanoutFirst: { herald: [], baseline: [] },
    fanoutFloor: [],
    deliveriesPerSec: [],
    loopPostsPerSec: [],
    floorEachPerSec: [],
    floorBatchPerSec: [],
    eventsPerSec: [],
    coldDeliveriesPerSec: [],
    deliveryCpuMs: [],
    deliveryRedisCpuMs: [],
    bytesPerIncident: [],
    rawIncidentBytes: [],
    rssMB: [],
    rssUnderLoadMB: [],
    peakRssMB: [],
    cgroupPeakMB: [],
    cgroupOomKills: [],
    cgroupLimitHits: [],
    memoryShape: [],
    slackApiCalls: [],
    slackRssMB: [],
    readyMs: [],
    stopMs: [],
    cliMs: [],
    nodeMs: [],
  };
}

/** One row of the table. */
export interface Figure {
  figure: string;
  herald: number | null;
  baseline: number | null;
  ratio: number | null;
  unit: string;
  target: string;
  met: boolean | null;
}

/** The lowest of the rounds' ratios a[i] / b[i] (rounds where both were measured), or null. */
export function lowestRatio(a: readonly number[], b: readonly number[]): number | null {
  const ratios: number[] = [];
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (b[i]! > 0) ratios.push(a[i]! / b[i]!);
  return ratios.length === 0 ? null : Math.min(...ratios);
}

const medianOrNull = (xs: readonly number[]): number | null => (xs.length === 0 ? null : median(xs));
const ratioOf = (a: number | null, b: number | null): number | null =>
  a === null || b === null || b === 0 ? null : a / b;

/**
 * A load row's two figures against its baseline: req/s (at least `minRate` times the baseline's)
 * and p99 (at most `maxP99` times the baseline's; no target when null).
 */
function loadFigures(
  rateLabel: string,
  runs: Record<Side, LoadResult[]>,
  minRate: number,
  p99Label: string,
  maxP99: number | null,
): [Figure, Figure] {
  const hr = medianOrNull(runs.herald.map((x) => x.rps));
  const br = medianOrNull(runs.baseline.map((x) => x.rps));
  const rr = ratioOf(hr, br);
  const hp = medianOrNull(runs.herald.map((x) => x.p99));
  const bp = medianOrNull(runs.baseline.map((x) => x.p99));
  const pr = ratioOf(hp, bp);
  return [
    {
      figure: rateLabel,
      herald: hr,
      baseline: br,
      ratio: rr,
      unit: 'req/s',
      target: `≥ ${minRate}× baseline`,
      met: rr === null ? null : rr >= minRate,
    },
    {
      figure: p99Label,
      herald: hp,
      baseline: bp,
      ratio: pr,
      unit: 'ms',
      target: maxP99 === null ? '—' : `≤ ${maxP99}× baseline`,
      met: maxP99 === null || pr === null ? null : pr <= maxP99,
    },
  ];
}

/** The settings of the run that the table's rows name. */
export interface ReportSettings {
  apiConnections: number;
  slackConnections: number;
  fanout: number;
  executes: number;
  events: number;
  restMs: number;
  cliRuns: number;
  statusPublishes: number;
  /** --cgroup-mb, when given. */
  cgroupMb: number | null;
  /** Rows measured apart from the rounds (the subscriber rows), appended as they are. */
  extra: readonly Figure[];
}

/** The figures of `samples` (medians of the rounds, with their baselines and targets) and the table. */
export function buildReport(samples: Samples, s: ReportSettings): { figures: Figure[]; table: string } {
  const figures: Figure[] = [];
  const m = medianOrNull;
  const div = ratioOf;
  const add = (f: Figure) => figures.push(f);

  const api: Array<[ApiRow, string, number]> = [
    ['read', '1. GET /v1/incidents/{id}', 0.85],
    ['write', '2. POST /v1/incidents', 0.85],
    ['list', '3. GET /v1/incidents?limit=25', 0.6],
  ];
  for (const [key, label, min] of api) {
    const side = samples.api[key];
    figures.push(...loadFigures(`${label}, req/s (${s.apiConnections} conns)`, side, min, `${label}, p99`, 1.5));
    // Not targets: the CPU a request cost each process, its main thread (the event loop, which
    // bounds the req/s), and Redis (ratio = Herald / baseline).
    const cpuRows = [
      ['a', 'CPU per request', samples.apiCpuUs],
      ['b', 'main-thread CPU per request', samples.apiMainCpuUs],
      ['c', "Redis' CPU per request", samples.apiRedisCpuUs],
    ] as const;
    for (const [suffix, what, series] of cpuRows) {
      const hc = m(series[key].herald);
      const bc = m(series[key].baseline);
      add({
        figure: `${label.replace('.', `${suffix}.`)}, ${what}`,
        herald: hc,
        baseline: bc,
        ratio: div(hc, bc),
        unit: 'µs',
        target: '—',
        met: null,
      });
    }
  }
  const sr = m(samples.slack.map((x) => x.rps));
  add({
    figure: `4. Slack /incident help, acks/s (${s.slackConnections} conns)`,
    herald: sr,
    baseline: null,
    ratio: null,
    unit: 'req/s',
    target: '—',
    met: null,
  });
  const sp = m(samples.slack.map((x) => x.p99));
  add({
    figure: '4. Slack /incident help, ack p99',
    herald: sp,
    baseline: null,
    ratio: null,
    unit: 'ms',
    target: '≤ 30 ms',
    met: sp === null ? null : sp <= 30,
  });
  const fh = m(samples.fanout.herald);
  const fb = m(samples.fanout.baseline);
  const fr = div(fb, fh);
  // The ratio must hold in every round, not only in the median one.
  const fanoutWorst = lowestRatio(samples.fanout.baseline, samples.fanout.herald);
  add({
    figure: `5. execute → ${s.fanout} webhooks, 202 → last arrival (ratio = baseline/Herald)`,
    herald: fh,
    baseline: fb,
    ratio: fr,
    unit: 's',
    target: '≤ 0.25 s, ratio ≥ 0.4 in every round',
    met: fh === null || fanoutWorst === null ? null : fh <= 0.25 && fanoutWorst >= 0.4,
  });
  add({
    figure: '5d. … the lowest round ratio',
    herald: null,
    baseline: null,
    ratio: fanoutWorst,
    unit: '',
    target: '≥ 0.4',
    met: fanoutWorst === null ? null : fanoutWorst >= 0.4,
  });
  // Not a target: how much of row 5 is the wait for the first send, and what the execute took.
  const ffh = m(samples.fanoutFirst.herald);
  const ffb = m(samples.fanoutFirst.baseline);
  add({
    figure: '5a. … 202 (baseline: the go) → first arrival',
    herald: ffh,
    baseline: ffb,
    ratio: null,
    unit: 's',
    target: '—',
    met: null,
  });
  const acc = m(samples.executeAcceptMs);
  add({
    figure: '5b. … the execute request → its 202',
    herald: acc === null ? null : acc / 1000,
    baseline: null,
    ratio: null,
    unit: 's',
    target: '—',
    met: null,
  });
  // Not a target: the same 200 POSTs as BullMQ jobs with nothing of Herald's around them.
  const ffl = m(samples.fanoutFloor);
  add({
    figure: '5c. … a BullMQ job per delivery, each only POSTing (ratio = baseline/it)',
    herald: ffl,
    baseline: fb,
    ratio: div(fb, ffl),
    unit: 's',
    target: '—',
    met: null,
  });
  const d = m(samples.deliveriesPerSec);
  const dl = m(samples.loopPostsPerSec);
  const dWorst = lowestRatio(samples.deliveriesPerSec, samples.loopPostsPerSec);
  add({
    figure: `6. ${s.executes} executes × ${s.fanout} = ${s.executes * s.fanout} deliveries (after a warm-up run of the same; baseline: the bare loop's posts/s, ratio = Herald/baseline, lowest round)`,
    herald: d,
    baseline: dl,
    ratio: dWorst,
    unit: 'deliveries/s',
    target: '≥ 1,500/s, ratio ≥ 0.5',
    met: d === null ? null : d >= 1500 && (dWorst === null || dWorst >= 0.5),
  });
  // Not targets: where the deliveries' CPU went (compare these between versions on a busy machine).
  add({
    figure: "6a. CPU per delivery: Herald (Redis's as baseline)",
    herald: m(samples.deliveryCpuMs),
    baseline: m(samples.deliveryRedisCpuMs),
    ratio: null,
    unit: 'ms',
    target: '—',
    met: null,
  });
  add({
    figure: '6b. the warm-up run (delivery path not yet optimized by V8)',
    herald: m(samples.coldDeliveriesPerSec),
    baseline: null,
    ratio: null,
    unit: 'deliveries/s',
    target: '—',
    met: null,
  });
  const ev = m(samples.eventsPerSec);
  add({
    figure: `6c. ${s.events} incident events to an event endpoint, one worker (replay → last arrival)`,
    herald: ev,
    baseline: null,
    ratio: null,
    unit: 'events/s',
    target: '≥ 1,500/s',
    met: ev === null ? null : ev >= 1500,
  });
  // Not targets: what keeping a record per delivery costs on this machine, whatever else is done.
  for (const [label, samplesOf] of [
    [
      "6d. the bookkeeping floor: the loop's posts, each with a record read, marked sending and recorded by compare-and-set (baseline: the loop; ratio = floor/loop, lowest round)",
      samples.floorEachPerSec,
    ],
    ['6e. … the same records read and written 25 at a time', samples.floorBatchPerSec],
  ] as const)
    add({
      figure: label,
      herald: m(samplesOf),
      baseline: dl,
      ratio: lowestRatio(samplesOf, samples.loopPostsPerSec),
      unit: 'deliveries/s',
      target: '—',
      met: null,
    });
  // Herald set against the floor of 6d in each round: how much of the loop-plus-a-record rate its
  // deliveries keep, doing everything else besides (the worst round, as row 6 reports its own).
  add({
    figure: '6f. … Herald against the floor one at a time (baseline: 6d; ratio = Herald/floor, lowest round)',
    herald: d,
    baseline: m(samples.floorEachPerSec),
    ratio: lowestRatio(samples.deliveriesPerSec, samples.floorEachPerSec),
    unit: 'deliveries/s',
    target: '—',
    met: null,
  });
  const bh = m(samples.bytesPerIncident);
  const braw = m(samples.rawIncidentBytes);
  add({
    figure: '7. Redis bytes per incident (500-char description; baseline = its JSON)',
    herald: bh,
    baseline: braw,
    ratio: div(bh, braw),
    unit: 'B',
    target: '≤ 1.2 KiB (1,229 B)',
    met: bh === null ? null : bh <= 1.2 * 1024,
  });
  const last = (xs: number[]) => (xs.length === 0 ? null : (xs[xs.length - 1] ?? null));
  // Not targets: what a container's memory must hold (docs/performance.md, "Memory in a container").
  const rssRows = [
    [`8. Herald RSS after the run (at rest, ${s.restMs / 1000} s after the last delivery)`, samples.rssMB],
    ['8a. Herald RSS at the last delivery (under load)', samples.rssUnderLoadMB],
    ['8b. Herald peak RSS over the run (VmHWM)', samples.peakRssMB],
  ] as const;
  for (const [figure, series] of rssRows)
    add({ figure, herald: last(series), baseline: null, ratio: null, unit: 'MB', target: '—', met: null });
  if (s.cgroupMb !== null) {
    const peak = samples.cgroupPeakMB.length === 0 ? null : Math.max(...samples.cgroupPeakMB);
    const kills = last(samples.cgroupOomKills);
    add({
      figure: `8c. memory cgroup of ${s.cgroupMb} MiB: peak charge over the rounds (OOM kills ${kills ?? '?'}, limit reached ${last(samples.cgroupLimitHits) ?? '?'} times)`,
      herald: peak,
      baseline: null,
      ratio: null,
      unit: 'MB',
      target: 'no OOM kill',
      met: kills === null ? null : kills === 0,
    });
  }
  const ready = m(samples.readyMs);
  add({
    figure: '9. spawn → first 200 from /readyz (external Redis)',
    herald: ready === null ? null : ready / 1000,
    baseline: null,
    ratio: null,
    unit: 's',
    target: '≤ 1.5 s',
    met: ready === null ? null : ready <= 1500,
  });
  const cli = m(samples.cliMs);
  const bare = m(samples.nodeMs);
  add({
    figure: `10. CLI keys list (baseline: node -e '', medians of ${s.cliRuns})`,
    herald: cli,
    baseline: bare,
    ratio: div(cli, bare),
    unit: 'ms',
    target: '≤ 300 ms',
    met: cli === null ? null : cli <= 300,
  });

  const statusRows: Array<['summary' | 'page', string]> = [
    ['summary', '11. status page GET /status/api/v2/summary.json (baseline: the same bytes, static)'],
    ['page', '11a. status page GET /status, HTML (baseline: the same bytes, static)'],
  ];
  for (const [key, label] of statusRows)
    figures.push(
      ...loadFigures(
        `${label}, req/s (${s.apiConnections} conns)`,
        samples.status[key],
        0.8,
        `${label.split(' (')[0]}, p99`,
        null,
      ),
    );
  const vis = m(samples.statusVisibleMs);
  add({
    figure: `11b. status page: execute's 202 → the update in summary.json (median of ${s.statusPublishes})`,
    herald: vis === null ? null : vis / 1000,
    baseline: null,
    ratio: null,
    unit: 's',
    target: '≤ 1 s',
    met: vis === null ? null : vis <= 1000,
  });

  for (const f of s.extra) add(f);

  const fmt = (v: number | null, unit: string): string => {
    if (v === null || !Number.isFinite(v)) return '—';
    switch (unit) {
      case 'req/s':
      case 'deliveries/s':
      case 'events/s':
        return `${Math.round(v).toLocaleString('en-US')}/s`;
      case 'ms':
        return v < 10 ? `${v.toFixed(3)} ms` : `${v.toFixed(1)} ms`;
      case 's':
        return `${v.toFixed(3)} s`;
      case 'B':
        return `${Math.round(v).toLocaleString('en-US')} B`;
      case 'MB':
        return `${v.toFixed(1)} MB`;
      case 'µs':
        return `${Math.round(v)} µs`;
      default:
        return String(v);
    }
  };
  const lines = ['| figure | Herald | baseline | ratio | target | met? |', '|---|---:|---:|---:|---|:---:|'];
  for (const f of figures) {
    const ratio = f.ratio === null || !Number.isFinite(f.ratio) ? '—' : `${f.ratio.toFixed(2)}×`;
    const met = f.met === null ? (f.target === '—' ? '—' : 'n/a') : f.met ? 'yes' : 'NO';
    lines.push(
      `| ${f.figure} | ${fmt(f.herald, f.unit)} | ${fmt(f.baseline, f.unit)} | ${ratio} | ${f.target} | ${met} |`,
    );
  }
  return { figures, table: lines.join('\n') };
}
