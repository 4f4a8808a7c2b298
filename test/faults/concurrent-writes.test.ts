import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHerald, type TestHerald } from '../support/herald.js';

/**
 * No spurious conflicts: writers racing on one record retry inside Herald (one retryOnConflict
 * helper), so every one of them succeeds; a client sees a conflict only for its own stale If-Match.
 */
let h: TestHerald;
beforeAll(async () => {
  h = await startHerald({ HERALD_RATE_LIMIT: '100000', HERALD_EXECUTE_RATE_LIMIT: '100000' }, { worker: false });
  for (let i = 0; i < 2; i++) {
    const c = await h.api('POST', '/v1/connections', {
      body: { name: `sink ${i}`, type: 'webhook', config: { url: `http://127.0.0.1:9/hook/${i}` } },
    });
    expect(c.status).toBe(201);
  }
});
afterAll(async () => {
  await h?.close();
});

async function newIncident(): Promise<{ id: string }> {
  const r = await h.api('POST', '/v1/incidents', {
    body: { title: `race ${randomBytes(4).toString('hex')}`, severity: 'major' },
  });
  expect(r.status).toBe(201);
  return r.body;
}

describe('concurrent writes to one record', () => {
  it(
    '20 concurrent executes of one incident all answer 202 with distinct executions',
    { timeout: 60_000 },
    async () => {
      const inc = await newIncident();
      const results = await Promise.all(
        Array.from({ length: 20 }, () => h.api('POST', `/v1/incidents/${inc.id}/execute`, { body: {} })),
      );
      expect(results.map((r) => r.status)).toEqual(Array(20).fill(202));
      const ids = new Set(results.map((r) => r.body.id));
      expect(ids.size).toBe(20);
      const after = await h.api('GET', `/v1/incidents/${inc.id}`);
      expect(after.body.execution_count).toBe(20);
      const list = await h.api('GET', `/v1/incidents/${inc.id}/executions?limit=100`);
      expect(new Set(list.body.data.map((e: { id: string }) => e.id))).toEqual(ids);
    },
  );

  it('two rounds of 10 executes on each of 3 incidents at once: all 202', { timeout: 60_000 }, async () => {
    const incs = await Promise.all([newIncident(), newIncident(), newIncident()]);
    for (let round = 0; round < 2; round++) {
      const results = await Promise.all(
        incs.flatMap((inc) =>
          Array.from({ length: 10 }, () => h.api('POST', `/v1/incidents/${inc.id}/execute`, { body: {} })),
        ),
      );
      expect(results.filter((r) => r.status !== 202).map((r) => r.body)).toEqual([]);
    }
    for (const inc of incs) expect((await h.api('GET', `/v1/incidents/${inc.id}`)).body.execution_count).toBe(20);
  });

  it('concurrent PATCHes without If-Match all succeed, each one recorded', { timeout: 60_000 }, async () => {
    const inc = await newIncident();
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        h.api('PATCH', `/v1/incidents/${inc.id}`, { body: { impact: `update ${i}` } }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(200));
    const events = await h.api('GET', `/v1/incidents/${inc.id}/events?limit=100`);
    expect(events.body.data.filter((e: { type: string }) => e.type === 'incident.updated')).toHaveLength(20);
    // Executes racing PATCHes: both kinds get through.
    const mixed = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        i % 2 === 0
          ? h.api('POST', `/v1/incidents/${inc.id}/execute`, { body: {} })
          : h.api('PATCH', `/v1/incidents/${inc.id}`, { body: { impact: `mixed ${i}` } }),
      ),
    );
    expect(mixed.map((r) => r.status)).toEqual(Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? 202 : 200)));
  });

  it('a stale If-Match is still refused with 412 precondition_failed', async () => {
    const inc = await newIncident();
    const read = await h.api('GET', `/v1/incidents/${inc.id}`);
    const etag = read.headers.get('etag')!;
    const first = await h.api('PATCH', `/v1/incidents/${inc.id}`, {
      body: { impact: 'first' },
      headers: { 'If-Match': etag },
    });
    expect(first.status).toBe(200);
    const stale = await h.api('PATCH', `/v1/incidents/${inc.id}`, {
      body: { impact: 'second' },
      headers: { 'If-Match': etag },
    });
    expect(stale.status).toBe(412);
    expect(stale.body.code).toBe('precondition_failed');
    // Concurrent writers with the same fresh If-Match: exactly one wins, the others are told.
    const fresh = first.headers.get('etag')!;
    const racing = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        h.api('PATCH', `/v1/incidents/${inc.id}`, { body: { impact: `race ${i}` }, headers: { 'If-Match': fresh } }),
      ),
    );
    expect(racing.filter((r) => r.status === 200)).toHaveLength(1);
    expect(racing.filter((r) => r.status === 412)).toHaveLength(4);
  });
});
