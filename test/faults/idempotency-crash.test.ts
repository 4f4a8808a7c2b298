import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectionCreated } from '../../src/http/routes/connections.js';
import { accepted } from '../../src/http/routes/executions.js';
import { created } from '../../src/http/routes/incidents.js';
import type { IdempotencyClaim, IdempotentRequest } from '../../src/ports/index.js';
import { createSecretBox } from '../../src/store/crypto.js';
import { IDEMPOTENCY_LEASE_MS, RedisIdempotencyStore } from '../../src/store/idempotency.js';
import { startHerald, type TestHerald } from '../support/herald.js';

/**
 * Crash-safe idempotency, deterministically: each test leaves Redis exactly as a process killed
 * at one point of an idempotent request would (the claim taken; the effect committed or not; no
 * answer sent, no lease renewed), then retries over HTTP as the README advises (again on 409
 * idempotency_key_in_use, after Retry-After). The retry must give the original answer when the
 * effect was committed, or run exactly once when it was not — never twice.
 */
let h: TestHerald;
let store: RedisIdempotencyStore;
let apiKeyId: string;
const actor = { type: 'api_key' as const, id: 'test', name: 'test' };
const sha = (x: string) => createHash('sha256').update(x).digest('hex');

beforeAll(async () => {
  h = await startHerald({ HERALD_RATE_LIMIT: '100000', HERALD_EXECUTE_RATE_LIMIT: '100000' });
  store = new RedisIdempotencyStore(h.herald.redis, h.herald.keys, createSecretBox(Buffer.from(h.secretKey, 'base64')));
  apiKeyId = (await h.herald.services.apiKeys.authenticate(h.token)).id;
  const c = await h.api('POST', '/v1/connections', {
    body: { name: 'sink', type: 'webhook', config: { url: 'http://127.0.0.1:9/hook' } },
  });
  expect(c.status).toBe(201);
});
afterAll(async () => {
  await h?.close();
});

/** Claims the key exactly as the middleware does for this request (same fingerprint). */
async function claimAsCrashedRequest(path: string, raw: string, key: string): Promise<IdempotencyClaim> {
  const begun = await store.begin(apiKeyId, key, sha(`POST\n${path}\n${sha(raw)}`));
  if (begun.state !== 'new') throw new Error(`expected a new claim, got ${begun.state}`);
  return begun.claim;
}

/** Retries as the README advises: again after Retry-After while the key is in use. */
async function retryUntilAnswered(
  path: string,
  raw: string,
  key: string,
): Promise<{ res: Awaited<ReturnType<TestHerald['api']>>; inUse: number; ms: number }> {
  const start = Date.now();
  let inUse = 0;
  for (;;) {
    const res = await h.api('POST', path, {
      raw,
      headers: { 'Idempotency-Key': key, 'Content-Type': 'application/json' },
    });
    if (res.status !== 409 || res.body.code !== 'idempotency_key_in_use') return { res, inUse, ms: Date.now() - start };
    inUse++;
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    if (Date.now() - start > 30_000) throw new Error('the key stayed in use for 30 s');
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function incidentsTitled(title: string): Promise<string[]> {
  const list = await h.api('GET', '/v1/incidents?limit=100');
  return list.body.data.filter((i: { title: string }) => i.title === title).map((i: { id: string }) => i.id);
}

describe('an idempotent request whose process dies', () => {
  it(
    'create: dies after the commit, before answering → the retry replays the original 201, one incident',
    { timeout: 60_000 },
    async () => {
      const title = `crash-after-commit ${randomBytes(4).toString('hex')}`;
      const raw = JSON.stringify({ title, severity: 'major' });
      const key = `after-${randomBytes(6).toString('hex')}`;
      const claim = await claimAsCrashedRequest('/v1/incidents', raw, key);
      const request: IdempotentRequest = {
        claim,
        respond: (e) => (e.kind === 'incident' ? created(e.incident) : null),
        stored: false,
      };
      // The route's work, inside the request's scope; then the process "dies": no complete(), no renewal.
      const incident = await store.within(request, () => h.herald.services.incidents.create(JSON.parse(raw), actor));

      const { res, inUse } = await retryUntilAnswered('/v1/incidents', raw, key);
      expect(res.status).toBe(201);
      expect(res.headers.get('idempotent-replayed')).toBe('true');
      expect(res.body.id).toBe(incident.id);
      expect(res.headers.get('location')).toBe(`/v1/incidents/${incident.id}`);
      // Stored with the commit: there was never an in-flight window to wait out.
      expect(inUse).toBe(0);
      expect(await incidentsTitled(title)).toEqual([incident.id]);
    },
  );

  it(
    'create: dies before the commit → the claim is taken over within the lease, and the request runs once',
    { timeout: 60_000 },
    async () => {
      const title = `crash-before-commit ${randomBytes(4).toString('hex')}`;
      const raw = JSON.stringify({ title, severity: 'minor' });
      const key = `before-${randomBytes(6).toString('hex')}`;
      await claimAsCrashedRequest('/v1/incidents', raw, key);

      const { res, inUse, ms } = await retryUntilAnswered('/v1/incidents', raw, key);
      expect(res.status).toBe(201);
      expect(res.headers.get('idempotent-replayed')).toBeNull();
      expect(inUse).toBeGreaterThan(0);
      // Taken over within 10 s (the lease is 5 s).
      expect(ms).toBeLessThan(10_000);
      expect(ms).toBeGreaterThanOrEqual(IDEMPOTENCY_LEASE_MS - 1000);
      // And from now on it replays.
      const again = await h.api('POST', '/v1/incidents', {
        raw,
        headers: { 'Idempotency-Key': key, 'Content-Type': 'application/json' },
      });
      expect(again.status).toBe(201);
      expect(again.body.id).toBe(res.body.id);
      expect(await incidentsTitled(title)).toEqual([res.body.id]);
    },
  );

  it(
    'a holder that stalled past its lease cannot commit after a retry took the key over',
    { timeout: 60_000 },
    async () => {
      const title = `stalled-holder ${randomBytes(4).toString('hex')}`;
      const raw = JSON.stringify({ title, severity: 'minor' });
      const key = `stalled-${randomBytes(6).toString('hex')}`;
      const claim = await claimAsCrashedRequest('/v1/incidents', raw, key);
      const { res } = await retryUntilAnswered('/v1/incidents', raw, key);
      expect(res.status).toBe(201);
      // The first holder wakes up and tries to commit its own incident: refused, nothing written.
      const request: IdempotentRequest = {
        claim,
        respond: (e) => (e.kind === 'incident' ? created(e.incident) : null),
        stored: false,
      };
      await expect(
        store.within(request, () => h.herald.services.incidents.create(JSON.parse(raw), actor)),
      ).rejects.toMatchObject({ code: 'idempotency_key_in_use' });
      expect(await incidentsTitled(title)).toEqual([res.body.id]);
    },
  );

  it(
    'execute: dies after the commit → the retry gets the same execution, never a second fan-out',
    { timeout: 60_000 },
    async () => {
      const inc = await h.api('POST', '/v1/incidents', {
        body: { title: `exec-crash ${randomBytes(4).toString('hex')}`, severity: 'major' },
      });
      const path = `/v1/incidents/${inc.body.id}/execute`;
      const raw = JSON.stringify({});
      const key = `exec-${randomBytes(6).toString('hex')}`;
      const claim = await claimAsCrashedRequest(path, raw, key);
      const request: IdempotentRequest = {
        claim,
        respond: (e) => (e.kind === 'execution' ? accepted(e.execution, e.deliveries) : null),
        stored: false,
      };
      const result = await store.within(request, () =>
        h.herald.services.executions.execute(inc.body.id, {}, actor, { dryRun: undefined }),
      );
      if (result.dryRun) throw new Error('not a dry run');

      const { res, inUse } = await retryUntilAnswered(path, raw, key);
      expect(res.status).toBe(202);
      expect(res.headers.get('idempotent-replayed')).toBe('true');
      expect(res.body.id).toBe(result.execution.id);
      expect(inUse).toBe(0);
      const list = await h.api('GET', `/v1/incidents/${inc.body.id}/executions`);
      expect(list.body.data.map((e: { id: string }) => e.id)).toEqual([result.execution.id]);
    },
  );

  it('execute: dies before the commit → taken over, exactly one execution', { timeout: 60_000 }, async () => {
    const inc = await h.api('POST', '/v1/incidents', {
      body: { title: `exec-before ${randomBytes(4).toString('hex')}`, severity: 'major' },
    });
    const path = `/v1/incidents/${inc.body.id}/execute`;
    const raw = JSON.stringify({});
    const key = `exec-before-${randomBytes(6).toString('hex')}`;
    await claimAsCrashedRequest(path, raw, key);
    const { res, ms } = await retryUntilAnswered(path, raw, key);
    expect(res.status).toBe(202);
    expect(ms).toBeLessThan(10_000);
    const again = await h.api('POST', path, {
      raw,
      headers: { 'Idempotency-Key': key, 'Content-Type': 'application/json' },
    });
    expect(again.body.id).toBe(res.body.id);
    const list = await h.api('GET', `/v1/incidents/${inc.body.id}/executions`);
    expect(list.body.data.map((e: { id: string }) => e.id)).toEqual([res.body.id]);
  });

  it(
    'connection create: dies after the commit → the retry replays the 201 with the signing secret shown once',
    { timeout: 60_000 },
    async () => {
      const name = `crash-conn-${randomBytes(4).toString('hex')}`;
      const raw = JSON.stringify({ name, type: 'webhook', config: { url: 'http://127.0.0.1:9/crash' } });
      const key = `conn-${randomBytes(6).toString('hex')}`;
      const claim = await claimAsCrashedRequest('/v1/connections', raw, key);
      const request: IdempotentRequest = {
        claim,
        respond: (e) => (e.kind === 'connection' ? connectionCreated(e.connection, e.signingSecret) : null),
        stored: false,
      };
      const made = await store.within(request, () => h.herald.services.connections.create(JSON.parse(raw)));
      expect(made.signingSecret).toMatch(/^whsec_/);

      const { res, inUse } = await retryUntilAnswered('/v1/connections', raw, key);
      expect(res.status).toBe(201);
      expect(inUse).toBe(0);
      expect(res.headers.get('idempotent-replayed')).toBe('true');
      expect(res.body.id).toBe(made.connection.id);
      expect(res.body.signing_secret).toBe(made.signingSecret);
      const all = await h.api('GET', '/v1/connections?limit=100');
      expect(all.body.data.filter((c: { name: string }) => c.name === name)).toHaveLength(1);
    },
  );

  it(
    'a request that runs longer than the lease keeps its key (renewed while it runs)',
    { timeout: 60_000 },
    async () => {
      const title = `long-runner ${randomBytes(4).toString('hex')}`;
      const raw = JSON.stringify({ title, severity: 'minor' });
      const key = `long-${randomBytes(6).toString('hex')}`;
      const claim = await claimAsCrashedRequest('/v1/incidents', raw, key);
      // Renew as the middleware does, for twice the lease, while retries knock.
      const renewing = setInterval(() => {
        store.renew(claim).catch(() => false);
      }, 1500);
      try {
        const until = Date.now() + 2 * IDEMPOTENCY_LEASE_MS;
        while (Date.now() < until) {
          const r = await h.api('POST', '/v1/incidents', {
            raw,
            headers: { 'Idempotency-Key': key, 'Content-Type': 'application/json' },
          });
          expect(r.status).toBe(409);
          expect(r.body.code).toBe('idempotency_key_in_use');
          await new Promise((resolve) => setTimeout(resolve, 500));
        }
      } finally {
        clearInterval(renewing);
      }
      expect(await incidentsTitled(title)).toEqual([]);
    },
  );
});
