import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { payloadOf } from '../../src/domain/event/catalog.js';
import type { EndpointRecord } from '../../src/domain/event/endpoint.js';
import { EventSender } from '../../src/services/events.js';
import { createSecretBox } from '../../src/store/crypto.js';
import { useDocReceiver } from '../support/doc-receiver.js';

/**
 * docs/events.md's Node receiver, run as written against Herald's own event signer (EventSender):
 * the block after `<!-- event-receiver -->` is saved and started with node, so what a reader
 * copies accepts exactly what Herald sends, drops a repeat, and refuses what it must.
 */
const secret = `whsec_${randomBytes(32).toString('base64')}`;
const box = createSecretBox(randomBytes(32));
const endpoint: EndpointRecord = {
  id: 'evp_01JH3ZK6X2B8V4N0Q7R5T9W1YC',
  url: 'http://127.0.0.1/',
  description: '',
  event_types: ['*'],
  filter: null,
  payload: 'full',
  enabled: true,
  disabled_reason: null,
  secrets: [{ sealed: box.seal(secret), created_at: new Date().toISOString(), expires_at: null }],
  created_at: new Date().toISOString(),
  updated_at: new Date().toISOString(),
  rev: 1,
};
// Inside the repository, so the block's `standardwebhooks` import resolves as in a reader's project.
const receiver = useDocReceiver({ page: 'events.md', marker: 'event-receiver', secret, inRepo: true });

const body = (id: string) =>
  JSON.stringify(
    payloadOf(
      {
        id,
        type: 'incident.created',
        incident_id: 'inc_01TEST',
        sequence: 1,
        event: JSON.stringify({ at: new Date().toISOString(), data: { title: 'Checkout ✅', severity: 'major' } }),
        at_ms: Date.now(),
      },
      'full',
    ),
  );

/** An event as Herald sends it: EventSender's headers over `text`. */
function post(id: string, text: string, opts: { at?: Date; sentBody?: string; e?: EndpointRecord } = {}) {
  const sender = new EventSender({
    box,
    clock: { now: () => new Date() },
    http: { request: () => Promise.reject(new Error('unused')) },
  });
  return fetch(receiver.url, {
    method: 'POST',
    headers: sender.headers(opts.e ?? endpoint, id, text, opts.at ?? new Date()),
    body: opts.sentBody ?? text,
  });
}

describe("docs/events.md's receiver", () => {
  it('accepts an event Herald signed, once per webhook-id', async () => {
    const text = body('evt_1');
    expect((await post('evt_1', text)).status).toBe(204);
    expect((await post('evt_1', text)).status).toBe(204); // a retry: accepted, not handled again
    await receiver.printed('incident.created inc_01TEST 1');
    expect(receiver.stdout.match(/incident\.created inc_01TEST 1/g)).toHaveLength(1);
  });

  it('accepts both signatures of a rotation, and refuses a changed body, a stale time, another secret', async () => {
    const other = `whsec_${randomBytes(32).toString('base64')}`;
    const rotating: EndpointRecord = {
      ...endpoint,
      secrets: [
        { sealed: box.seal(other), created_at: endpoint.created_at, expires_at: null },
        { ...endpoint.secrets[0]!, expires_at: new Date(Date.now() + 3_600_000).toISOString() },
      ],
    };
    expect((await post('evt_2', body('evt_2'), { e: rotating })).status).toBe(204);
    const text = body('evt_3');
    expect((await post('evt_3', text, { sentBody: text.replace('Checkout', 'Changed') })).status).toBe(401);
    expect((await post('evt_3', text, { at: new Date(Date.now() - 10 * 60_000) })).status).toBe(401);
    const onlyOther = { ...endpoint, secrets: [{ ...endpoint.secrets[0]!, sealed: box.seal(other) }] };
    expect((await post('evt_3', text, { e: onlyOther })).status).toBe(401);
    expect((await fetch(receiver.url, { method: 'POST', body: text })).status).toBe(401);
  });
});
