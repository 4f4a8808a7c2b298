import { createCipheriv, createDecipheriv, hash, randomBytes } from 'node:crypto';
import type { SecretBox, TokenCrypto } from '../ports/index.js';

export const nodeTokenCrypto: TokenCrypto = {
  randomBytes: (n) => randomBytes(n),
  // The one-shot hash: every authenticated request hashes its token, and a Hash object per
  // call costs about three times as much (~1.0 against ~0.4 µs, Node 20 and 24 alike).
  sha256Hex: (s) => hash('sha256', s, 'hex'),
};

/**
 * AES-256-GCM for secrets at rest. Sealed form: `v1.<iv>.<tag>.<ciphertext>` (base64url), a fresh
 * 12-byte IV each time. A wrong key fails authentication and throws — never returns garbage.
 *
 * Key rotation (SECURITY.md "Rotating the secret key"): `previous` are keys that sealed data earlier
 * (HERALD_SECRET_KEY_PREVIOUS). Values are always sealed with the current key; opening tries the
 * current key, then each previous one — GCM's tag tells a wrong key apart, so no key id is stored.
 * `reseal` moves one value to the current key; `herald secrets reseal` applies it to everything.
 */
export function createSecretBox(key: Buffer, previous: readonly Buffer[] = []): SecretBox {
  for (const k of [key, ...previous]) if (k.length !== 32) throw new Error('HERALD_SECRET_KEY must be 32 bytes');
  const older = previous.filter((k) => !k.equals(key));
  const seal = (plaintext: string): string => {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ct.toString('base64url')].join(
      '.',
    );
  };
  /** The plaintext and whether the current key opened it; throws when no key does. */
  const openWithAny = (sealed: string): { plaintext: string; current: boolean } => {
    const current = tryOpen(key, sealed);
    if (current !== null) return { plaintext: current, current: true };
    for (const k of older) {
      const plaintext = tryOpen(k, sealed);
      if (plaintext !== null) return { plaintext, current: false };
    }
    throw new Error('sealed secret could not be opened with the current or a previous key');
  };
  // Every delivery opens its connection's secrets (a webhook's URL and signing secret): the same
  // few sealed values thousands of times a fan-out. A sealed value never changes meaning (a new
  // value or a reseal is a new sealed text), so what one opened to is kept, for a bounded number.
  const opened = new Map<string, string>();
  return {
    seal,
    open(sealed) {
      const known = opened.get(sealed);
      if (known !== undefined) return known;
      const plaintext = openWithAny(sealed).plaintext;
      if (opened.size >= OPENED_KEPT) opened.clear();
      opened.set(sealed, plaintext);
      return plaintext;
    },
    reseal(sealed) {
      const { plaintext, current } = openWithAny(sealed);
      return current ? null : seal(plaintext);
    },
  };
}

/** Opened secrets kept per box: a few per connection; past this many, the memory starts over. */
const OPENED_KEPT = 2000;

function tryOpen(key: Buffer, sealed: string): string | null {
  const [v, iv, tag, ct] = sealed.split('.');
  if (v !== 'v1' || iv === undefined || tag === undefined || ct === undefined) throw new Error('not a sealed secret');
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
  } catch {
    return null;
  }
}
