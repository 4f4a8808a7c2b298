import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHerald, type TestHerald } from '../support/herald.js';
import { Starvation } from '../support/starvation.js';
import { waitFor } from '../support/wait.js';
import { recordingSenders, startPrivateRedis, type PrivateRedis } from './support.js';

/**
 * A stalled Redis (SIGSTOP: a stuck primary or a partition looks like this) on a loaded machine:
 * every class of request is answered within 2 s of its arrival, or of the stop for one already
 * under way (see fireContinuously), because one deadline covers all of a request's Redis calls (a
 * time-out per command added up over two or three calls, to 2.3 s).
 *
 * The load: two CPU-bound processes beside the test, on a machine whose cores are already shared.
 * Every answer is timed by the client, in this process, which also runs Herald; MARGIN_MS is the
 * client's own share of that: the fetch and the event loop turn that reads the answer. The server
 * answers by 1.2 s (REQUEST_ANSWER_BOUND_MS), so the bound tested is what a client sees. Slack's
 * endpoint has its own bound (its 3 s ack, with a friendly line; redis-outage.test.ts) and is not
 * fired here.
 *
 * What no margin covers is a machine so busy that this process is not run at all for a while (the
 * burners beside another test run took it past any fixed margin, even for requests Redis answered
 * at once): each answer's time leaves out the stretches in which this process' event loop could not
 * run (Starvation). What the test is after — waits on Redis that add up past the deadline — is time
 * in which the loop is free, so it still counts in full.
 */
const BOUND_MS = 2000;
const MARGIN_MS = 150;
/** Requests of each class in flight at once: enough that some are caught mid-way by the stop. */
const LOOPS_PER_CLASS = 2;
/** Stalls in a row: each catches other requests mid-way. */
const STALLS = 4;

let redis: PrivateRedis;
let h: TestHerald;
let readToken: string;
const burners: ChildProcess[] = [];
const acknowledged: string[] = [];
const slowest: Record<string, number> = {};

beforeAll(async () => {
  redis = await startPrivateRedis();
  h = await startHerald(
    {
      HERALD_RATE_LIMIT: '100000',
      HERALD_EXECUTE_RATE_LIMIT: '100000',
    },
    { redisUrl: redis.url, senders: recordingSenders().senders, worker: true },
  );
  readToken = await h.tokenWith(['incidents:read', 'templates:read']);
  const c = await h.api('POST', '/v1/connections', {
    body: { name: 'sink', type: 'webhook', config: { url: 'http://127.0.0.1:9/hook' } },
  });
  expect(c.status).toBe(201);
  for (let i = 0; i < 2; i++) {
    const inc = await h.api('POST', '/v1/incidents', { body: { title: `before the stall ${i}`, severity: 'major' } });
    expect(inc.status).toBe(201);
    acknowledged.push(inc.body.id as string);
  }
}, 60_000);

afterAll(async () => {
  for (const b of burners) b.kill('SIGKILL');
  redis?.resume();
  await h?.close().catch(() => undefined);
  await redis?.close();
  console.info(
    `slowest answer per request class while Redis was stalled, ms from its arrival or the last stop or resume: ${JSON.stringify(slowest)}`,
  );
});

type Send = () => Promise<{ status: number; type: string | null; retryAfter: string | null; code: unknown }>;

function requestClasses(): [string, Send][] {
  const id = acknowledged[0]!;
  const api =
    (method: string, path: string, opts: Parameters<TestHerald['api']>[2] = {}): Send =>
    async () => {
      const r = await h.api(method, path, opts);
      return {
        status: r.status,
        type: r.headers.get('content-type'),
        retryAfter: r.headers.get('retry-after'),
        code: (r.body as { code?: unknown } | undefined)?.code,
      };
    };
  return [
    ['auth only (read-only key)', api('GET', '/v1/templates', { token: readToken })],
    ['get one', api('GET', `/v1/incidents/${id}`)],
    ['list', api('GET', '/v1/incidents?limit=5')],
    [
      'create',
      () =>
        api('POST', '/v1/incidents', {
          body: { title: 'during the stall', severity: 'minor' },
          headers: { 'Idempotency-Key': `stall-${randomBytes(4).toString('hex')}` },
        })(),
    ],
    ['patch', api('PATCH', `/v1/incidents/${id}`, { body: { impact: 'during the stall' } })],
    ['execute', api('POST', `/v1/incidents/${id}/execute`, { body: {} })],
    ['readyz', api('GET', '/readyz', { token: null })],
  ];
}

/** Whether the process is stopped by a signal (state T in /proc/<pid>/stat). */
function stopped(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).startsWith('T');
}

/**
 * When Redis stopped or came back (performance.now(), the moment the test signalled it), in order.
 * A request under way at such a moment is timed from it (see fireContinuously).
 */
const changes: { at: number; what: 'stop' | 'resume' }[] = [];

interface Answer {
  name: string;
  /**
   * From its arrival, or from the last stop or resume while it was under way (`from`), less the
   * stretches in which this process could not run (`starved`).
   */
  ms: number;
  starved: number;
  from: 'arrival' | 'stop' | 'resume';
  /**
   * Sent and answered while Redis was stopped (else it may have been caught mid-way by the stop,
   * or answered once Redis was back): it must be a 503.
   */
  afterStop: boolean;
  status: number;
  type: string | null;
  retryAfter: string | null;
  code: unknown;
}

/**
 * Every request class, LOOPS_PER_CLASS loops each, sending one request after another until
 * `stop()`: some are caught mid-way by the SIGSTOP (their first calls answered, the next ones not), which is
 * where time-outs per command added up.
 *
 * What is promised is that no request waits more than 2 s on a stalled Redis, so each answer is
 * timed from the request's arrival or from the last stop or resume of Redis while it was under
 * way, whichever came last. A request already some way into its work when Redis stops is answered
 * within 2 s of the stop (a stall is only seen once Redis has been silent for 0.5 s, so one begun
 * late in a request's life cannot be answered 2 s after its arrival); one that waited through a
 * stall and is served once Redis is back, within 2 s of the resume, like any request served on this
 * loaded machine. Time-outs per command that add up still show: they run from the arrival, with no
 * stop or resume in between.
 */
function fireContinuously(
  stall: () => number | null,
  starvation: Starvation,
): { answers: Answer[]; stop(): Promise<void> } {
  const answers: Answer[] = [];
  let running = true;
  const loops = Array.from({ length: LOOPS_PER_CLASS }, requestClasses)
    .flat()
    .map(async ([name, send]) => {
      while (running) {
        const sentIn = stall();
        const start = performance.now();
        const r = await send();
        const end = performance.now();
        const last = changes.findLast((c) => c.at > start && c.at <= end);
        // Counted as answered during the stall only if Redis is still stopped when it comes, in the
        // same stall: one sent near a stall's end may be answered after the resume, as the next
        // stall begins.
        const afterStop = sentIn !== null && stall() === sentIn;
        const from = last?.at ?? start;
        const starved = Math.round(starvation.within(from, end));
        answers.push({
          name,
          ms: Math.round(end - from) - starved,
          starved,
          from: last?.what ?? 'arrival',
          afterStop,
          ...r,
        });
      }
    });
  return {
    answers,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

function expectWithinBound(answers: readonly Answer[]): void {
  for (const r of answers) slowest[r.name] = Math.max(slowest[r.name] ?? 0, r.ms);
  slowest['(most time one answer could not run)'] = Math.max(0, ...answers.map((r) => r.starved));
  for (const r of answers) {
    expect(
      r.ms,
      `${r.name} (${r.status}, sent ${r.afterStop ? 'after' : 'before'} the stop) answered ${r.ms} ms after its ${r.from}` +
        ` (and ${r.starved} ms in which this process could not run)`,
    ).toBeLessThanOrEqual(BOUND_MS + MARGIN_MS);
    if (!r.afterStop && r.status < 500) continue;
    expect(r.status, r.name).toBe(503);
    if (r.name === 'readyz') continue;
    expect(r.type, r.name).toMatch(/^application\/problem\+json/);
    expect(r.code, r.name).toBe('service_unavailable');
    expect(Number(r.retryAfter), r.name).toBeGreaterThan(0);
  }
}

describe('Redis stalled (SIGSTOP) on a loaded machine', () => {
  it('answers every request class within 2 s, each time, then recovers', { timeout: 120_000 }, async () => {
    for (let i = 0; i < 2; i++) burners.push(spawn(process.execPath, ['-e', 'for(;;){}'], { stdio: 'ignore' }));
    /** The number of the stall Redis is in, or null while it runs. */
    let paused: number | null = null;
    const starvation = new Starvation();
    const firing = fireContinuously(() => paused, starvation);
    try {
      for (let stall = 0; stall < STALLS; stall++) {
        // Stopped while requests are in flight, then kept stalled until every class has been
        // answered several times since; then resumed until Herald answers normally again.
        const before = firing.answers.length;
        await waitFor(() => firing.answers.length >= before + 30, {
          timeoutMs: 30_000,
          what: 'requests before the stall',
        });
        const since = firing.answers.length;
        changes.push({ at: performance.now(), what: 'stop' });
        redis.pause();
        // SIGSTOP lands asynchronously: only what is sent once the process is stopped counts as
        // sent during the stall (Redis may still answer a command or two before).
        await waitFor(() => stopped(redis.proc.pid), { timeoutMs: 10_000, intervalMs: 5, what: 'redis stopped' });
        paused = stall;
        await waitFor(
          () =>
            requestClasses().every(
              ([name]) => firing.answers.slice(since).filter((a) => a.name === name && a.afterStop).length >= 6,
            ),
          { timeoutMs: 60_000, intervalMs: 100, what: 'every class answered during the stall' },
        );
        paused = null;
        changes.push({ at: performance.now(), what: 'resume' });
        redis.resume();
        await waitFor(async () => (await h.api('GET', '/readyz', { token: null })).status === 200, {
          timeoutMs: 30_000,
          intervalMs: 100,
          what: 'readyz 200 after the stall',
        });
      }
    } finally {
      redis.resume();
      for (const b of burners.splice(0)) b.kill('SIGKILL');
      await firing.stop();
      starvation.stop();
    }
    expectWithinBound(firing.answers);
    await waitFor(async () => (await h.api('GET', '/readyz', { token: null })).status === 200, {
      timeoutMs: 30_000,
      intervalMs: 100,
      what: 'readyz 200 after the stall',
    });
    for (const id of acknowledged) expect((await h.api('GET', `/v1/incidents/${id}`)).status).toBe(200);
    const after = await h.api('POST', '/v1/incidents', { body: { title: 'after the stall', severity: 'minor' } });
    expect(after.status).toBe(201);
  });
});
