import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { LinkToken } from '../../src/ports/index.js';
import { subscriberBucketOf, subscriberKeyMaterial } from '../../src/store/subscriber-key.js';

/**
 * Subscriber link tokens and ids (src/store/subscriber-key.ts): a token is good only as signed,
 * by this key, before its expiry; anything else — tampered, truncated, foreign, garbage — is
 * refused without throwing. Ids are stable per (kind, address) and differ between keys.
 */
const NOW = Date.parse('2026-12-01T12:00:00.000Z');
const { ids, tokens } = subscriberKeyMaterial(randomBytes(32));
const id = ids.idOf('email', 'jane@example.com');
const confirm: LinkToken = { purpose: 'confirm', subscriberId: id, version: 0, nonce: 'n0nce', expiresMs: NOW + 1000 };
const unsubscribe: LinkToken = { purpose: 'unsubscribe', subscriberId: id, version: 3 };

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

describe('link tokens', () => {
  it('round-trips each purpose with what was signed', () => {
    expect(tokens.verify(tokens.sign(confirm), NOW)).toEqual(confirm);
    expect(tokens.verify(tokens.sign(unsubscribe), NOW)).toEqual(unsubscribe);
    const manage: LinkToken = { purpose: 'manage', subscriberId: id, version: 7 };
    expect(tokens.verify(tokens.sign(manage), NOW + 10 * 365 * 86_400_000)).toEqual(manage);
  });

  it('refuses a confirm token from its expiry on, but not a manage or unsubscribe token', () => {
    const t = tokens.sign(confirm);
    expect(tokens.verify(t, NOW + 999)).not.toBeNull();
    expect(tokens.verify(t, NOW + 1000)).toBeNull();
    expect(tokens.verify(tokens.sign(unsubscribe), NOW + 1000 * 86_400_000)).toEqual(unsubscribe);
  });

  it('refuses a confirm token without an expiry or a nonce even when signed', () => {
    expect(
      tokens.verify(tokens.sign({ purpose: 'confirm', subscriberId: id, version: 0, nonce: 'x' }), NOW),
    ).toBeNull();
    expect(
      tokens.verify(tokens.sign({ purpose: 'confirm', subscriberId: id, version: 0, expiresMs: NOW + 5 }), NOW),
    ).toBeNull();
  });

  it('refuses a tampered payload: another version, purpose, subscriber or expiry', () => {
    const [, sig] = tokens.sign(unsubscribe).split('.');
    for (const payload of [
      { p: 'u', i: id, v: 4 },
      { p: 'm', i: id, v: 3 },
      { p: 'u', i: ids.idOf('email', 'john@example.com'), v: 3 },
    ]) {
      expect(tokens.verify(`${b64(payload)}.${sig}`, NOW)).toBeNull();
    }
    const [, csig] = tokens.sign(confirm).split('.');
    expect(
      tokens.verify(`${b64({ p: 'c', i: id, v: 0, n: 'n0nce', e: NOW + 10_000 })}.${csig}`, NOW + 5000),
    ).toBeNull();
  });

  it('refuses a tampered or truncated signature and one made with another key', () => {
    const t = tokens.sign(unsubscribe);
    const [body, sig] = t.split('.') as [string, string];
    const flipped = `${sig.slice(0, 5)}${sig[5] === 'A' ? 'B' : 'A'}${sig.slice(6)}`;
    expect(tokens.verify(`${body}.${flipped}`, NOW)).toBeNull();
    expect(tokens.verify(`${body}.${sig.slice(0, -2)}`, NOW)).toBeNull();
    expect(tokens.verify(`${body}.${sig}AAAA`, NOW)).toBeNull();
    const other = subscriberKeyMaterial(randomBytes(32)).tokens;
    expect(other.verify(t, NOW)).toBeNull();
  });

  it('never throws on malformed input', () => {
    const junk: unknown[] = [
      '',
      '.',
      '..',
      'a.b.c',
      'abc',
      '!!!.???',
      `${'A'.repeat(5000)}.x`,
      '\u0000.\u0000',
      null,
      42,
    ];
    for (const j of junk) expect(tokens.verify(j as string, NOW)).toBeNull();
  });

  it('a validly signed payload of the wrong shape is still refused', () => {
    // Only sign() holds the key, so this stands for a future payload version reaching an older Herald.
    expect(tokens.verify(tokens.sign({ ...unsubscribe, version: 1.5 }), NOW)).toBeNull();
  });
});

describe('subscriber ids', () => {
  it('are sub_ + 26 Crockford characters, stable per kind and address, and keyed', () => {
    expect(id).toMatch(/^sub_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(ids.idOf('email', 'jane@example.com')).toBe(id);
    expect(ids.idOf('webhook', 'jane@example.com')).not.toBe(id);
    expect(ids.idOf('email', 'Jane@example.com')).not.toBe(id);
    expect(subscriberKeyMaterial(randomBytes(32)).ids.idOf('email', 'jane@example.com')).not.toBe(id);
  });

  it('spread over the 256 buckets, each id in one stable bucket', () => {
    const seen = new Set<number>();
    for (let i = 0; i < 5000; i++) seen.add(ids.bucketOf(ids.idOf('email', `user${i}@example.com`)));
    expect([...seen].every((b) => Number.isInteger(b) && b >= 0 && b < 256)).toBe(true);
    expect(seen.size).toBe(256);
    expect(ids.bucketOf(id)).toBe(subscriberBucketOf(id));
    expect(subscriberBucketOf('not-an-id')).toBe(subscriberBucketOf('not-an-id'));
  });
});
