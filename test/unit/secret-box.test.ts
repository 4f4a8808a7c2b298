import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createSecretBox } from '../../src/store/crypto.js';

/**
 * The secret box remembers what a sealed text opened to (every delivery opens its connection's
 * secrets): what it remembers must never let through a value it would refuse.
 */
describe('the secret box', () => {
  const key = randomBytes(32);

  it('opens the same sealed value again and again to the same plaintext', () => {
    const box = createSecretBox(key);
    const sealed = box.seal('https://hooks.example.com/in/t0ken');
    for (let i = 0; i < 3; i++) expect(box.open(sealed)).toBe('https://hooks.example.com/in/t0ken');
  });

  it('still refuses a tampered value, and another key, after the genuine one was opened', () => {
    const box = createSecretBox(key);
    const sealed = box.seal('whsec_secret');
    expect(box.open(sealed)).toBe('whsec_secret');
    const [v, iv, tag, ct] = sealed.split('.');
    const flipped = `${ct!.startsWith('A') ? 'B' : 'A'}${ct!.slice(1)}`;
    expect(() => box.open([v, iv, tag, flipped].join('.'))).toThrow(/could not be opened/);
    expect(() => createSecretBox(randomBytes(32)).open(sealed)).toThrow(/could not be opened/);
  });

  it('reseal still tells an old key from the current one (nothing remembered decides it)', () => {
    const old = randomBytes(32);
    const sealedOld = createSecretBox(old).seal('xoxb-token');
    const box = createSecretBox(key, [old]);
    expect(box.open(sealedOld)).toBe('xoxb-token');
    const moved = box.reseal(sealedOld);
    expect(moved).not.toBeNull();
    expect(box.reseal(moved!)).toBeNull();
    expect(box.open(moved!)).toBe('xoxb-token');
  });

  it('keeps a bounded number of opened values and opens correctly past the bound', () => {
    const box = createSecretBox(key);
    const sealed = Array.from({ length: 2500 }, (_, i) => box.seal(`secret-${i}`));
    sealed.forEach((s, i) => expect(box.open(s)).toBe(`secret-${i}`));
    expect(box.open(sealed[0]!)).toBe('secret-0');
  });
});
