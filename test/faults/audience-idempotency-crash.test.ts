import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { audienceCreated } from '../../src/http/routes/audiences.js';
import type { IdempotentRequest } from '../../src/ports/index.js';
import { createSecretBox } from '../../src/store/crypto.js';
import { RedisIdempotencyStore } from '../../src/store/idempotency.js';
import { startHerald, type TestHerald } from '../support/herald.js';

/**
 * An audience create whose process dies after its commit, before it answered: Redis is left as
 * that process would leave it (the claim taken, the audience stored, no answer sent), and the
 * retry with the same Idempotency-Key must replay the original 201 at once, not create again
 * (which would answer 409 audience_key_taken, or wait for the lease).
 */
let h: TestHerald;
let store: RedisIdempotencyStore;
let apiKeyId: string;
const sha = (x: string) => createHash('sha256').update(x).digest('hex');

beforeAll(async () => {
  h = await startHerald();
  store = new RedisIdempotencyStore(h.herald.redis, h.herald.keys, createSecretBox(Buffer.from(h.secretKey, 'base64')));
  apiKeyId = (await h.herald.services.apiKeys.authenticate(h.token)).id;
});
afterAll(async () => {
  await h?.close();
});

describe('an idempotent audience create whose process dies', () => {
  it('after the commit → the retry replays the original 201 and there is one audience', async () => {
    const key = `crash-${randomBytes(4).toString('hex')}`;
    const raw = JSON.stringify({ key, name: 'Customers', visibility: 'external' });
    const idem = `aud-${randomBytes(6).toString('hex')}`;
    const begun = await store.begin(apiKeyId, idem, sha(`POST\n/v1/audiences\n${sha(raw)}`));
    if (begun.state !== 'new') throw new Error(`expected a new claim, got ${begun.state}`);
    const request: IdempotentRequest = {
      claim: begun.claim,
      respond: (e) => (e.kind === 'audience' ? audienceCreated(e.audience) : null),
      stored: false,
    };
    // The route's work inside the request's scope; then the process "dies": no answer, no renewal.
    const made = await store.within(request, () => h.herald.services.audiences.create(JSON.parse(raw)));

    const res = await h.api('POST', '/v1/audiences', {
      raw,
      headers: { 'Idempotency-Key': idem, 'Content-Type': 'application/json' },
    });
    expect(res.status).toBe(201);
    expect(res.headers.get('idempotent-replayed')).toBe('true');
    expect(res.body.id).toBe(made.id);
    expect(res.headers.get('location')).toBe(`/v1/audiences/${made.id}`);
    expect(res.headers.get('etag')).toBe('"r1"');
    const all = await h.herald.services.audiences.all();
    expect(all.filter((a) => a.key === key).map((a) => a.id)).toEqual([made.id]);
  });
});
