import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { STATUS_BY_CODE } from '../../src/http/middleware/problem.js';

/**
 * docs/api.md against the code it describes: every operation of the generated OpenAPI document
 * is in its endpoint tables with its method, path and scope (and nothing else is), every channel
 * type has its config section, and the error table gives every code the status the problem
 * handler answers. A new route, type or error code fails here until the guide says so.
 */
const ROOT = join(import.meta.dirname, '..', '..');
const guide = readFileSync(join(ROOT, 'docs', 'api.md'), 'utf8');

interface Operation {
  operationId?: string;
  description?: string;
}
interface OpenApi {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, { enum?: string[] }> };
}
const openapi = JSON.parse(readFileSync(join(ROOT, 'manifest', 'openapi.json'), 'utf8')) as OpenApi;
const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

const operations = Object.entries(openapi.paths).flatMap(([path, ops]) =>
  Object.entries(ops)
    .filter(([method]) => METHODS.includes(method))
    .map(([method, op]) => ({
      method: method.toUpperCase(),
      path,
      scope: /Scope: `([^`]+)`/.exec(op.description ?? '')?.[1],
      id: op.operationId ?? `${method} ${path}`,
    })),
);

/** The guide's endpoint rows under /v1: `| \`METHOD\` | \`/path\` | \`scope\` | … |`. */
const rows = [...guide.matchAll(/^\| `(GET|POST|PUT|PATCH|DELETE)` \| `(\/[^`]*)` \| `([a-z:*]+)` \|/gm)].map((m) => ({
  method: m[1]!,
  path: m[2]!,
  scope: m[3]!,
}));

describe('docs/api.md', () => {
  it('finds the operations and the rows', () => {
    expect(operations.length).toBeGreaterThan(20);
    expect(rows.length).toBeGreaterThan(20);
  });

  it.each(operations.map((o) => [o.id, o]))('lists %s with its method, path and scope', (_id, op) => {
    expect(op.scope, `${op.id} names its scope in the OpenAPI description`).toBeDefined();
    expect(rows).toContainEqual({ method: op.method, path: op.path, scope: op.scope });
  });

  it('lists no endpoint the API does not have', () => {
    const known = operations.map((o) => `${o.method} ${o.path}`);
    expect(rows.map((r) => `${r.method} ${r.path}`).filter((r) => !known.includes(r))).toEqual([]);
  });

  it('has a config section with a JSON example for every channel type', () => {
    const types = openapi.components.schemas.ChannelType?.enum ?? [];
    expect(types.length).toBeGreaterThanOrEqual(8);
    for (const type of types) {
      const section = new RegExp(`^### ${type}\\n([\\s\\S]*?)(?=^##)`, 'm').exec(guide)?.[1];
      expect(section, `### ${type}`).toBeDefined();
      const example = /```json\n([\s\S]*?)```/.exec(section!)?.[1];
      expect(example, `${type}'s JSON example`).toBeDefined();
      expect((JSON.parse(example!) as { type: string }).type).toBe(type);
    }
  });

  it('gives every error code the status the problem handler answers', () => {
    const table = new Map<string, number>();
    for (const m of guide.matchAll(/^\| `(\d{3})` \| (.+) \|$/gm))
      for (const code of m[2]!.matchAll(/`([a-z_]+)`/g)) table.set(code[1]!, Number(m[1]));
    expect(Object.fromEntries(table)).toEqual(STATUS_BY_CODE);
  });
});
