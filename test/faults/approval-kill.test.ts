import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHILD_DEADLINE_MS, childEnv, freePort, spawnEntry, stopChild, type Child } from '../support/child.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { startHttpSink, type HttpSink } from '../support/peers/http-sink.js';
import { testRedisUrl } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/**
 * Approval under SIGKILL, process level (the real `dist/main.js` as `npm start` runs it, built by
 * `npm test` first). An API-only Herald in this process takes the executes; the sends and the
 * approvals' side effects run in separate worker processes.
 *
 * - The API process is SIGKILLed with approvals in flight; every approval is retried (same
 *   Idempotency-Key, as the README advises) against another Herald: each is decided once and
 *   each held delivery reaches its sink exactly once.
 * - The worker is SIGKILLed while deliveries are held; they are approved with no worker running,
 *   and the next worker sends each exactly once: the approval queued them durably (outbox).
 * - A worker is SIGKILLed while an approved audience's deliveries are being sent; the next
 *   worker finishes: every held delivery reaches the sink, none is lost, and a send cut off by the
 *   kill is repeated only flagged as a possible duplicate.
 */
const secretKey = randomBytes(32).toString('base64');
let h: TestHerald;
let sink: HttpSink;
const children: Child[] = [];
let requester = '';
let approver = '';
const tpl = { responders: '', customers: '' };
/** Connections of the wide audience, whose sink answers slowly: its fan-out takes a while. */
const WIDE = 100;
/** Sends a worker runs at once: at most these can be cut off (and so repeated) by one kill. */
const CONCURRENCY = 10;

function env(role: 'api' | 'worker', extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return childEnv({
    HERALD_ROLE: role,
    REDIS_URL: testRedisUrl(),
    HERALD_KEY_PREFIX: h.prefix,
    HERALD_SECRET_KEY: secretKey,
    HERALD_OUTBOUND_ALLOW: '127.0.0.1/32',
    HERALD_DATA_DIR: h.dataDir,
    HERALD_RATE_LIMIT: '100000',
    HERALD_EXECUTE_RATE_LIMIT: '100000',
    HERALD_OUTBOX_SWEEP_MS: '1000',
    HERALD_JOB_LOCK_MS: '2000',
    HERALD_WORKER_CONCURRENCY: String(CONCURRENCY),
    // info: the start-up line tells "still starting" from "started and stuck".
    LOG_LEVEL: 'info',
    ...extra,
  });
}

async function startedWorker(): Promise<Child> {
  const w = spawnEntry('main', [], env('worker'));
  children.push(w);
  await waitFor(() => w.stdout().includes('Herald running (role worker'), {
    timeoutMs: CHILD_DEADLINE_MS,
    what: 'the worker to start',
  }).catch((e: unknown) => {
    throw new Error(`${(e as Error).message}\n${w.stdout().slice(-3000)}\n${w.stderr().slice(-3000)}`);
  });
  return w;
}

async function createdId(path: string, body: unknown): Promise<string> {
  const r = await h.api('POST', path, { body });
  expect(r.status, r.text).toBe(201);
  return r.body.id as string;
}

beforeAll(async () => {
  sink = await startHttpSink({
    respond: (req) => (req.path.startsWith('/wide/') ? { status: 200, delayMs: 150 } : { status: 200 }),
  });
  h = await startHerald(
    {
      HERALD_SECRET_KEY: secretKey,
      HERALD_RATE_LIMIT: '100000',
      HERALD_EXECUTE_RATE_LIMIT: '100000',
      HERALD_OUTBOX_SWEEP_MS: '1000',
    },
    { worker: false },
  );
  requester = await h.tokenWith(['incidents:read', 'incidents:write', 'incidents:execute'], 'requester');
  approver = await h.tokenWith(['incidents:read', 'approvals:write'], 'approver');
  tpl.responders = await createdId('/v1/templates', { name: 'responders', body: 'Responders: {{incident.title}}' });
  tpl.customers = await createdId('/v1/templates', { name: 'customers', body: 'Customers: {{incident.title}}' });

  const hook = (name: string, path: string) =>
    createdId('/v1/connections', { name, type: 'webhook', config: { url: `${sink.url}${path}` } });
  const responders = await hook('responders', '/responders/0');
  const customers = [await hook('customers 0', '/customers/0'), await hook('customers 1', '/customers/1')];
  const wide: string[] = [];
  for (let i = 0; i < WIDE; i++) wide.push(await hook(`wide ${i}`, `/wide/${i}`));

  const approval = {
    required: true,
    approvers: { slack_user_ids: ['U0APPROVER1'], api_key_scopes: ['approvals:write'] },
    four_eyes: true,
    expires_in: '2h',
  };
  const audience = (body: Record<string, unknown>) => createdId('/v1/audiences', body);
  await audience({
    key: 'responders',
    name: 'Responders',
    visibility: 'internal',
    connection_ids: [responders],
    template_ids: [tpl.responders],
  });
  await audience({
    key: 'customers',
    name: 'Customers',
    visibility: 'external',
    connection_ids: customers,
    template_ids: [tpl.customers],
    approval,
  });
  await audience({
    key: 'wide',
    name: 'Everyone outside',
    visibility: 'external',
    connection_ids: wide,
    template_ids: [tpl.customers],
    approval,
  });
}, 180_000);

afterAll(async () => {
  for (const c of children) await stopChild(c);
  await sink?.close();
  await h?.close();
});

interface DeliveryView {
  id: string;
  status: string;
  audience: string | null;
  possible_duplicate: boolean;
  attempts: { outcome: string }[];
}
interface ExecutionView {
  id: string;
  status: string;
  deliveries: DeliveryView[];
  audiences?: { key: string; approval: { state: string } | null }[];
}

async function heldExecute(audiences: string[]): Promise<{ inc: string; exe: ExecutionView }> {
  const inc = await createdId('/v1/incidents', {
    title: `Approval under fire ${randomBytes(3).toString('hex')}`,
    severity: 'critical',
    template_ids: [tpl.responders, tpl.customers],
  });
  const r = await h.api('POST', `/v1/incidents/${inc}/execute`, { body: { audiences }, token: requester });
  expect(r.status, r.text).toBe(202);
  return { inc, exe: r.body as ExecutionView };
}

const held = (e: ExecutionView) => e.deliveries.filter((d) => d.status === 'pending_approval');
const seen = (id: string) => sink.requests.filter((r) => r.headers['webhook-id'] === id).length;

async function delivered(inc: string, exe: string, timeoutMs = 90_000): Promise<ExecutionView> {
  return waitFor(
    async () => {
      const r = await h.api('GET', `/v1/incidents/${inc}/executions/${exe}`);
      return r.body.status === 'delivered' ? (r.body as ExecutionView) : undefined;
    },
    { timeoutMs, intervalMs: 250, what: `execution ${exe} delivered` },
  );
}

interface Approve {
  inc: string;
  exe: string;
  key: string;
  first: { status: number; body: any } | null;
}

async function sendApprove(base: string, a: Approve): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(`${base}/v1/incidents/${a.inc}/executions/${a.exe}/approve`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${approver}`, 'Content-Type': 'application/json', 'Idempotency-Key': a.key },
    body: JSON.stringify({ reason: 'checked' }),
  });
  const text = await res.text();
  return { status: res.status, body: text === '' ? null : JSON.parse(text), headers: res.headers };
}

/** The README's advice: retry on 409 idempotency_key_in_use (after Retry-After), 503 and network errors. */
async function retryApprove(base: string, a: Approve) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const r = await sendApprove(base, a);
      if (!(r.status === 409 && r.body?.code === 'idempotency_key_in_use') && r.status !== 503) return r;
      await new Promise((res) => setTimeout(res, 1000 * Math.min(Number(r.headers.get('retry-after') ?? '1'), 1)));
    } catch {
      await new Promise((res) => setTimeout(res, 200));
    }
    if (Date.now() > deadline) throw new Error(`${a.key}: no answer within 60 s`);
  }
}

describe('the API SIGKILLed with approvals in flight', () => {
  it(
    'every retried approval is decided once, and each held delivery is sent exactly once',
    { timeout: 240_000 },
    async () => {
      const N = 20;
      const worker = await startedWorker();
      const tag = `approve-kill-${randomBytes(4).toString('hex')}`;
      const runs = await Promise.all(Array.from({ length: N }, () => heldExecute(['responders', 'customers'])));
      const heldIds = runs.flatMap((r) => held(r.exe).map((d) => d.id));
      expect(heldIds).toHaveLength(N * 2);

      const port = await freePort();
      const api = spawnEntry('main', [], env('api', { PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' }));
      children.push(api);
      const base = `http://127.0.0.1:${port}`;
      await waitFor(async () => (await fetch(`${base}/readyz`)).status === 200, {
        timeoutMs: CHILD_DEADLINE_MS,
        intervalMs: 200,
        what: 'the API child ready',
      });

      // 16 at once; from the callback of the 8th answer the process is frozen (SIGSTOP), the last
      // 4 are sent to it frozen, and it dies (SIGKILL). Those 8 of the 16 still in flight may
      // have been answered before the kill, so the 4 sent to the frozen process are what makes
      // sure some approvals are cut off: they can get no answer.
      const approvals: Approve[] = runs.map((r, i) => ({ inc: r.inc, exe: r.exe.id, key: `${tag}-${i}`, first: null }));
      const LATE = 4;
      let answered = 0;
      let freeze = (): void => undefined;
      const frozen = new Promise<void>((resolve) => (freeze = resolve));
      const inFlight = approvals.slice(0, N - LATE).map((a) =>
        sendApprove(base, a).then(
          (r) => {
            a.first = r;
            if (++answered === 8) {
              api.proc.kill('SIGSTOP');
              freeze();
            }
          },
          () => undefined,
        ),
      );
      // Should fewer than 8 be answered at all, the freeze comes once the rest have settled.
      await Promise.race([frozen, Promise.all(inFlight)]);
      api.proc.kill('SIGSTOP');
      inFlight.push(
        ...approvals.slice(N - LATE).map((a) =>
          sendApprove(base, a).then(
            (r) => void (a.first = r),
            () => undefined,
          ),
        ),
      );
      api.proc.kill('SIGKILL');
      await api.exited;
      await Promise.all(inFlight);
      const cutOff = approvals.filter((a) => a.first === null).length;
      expect(cutOff, 'approvals cut off by the kill').toBeGreaterThanOrEqual(LATE);

      // Retried against the in-process Herald over the same Redis: each one a decision, once.
      const retried = await Promise.all(approvals.map((a) => retryApprove(h.url, a)));
      approvals.forEach((a, i) => {
        const r = retried[i]!;
        expect([200, 202], `${a.key}: ${JSON.stringify(r.body)}`).toContain(r.status);
        const cust = (r.body as ExecutionView).audiences?.find((x) => x.key === 'customers');
        expect(cust?.approval?.state, a.key).toBe('approved');
        // An approval answered before the kill replays that very answer.
        if (a.first && a.first.status < 300) expect(r.body, a.key).toEqual(a.first.body);
      });

      for (const r of runs) await delivered(r.inc, r.exe.id);
      await stopChild(worker);
      for (const id of heldIds) expect(seen(id), id).toBe(1);
      for (const r of runs) {
        const events = (await h.api('GET', `/v1/incidents/${r.inc}/events?limit=100`)).body.data as { type: string }[];
        expect(
          events.filter((e) => e.type === 'execution.approved'),
          r.inc,
        ).toHaveLength(1);
      }
      console.info(
        `approval-kill (api): ${N - cutOff} approvals answered before the kill, ${cutOff} cut off; all decided once`,
      );
    },
  );
});

describe('a worker SIGKILLed while approved deliveries are being sent', () => {
  it('loses none of them: the next worker sends the rest, repeats only flagged', { timeout: 240_000 }, async () => {
    const first = await startedWorker();
    const { inc, exe } = await heldExecute(['wide']);
    const ids = new Set(held(exe).map((d) => d.id));
    expect(ids.size).toBe(WIDE);
    const ours = () => sink.requests.filter((r) => ids.has(String(r.headers['webhook-id'])));

    // Held: the running worker sends nothing before the approval. A fence proves it without
    // waiting: an ordinary execute made after the held one goes through the same worker, and once
    // it is delivered the held deliveries are still waiting and none reached the sink.
    const fence = await heldExecute(['responders']);
    await delivered(fence.inc, fence.exe.id, 60_000);
    const still = (await h.api('GET', `/v1/incidents/${inc}/executions/${exe.id}`)).body as ExecutionView;
    expect(still.deliveries.filter((d) => d.status !== 'pending_approval')).toEqual([]);
    expect(ours()).toHaveLength(0);

    const r = await h.api('POST', `/v1/incidents/${inc}/executions/${exe.id}/approve`, {
      body: { reason: 'go' },
      token: approver,
    });
    expect([200, 202], r.text).toContain(r.status);
    await waitFor(() => ours().length >= 20, { timeoutMs: 60_000, what: '20 approved sends under way' });
    first.proc.kill('SIGKILL');
    await first.exited;
    expect(ours().length).toBeLessThan(WIDE);

    const second = await startedWorker();
    const done = await delivered(inc, exe.id, 120_000);
    await stopChild(second);
    expect(done.deliveries).toHaveLength(WIDE);
    // Every held delivery reached the sink; a send the kill cut off was repeated only flagged.
    for (const d of done.deliveries) {
      expect(seen(d.id), d.id).toBeGreaterThanOrEqual(1);
      if (seen(d.id) > 1) {
        expect(d.possible_duplicate, d.id).toBe(true);
        expect(
          d.attempts.some((a) => a.outcome === 'interrupted'),
          d.id,
        ).toBe(true);
      }
    }
    const repeats = done.deliveries.filter((d) => seen(d.id) > 1).length;
    // At most the sends in flight at the kill (the worker's concurrency) can repeat.
    expect(repeats).toBeLessThanOrEqual(CONCURRENCY);
    const events = (await h.api('GET', `/v1/incidents/${inc}/events?limit=100`)).body.data as { type: string }[];
    expect(events.filter((e) => e.type === 'execution.approved')).toHaveLength(1);
    console.info(`approval-kill (worker): ${repeats} of ${WIDE} sends repeated after the kill, each flagged`);
  });
});

describe('the worker SIGKILLed while deliveries wait for approval', () => {
  it('the approvals queue them durably: the next worker sends each exactly once', { timeout: 240_000 }, async () => {
    const N = 5;
    // Only this test's workers run: one left over would send what must wait here.
    for (const c of children) await stopChild(c);
    const first = await startedWorker();
    const runs = await Promise.all(Array.from({ length: N }, () => heldExecute(['responders', 'customers'])));
    const heldIds = runs.flatMap((r) => held(r.exe).map((d) => d.id));
    expect(heldIds).toHaveLength(N * 2);
    // The responders hear from the first worker; then it dies with the customers' parts held.
    await waitFor(
      async () => {
        for (const r of runs) {
          const e = (await h.api('GET', `/v1/incidents/${r.inc}/executions/${r.exe.id}`)).body as ExecutionView;
          if (e.status !== 'pending_approval') return false;
        }
        return true;
      },
      { timeoutMs: 60_000, intervalMs: 250, what: 'every execution waiting for approval only' },
    );
    first.proc.kill('SIGKILL');
    await first.exited;

    // Approved with no worker anywhere: nothing can be sent yet, nothing is lost.
    for (const r of runs) {
      const a = await h.api('POST', `/v1/incidents/${r.inc}/executions/${r.exe.id}/approve`, { token: approver });
      expect([200, 202], a.text).toContain(a.status);
    }
    for (const id of heldIds) expect(seen(id), id).toBe(0);

    const next = await startedWorker();
    for (const r of runs) {
      const done = await delivered(r.inc, r.exe.id);
      for (const d of done.deliveries) expect(d.possible_duplicate, d.id).toBe(false);
    }
    await stopChild(next);
    for (const id of heldIds) expect(seen(id), id).toBe(1);
  });
});
