import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { signWebhook } from '../../src/domain/common/webhook-signature.js';

/**
 * Herald signs with node:crypto; receivers verify with the Standard Webhooks package. What one
 * makes, the other must accept, for any id, time and body (non-ASCII text included: both sign the
 * UTF-8 bytes), and it must be the very signature the package would make.
 */
describe('the Standard Webhooks signature', () => {
  it('equals the package’s and verifies with it, for any secret, id, time and body', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 24, max: 64 }),
        fc.string({ minLength: 1, maxLength: 40 }).filter((s) => !s.includes(' ')),
        fc.integer({ min: 1_600_000_000, max: 2_100_000_000 }),
        fc.string({ unit: 'binary', maxLength: 2000 }),
        (bytes, id, seconds, text) => {
          // A JSON body, as Herald sends (verify() parses it).
          const body = JSON.stringify({ text });
          const secret = `whsec_${randomBytes(bytes).toString('base64')}`;
          const signature = signWebhook(secret, id, seconds, body);
          const wh = new Webhook(secret);
          expect(signature).toBe(wh.sign(id, new Date(seconds * 1000), body));
          // verify() checks the time against now: give it a timestamp of now, signed afresh.
          const now = Math.floor(Date.now() / 1000);
          const headers = {
            'webhook-id': id,
            'webhook-timestamp': String(now),
            'webhook-signature': signWebhook(secret, id, now, body),
          };
          expect(() => wh.verify(body, headers)).not.toThrow();
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a different body, id or secret does not verify', () => {
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const now = Math.floor(Date.now() / 1000);
    const headers = { 'webhook-id': 'dlv_1', 'webhook-timestamp': String(now) };
    const sig = signWebhook(secret, 'dlv_1', now, '{"a":1}');
    const wh = new Webhook(secret);
    expect(() => wh.verify('{"a":2}', { ...headers, 'webhook-signature': sig })).toThrow();
    expect(() => wh.verify('{"a":1}', { ...headers, 'webhook-id': 'dlv_2', 'webhook-signature': sig })).toThrow();
    const other = new Webhook(`whsec_${randomBytes(32).toString('base64')}`);
    expect(() => other.verify('{"a":1}', { ...headers, 'webhook-signature': sig })).toThrow();
  });
});
