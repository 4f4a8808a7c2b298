import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHILD_DEADLINE_MS, childEnv, ROOT, spawnEntry, stopChild, type Child } from '../support/child.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { startHttpSink, type HttpSink } from '../support/peers/http-sink.js';
import { testRedisUrl } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/**
 * docs/explanation/living-updates.md, process level: an API-only Herald takes the execute with
 * `next_update_in`; a separate worker process (the real `npm start` entry, HERALD_ROLE=worker)
 * records the overdue reminders every HERALD_REMINDER_REPEAT. The worker is SIGKILLed after
 * reminder 1 and a new one carries on with reminder 2 — no number repeated, none skipped; a
 * resolve then stops the reminders and drops the incident from the schedule.
 *
 * The workers run dist/main.js, which `npm test` builds first. HERALD_TEST_MAIN may point at
 * another build of src/main.ts (inside the project, so node_modules resolve) when dist/ is shared
 * and must not be rebuilt under others' feet.
 */
const REPEAT_MS = 10_000;
const secretKey = randomBytes(32).toString('base64');
let h: TestHerald;
let sink: HttpSink;
const workers: Child[] = [];

function spawnMain(env: NodeJS.ProcessEnv): Child {
  const main = process.env.HERALD_TEST_MAIN;
  if (main === undefined || main === '') return spawnEntry('main', [], env);
  const proc = spawn(process.execPath, [main], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  proc.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
  proc.stderr.on('data', (c: Buffer) => (err += c.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => proc.on('close', (code) => resolve(code)));
  return { proc, stdout: () => out, stderr: () => err, exited };
}

/** Starts a worker process and waits until it says it runs (a cold start on a busy machine takes seconds). */
async function startedWorker(): Promise<{ worker: Child; startMs: number }> {
  const t0 = Date.now();
  const w = spawnMain(
    childEnv({
      HERALD_ROLE: 'worker',
      REDIS_URL: testRedisUrl(),
      HERALD_KEY_PREFIX: h.prefix,
      HERALD_SECRET_KEY: secretKey,
      HERALD_OUTBOUND_ALLOW: '127.0.0.1/32',
      HERALD_DATA_DIR: h.dataDir,
      HERALD_REMINDER_REPEAT: '10s',
      LOG_LEVEL: 'info',
    }),
  );
  workers.push(w);
  await waitFor(() => w.stdout().includes('Herald running (role worker'), {
    timeoutMs: CHILD_DEADLINE_MS,
    what: 'the worker to start',
  }).catch((e: unknown) => {
    throw new Error(`${(e as Error).message}\n${tail(w)}`);
  });
  return { worker: w, startMs: Date.now() - t0 };
}

const tail = (w: Child): string => `worker output:\n${w.stdout().slice(-3000)}\n${w.stderr().slice(-3000)}`;

interface Event {
  id: string;
  type: string;
  at: string;
  actor: { type: string; id: string; name: string };
  data: Record<string, unknown>;
}

/** The whole timeline, through every page. */
async function timeline(incidentId: string): Promise<Event[]> {
  const out: Event[] = [];
  let cursor: string | null = null;
  for (;;) {
    const r = await h.api(
      'GET',
      `/v1/incidents/${incidentId}/events?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
    );
    expect(r.status).toBe(200);
    out.push(...(r.body.data as Event[]));
    cursor = r.body.pagination?.next_cursor ?? null;
    if (!cursor) return out;
  }
}

const overdue = (events: Event[]) => events.filter((e) => e.type === 'incident.update_overdue');
const numbers = (events: Event[]) => overdue(events).map((e) => e.data.reminder as number);

beforeAll(async () => {
  // The workers run a build of src/: one from before the update cadence has no reminders at all.
  const built = process.env.HERALD_TEST_MAIN
    ? join(process.env.HERALD_TEST_MAIN, '..', 'delivery', 'sweep-loop.js')
    : join(ROOT, 'dist', 'delivery', 'sweep-loop.js');
  if (!existsSync(built))
    throw new Error(`${built} is missing: the build predates the update cadence (run \`npm run build\`)`);
  sink = await startHttpSink();
  h = await startHerald(
    { HERALD_ROLE: 'api', HERALD_SECRET_KEY: secretKey, HERALD_REMINDER_REPEAT: '10s', HERALD_RATE_LIMIT: '100000' },
    { worker: false },
  );
  const con = await h.api('POST', '/v1/connections', {
    body: { name: 'status webhook', type: 'webhook', config: { url: `${sink.url}/hook` } },
  });
  expect(con.status).toBe(201);
});
afterAll(async () => {
  for (const w of workers) await stopChild(w);
  await sink?.close();
  await h?.close();
});

describe('next_update_in validation', () => {
  it.each(['30s', '0m', '59s', '25h', '1441m', '1d', 'soon', '', 15])(
    'next_update_in %j is refused with 422 on that field, and nothing is executed',
    async (value) => {
      const { body: inc } = await h.api('POST', '/v1/incidents', { body: { title: 'Bad cadence', severity: 'minor' } });
      const r = await h.api('POST', `/v1/incidents/${inc.id}/execute`, { body: { next_update_in: value } });
      expect(r.status).toBe(422);
      expect(r.body.code).toBe('validation_failed');
      // One error, on that field: a malformed value is not also judged by the 1m–24h range.
      const fields: string[] = r.body.errors.map((e: { field: string }) => e.field);
      expect(fields).toEqual(['next_update_in']);
      const after = (await h.api('GET', `/v1/incidents/${inc.id}`)).body;
      expect(after.execution_count).toBe(0);
      expect(after.next_update_due_at).toBeNull();
      expect(await h.herald.redis.zscore(`{${h.prefix}}:reminders`, inc.id)).toBeNull();
    },
  );

  it.each(['1m', '24h', '1440m'])('next_update_in %j (the bounds) is accepted as a dry run', async (value) => {
    const { body: inc } = await h.api('POST', '/v1/incidents', { body: { title: 'Edge cadence', severity: 'minor' } });
    const r = await h.api('POST', `/v1/incidents/${inc.id}/execute?dry_run=true`, { body: { next_update_in: value } });
    expect(r.status).toBe(200);
  });
});

describe('the update cadence across worker processes', () => {
  it(
    'reminds once per interval, survives a SIGKILLed worker without a repeated number, and stops on resolve',
    { timeout: 300_000 },
    async () => {
      const first = await startedWorker();
      const { body: inc } = await h.api('POST', '/v1/incidents', {
        body: { title: 'Payments degraded', severity: 'critical' },
      });
      const before = Date.now();
      const exe = await h.api('POST', `/v1/incidents/${inc.id}/execute`, { body: { next_update_in: '1m' } });
      const after = Date.now();
      expect(exe.status).toBe(202);

      // The due time: a minute from the execute.
      const shown = (await h.api('GET', `/v1/incidents/${inc.id}`)).body;
      const due = Date.parse(shown.next_update_due_at);
      expect(due).toBeGreaterThanOrEqual(before + 60_000);
      expect(due).toBeLessThanOrEqual(after + 60_000);
      const scheduleKey = `{${h.prefix}}:reminders`;
      expect(Number(await h.herald.redis.zscore(scheduleKey, inc.id))).toBe(due);
      // The worker delivers the execute itself to the webhook meanwhile.
      await sink.waitForRequests(1, 60_000);

      // Reminder 1, after the due time (not before it).
      const firstReminder = await waitFor(
        async () => {
          const evs = overdue(await timeline(inc.id));
          return evs.length > 0 ? evs : undefined;
        },
        { timeoutMs: 120_000, intervalMs: 250, what: 'reminder 1 (incident.update_overdue)' },
      ).catch((e: unknown) => {
        throw new Error(`${(e as Error).message}\n${tail(first.worker)}`);
      });
      const seenAt = Date.now();
      expect(firstReminder).toHaveLength(1);
      const r1 = firstReminder[0]!;
      expect(r1.data).toMatchObject({ due_at: shown.next_update_due_at, reminder: 1 });
      expect(Date.parse(r1.at)).toBeGreaterThanOrEqual(due);
      expect(r1.data.overdue_ms).toBe(Date.parse(r1.at) - due);
      expect(r1.data.last_executed_by).toMatchObject({ type: 'api_key', name: 'admin' });
      expect(r1.actor.type).toBe('system');
      // Next in the schedule: reminder 2, one repeat after the due time.
      expect(Number(await h.herald.redis.zscore(scheduleKey, inc.id))).toBeGreaterThanOrEqual(due + REPEAT_MS);

      // Kill -9 the worker; a new one takes over.
      first.worker.proc.kill('SIGKILL');
      await first.worker.exited;
      const second = await startedWorker();
      // Reminder 2 is due at due + 10 s; the new worker must have started before reminder 3's slot
      // (due + 20 s) for it to be numbered 2 — reminders are numbered by the intervals passed.
      const startedAt = Date.now();
      const both = await waitFor(
        async () => {
          const evs = overdue(await timeline(inc.id));
          return evs.length >= 2 ? evs : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 250, what: 'reminder 2 from the new worker' },
      ).catch((e: unknown) => {
        throw new Error(`${(e as Error).message}\n${tail(second.worker)}`);
      });
      const context = `reminder 1 seen ${seenAt - due} ms after due; the new worker took ${second.startMs} ms to start (ready ${startedAt - due} ms after due)`;
      expect(
        both.map((e) => e.data.reminder),
        context,
      ).toEqual([1, 2]);
      const r2 = both[1]!;
      expect(r2.data.due_at).toBe(shown.next_update_due_at);
      expect(Date.parse(r2.at)).toBeGreaterThanOrEqual(due + REPEAT_MS);
      expect(r2.data.overdue_ms).toBe(Date.parse(r2.at) - due);

      // Resolve: the due time and the schedule entry go.
      const resolved = await h.api('PATCH', `/v1/incidents/${inc.id}`, { body: { status: 'resolved' } });
      expect(resolved.status).toBe(200);
      expect(resolved.body.next_update_due_at).toBeNull();
      expect(await h.herald.redis.zscore(scheduleKey, inc.id)).toBeNull();
      const settled = await timeline(inc.id);
      expect(numbers(settled), context).toEqual([1, 2]);

      // Absence, so a bounded look: until past reminder 3's slot (due + 20 s) with the poll's
      // second to spare, at most 12 s, nothing is added to the timeline and no entry comes back.
      const lookUntil = Math.min(Date.now() + 12_000, Math.max(Date.now() + 3_000, due + 2 * REPEAT_MS + 2_500));
      while (Date.now() < lookUntil) {
        const now = await timeline(inc.id);
        expect(now.map((e) => e.id)).toEqual(settled.map((e) => e.id));
        expect(await h.herald.redis.zscore(scheduleKey, inc.id)).toBeNull();
        await new Promise((r) => setTimeout(r, 500));
      }

      // Each event once: no duplicate ids, no duplicate reminder numbers, across both workers.
      const all = await timeline(inc.id);
      expect(new Set(all.map((e) => e.id)).size).toBe(all.length);
      expect(numbers(all)).toEqual([1, 2]);
      expect(all.filter((e) => e.type === 'incident.executed')).toHaveLength(1);
      expect(all.filter((e) => e.type === 'incident.status_changed')).toHaveLength(1);
      // The worker that carried on is healthy (no failed reminder logged).
      expect(second.worker.stdout()).not.toContain('update reminder failed');
      await stopChild(second.worker);
    },
  );
});
