import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { childEnv, freePort, spawnEntry, stopChild, type Child } from '../support/child.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { startHttpSink, type HttpSink } from '../support/peers/http-sink.js';
import { testRedisUrl } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/**
 * Events for integrators under SIGKILL (docs/events.md). The API process (the built entry,
 * HERALD_ROLE=api) is killed with 200 incident writes in flight, and the worker sending their
 * events is killed mid-delivery and replaced. Every change that was committed — answered or
 * not — reaches the receiver as exactly one event id (webhook-id), and no event arrives for a
 * change that is not on a timeline: the outbox is written in the change's own atomic step.
 */
const WRITES = 200;
const INCIDENTS = 20;
const secretKey = randomBytes(32).toString('base64');
let h: TestHerald;
let sink: HttpSink;
const children: Child[] = [];

beforeAll(async () => {
  // A slowish receiver, so the killed worker has sends in flight.
  sink = await startHttpSink({ respond: () => ({ status: 200, delayMs: 5 }) });
  h = await startHerald({ HERALD_SECRET_KEY: secretKey, HERALD_RATE_LIMIT: '100000' }, { worker: false });
}, 60_000);
afterAll(async () => {
  for (const c of children) await stopChild(c);
  await sink?.close();
  await h?.close();
});

function spawnHerald(role: 'api' | 'worker', port?: number): Child {
  const child = spawnEntry(
    'main',
    [],
    childEnv({
      HERALD_ROLE: role,
      ...(port ? { PORT: String(port), HOST: '127.0.0.1' } : {}),
      REDIS_URL: testRedisUrl(),
      HERALD_KEY_PREFIX: h.prefix,
      HERALD_SECRET_KEY: secretKey,
      HERALD_OUTBOUND_ALLOW: '127.0.0.1/32',
      HERALD_RATE_LIMIT: '100000',
      HERALD_DATA_DIR: h.dataDir,
      LOG_LEVEL: 'warn',
    }),
  );
  children.push(child);
  return child;
}

describe('events with the API and the worker SIGKILLed', () => {
  it('every committed change has exactly one event at the receiver', { timeout: 240_000 }, async () => {
    const ep = await h.api('POST', '/v1/event-endpoints', {
      body: { url: `${sink.url}/events`, event_types: ['incident.*'] },
    });
    expect(ep.status, ep.text).toBe(201);
    const ids: string[] = [];
    for (let i = 0; i < INCIDENTS; i++) {
      const r = await h.api('POST', '/v1/incidents', { body: { title: `base ${i}`, severity: 'major' } });
      ids.push(r.body.id);
    }

    const port = await freePort();
    const api = spawnHerald('api', port);
    const base = `http://127.0.0.1:${port}`;
    await waitFor(async () => (await fetch(`${base}/readyz`).catch(() => null))?.status === 200, {
      timeoutMs: 60_000,
      intervalMs: 200,
      what: 'the API child ready',
    });
    // 200 writes at once: creates and updates of the incidents above; killed after 60 answers.
    let answered = 0;
    const writes = Array.from({ length: WRITES }, (_, i) => {
      const create = i % 4 === 0;
      return fetch(create ? `${base}/v1/incidents` : `${base}/v1/incidents/${ids[i % INCIDENTS]}`, {
        method: create ? 'POST' : 'PATCH',
        headers: { Authorization: `Bearer ${h.token}`, 'Content-Type': 'application/json' },
        body: JSON.stringify(create ? { title: `written ${i}`, severity: 'minor' } : { description: `write ${i}` }),
      }).then(
        (r) => {
          if (++answered === 60) api.proc.kill('SIGKILL');
          return r.status;
        },
        () => null,
      );
    });
    await api.exited;
    const statuses = await Promise.all(writes);
    expect(statuses.filter((s) => s === null).length, 'writes cut off by the kill').toBeGreaterThan(0);

    // Every change committed, from the timelines (the record of what happened).
    const incidents: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { body: { data: { id: string }[]; pagination: { next_cursor: string | null } } } = await h.api(
        'GET',
        `/v1/incidents?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      incidents.push(...page.body.data.map((x) => x.id));
      cursor = page.body.pagination.next_cursor;
    } while (cursor);
    const expected = new Set<string>();
    for (const id of incidents) {
      const t = await h.api('GET', `/v1/incidents/${id}/events?limit=100`);
      for (const e of t.body.data as { id: string }[]) expected.add(e.id);
    }
    // At least the base incidents' creations and every write answered with success; writes
    // committed but cut off before their answer may add more, but need not (the kill can land
    // between two commits).
    const succeeded = statuses.filter((s) => s !== null && s < 300).length;
    expect(succeeded).toBeGreaterThanOrEqual(60);
    expect(expected.size).toBeGreaterThanOrEqual(INCIDENTS + succeeded);

    // A worker sends them; it is killed mid-delivery and another one finishes.
    const first = spawnHerald('worker');
    await waitFor(() => sink.requests.length >= 20, { timeoutMs: 60_000, what: 'the first worker sending' });
    first.proc.kill('SIGKILL');
    await first.exited;
    spawnHerald('worker');
    const got = () => new Set(sink.requests.map((r) => String(r.headers['webhook-id'])));
    await waitFor(() => got().size >= expected.size, { timeoutMs: 120_000, intervalMs: 250, what: 'every event' });
    // Nothing beyond them may arrive. Rather than wait to see, wait until the endpoint's delivery
    // log is final: every delivery it made is done (so none is sent again), and it made one per
    // expected event and no other. A fence (a change made now, whose event must arrive) shows the
    // outbox has been drained past anything committed before it.
    const fence = await h.api('PATCH', `/v1/incidents/${ids[0]}`, { body: { description: 'fence' } });
    expect(fence.status, fence.text).toBe(200);
    const timeline = await h.api('GET', `/v1/incidents/${ids[0]}/events?limit=100`);
    const fenceIds = (timeline.body.data as { id: string }[]).map((e) => e.id).filter((id) => !expected.has(id));
    expect(fenceIds.length).toBeGreaterThan(0);
    const all = new Set([...expected, ...fenceIds]);
    const log = await waitFor(
      async () => {
        const rows: { event_id: string; status: string }[] = [];
        let next: string | null = null;
        do {
          const page: { body: { data: typeof rows; pagination: { next_cursor: string | null } } } = await h.api(
            'GET',
            `/v1/event-endpoints/${ep.body.id}/deliveries?limit=100${next ? `&cursor=${encodeURIComponent(next)}` : ''}`,
          );
          rows.push(...page.body.data);
          next = page.body.pagination.next_cursor;
        } while (next);
        return rows.length >= all.size && rows.every((d) => d.status !== 'pending') && rows;
      },
      { timeoutMs: 120_000, intervalMs: 250, what: 'every event delivery final' },
    );
    expect(log.every((d) => d.status === 'delivered')).toBe(true);
    expect(new Set(log.map((d) => d.event_id))).toEqual(all);
    expect(log).toHaveLength(all.size);
    expect(got()).toEqual(all);
    // At least once: a send cut off by the kill may repeat, always under its own id.
    for (const r of sink.requests) {
      const body = r.body as { id: string };
      expect(r.headers['webhook-id']).toBe(body.id);
    }
  });
});
