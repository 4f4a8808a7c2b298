import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signWebhook } from '../../src/channels/webhook/send.js';

/**
 * docs/api.md's webhook receiver, run as written against Herald's own signer: the block after
 * `<!-- webhook-receiver -->` is saved as a file and started with node, so the example a reader
 * copies accepts exactly what Herald sends and refuses what it must.
 */
const ROOT = join(import.meta.dirname, '..', '..');
const DEADLINE_MS = 30_000;

function receiverSource(): string {
  const doc = readFileSync(join(ROOT, 'docs', 'api.md'), 'utf8');
  const m = /<!-- webhook-receiver -->\s*```js\n([\s\S]*?)```/.exec(doc);
  if (!m) throw new Error('docs/api.md has no <!-- webhook-receiver --> js block');
  return m[1]!;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

const secret = `whsec_${randomBytes(24).toString('base64')}`;
const dir = mkdtempSync(join(tmpdir(), 'herald-receiver-'));
let child: ChildProcess | undefined;
let stdout = '';
let url = '';

beforeAll(async () => {
  const file = join(dir, 'receiver.mjs');
  writeFileSync(file, receiverSource());
  const port = await freePort();
  url = `http://127.0.0.1:${port}/herald`;
  child = spawn(process.execPath, [file], {
    env: { ...process.env, WEBHOOK_SECRET: secret, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  // Poll until it accepts connections: it prints nothing when it starts listening.
  const until = Date.now() + DEADLINE_MS;
  for (;;) {
    const up = await fetch(url, { method: 'POST', body: '{}' }).then(
      () => true,
      () => false,
    );
    if (up) break;
    if (child.exitCode !== null || Date.now() > until) throw new Error(`the receiver did not start: ${stderr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
});
afterAll(() => {
  child?.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
});

/** A delivery as Herald sends it: the headers of src/channels/webhook/send.ts over `body`. */
function post(id: string, body: string, opts: { key?: string; at?: number; sentBody?: string } = {}) {
  const timestamp = Math.floor((opts.at ?? Date.now()) / 1000);
  return fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signWebhook(opts.key ?? secret, id, timestamp, body),
    },
    body: opts.sentBody ?? body,
  });
}

const event = (id: string, subject: string) =>
  JSON.stringify({
    type: 'incident.executed',
    test: false,
    delivery_id: id,
    incident_id: 'inc_01TEST',
    subject,
    body: 'We are investigating. Näxt update in 30 minutes ✅',
  });

describe("docs/api.md's webhook receiver", () => {
  it('accepts a delivery Herald signed, once per webhook-id', async () => {
    const body = event('dlv_1', 'Checkout errors');
    expect((await post('dlv_1', body)).status).toBe(204);
    expect((await post('dlv_1', body)).status).toBe(204); // a retry: accepted, not handled again
    const deadline = Date.now() + DEADLINE_MS;
    while (!stdout.includes('incident.executed inc_01TEST Checkout errors') && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    expect(stdout.match(/incident\.executed inc_01TEST Checkout errors/g)).toHaveLength(1);
  });

  it('refuses a changed body, another secret, a stale timestamp and a missing signature', async () => {
    const body = event('dlv_2', 'Refused');
    expect((await post('dlv_2', body, { sentBody: body.replace('Refused', 'Changed') })).status).toBe(401);
    const other = `whsec_${randomBytes(24).toString('base64')}`;
    expect((await post('dlv_2', body, { key: other })).status).toBe(401);
    expect((await post('dlv_2', body, { at: Date.now() - 10 * 60_000 })).status).toBe(401);
    expect((await fetch(url, { method: 'POST', body })).status).toBe(401);
    expect(stdout).not.toContain('Refused');
  });
});
