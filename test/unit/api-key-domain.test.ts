import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { formatToken, hasScope, isWellFormedToken, parseExpiresIn } from '../../src/domain/common/api-key.js';
import { decodeCursor, encodeCursor } from '../../src/domain/common/pagination.js';

describe('tokens', () => {
  it('are hld_ + 43 base62 + 6 base62 checksum characters and verify offline', () => {
    for (let i = 0; i < 50; i++) {
      const t = formatToken(randomBytes(32));
      expect(t).toMatch(/^hld_[0-9A-Za-z]{49}$/);
      expect(isWellFormedToken(t)).toBe(true);
    }
    expect(formatToken(Buffer.alloc(32))).toBe(`hld_${'0'.repeat(43)}${formatToken(Buffer.alloc(32)).slice(47)}`);
  });

  it('reject a token whose checksum does not match', () => {
    const t = formatToken(randomBytes(32));
    const flipped = t.slice(0, 10) + (t[10] === 'a' ? 'b' : 'a') + t.slice(11);
    expect(isWellFormedToken(flipped)).toBe(false);
    expect(isWellFormedToken('hld_short')).toBe(false);
  });

  it('scopes: * grants everything', () => {
    expect(hasScope({ scopes: ['*'] }, 'connections:write')).toBe(true);
    expect(hasScope({ scopes: ['incidents:read'] }, 'incidents:write')).toBe(false);
  });

  it('parses expiries', () => {
    expect(parseExpiresIn('30m')).toBe(30 * 60_000);
    expect(parseExpiresIn('12h')).toBe(12 * 3_600_000);
    expect(parseExpiresIn('90d')).toBe(90 * 86_400_000);
    expect(() => parseExpiresIn('90')).toThrow();
    expect(() => parseExpiresIn('0d')).toThrow();
    expect(() => parseExpiresIn('9999d')).toThrow();
  });
});

describe('cursors', () => {
  it('round-trip and refuse anything else', () => {
    const c = { after: 'inc_01HZZZZZZZZZZZZZZZZZZZZZZZ' };
    expect(decodeCursor(encodeCursor(c))).toEqual(c);
    expect(() => decodeCursor('garbage')).toThrow();
    expect(() => decodeCursor(Buffer.from('{"after":"x"}').toString('base64url'))).toThrow();
  });
});
