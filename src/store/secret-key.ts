import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import type { RedisClient as Redis } from './redis-connect.js';
import type { SecretBox } from '../ports/index.js';
import type { Keys } from './keys.js';

/**
 * The key for secrets at rest: HERALD_SECRET_KEY, or one generated once under the data directory
 * (mode 0600). `generated` tells the caller to warn that every instance needs the same key.
 */
export function loadOrCreateSecretKey(
  configured: string | undefined,
  dataDir: string,
): { key: Buffer; generated: boolean; path?: string } {
  if (configured !== undefined) return { key: Buffer.from(configured, 'base64'), generated: false };
  const path = join(dataDir, 'secret.key');
  if (existsSync(path)) {
    const key = Buffer.from(readFileSync(path, 'utf8').trim(), 'base64');
    if (key.length !== 32)
      throw new Error(`${path} does not hold 32 base64 bytes; restore it or set HERALD_SECRET_KEY.`);
    return { key, generated: true, path };
  }
  mkdirSync(dataDir, { recursive: true });
  const key = randomBytes(32);
  writeFileSync(path, `${key.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  return { key, generated: true, path };
}

const CHECK_PLAINTEXT = 'herald-secret-key-check-v1';

/**
 * Guards against a wrong key: the first start stores a sealed check value; later starts must be
 * able to open it, or Herald refuses to start (instead of failing to decrypt at send time).
 * 'previous' means only HERALD_SECRET_KEY_PREVIOUS opens it: a rotation is under way and
 * `herald secrets reseal` has not finished (the caller warns).
 */
export async function verifySecretKey(redis: Redis, keys: Keys, box: SecretBox): Promise<'current' | 'previous'> {
  const sealed = await redis.get(keys.meta('secret-check'));
  if (sealed === null) {
    await redis.set(keys.meta('secret-check'), box.seal(CHECK_PLAINTEXT), 'NX');
    return verifySecretKey(redis, keys, box);
  }
  let opened: string | null = null;
  let resealed: string | null = null;
  try {
    opened = box.open(sealed);
    resealed = box.reseal(sealed);
  } catch {
    opened = null;
  }
  if (opened !== CHECK_PLAINTEXT) {
    throw new Error(
      'HERALD_SECRET_KEY does not match the key this Redis was set up with: connection secrets could not be decrypted. ' +
        'Start with the original key (HERALD_SECRET_KEY or data/secret.key), or while rotating give the old one as HERALD_SECRET_KEY_PREVIOUS.',
    );
  }
  return resealed === null ? 'current' : 'previous';
}

/** The stored check value, for `herald secrets reseal`. */
export const secretCheckKey = (keys: Keys): string => keys.meta('secret-check');

/** HERALD_SECRET_KEY_PREVIOUS as key material (empty when not rotating). */
export function previousSecretKeys(config: { HERALD_SECRET_KEY_PREVIOUS?: string | undefined }): Buffer[] {
  return config.HERALD_SECRET_KEY_PREVIOUS === undefined
    ? []
    : [Buffer.from(config.HERALD_SECRET_KEY_PREVIOUS, 'base64')];
}
