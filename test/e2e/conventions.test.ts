import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { createSecretBox } from '../../src/store/crypto.js';
import { RedisIdempotencyStore } from '../../src/store/idempotency.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { waitFor } from '../support/wait.js';

let h: TestHerald;
beforeAll(async () => {
  h = await startHerald({ HERALD_RATE_LIMIT: '1000' });
});
afterAll(async () => {
  await h.close();
});

const incident = { title: 'API errors', severity: 'major' };

describe('request ids', () => {
  it('echoes a sane client id and replaces an unsafe one', async () => {
    const mine = await h.api('GET', '/v1/incidents', { headers: { 'X-Request-Id': 'abc.DEF-123_x' } });
    expect(mine.headers.get('x-request-id')).toBe('abc.DEF-123_x');
    const bad = await h.api('GET', '/v1/incidents', { headers: { 'X-Request-Id': 'has space/slash' } });
    expect(bad.headers.get('x-request-id')).not.toBe('has space/slash');
    const tooLong = await h.api('GET', '/v1/nope', { headers: { 'X-Request-Id': 'a'.repeat(129) } });
    expect(tooLong.headers.get('x-request-id')).not.toBe('a'.repeat(129));
    expect(tooLong.body.request_id).toBe(tooLong.headers.get('x-request-id'));
  });
});

describe('bodies', () => {
  it('415 without application/json, 400 on malformed JSON, 413 over 256 KiB, 422 on unknown fields', async () => {
    const noType = await h.api('POST', '/v1/incidents', {
      raw: JSON.stringify(incident),
      headers: { 'Content-Type': 'text/plain' },
    });
    expect(noType.status).toBe(415);
    expect(noType.body.code).toBe('unsupported_media_type');
    const malformed = await h.api('POST', '/v1/incidents', {
      raw: '{"title": ',
      headers: { 'Content-Type': 'application/json' },
    });
    expect(malformed.status).toBe(400);
    expect(malformed.body.code).toBe('invalid_json');
    const big = await h.api('POST', '/v1/incidents', { body: { ...incident, description: 'x'.repeat(300 * 1024) } });
    expect(big.status).toBe(413);
    const unknown = await h.api('POST', '/v1/incidents', { body: { ...incident, sevrity: 'minor' } });
    expect(unknown.status).toBe(422);
    expect(unknown.body.errors).toEqual([expect.objectContaining({ field: 'sevrity', code: 'unknown_field' })]);
    const array = await h.api('POST', '/v1/incidents', { body: [incident] });
    expect(array.status).toBe(422);
  });

  it('close takes an empty body without a Content-Type', async () => {
    const { body: inc } = await h.api('POST', '/v1/incidents', { body: incident });
    const r = await h.api('POST', `/v1/incidents/${inc.id}/close`);
    expect(r.status).toBe(200);
  });

  it('never leaks internals in problems', async () => {
    const r = await h.api('POST', '/v1/incidents', { raw: '{"a":', headers: { 'Content-Type': 'application/json' } });
    expect(r.text).not.toMatch(/at .*\.(ts|js):\d+/);
    expect(Object.keys(r.body).sort()).toEqual(['code', 'detail', 'errors', 'request_id', 'status', 'title', 'type']);
    expect(r.body.type).toBe('urn:herald:problem:invalid_json');
  });
});

describe('idempotency', () => {
  it('replays the first response with Idempotent-Replayed', async () => {
    const headers = { 'Idempotency-Key': `k-${Date.now()}-a` };
    const first = await h.api('POST', '/v1/incidents', { body: incident, headers });
    const second = await h.api('POST', '/v1/incidents', { body: incident, headers });
    expect(first.status).toBe(201);
    expect(second.status).toBe(201);
    expect(second.body).toEqual(first.body);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.headers.get('location')).toBe(first.headers.get('location'));
    expect(first.headers.get('idempotent-replayed')).toBeNull();
  });

  it('keeps replayable responses sealed at rest (a webhook signing secret is shown once, never stored in clear)', async () => {
    const headers = { 'Idempotency-Key': `k-${Date.now()}-secret` };
    const r = await h.api('POST', '/v1/connections', {
      body: { name: 'sealed', type: 'webhook', config: { url: 'https://hooks.example.com/x' } },
      headers,
    });
    expect(r.status).toBe(201);
    const secret: string = r.body.signing_secret;
    expect(secret).toMatch(/^whsec_/);
    const keys = await h.herald.redis.keys(`{${h.prefix}}:idem:*`);
    const values = await Promise.all(keys.map((k) => h.herald.redis.get(k)));
    expect(values.join('\n')).not.toContain(secret);
    const replay = await h.api('POST', '/v1/connections', {
      body: { name: 'sealed', type: 'webhook', config: { url: 'https://hooks.example.com/x' } },
      headers,
    });
    expect(replay.body.signing_secret).toBe(secret);
  });

  it('refuses the same key for a different request (422) and scopes keys per API key', async () => {
    const headers = { 'Idempotency-Key': `k-${Date.now()}-b` };
    await h.api('POST', '/v1/incidents', { body: incident, headers });
    const other = await h.api('POST', '/v1/incidents', { body: { ...incident, title: 'other' }, headers });
    expect(other.status).toBe(422);
    expect(other.body.code).toBe('idempotency_key_reused');
    const otherKey = await h.tokenWith(['incidents:write']);
    const fresh = await h.api('POST', '/v1/incidents', {
      body: { ...incident, title: 'other' },
      headers,
      token: otherKey,
    });
    expect(fresh.status).toBe(201);
    expect(fresh.headers.get('idempotent-replayed')).toBeNull();
  });

  it('answers 409 while the first request is still in flight', async () => {
    const key = `k-${Date.now()}-c`;
    const raw = JSON.stringify(incident);
    // Claim the key exactly as an in-flight request would (same fingerprint), then send it.
    const sha = (x: string) => createHash('sha256').update(x).digest('hex');
    const apiKeyId = (await h.herald.services.apiKeys.authenticate(h.token)).id;
    const store = new RedisIdempotencyStore(
      h.herald.redis,
      h.herald.keys,
      createSecretBox(Buffer.from(h.secretKey, 'base64')),
    );
    expect((await store.begin(apiKeyId, key, sha(`POST\n/v1/incidents\n${sha(raw)}`))).state).toBe('new');
    const busy = await h.api('POST', '/v1/incidents', {
      raw,
      headers: { 'Idempotency-Key': key, 'Content-Type': 'application/json' },
    });
    expect(busy.status).toBe(409);
    expect(busy.body.code).toBe('idempotency_key_in_use');
  });

  it('creates exactly one incident under concurrent identical requests', async () => {
    const key = `k-${Date.now()}-d`;
    const results = await Promise.all(
      Array.from({ length: 8 }, () =>
        h.api('POST', '/v1/incidents', { body: incident, headers: { 'Idempotency-Key': key } }),
      ),
    );
    expect(results.every((r) => r.status === 201 || r.status === 409)).toBe(true);
    expect(new Set(results.filter((r) => r.status === 201).map((r) => r.body.id)).size).toBe(1);
  });

  it('works on every POST: bulk templates, render, connection create and test, close', async () => {
    const tag = `every-${Date.now()}`;
    const twice = async (path: string, body: unknown) => {
      const headers = { 'Idempotency-Key': `${tag}-${path}` };
      const first = await h.api('POST', path, { body, headers });
      const second = await h.api('POST', path, { body, headers });
      expect(second.status, path).toBe(first.status);
      expect(second.text, path).toBe(first.text);
      expect(second.headers.get('idempotent-replayed'), path).toBe('true');
      expect(second.headers.get('location'), path).toBe(first.headers.get('location'));
      return first;
    };
    const bulk = await twice('/v1/templates', [
      { name: `${tag}-a`, body: 'a {{eta}}' },
      { name: `${tag}-b`, body: 'b' },
    ]);
    expect(bulk.status).toBe(201);
    expect(
      (await h.api('GET', '/v1/templates?limit=100')).body.data.filter((t: { name: string }) => t.name.startsWith(tag)),
    ).toHaveLength(2);
    await twice(`/v1/templates/${bulk.body.data[0].id}/render`, { variables: { eta: 'soon' } });
    const con = await twice('/v1/connections', {
      name: tag,
      type: 'teams',
      config: { webhook_url: 'https://prod.westus.logic.azure.com/workflows/abc' },
    });
    expect(con.status).toBe(201);
    const test = await twice(`/v1/connections/${con.body.id}/test`, {});
    expect(test.body.status).toBe('needs_send_message');
    const inc = await h.api('POST', '/v1/incidents', { body: incident });
    const close = await twice(`/v1/incidents/${inc.body.id}/close`, { resolution_summary: 'done' });
    expect(close.status).toBe(200);
    expect(close.headers.get('etag')).toMatch(/^"r\d+"$/);
  });

  it('rejects an over-long key', async () => {
    const r = await h.api('POST', '/v1/incidents', { body: incident, headers: { 'Idempotency-Key': 'k'.repeat(256) } });
    expect(r.status).toBe(422);
  });
});

describe('ETag / If-Match', () => {
  it('412 on a stale If-Match, 200 on the current one', async () => {
    const { body: inc, headers } = await h.api('POST', '/v1/incidents', { body: incident });
    const etag = headers.get('etag')!;
    const ok = await h.api('PATCH', `/v1/incidents/${inc.id}`, {
      body: { title: 'renamed' },
      headers: { 'If-Match': etag },
    });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('etag')).not.toBe(etag);
    const stale = await h.api('PATCH', `/v1/incidents/${inc.id}`, {
      body: { title: 'again' },
      headers: { 'If-Match': etag },
    });
    expect(stale.status).toBe(412);
    expect(stale.body.code).toBe('precondition_failed');
    const get = await h.api('GET', `/v1/incidents/${inc.id}`);
    expect(get.headers.get('etag')).toBe(ok.headers.get('etag'));
  });

  it('compares strongly: a weak tag never matches (RFC 9110 §13.1.1)', async () => {
    const { body: inc, headers } = await h.api('POST', '/v1/incidents', { body: incident });
    const weak = await h.api('PATCH', `/v1/incidents/${inc.id}`, {
      body: { title: 'weak' },
      headers: { 'If-Match': `W/${headers.get('etag')}` },
    });
    expect(weak.status).toBe(412);
  });

  it('412 on a stale If-Match for PATCH and DELETE of templates and connections, and for close', async () => {
    const tpl = await h.api('POST', '/v1/templates', { body: { name: `etag-${Date.now()}`, body: 'x' } });
    const con = await h.api('POST', '/v1/connections', {
      body: {
        name: 'etag',
        type: 'teams',
        config: { webhook_url: 'https://prod.westus.logic.azure.com/workflows/abc' },
      },
    });
    const inc = await h.api('POST', '/v1/incidents', { body: incident });
    for (const [path, etag] of [
      [`/v1/templates/${tpl.body.id}`, tpl.headers.get('etag')!],
      [`/v1/connections/${con.body.id}`, con.headers.get('etag')!],
    ] as const) {
      expect(etag, path).toMatch(/^"r\d+"$/);
      const next = await h.api('PATCH', path, {
        body: { name: `renamed-${Date.now()}` },
        headers: { 'If-Match': etag },
      });
      expect(next.status, path).toBe(200);
      expect(
        (await h.api('PATCH', path, { body: { name: 'stale' }, headers: { 'If-Match': etag } })).status,
        path,
      ).toBe(412);
      const del = await h.api('DELETE', path, { headers: { 'If-Match': etag } });
      expect(del.status, path).toBe(412);
      expect(del.body.code, path).toBe('precondition_failed');
      expect((await h.api('DELETE', path, { headers: { 'If-Match': next.headers.get('etag')! } })).status, path).toBe(
        204,
      );
    }
    await h.api('PATCH', `/v1/incidents/${inc.body.id}`, { body: { status: 'identified' } });
    const close = await h.api('POST', `/v1/incidents/${inc.body.id}/close`, {
      headers: { 'If-Match': inc.headers.get('etag')! },
    });
    expect(close.status).toBe(412);
  });
});

describe('authentication and scopes', () => {
  it('401 invalid_token for malformed, unknown and revoked tokens; 403 names the scope', async () => {
    const malformed = await h.api('GET', '/v1/incidents', { token: 'nope' });
    expect(malformed.status).toBe(401);
    expect(malformed.headers.get('www-authenticate')).toBe('Bearer realm="herald", error="invalid_token"');
    const unknown = await h.api('GET', '/v1/incidents', { token: `hld_${'a'.repeat(49)}` });
    expect(unknown.status).toBe(401);

    const reader = await h.tokenWith(['incidents:read']);
    const forbidden = await h.api('POST', '/v1/incidents', { body: incident, token: reader });
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.code).toBe('insufficient_scope');
    expect(forbidden.headers.get('www-authenticate')).toBe(
      'Bearer realm="herald", error="insufficient_scope", scope="incidents:write"',
    );
    expect((await h.api('GET', '/v1/incidents', { token: reader })).status).toBe(200);
  });

  it('another scheme is a missing token (no error code, RFC 6750 §3.1); an empty Bearer is malformed', async () => {
    const basic = await h.api('GET', '/v1/incidents', {
      token: null,
      headers: { Authorization: 'Basic dXNlcjpwYXNz' },
    });
    expect(basic.status).toBe(401);
    expect(basic.headers.get('www-authenticate')).toBe('Bearer realm="herald"');
    const empty = await h.api('GET', '/v1/incidents', { token: null, headers: { Authorization: 'Bearer' } });
    expect(empty.status).toBe(401);
    expect(empty.headers.get('www-authenticate')).toBe('Bearer realm="herald", error="invalid_token"');
    const two = await h.api('GET', '/v1/incidents', {
      token: null,
      headers: { Authorization: `Bearer ${h.token} extra` },
    });
    expect(two.headers.get('www-authenticate')).toBe('Bearer realm="herald", error="invalid_token"');
  });

  it('a 403 is an authenticated response: it carries the RateLimit headers', async () => {
    const reader = await h.tokenWith(['incidents:read']);
    const forbidden = await h.api('GET', '/v1/templates', { token: reader });
    expect(forbidden.status).toBe(403);
    expect(forbidden.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(forbidden.headers.get('ratelimit-policy')).toBe('"default";q=1000;w=60');
    expect(forbidden.headers.get('ratelimit')).toMatch(/^"default";r=\d+;t=\d+$/);
  });

  it('revocation is honoured at once, and last_used_at is recorded', async () => {
    const { key, token } = await h.herald.services.apiKeys.create(
      { name: 'short-lived', scopes: ['*'] },
      { type: 'system', id: 't', name: 't' },
    );
    expect((await h.api('GET', '/v1/incidents', { token })).status).toBe(200);
    const used = await h.herald.services.apiKeys.get(key.id);
    expect(used.last_used_at).not.toBeNull();
    await h.herald.services.apiKeys.revoke(key.id, { type: 'system', id: 't', name: 't' });
    const t0 = Date.now();
    await waitFor(async () => (await h.api('GET', '/v1/incidents', { token })).status === 401, {
      timeoutMs: 1000,
      what: 'revocation',
    });
    expect(Date.now() - t0).toBeLessThan(1000);
  });

  it('expired keys are refused', async () => {
    const { key, token } = await h.herald.services.apiKeys.create(
      { name: 'exp', scopes: ['*'], expires_in: '1m' },
      { type: 'system', id: 't', name: 't' },
    );
    expect(key.expires_at).not.toBeNull();
    expect((await h.api('GET', '/v1/incidents', { token })).status).toBe(200);
    // Move its expiry into the past, as time passing would.
    const stored = JSON.parse((await h.herald.redis.get(h.herald.keys.apiKey(key.id)))!);
    await h.herald.redis.set(
      h.herald.keys.apiKey(key.id),
      JSON.stringify({ ...stored, expires_at: new Date(Date.now() - 1000).toISOString() }),
    );
    // A key's record may be cached by a process for AUTH_CACHE_MS: the change holds within a second.
    const r = await waitFor(
      async () => {
        const x = await h.api('GET', '/v1/incidents', { token });
        return x.status === 401 ? x : false;
      },
      { timeoutMs: 1000, what: '401 once the stored expiry has passed' },
    );
    expect(r.headers.get('www-authenticate')).toContain('invalid_token');
  });
});

describe('rate limits', () => {
  it('carries RateLimit headers and answers 429 with Retry-After past the limit', async () => {
    const t = await startHerald({ HERALD_RATE_LIMIT: '3' });
    try {
      const first = await t.api('GET', '/v1/incidents');
      expect(first.headers.get('ratelimit-policy')).toBe('"default";q=3;w=60');
      expect(first.headers.get('ratelimit')).toMatch(/^"default";r=2;t=\d+$/);
      await t.api('GET', '/v1/incidents');
      await t.api('GET', '/v1/incidents');
      const limited = await t.api('GET', '/v1/incidents');
      expect(limited.status).toBe(429);
      expect(limited.body.code).toBe('rate_limited');
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
      // Another key has its own budget.
      const other = await t.tokenWith(['*']);
      expect((await t.api('GET', '/v1/incidents', { token: other })).status).toBe(200);
    } finally {
      await t.close();
    }
  });
});

describe('pagination', () => {
  it('pages newest first without skipping or repeating while items are added', async () => {
    const t = await startHerald({ HERALD_RATE_LIMIT: '10000' });
    try {
      const made: string[] = [];
      for (let i = 0; i < 12; i++)
        made.push((await t.api('POST', '/v1/incidents', { body: { ...incident, title: `n${i}` } })).body.id);
      const seen: string[] = [];
      let cursor: string | null = null;
      let round = 0;
      do {
        const q: string = cursor ? `&cursor=${cursor}` : '';
        const page = await t.api('GET', `/v1/incidents?limit=5${q}`);
        expect(page.body.pagination.limit).toBe(5);
        seen.push(...page.body.data.map((i: { id: string }) => i.id));
        cursor = page.body.pagination.next_cursor;
        // New incidents arrive between pages: they are newer than the cursor, so never served here.
        await t.api('POST', '/v1/incidents', { body: { ...incident, title: `late${round++}` } });
      } while (cursor);
      expect(seen).toEqual([...made].reverse());
    } finally {
      await t.close();
    }
  });

  it('every list refuses a cursor another kind of list issued (400), instead of starting over', async () => {
    const a = (await h.api('POST', '/v1/incidents', { body: incident })).body;
    await h.api('POST', '/v1/incidents', { body: incident });
    await h.api('PATCH', `/v1/incidents/${a.id}`, { body: { status: 'identified' } });
    const tpl = (await h.api('POST', '/v1/templates', { body: { name: `cursor-kinds-${Date.now()}`, body: 'v1' } }))
      .body;
    await h.api('PATCH', `/v1/templates/${tpl.id}`, { body: { body: 'v2' } });
    const byId: string = (await h.api('GET', '/v1/incidents?limit=1')).body.pagination.next_cursor;
    const byOffset: string = (await h.api('GET', `/v1/incidents/${a.id}/events?limit=1`)).body.pagination.next_cursor;
    expect(byId).toBeTruthy();
    expect(byOffset).toBeTruthy();
    const lists: [string, string][] = [
      ['/v1/incidents', byOffset],
      ['/v1/templates', byOffset],
      ['/v1/connections', byOffset],
      [`/v1/incidents/${a.id}/events`, byId],
      [`/v1/templates/${tpl.id}/versions`, byId],
    ];
    for (const [path, cursor] of lists) {
      const r = await h.api('GET', `${path}?cursor=${cursor}`);
      expect(r.status, path).toBe(400);
      expect(r.body.code, path).toBe('invalid_cursor');
    }
  });

  it('every list validates limit (422 on field limit) and cursor (400 invalid_cursor)', async () => {
    const inc = (await h.api('POST', '/v1/incidents', { body: incident })).body;
    const tpl = (await h.api('POST', '/v1/templates', { body: { name: `limits-${Date.now()}`, body: 'x' } })).body;
    for (const path of [
      '/v1/incidents',
      `/v1/incidents/${inc.id}/events`,
      '/v1/templates',
      `/v1/templates/${tpl.id}/versions`,
      '/v1/connections',
    ]) {
      for (const limit of ['0', '101', 'abc', '1.5']) {
        const r = await h.api('GET', `${path}?limit=${limit}`);
        expect(r.status, `${path} limit=${limit}`).toBe(422);
        expect(r.body.errors, path).toEqual([expect.objectContaining({ field: 'limit' })]);
      }
      const bad = await h.api('GET', `${path}?cursor=not-a-cursor`);
      expect(bad.status, path).toBe(400);
      expect(bad.body.code, path).toBe('invalid_cursor');
      const ok = await h.api('GET', `${path}?limit=1`);
      expect(ok.body.pagination, path).toEqual({ next_cursor: expect.toBeOneOf([null, expect.any(String)]), limit: 1 });
    }
  });

  it('validates limit and cursor, and filters by status and severity', async () => {
    expect((await h.api('GET', '/v1/incidents?limit=0')).status).toBe(422);
    const over = await h.api('GET', '/v1/incidents?limit=101');
    expect(over.status).toBe(422);
    expect(over.body.errors[0].field).toBe('limit');
    const bad = await h.api('GET', '/v1/incidents?cursor=garbage');
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('invalid_cursor');
    const low = await h.api('POST', '/v1/incidents', { body: { title: 'low one', severity: 'low' } });
    await h.api('PATCH', `/v1/incidents/${low.body.id}`, { body: { status: 'monitoring' } });
    const filtered = await h.api('GET', '/v1/incidents?status=monitoring,identified&severity=low');
    expect(filtered.body.data.map((i: { id: string }) => i.id)).toContain(low.body.id);
    expect(
      filtered.body.data.every(
        (i: { status: string; severity: string }) =>
          i.severity === 'low' && ['monitoring', 'identified'].includes(i.status),
      ),
    ).toBe(true);
    const badFilter = await h.api('GET', '/v1/incidents?status=sleeping');
    expect(badFilter.status).toBe(422);
  });
});
