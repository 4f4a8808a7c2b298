import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import type { LinkToken, SecretBox, SubscriberKind, SubscriberTokens } from '../ports/index.js';
import type { Keys } from './keys.js';
import type { RedisClient as Redis } from './redis-connect.js';

/**
 * The subscriber key: 32 random bytes, made once per Herald (SET NX, so two instances starting
 * together end up with the same one) and stored sealed by the secret box, so `herald secrets
 * reseal` moves it to a new HERALD_SECRET_KEY like every other secret. Two keys are derived from it
 * (HKDF): one names subscribers (ids.idOf), one signs their link tokens. Neither is stored.
 */

/** The subscriber ids derived from addresses, and the buckets they are stored in. */
export interface SubscriberIds {
  /** `sub_` + 26 Crockford base32 characters of a keyed hash of (kind, normalized address). */
  idOf(kind: SubscriberKind, address: string): string;
  /** The bucket (0..255) the id is stored in. */
  bucketOf(id: string): number;
}

export const SUBSCRIBER_BUCKET_COUNT = 256;

export async function openSubscriberKey(
  redis: Redis,
  keys: Keys,
  box: SecretBox,
): Promise<{ ids: SubscriberIds; tokens: SubscriberTokens }> {
  const key = keys.subscriberKey();
  // The value sealed is the key in base64 (the box seals text). A lost SET NX race is fine: the
  // winner's key is read back below, so every instance derives from the same bytes.
  await redis.set(key, box.seal(randomBytes(32).toString('base64')), 'NX');
  const sealed = await redis.get(key);
  if (sealed === null) throw new Error('the subscriber key vanished right after it was created');
  const secret = Buffer.from(box.open(sealed), 'base64');
  if (secret.length !== 32) throw new Error('the stored subscriber key is not 32 bytes');
  return subscriberKeyMaterial(secret);
}

/** What the subscriber key gives: ids and tokens (pure; openSubscriberKey loads the key). */
export function subscriberKeyMaterial(secret: Buffer): { ids: SubscriberIds; tokens: SubscriberTokens } {
  const derive = (label: string) => Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), label, 32));
  const idKey = derive('subscriber-id');
  const tokenKey = derive('subscriber-token');
  return {
    ids: {
      idOf: (kind, address) =>
        `sub_${base32(createHmac('sha256', idKey).update(`${kind}\n${address}`).digest()).slice(0, 26)}`,
      bucketOf: subscriberBucketOf,
    },
    tokens: linkTokens(tokenKey),
  };
}

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const SUB_ID = /^sub_[0-9A-HJKMNP-TV-Z]{26}$/;

/** Crockford base32, most significant bits first (like a ULID's characters). */
function base32(bytes: Buffer): string {
  let out = '';
  let acc = 0;
  let bits = 0;
  for (const byte of bytes) {
    acc = ((acc << 8) | byte) & 0xffff;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += CROCKFORD[(acc >> bits) & 31];
    }
  }
  return out;
}

/**
 * The first two characters of the id's hash part (10 bits) mod 256: uniform, because the id is a
 * keyed hash. An id of another shape (never one this store made) still gets a stable bucket.
 */
export function subscriberBucketOf(id: string): number {
  if (SUB_ID.test(id)) return ((CROCKFORD.indexOf(id[4]!) << 5) | CROCKFORD.indexOf(id[5]!)) % SUBSCRIBER_BUCKET_COUNT;
  let h = 0;
  for (let i = 0; i < id.length; i++) h = (h * 31 + id.charCodeAt(i)) >>> 0;
  return h % SUBSCRIBER_BUCKET_COUNT;
}

// ── link tokens ──────────────────────────────────────────────────────────────────────────────

/** Short purpose codes: the token rides in a URL, and mail clients wrap long lines. */
const PURPOSE_CODE = { confirm: 'c', manage: 'm', unsubscribe: 'u' } as const;
const PURPOSE_OF = new Map<unknown, LinkToken['purpose']>([
  ['c', 'confirm'],
  ['m', 'manage'],
  ['u', 'unsubscribe'],
]);

/** Longer than any token sign() makes: anything past it is refused before any work is done. */
const TOKEN_MAX = 512;
const B64URL = /^[A-Za-z0-9_-]+$/;

interface Payload {
  p: string;
  i: string;
  v: number;
  n?: string;
  e?: number;
}

/**
 * `<base64url(JSON {p,i,v,n?,e?})>.<base64url(HMAC-SHA256 of the first part)>`. The MAC covers the
 * encoded text itself, so no canonical JSON is needed. Confirm tokens carry their expiry and nonce
 * (single use is the record's job: confirming clears the nonce); manage and unsubscribe tokens last
 * until the record's token_version moves.
 */
function linkTokens(key: Buffer): SubscriberTokens {
  const mac = (text: string) => createHmac('sha256', key).update(text).digest();
  return {
    sign(t) {
      const payload: Payload = { p: PURPOSE_CODE[t.purpose], i: t.subscriberId, v: t.version };
      if (t.nonce !== undefined) payload.n = t.nonce;
      if (t.expiresMs !== undefined) payload.e = t.expiresMs;
      const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
      return `${body}.${mac(body).toString('base64url')}`;
    },
    verify(token, nowMs) {
      if (typeof token !== 'string' || token.length > TOKEN_MAX) return null;
      const [body, sig, extra] = token.split('.');
      if (body === undefined || sig === undefined || extra !== undefined) return null;
      if (!B64URL.test(body) || !B64URL.test(sig)) return null;
      const given = Buffer.from(sig, 'base64url');
      const expected = mac(body);
      // timingSafeEqual throws on unequal lengths: a wrong length is simply a wrong signature.
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
      const t = parsePayload(Buffer.from(body, 'base64url').toString('utf8'));
      if (t === null) return null;
      if (t.purpose === 'confirm' && (t.expiresMs === undefined || t.nonce === undefined)) return null;
      if (t.expiresMs !== undefined && nowMs >= t.expiresMs) return null;
      return t;
    },
  };
}

/** The payload of a token whose MAC held (so made by sign()), still checked field by field. */
function parsePayload(json: string): LinkToken | null {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    return null;
  }
  if (typeof raw !== 'object' || raw === null) return null;
  const p = raw as Partial<Record<keyof Payload, unknown>>;
  const purpose = PURPOSE_OF.get(p.p);
  if (purpose === undefined || typeof p.i !== 'string' || typeof p.v !== 'number' || !Number.isInteger(p.v)) {
    return null;
  }
  const t: LinkToken = { purpose, subscriberId: p.i, version: p.v };
  if (p.n !== undefined) {
    if (typeof p.n !== 'string') return null;
    t.nonce = p.n;
  }
  if (p.e !== undefined) {
    if (typeof p.e !== 'number' || !Number.isFinite(p.e)) return null;
    t.expiresMs = p.e;
  }
  return t;
}
