import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHILD_DEADLINE_MS, childEnv, spawnEntry, stopChild, type Child } from '../support/child.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { startHttpSink, type HttpSink } from '../support/peers/http-sink.js';
import { testRedisUrl } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/**
 * docs/explanation/delivery-semantics.md: "a process killed at any point loses no delivery". An API-only Herald takes
 * the execute; a separate worker process (the real `npm start` entry, HERALD_ROLE=worker) sends to a
 * slow sink and is SIGKILLed mid-fan-out; a second worker finishes, and every delivery arrives.
 */
const CONNECTIONS = 300;
const secretKey = randomBytes(32).toString('base64');
let h: TestHerald;
let sink: HttpSink;
const workers: Child[] = [];

function startWorker(): Child {
  const child = spawnEntry(
    'main',
    [],
    childEnv({
      HERALD_ROLE: 'worker',
      REDIS_URL: testRedisUrl(),
      HERALD_KEY_PREFIX: h.prefix,
      HERALD_SECRET_KEY: secretKey,
      HERALD_OUTBOUND_ALLOW: '127.0.0.1/32',
      HERALD_JOB_LOCK_MS: '2000',
      HERALD_WORKER_CONCURRENCY: '25',
      HERALD_DATA_DIR: h.dataDir,
      // info: the start-up line tells "still starting" from "started and stuck".
      LOG_LEVEL: 'info',
    }),
  );
  workers.push(child);
  return child;
}

/**
 * Starts a worker and waits until it says it runs: on a busy machine a cold start can take many
 * seconds, and that time is not the fan-out's. The fan-out then has `underWayMs` to reach `n`
 * sends, and a failure shows the worker's own output.
 */
async function startedWorker(sent: () => number, n: number, underWayMs = 30_000): Promise<Child> {
  const w = startWorker();
  const tail = () => `worker output:\n${w.stdout().slice(-3000)}\n${w.stderr().slice(-3000)}`;
  await waitFor(() => w.stdout().includes('Herald running (role worker'), {
    timeoutMs: CHILD_DEADLINE_MS,
    what: 'the worker to start',
  }).catch((e: unknown) => {
    throw new Error(`${(e as Error).message}\n${tail()}`);
  });
  await waitFor(() => sent() >= n, { timeoutMs: underWayMs, what: `${n} sends under way` }).catch((e: unknown) => {
    throw new Error(`${(e as Error).message} (${sent()} so far)\n${tail()}`);
  });
  return w;
}

/** Waits until every delivery of the execution is delivered; answers the execution. */
async function allDelivered(incidentId: string, executionId: string, what: string, timeoutMs = 60_000) {
  return waitFor(
    async () => {
      const e = (await h.api('GET', `/v1/incidents/${incidentId}/executions/${executionId}`)).body;
      return e.status === 'delivered' ? e : undefined;
    },
    { timeoutMs, intervalMs: 250, what },
  );
}

beforeAll(async () => {
  // Every answer takes 150 ms: the fan-out is still running when the worker is killed.
  sink = await startHttpSink({ respond: () => ({ status: 200, delayMs: 150 }) });
  h = await startHerald({ HERALD_SECRET_KEY: secretKey, HERALD_RATE_LIMIT: '100000' }, { worker: false });
  for (let i = 0; i < CONNECTIONS; i++) {
    const r = await h.api('POST', '/v1/connections', {
      body: { name: `sink ${i}`, type: 'webhook', config: { url: `${sink.url}/hook/${i}` } },
    });
    expect(r.status).toBe(201);
  }
});
afterAll(async () => {
  for (const w of workers) await stopChild(w);
  await sink.close();
  await h.close();
});

describe('a worker killed with SIGKILL mid-fan-out', () => {
  it('loses no delivery: the restarted worker completes every one', { timeout: 180_000 }, async () => {
    const { body: inc } = await h.api('POST', '/v1/incidents', {
      body: { title: 'Fan-out under fire', severity: 'critical' },
    });
    const exe = await h.api('POST', `/v1/incidents/${inc.id}/execute`, { body: {} });
    expect(exe.status).toBe(202);
    expect(exe.body.deliveries).toHaveLength(CONNECTIONS);

    const first = await startedWorker(() => sink.requests.length, 60);
    first.proc.kill('SIGKILL');
    await first.exited;
    const receivedBeforeKill = sink.requests.length;
    expect(receivedBeforeKill).toBeLessThan(CONNECTIONS);

    const second = startWorker();
    const done = await allDelivered(inc.id, exe.body.id, 'every delivery delivered after the restart', 60_000);
    await stopChild(second);
    expect(done.deliveries).toHaveLength(CONNECTIONS);
    expect(done.deliveries.every((d: { status: string }) => d.status === 'delivered')).toBe(true);
    // Every delivery reached the sink (webhook-id = delivery id), none is missing.
    const seen = new Set(sink.requests.map((r) => r.headers['webhook-id']));
    for (const d of done.deliveries) expect(seen.has(d.id)).toBe(true);
    // The kill hit mid-send: those attempts are on record as interrupted.
    expect(
      done.deliveries.some((d: { attempts: { outcome: string }[] }) =>
        d.attempts.some((a) => a.outcome === 'interrupted'),
      ),
    ).toBe(true);
    // Sends cut off by the kill were retried and flagged, never silently repeated.
    const repeated = new Set(
      sink.requests.map((r) => r.headers['webhook-id']).filter((id, i, all) => all.indexOf(id) !== i),
    );
    for (const d of done.deliveries) if (repeated.has(d.id)) expect(d.possible_duplicate).toBe(true);
  });
});

describe('a worker stopped with SIGTERM mid-fan-out', () => {
  it(
    'finishes the sends it started, exits 0 within 10 s, and leaves the rest queued for the next worker',
    { timeout: 180_000 },
    async () => {
      const { body: inc } = await h.api('POST', '/v1/incidents', {
        body: { title: 'Rolling deploy', severity: 'major' },
      });
      const exe = await h.api('POST', `/v1/incidents/${inc.id}/execute`, { body: {} });
      expect(exe.status).toBe(202);
      const ids = new Set<string>(exe.body.deliveries.map((d: { id: string }) => d.id));
      const ours = () => sink.requests.filter((r) => ids.has(String(r.headers['webhook-id'])));

      const first = await startedWorker(() => ours().length, 60);
      const stoppedAt = Date.now();
      first.proc.kill('SIGTERM');
      expect(await first.exited).toBe(0);
      expect(Date.now() - stoppedAt).toBeLessThan(10_000);

      // Nothing was left half-sent: every send it started was recorded before it exited.
      const after = (await h.api('GET', `/v1/incidents/${inc.id}/executions/${exe.body.id}`)).body;
      expect(after.deliveries.filter((d: { status: string }) => d.status === 'sending')).toEqual([]);
      expect(ours().length).toBeLessThan(CONNECTIONS);

      startWorker();
      const done = await allDelivered(inc.id, exe.body.id, 'every delivery delivered by the next worker', 60_000);
      // A graceful stop cuts nothing off: one attempt each, no duplicates, nothing flagged.
      for (const d of done.deliveries) {
        expect(d.attempts.map((a: { outcome: string }) => a.outcome)).toEqual(['delivered']);
        expect(d.possible_duplicate).toBe(false);
      }
      expect(ours()).toHaveLength(CONNECTIONS);
    },
  );
});

describe('two workers sharing an execute', () => {
  it(
    "send each delivery exactly once: a dispatch job's deliveries are its worker's alone",
    { timeout: 180_000 },
    async () => {
      // Only these two run: the previous test's worker is stopped first.
      for (let w = workers.pop(); w; w = workers.pop()) await stopChild(w);
      const { body: inc } = await h.api('POST', '/v1/incidents', { body: { title: 'Two workers', severity: 'major' } });
      const exe = await h.api('POST', `/v1/incidents/${inc.id}/execute`, { body: {} });
      expect(exe.status).toBe(202);
      const ids = new Set<string>(exe.body.deliveries.map((d: { id: string }) => d.id));
      const ours = () => sink.requests.filter((r) => ids.has(String(r.headers['webhook-id'])));
      startWorker();
      startWorker();
      const done = await allDelivered(inc.id, exe.body.id, 'every delivery delivered by the two workers', 90_000);
      // 300 deliveries are six dispatch jobs of 50; whichever worker took one, each delivery went once.
      expect(ours()).toHaveLength(CONNECTIONS);
      expect(new Set(ours().map((r) => r.headers['webhook-id'])).size).toBe(CONNECTIONS);
      for (const d of done.deliveries) {
        expect(d.attempts.map((a: { outcome: string }) => a.outcome)).toEqual(['delivered']);
        expect(d.possible_duplicate).toBe(false);
      }
    },
  );
});
