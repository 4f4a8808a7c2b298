import type { Redis } from 'ioredis';
import { scanPrefix } from './redis.js';

/**
 * Finds secrets in text, in clear or encoded: base64 and base64url at each of the three byte
 * alignments (a secret inside a longer encoded string only shows whole 4-character groups), and
 * hex in either case. `needlesOf` turns one secret into what to look for.
 */
export function needlesOf(secret: string): string[] {
  const bytes = Buffer.from(secret, 'utf8');
  const needles = new Set<string>([secret, bytes.toString('hex')]);
  for (let align = 0; align < 3; align++) {
    const shifted = Buffer.concat([Buffer.alloc(align), bytes]);
    for (const encoding of ['base64', 'base64url'] as const) {
      const enc = shifted.toString(encoding).replace(/=+$/, '');
      // Drop the groups the neighbouring bytes could change: the first when shifted, and the last.
      const inner = enc.slice(align === 0 ? 0 : 4, enc.length - 4);
      if (inner.length >= 8) needles.add(inner);
    }
  }
  return [...needles];
}

export interface SecretHit {
  secret: string;
  needle: string;
  where: string;
}

/** Every (secret, place) where a needle of the secret occurs. Hex is matched case-insensitively. */
export function findSecrets(secrets: readonly string[], places: ReadonlyMap<string, string>): SecretHit[] {
  const hits: SecretHit[] = [];
  for (const secret of secrets) {
    const needles = needlesOf(secret);
    for (const [where, text] of places) {
      const lower = text.toLowerCase();
      for (const needle of needles) {
        const isHex = /^[0-9a-f]+$/.test(needle);
        if (isHex ? lower.includes(needle) : text.includes(needle)) {
          hits.push({ secret, needle, where });
          break;
        }
      }
    }
  }
  return hits;
}

/**
 * Every key under a prefix's hash tag (BullMQ's included) with its whole value, read by type:
 * strings, hashes, lists, sets, sorted sets (members and scores) and streams.
 */
export async function dumpPrefix(redis: Redis, prefix: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for await (const keys of scanPrefix(redis, prefix)) {
    for (const key of keys) out.set(`redis ${key}`, `${key}\n${await readValue(redis, key)}`);
  }
  return out;
}

async function readValue(redis: Redis, key: string): Promise<string> {
  const type = await redis.type(key);
  switch (type) {
    case 'string':
      return (await redis.getBuffer(key))?.toString('latin1') ?? '';
    case 'hash':
      return JSON.stringify(await redis.hgetall(key));
    case 'list':
      return JSON.stringify(await redis.lrange(key, 0, -1));
    case 'set':
      return JSON.stringify(await redis.smembers(key));
    case 'zset':
      return JSON.stringify(await redis.zrange(key, '0', '-1', 'WITHSCORES'));
    case 'stream':
      return JSON.stringify(await redis.xrange(key, '-', '+'));
    case 'none':
      return '';
    default:
      throw new Error(`secret scan cannot read Redis type ${type} (${key})`);
  }
}
