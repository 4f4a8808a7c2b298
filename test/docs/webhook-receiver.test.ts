import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { signWebhook } from '../../src/domain/common/webhook-signature.js';
import { useDocReceiver } from '../support/doc-receiver.js';

/**
 * docs/api.md's webhook receiver, run as written against Herald's own signer: the block after
 * `<!-- webhook-receiver -->` is saved as a file and started with node, so the example a reader
 * copies accepts exactly what Herald sends and refuses what it must.
 */
const secret = `whsec_${randomBytes(24).toString('base64')}`;
const receiver = useDocReceiver({ page: 'api.md', marker: 'webhook-receiver', secret });

/** A delivery as Herald sends it: the headers of src/channels/webhook/send.ts over `body`. */
function post(id: string, body: string, opts: { key?: string; at?: number; sentBody?: string } = {}) {
  const timestamp = Math.floor((opts.at ?? Date.now()) / 1000);
  return fetch(receiver.url, {
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
    await receiver.printed('incident.executed inc_01TEST Checkout errors');
    expect(receiver.stdout.match(/incident\.executed inc_01TEST Checkout errors/g)).toHaveLength(1);
  });

  it('refuses a changed body, another secret, a stale timestamp and a missing signature', async () => {
    const body = event('dlv_2', 'Refused');
    expect((await post('dlv_2', body, { sentBody: body.replace('Refused', 'Changed') })).status).toBe(401);
    const other = `whsec_${randomBytes(24).toString('base64')}`;
    expect((await post('dlv_2', body, { key: other })).status).toBe(401);
    expect((await post('dlv_2', body, { at: Date.now() - 10 * 60_000 })).status).toBe(401);
    expect((await fetch(receiver.url, { method: 'POST', body })).status).toBe(401);
    expect(receiver.stdout).not.toContain('Refused');
  });
});
