import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCOPES, type Scope } from '../../src/domain/common/api-key.js';
import { startHerald, type TestHerald } from '../support/herald.js';

/**
 * Every endpoint of manifest/openapi.json × every scope: a key holding exactly one scope is let
 * through (any answer but 401/403) only by the scope the operation documents ("Scope: `…`" in
 * its description), and refused with 403 `insufficient_scope` naming that scope by every other;
 * no key at all is a 401. Nothing is created: bodies are `{}` and ids do not exist.
 */
interface Operation {
  method: string;
  path: string;
  scope: Scope;
}

const doc = JSON.parse(readFileSync(new URL('../../manifest/openapi.json', import.meta.url), 'utf8')) as {
  paths: Record<string, Record<string, { description?: string; 'x-scope'?: string; security?: unknown[] }>>;
};

const operations: Operation[] = Object.entries(doc.paths).flatMap(([path, ops]) =>
  Object.entries(ops)
    .filter(([method]) => ['get', 'post', 'patch', 'put', 'delete'].includes(method))
    .map(([method, op]) => {
      const documented = op['x-scope'] ?? /Scope[s]?:\s*`([a-z]+:[a-z]+)`/.exec(op.description ?? '')?.[1];
      if (documented === undefined || !(SCOPES as readonly string[]).includes(documented))
        throw new Error(`${method.toUpperCase()} ${path} documents no scope`);
      return { method: method.toUpperCase(), path, scope: documented as Scope };
    }),
);

const FAKE: Record<string, string> = {
  id: 'x_01JZZZZZZZZZZZZZZZZZZZZZZZ',
  executionId: 'exe_01JZZZZZZZZZZZZZZZZZZZZZZZ',
  n: '1',
};
const concrete = (path: string) => `/v1${path.replace(/\{(\w+)\}/g, (_m, name: string) => FAKE[name] ?? 'x')}`;

let h: TestHerald;
const tokens = new Map<Scope, string>();

beforeAll(async () => {
  h = await startHerald();
  for (const s of SCOPES) tokens.set(s, await h.tokenWith([s], `only ${s}`));
});
afterAll(async () => {
  await h?.close();
});

function call(
  op: Operation,
  token: string | null,
  body: unknown = op.method === 'POST' || op.method === 'PATCH' ? {} : undefined,
) {
  return h.api(op.method, concrete(op.path), { token, body });
}

describe('endpoint × scope', () => {
  it('the document lists every endpoint with a scope (sanity of the walk itself)', () => {
    expect(operations.length).toBeGreaterThanOrEqual(24);
    expect(new Set(operations.map((o) => o.scope))).toEqual(new Set(SCOPES));
  });

  it.each(operations.map((o) => [`${o.method} ${o.path}`, o] as const))(
    '%s: allowed exactly by its documented scope',
    async (_name, op) => {
      const verdicts: string[] = [];
      const expected: string[] = [];
      for (const scope of SCOPES) {
        const r = await call(op, tokens.get(scope)!);
        const allowed = r.status !== 401 && r.status !== 403;
        verdicts.push(
          `${scope}:${allowed ? 'allowed' : `${r.status} ${r.body?.code} ${String(r.headers.get('www-authenticate'))}`}`,
        );
        expected.push(
          `${scope}:${scope === op.scope ? 'allowed' : `403 insufficient_scope Bearer realm="herald", error="insufficient_scope", scope="${op.scope}"`}`,
        );
        if (r.status >= 500) throw new Error(`${op.method} ${op.path} with ${scope} answered ${r.status}`);
      }
      expect(verdicts).toEqual(expected);
      const none = await call(op, null);
      expect(none.status).toBe(401);
      expect(none.body).toMatchObject({ code: 'unauthenticated' });
    },
  );

  it('render with incident_id needs incidents:read on top of templates:read', async () => {
    const render = operations.find((o) => o.path === '/templates/{id}/render')!;
    const body = { incident_id: 'inc_01JZZZZZZZZZZZZZZZZZZZZZZZ' };
    for (const scope of SCOPES) {
      const r = await call(render, tokens.get(scope)!, body);
      expect(r.status, scope).toBe(403);
      expect(r.headers.get('www-authenticate'), scope).toContain(
        `scope="${scope === 'templates:read' ? 'incidents:read' : 'templates:read'}"`,
      );
    }
    const both = await h.tokenWith(['templates:read', 'incidents:read']);
    expect((await call(render, both, body)).status).toBe(404); // the template does not exist: past both checks
  });
});
