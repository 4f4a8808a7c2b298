import { EVENT_CATALOG_TYPES } from '../../src/domain/event/catalog.js';
import { readFileSync } from 'node:fs';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildOpenApiDocument } from '../../src/http/openapi.js';
import { startHerald, type TestHerald } from '../support/herald.js';

let h: TestHerald;
beforeAll(async () => {
  h = await startHerald();
});
afterAll(async () => {
  await h.close();
});

describe('OpenAPI', () => {
  it('manifest/openapi.json is current (run `npm run openapi` after changing a schema or route)', () => {
    const checkedIn: unknown = JSON.parse(
      readFileSync(new URL('../../manifest/openapi.json', import.meta.url), 'utf8'),
    );
    expect(checkedIn).toEqual(JSON.parse(JSON.stringify(buildOpenApiDocument())));
  });

  it('is a valid OpenAPI 3.1 document', async () => {
    const validator = new Validator();
    const result = await validator.validate(
      JSON.parse(JSON.stringify(buildOpenApiDocument())) as Record<string, unknown>,
    );
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('is served at GET /v1/openapi.json without an API key, and documents every route', async () => {
    const r = await h.api('GET', '/v1/openapi.json', { token: null });
    expect(r.status).toBe(200);
    expect(r.body.openapi).toBe('3.1.0');
    const paths = Object.keys(r.body.paths);
    for (const p of [
      '/incidents',
      '/incidents/{id}/execute',
      '/incidents/{id}/executions/{executionId}/redeliver',
      '/templates/{id}/render',
      '/connections/{id}/test',
    ]) {
      expect(paths).toContain(p);
    }
  });

  it('names every operation, and declares the headers and statuses the request chain can answer', async () => {
    type Op = {
      operationId?: string;
      parameters?: { in: string; name: string }[];
      requestBody?: unknown;
      responses: Record<string, { headers?: Record<string, unknown> }>;
    };
    const doc = JSON.parse(JSON.stringify(buildOpenApiDocument())) as {
      info: { license?: unknown };
      paths: Record<string, Record<string, Op>>;
      webhooks?: Record<string, unknown>;
      components: { headers: Record<string, unknown> };
    };
    expect(doc.info.license).toMatchObject({ name: 'MIT' });
    // The webhook connection's payload, then one entry per integrator event type (docs/events.md).
    expect(Object.keys(doc.webhooks ?? {})).toEqual([
      'incidentDelivery',
      ...[...EVENT_CATALOG_TYPES, 'ping'].map((t) => `event.${t}`),
    ]);
    const ids = new Set<string>();
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        const where = `${method.toUpperCase()} ${path}`;
        expect(op.operationId, where).toMatch(/^[a-z][A-Za-z]+$/);
        ids.add(op.operationId!);
        const statuses = Object.keys(op.responses);
        for (const s of ['400', '401', '403', '429', '431', '503']) expect(statuses, `${where} ${s}`).toContain(s);
        if (op.requestBody) for (const s of ['413', '415', '422']) expect(statuses, `${where} ${s}`).toContain(s);
        if (path.includes('{')) expect(statuses, where).toContain('404');
        const headerParams = (op.parameters ?? []).filter((p) => p.in === 'header').map((p) => p.name);
        if (method === 'post') {
          expect(headerParams, where).toContain('Idempotency-Key');
          expect(statuses, where).toContain('409');
        }
        if (headerParams.includes('If-Match')) expect(statuses, where).toContain('412');
        for (const [status, response] of Object.entries(op.responses)) {
          expect(Object.keys(response.headers ?? {}), `${where} ${status}`).toContain('X-Request-Id');
          if (status === '429' || status === '503')
            expect(Object.keys(response.headers ?? {})).toContain('Retry-After');
          if (status === '201' || status === '202') expect(Object.keys(response.headers ?? {})).toContain('Location');
        }
      }
    }
    expect(ids.size).toBe(Object.values(doc.paths).reduce((n, ops) => n + Object.keys(ops).length, 0));
    // What the server really sends on a write is declared: ETag, RateLimit and the request id.
    const created = await h.api('POST', '/v1/incidents', { body: { title: 'Headers', severity: 'minor' } });
    const declared = Object.keys(doc.paths['/incidents']!.post!.responses['201']!.headers ?? {}).map((n) =>
      n.toLowerCase(),
    );
    for (const name of ['location', 'etag', 'ratelimit', 'ratelimit-policy', 'x-request-id']) {
      expect(created.headers.get(name), name).not.toBeNull();
      expect(declared).toContain(name);
    }
  });
});
