/** Randomness, hashing and sealing of secrets, implemented in src/store/crypto.ts. */

// ── crypto and secrets ───────────────────────────────────────────────────────────────────────

export interface TokenCrypto {
  randomBytes(n: number): Buffer;
  sha256Hex(input: string): string;
}

/** AES-256-GCM envelope for secrets at rest; the key never leaves the adapter. */
export interface SecretBox {
  seal(plaintext: string): string;
  /** Opens with the current key or a previous one (key rotation); throws when none fits. */
  open(sealed: string): string;
  /** The value sealed with the current key, or null when it already is; throws when no key opens it. */
  reseal(sealed: string): string | null;
}
