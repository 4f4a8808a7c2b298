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
    const checkedIn: unknown = JSON.parse(readFileSync(new URL('../../manifest/openapi.json', import.meta.url), 'utf8'));
    expect(checkedIn).toEqual(JSON.parse(JSON.stringify(buildOpenApiDocument())));
  });

  it('is a valid OpenAPI 3.1 document', async () => {
    const validator = new Validator();
    const result = await validator.validate(JSON.parse(JSON.stringify(buildOpenApiDocument())) as Record<string, unknown>);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('is served at GET /v1/openapi.json without an API key, and documents every route', async () => {
    const r = await h.api('GET', '/v1/openapi.json', { token: null });
    expect(r.status).toBe(200);
    expect(r.body.openapi).toBe('3.1.0');
    const paths = Object.keys(r.body.paths);
    for (const p of ['/incidents', '/incidents/{id}/execute', '/incidents/{id}/executions/{executionId}/redeliver', '/templates/{id}/render', '/connections/{id}/test']) {
      expect(paths).toContain(p);
    }
  });
});
