import { crc32 } from 'node:zlib';
import { z } from 'zod';
import { ActorSchema } from './actor.js';
import { DomainError, fieldError } from './errors.js';
import { LIMITS } from './limits.js';

export const SCOPES = [
  'incidents:read',
  'incidents:write',
  'incidents:execute',
  'templates:read',
  'templates:write',
  'connections:read',
  'connections:write',
  'audiences:read',
  'audiences:write',
  'approvals:write',
  'events:read',
  'events:write',
  'components:read',
  'components:write',
  'maintenances:read',
  'maintenances:write',
  'subscribers:read',
  'subscribers:write',
] as const;
export const ScopeSchema = z.enum([...SCOPES, '*']).meta({ id: 'Scope' });
export type Scope = (typeof SCOPES)[number];
export type GrantedScope = z.infer<typeof ScopeSchema>;

export const ApiKeySchema = z
  .object({
    id: z.string(),
    name: z.string(),
    scopes: z.array(ScopeSchema),
    created_at: z.string(),
    expires_at: z.string().nullable(),
    last_used_at: z.string().nullable(),
    revoked_at: z.string().nullable(),
    created_by: ActorSchema,
  })
  .meta({ id: 'ApiKey' });
export type ApiKey = z.infer<typeof ApiKeySchema>;

export const ApiKeyCreateSchema = z.strictObject({
  name: z.string().trim().min(1, 'name is required.').max(LIMITS.keyName),
  scopes: z.array(ScopeSchema).min(1, 'Grant at least one scope.'),
  expires_in: z.string().optional(),
});
export type ApiKeyCreate = z.infer<typeof ApiKeyCreateSchema>;

export function hasScope(key: Pick<ApiKey, 'scopes'>, scope: Scope): boolean {
  return key.scopes.includes('*') || key.scopes.includes(scope);
}

export type KeyState = 'active' | 'expired' | 'revoked';
export function keyState(key: ApiKey, now: Date): KeyState {
  if (key.revoked_at !== null) return 'revoked';
  if (key.expires_at !== null && Date.parse(key.expires_at) <= now.getTime()) return 'expired';
  return 'active';
}

// ── tokens ───────────────────────────────────────────────────────────────────────────────────
//
// hld_ + 43 base62 characters (the 32 random bytes as one big number) + 6 base62 characters of
// their CRC32, like GitHub's tokens: a scanner can tell a real token from a look-alike offline.

const B62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
export const TOKEN_PATTERN = /^hld_[0-9A-Za-z]{49}$/;

function base62(n: bigint, width: number): string {
  let s = '';
  let v = n;
  while (v > 0n) {
    s = B62[Number(v % 62n)] + s;
    v /= 62n;
  }
  return s.padStart(width, '0');
}

function checksum(body: string): string {
  return base62(BigInt(crc32(body)), 6);
}

/** Makes a token from 32 random bytes (injected, so tests are deterministic). */
export function formatToken(random32: Buffer): string {
  if (random32.length !== 32) throw new Error('a token needs exactly 32 random bytes');
  const body = base62(BigInt(`0x${random32.toString('hex')}`), 43);
  return `hld_${body}${checksum(body)}`;
}

/** Shape and checksum, checked before any lookup: a typo'd token never reaches Redis. */
export function isWellFormedToken(token: string): boolean {
  if (!TOKEN_PATTERN.test(token)) return false;
  const body = token.slice(4, 47);
  return token.slice(47) === checksum(body);
}

// ── expiry ───────────────────────────────────────────────────────────────────────────────────

const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** Parses `30m`, `12h`, `90d` (up to 10 years) into milliseconds. */
export function parseExpiresIn(text: string, field = 'expires_in'): number {
  const m = /^(\d{1,6})([mhd])$/.exec(text.trim());
  const n = m ? Number(m[1]) : 0;
  const ms = m ? n * UNIT_MS[m[2] as keyof typeof UNIT_MS] : 0;
  if (!m || n === 0 || ms > 3650 * UNIT_MS.d) {
    throw fieldError(
      'validation_failed',
      field,
      'Use a duration like 30m, 12h or 90d (at most 3650d).',
      'invalid_format',
    );
  }
  return ms;
}

export function unauthenticated(reason: 'missing' | 'invalid'): DomainError {
  return new DomainError(
    'unauthenticated',
    reason === 'missing'
      ? 'Send an API key as "Authorization: Bearer <token>".'
      : 'The API key is malformed, unknown, expired or revoked.',
    [],
    { reason },
  );
}
