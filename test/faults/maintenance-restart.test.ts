import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHILD_DEADLINE_MS, childEnv, spawnEntry, stopChild, type Child } from '../support/child.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { testRedisUrl } from '../support/redis.js';
import { waitFor } from '../support/wait.js';
import { startHttpSink, type HttpSink } from '../support/peers/http-sink.js';

/**
 * A maintenance's automatic steps across a worker restart, process level (the real
 * `dist/main.js`; `npm test` builds it first). An API-only Herald in this process schedules a
 * maintenance a few seconds ahead; a worker process posts its reminder and is SIGKILLed before
 * the start. A new worker (and, for the end, a second one beside it) takes the start and the
 * end: each step happens exactly once, not before its time, and within a generous bound after
 * it (a busy machine starts processes slowly; a step that is late still runs, once).
 */
const secretKey = randomBytes(32).toString('base64');
/** How late a step may be: a worker's start-up on a loaded 2-core machine, plus the loop's period. */
const LATE_BOUND_MS = 60_000;
let h: TestHerald;
let sink: HttpSink;
const children: Child[] = [];

async function startedWorker(): Promise<Child> {
  const w = spawnEntry(
    'main',
    [],
    childEnv({
      HERALD_ROLE: 'worker',
      REDIS_URL: testRedisUrl(),
      HERALD_KEY_PREFIX: h.prefix,
      HERALD_SECRET_KEY: secretKey,
      HERALD_DATA_DIR: h.dataDir,
      HERALD_OUTBOUND_ALLOW: '127.0.0.1/32',
      LOG_LEVEL: 'info',
    }),
  );
  children.push(w);
  await waitFor(() => w.stdout().includes('Herald running (role worker'), {
    timeoutMs: CHILD_DEADLINE_MS,
    what: 'the worker to start',
  }).catch((e: unknown) => {
    throw new Error(`${(e as Error).message}\n${w.stdout().slice(-3000)}\n${w.stderr().slice(-3000)}`);
  });
  return w;
}

beforeAll(async () => {
  sink = await startHttpSink();
  h = await startHerald({ HERALD_SECRET_KEY: secretKey }, { worker: false });
  // Integrators hear of every step: the workers' dispatcher sends the maintenance events here.
  const endpoint = await h.api('POST', '/v1/event-endpoints', {
    body: { url: `${sink.url}/events`, event_types: ['maintenance.*'] },
  });
  expect(endpoint.status, endpoint.text).toBe(201);
}, 120_000);

afterAll(async () => {
  for (const c of children) await stopChild(c);
  await h?.close();
  await sink?.close();
});

interface MaintenanceView {
  id: string;
  status: string;
  scheduled_for: string;
  scheduled_until: string;
  started_at: string | null;
  completed_at: string | null;
  reminded_at: string | null;
  updates: { kind: string; status: string; created_at: string }[];
}

/**
 * The maintenance's events as the endpoint received them, one per event id (a send cut off by a
 * kill may be repeated: at least once is the events' promise, the event itself is one).
 */
function eventTypes(id: string): string[] {
  const byId = new Map<string, string>();
  for (const r of sink.requests) {
    const e = r.body as { id?: string; type?: string; data?: { maintenance_id?: string } };
    if (e.id && e.type && e.data?.maintenance_id === id) byId.set(e.id, e.type);
  }
  return [...byId.values()];
}

describe('a maintenance across a worker SIGKILL and restart', () => {
  it('posts the reminder, starts and completes, each exactly once and on time', async () => {
    const first = await startedWorker();
    const component = (await h.api('POST', '/v1/components', { body: { name: 'Database' } })).body.id as string;
    // Far enough ahead that the kill surely comes before it; the reminder (one minute before) is due at once.
    const start = Date.now() + 10_000;
    const created = await h.api('POST', '/v1/maintenances', {
      body: {
        title: 'Database upgrade',
        components: [component],
        scheduled_for: new Date(start).toISOString(),
        scheduled_until: new Date(start + 6000).toISOString(),
        remind_before: 1,
      },
    });
    expect(created.status, created.text).toBe(201);
    const id = created.body.id as string;
    const get = async () => (await h.api('GET', `/v1/maintenances/${id}`)).body as MaintenanceView;

    const reminded = await waitFor(async () => ((await get()).reminded_at !== null ? get() : false), {
      timeoutMs: 30_000,
      what: 'the reminder',
    });
    first.proc.kill('SIGKILL');
    await first.exited;
    // The kill came before the start: the new worker has to take it.
    expect(reminded.status).toBe('scheduled');
    expect(Date.now()).toBeLessThan(start);

    await startedWorker();
    const running = await waitFor(async () => ((await get()).started_at !== null ? get() : false), {
      timeoutMs: LATE_BOUND_MS + 30_000,
      what: 'the start',
    });
    // A second worker beside it: the end is taken by whichever comes first, once.
    await startedWorker();
    const done = await waitFor(async () => ((await get()).status === 'completed' ? get() : false), {
      timeoutMs: LATE_BOUND_MS + 30_000,
      what: 'the end',
    });

    const startedAt = Date.parse(running.started_at!);
    expect(startedAt).toBeGreaterThanOrEqual(start);
    expect(startedAt - start).toBeLessThan(LATE_BOUND_MS);
    const completedAt = Date.parse(done.completed_at!);
    const until = Date.parse(done.scheduled_until);
    expect(completedAt).toBeGreaterThanOrEqual(until);
    expect(completedAt - until).toBeLessThan(LATE_BOUND_MS);
    expect(done.updates.map((u) => `${u.kind}:${u.status}`)).toEqual([
      'reminder:scheduled',
      'transition:in_progress',
      'transition:completed',
    ]);
    expect((await h.api('GET', `/v1/components/${component}`)).body.status).toBe('operational');

    // Every event reaches the endpoint; a few more loop periods of the two workers add nothing.
    await waitFor(() => eventTypes(id).length >= 6, { timeoutMs: 60_000, what: 'the six events' });
    const settled = Date.now() + 3000;
    await waitFor(() => Date.now() > settled, { timeoutMs: 10_000 });
    expect((await get()).updates).toHaveLength(3);
    const types = eventTypes(id);
    expect(types).toHaveLength(6);
    expect(types.filter((t) => t === 'maintenance.status_changed')).toHaveLength(2);
    expect(types.filter((t) => t === 'maintenance.updated')).toHaveLength(3);
    expect(types.filter((t) => t === 'maintenance.created')).toHaveLength(1);
  }, 300_000);
});
