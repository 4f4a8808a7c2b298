import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../support/child.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/peers/webhook-receiver.js';

/**
 * The OpenAPI document as a client author uses it: openapi-typescript in its default settings
 * generates types from manifest/openapi.json, openapi-fetch drives the whole story with them, a
 * strict type-check proves the README's minimal bodies fit the generated types, and the script
 * runs against a real Herald delivering to a local webhook receiver (the signature is checked
 * elsewhere: the story only learns the secret inside the script).
 */
const run = promisify(execFile);
const bin = (name: string) => join(ROOT, 'node_modules', '.bin', name);

const STORY = `import createClient from 'openapi-fetch';
import type { paths } from './api.js';

const client = createClient<paths>({ baseUrl: \`\${process.env.HERALD_URL}/v1\`, headers: { Authorization: \`Bearer \${process.env.HERALD_TOKEN}\` } });
const fail = (what: string, error: unknown): never => {
  throw new Error(\`\${what}: \${JSON.stringify(error)}\`);
};

// The minimal bodies of the README: every field with a default left out.
const hook = await client.POST('/connections', { body: { name: 'status webhook', type: 'webhook', config: { url: process.env.HOOK_URL! } } });
if (!hook.data) fail('create connection', hook.error);
const template = await client.POST('/templates', { body: { name: 'customer-update', body: 'Investigating {{incident.title}}. Next update in {{eta}}.' } });
if (!template.data || !('id' in template.data)) fail('create template', template.error);
const templateId = (template.data as { id: string }).id;
const incident = await client.POST('/incidents', {
  body: { title: 'Checkout errors in EU', severity: 'major', template_ids: [templateId] },
  params: { header: { 'Idempotency-Key': 'client-story-1' } },
});
if (!incident.data) fail('create incident', incident.error);
const incidentId = incident.data!.id;
const etag = incident.response.headers.get('etag') ?? undefined;
const patched = await client.PATCH('/incidents/{id}', { params: { path: { id: incidentId }, header: { 'If-Match': etag } }, body: { status: 'identified' } });
if (!patched.data) fail('update incident', patched.error);
const executed = await client.POST('/incidents/{id}/execute', { params: { path: { id: incidentId } }, body: { variables: { eta: '30 minutes' } } });
if (executed.response.status !== 202 || !executed.data || !('id' in executed.data)) fail('execute', executed.error);
const executionId = (executed.data as { id: string }).id;
let delivered = false;
for (let i = 0; i < 600 && !delivered; i++) {
  const receipt = await client.GET('/incidents/{id}/executions/{executionId}', { params: { path: { id: incidentId, executionId } } });
  delivered = receipt.data?.deliveries.every((d) => d.status === 'delivered') ?? false;
  if (!delivered) await new Promise((r) => setTimeout(r, 100));
}
const resolved = await client.PATCH('/incidents/{id}', { params: { path: { id: incidentId } }, body: { status: 'resolved', resolution_summary: 'Rolled back' } });
if (!resolved.data) fail('resolve', resolved.error);
const closed = await client.POST('/incidents/{id}/close', { params: { path: { id: incidentId } } });
if (!closed.data) fail('close', closed.error);
const missing = await client.GET('/incidents/{id}', { params: { path: { id: 'inc_01JH3ZK6X2B8V4N0Q7R5T9W1YC' } } });
console.log(JSON.stringify({ delivered, status: closed.data!.status, signing: hook.data!.signing_secret?.startsWith('whsec_'), missing: missing.error?.code }));
`;

const TSCONFIG = {
  compilerOptions: {
    target: 'ES2023',
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: ['node'],
    noUncheckedIndexedAccess: true,
  },
  include: ['*.ts'],
};

let dir: string;
let h: TestHerald;
let hook: WebhookReceiver;
beforeAll(async () => {
  // Inside the project, so the script resolves openapi-fetch from its node_modules.
  dir = mkdtempSync(join(ROOT, '.tmp-openapi-client-'));
  [h, hook] = await Promise.all([startHerald(), startWebhookReceiver({ acceptUnverified: true })]);
});
afterAll(async () => {
  await Promise.all([h?.close(), hook?.close()]);
  rmSync(dir, { recursive: true, force: true });
});

describe('a client generated from manifest/openapi.json', () => {
  it('type-checks against the README’s minimal bodies and drives the whole story', async () => {
    await run(bin('openapi-typescript'), [join(ROOT, 'manifest', 'openapi.json'), '-o', join(dir, 'api.d.ts')], {
      cwd: dir,
    });
    writeFileSync(join(dir, 'story.ts'), STORY);
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(TSCONFIG));
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
    // A type error fails here with tsc's own message.
    await run(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir], {
      cwd: dir,
    }).catch((e: { stdout?: string }) => {
      throw new Error(`the story does not type-check against the generated client:\n${e.stdout ?? String(e)}`);
    });

    const out = await run(process.execPath, ['--import', 'tsx', join(dir, 'story.ts')], {
      cwd: dir,
      env: { ...process.env, HERALD_URL: h.url, HERALD_TOKEN: h.token, HOOK_URL: `${hook.url}/herald` },
    });
    const result = JSON.parse(out.stdout.trim()) as {
      delivered: boolean;
      status: string;
      signing: boolean;
      missing: string;
    };
    expect(result).toEqual({ delivered: true, status: 'closed', signing: true, missing: 'not_found' });
    expect(hook.requests.length).toBeGreaterThanOrEqual(1);
  });
});
