import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { childEnv, freePort, spawnEntry, stopChild, type Child } from '../support/child.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { startHttpSink, type HttpSink } from '../support/peers/http-sink.js';
import { testRedisUrl } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/**
 * The API process (the real `npm start` entry, HERALD_ROLE=api) is SIGKILLed with 30 idempotent
 * creates and 30 idempotent executes in flight. Every one of them is then retried, as the README
 * advises (again on 409 idempotency_key_in_use, after Retry-After; again on a dropped
 * connection), against another Herald over the same Redis: exactly one incident per create key,
 * exactly one execution per execute key, and each delivery reaches the sink once.
 */
const N = 30;
const CONNECTIONS = 2;
const secretKey = randomBytes(32).toString('base64');
let h: TestHerald;
let sink: HttpSink;
let api: Child | undefined;

beforeAll(async () => {
  sink = await startHttpSink({ respond: () => ({ status: 200 }) });
  h = await startHerald(
    {
      HERALD_SECRET_KEY: secretKey,
      HERALD_RATE_LIMIT: '100000',
      HERALD_EXECUTE_RATE_LIMIT: '100000',
      HERALD_OUTBOX_SWEEP_MS: '1000',
    },
    { worker: true },
  );
  for (let i = 0; i < CONNECTIONS; i++) {
    const r = await h.api('POST', '/v1/connections', {
      body: { name: `sink ${i}`, type: 'webhook', config: { url: `${sink.url}/hook/${i}` } },
    });
    expect(r.status).toBe(201);
  }
}, 60_000);
afterAll(async () => {
  await stopChild(api);
  await sink?.close();
  await h?.close();
});

interface Call {
  key: string;
  path: string;
  body: string;
  /** What the killed process answered, if anything. */
  first: { status: number; body: { id?: string } } | null;
}

async function send(base: string, c: Call): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(`${base}${c.path}`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${h.token}`, 'Content-Type': 'application/json', 'Idempotency-Key': c.key },
    body: c.body,
  });
  const text = await res.text();
  return { status: res.status, body: text === '' ? null : JSON.parse(text), headers: res.headers };
}

/** The README's advice: retry on 409 idempotency_key_in_use (after Retry-After) and on network errors. */
async function retry(base: string, c: Call): Promise<{ status: number; body: any; headers: Headers }> {
  const deadline = Date.now() + 45_000;
  for (;;) {
    try {
      const r = await send(base, c);
      if (!(r.status === 409 && r.body?.code === 'idempotency_key_in_use') && r.status !== 503) return r;
      await new Promise((resolve) =>
        setTimeout(resolve, 1000 * Math.min(Number(r.headers.get('retry-after') ?? '1'), 1)),
      );
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    if (Date.now() > deadline) throw new Error(`${c.key}: no answer within 45 s`);
  }
}

describe('the API SIGKILLed with idempotent creates and executes in flight', () => {
  it('every retried request has exactly one effect', { timeout: 180_000 }, async () => {
    const tag = `kill-${randomBytes(4).toString('hex')}`;
    const targets: string[] = [];
    for (let i = 0; i < N; i++) {
      const r = await h.api('POST', '/v1/incidents', { body: { title: `${tag} target ${i}`, severity: 'major' } });
      targets.push(r.body.id);
    }
    const calls: Call[] = [
      ...Array.from({ length: N }, (_, i) => ({
        key: `${tag}-create-${i}`,
        path: '/v1/incidents',
        body: JSON.stringify({ title: `${tag} created ${i}`, severity: 'minor' }),
        first: null,
      })),
      ...targets.map((id, i) => ({
        key: `${tag}-execute-${i}`,
        path: `/v1/incidents/${id}/execute`,
        body: '{}',
        first: null,
      })),
    ];

    const port = await freePort();
    const child = spawnEntry(
      'main',
      [],
      childEnv({
        HERALD_ROLE: 'api',
        PORT: String(port),
        HOST: '127.0.0.1',
        REDIS_URL: testRedisUrl(),
        HERALD_KEY_PREFIX: h.prefix,
        HERALD_SECRET_KEY: secretKey,
        HERALD_OUTBOUND_ALLOW: '127.0.0.1/32',
        HERALD_RATE_LIMIT: '100000',
        HERALD_EXECUTE_RATE_LIMIT: '100000',
        HERALD_DATA_DIR: h.dataDir,
        LOG_LEVEL: 'warn',
      }),
    );
    // Also stopped by afterAll, should the test fail before the kill.
    api = child;
    const base = `http://127.0.0.1:${port}`;
    await waitFor(async () => (await fetch(`${base}/readyz`)).status === 200, {
      timeoutMs: 60_000,
      intervalMs: 200,
      what: 'the API child ready',
    });

    // All at once; the process dies as soon as the first answers come back: killed from the
    // callback of the 20th answer itself, not from a poll that a busy machine may run late,
    // after the rest were answered too.
    let answered = 0;
    const inFlight = calls.map((c) =>
      send(base, c).then(
        (r) => {
          c.first = r;
          if (++answered === 20) child.proc.kill('SIGKILL');
        },
        () => undefined,
      ),
    );
    await child.exited;
    await Promise.all(inFlight);
    const unanswered = calls.filter((c) => c.first === null).length;
    expect(unanswered, 'requests cut off by the kill').toBeGreaterThan(0);

    // How many died in the window that matters: committed, but never answered.
    let committedUnanswered = 0;
    for (let i = 0; i < N; i++) {
      const c = calls[N + i]!;
      const list = await h.api('GET', `/v1/incidents/${targets[i]}/executions`);
      if (c.first === null && list.body.data.length > 0) committedUnanswered++;
    }

    // Retry every one (answered or not) against another Herald over the same Redis.
    const retried = await Promise.all(calls.map((c) => retry(h.url, c)));
    calls.forEach((c, i) => {
      const r = retried[i]!;
      expect(r.status, c.key).toBe(c.path === '/v1/incidents' ? 201 : 202);
      // A request answered before the kill replays that very answer.
      if (c.first && c.first.status < 300) expect(r.body.id, c.key).toBe(c.first.body.id);
    });

    // Exactly one incident per create key.
    const all: { id: string; title: string }[] = [];
    let cursor: string | null = null;
    do {
      const page: { body: { data: { id: string; title: string }[]; pagination: { next_cursor: string | null } } } =
        await h.api('GET', `/v1/incidents?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      all.push(...page.body.data);
      cursor = page.body.pagination.next_cursor;
    } while (cursor);
    for (let i = 0; i < N; i++)
      expect(
        all.filter((x) => x.title === `${tag} created ${i}`),
        `create ${i}`,
      ).toHaveLength(1);

    // Exactly one execution per execute key, and it is the one the retry answered.
    for (let i = 0; i < N; i++) {
      const list = await h.api('GET', `/v1/incidents/${targets[i]}/executions`);
      expect(
        list.body.data.map((e: { id: string }) => e.id),
        `execute ${i}`,
      ).toEqual([retried[N + i]!.body.id]);
    }

    // Each delivery arrives once at the sink.
    const deliveryIds = retried.slice(N).flatMap((r) => r.body.deliveries.map((d: { id: string }) => d.id));
    expect(deliveryIds).toHaveLength(N * CONNECTIONS);
    await sink.waitForRequests(N * CONNECTIONS, 60_000);
    await waitFor(
      async () => {
        for (let i = 0; i < N; i++) {
          const e = await h.api('GET', `/v1/incidents/${targets[i]}/executions/${retried[N + i]!.body.id}`);
          if (e.body.status !== 'delivered') return false;
        }
        return true;
      },
      { timeoutMs: 60_000, intervalMs: 250, what: 'every execution delivered' },
    );
    const seen = sink.requests.map((r) => String(r.headers['webhook-id']));
    for (const id of deliveryIds)
      expect(
        seen.filter((s) => s === id),
        id,
      ).toHaveLength(1);
    expect(seen).toHaveLength(N * CONNECTIONS);
    console.info(
      `api-kill: ${N * 2 - unanswered} answered before the kill, ${unanswered} cut off (${committedUnanswered} executes committed but never answered); all ${N * 2} retried to exactly one effect`,
    );
  });
});
