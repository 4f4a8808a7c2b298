import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import type { SecretBox, TokenCrypto } from '../ports.js';

export const nodeTokenCrypto: TokenCrypto = {
  randomBytes: (n) => randomBytes(n),
  sha256Hex: (s) => createHash('sha256').update(s).digest('hex'),
};

/**
 * AES-256-GCM for secrets at rest. Sealed form: `v1.<iv>.<tag>.<ciphertext>` (base64url), a fresh
 * 12-byte IV each time. A wrong key fails authentication and throws — never returns garbage.
 */
export function createSecretBox(key: Buffer): SecretBox {
  if (key.length !== 32) throw new Error('HERALD_SECRET_KEY must be 32 bytes');
  return {
    seal(plaintext) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ct.toString('base64url')].join('.');
    },
    open(sealed) {
      const [v, iv, tag, ct] = sealed.split('.');
      if (v !== 'v1' || iv === undefined || tag === undefined || ct === undefined) throw new Error('not a sealed secret');
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
    },
  };
}
