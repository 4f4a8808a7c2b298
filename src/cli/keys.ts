/**
 * `herald keys create | list | revoke` (docs/api.md "Authentication and scopes"): turns flags into ApiKeyService calls
 * and presents the results, as a table for people or JSON for scripts. The rules (scopes, expiry, revocation)
 * live in the service and the domain; this file only translates.
 */
import type { Actor } from '../domain/common/actor.js';
import {
  ApiKeyCreateSchema,
  SCOPES,
  ScopeSchema,
  keyState,
  parseExpiresIn,
  type ApiKey,
  type ApiKeyCreate,
} from '../domain/common/api-key.js';
import { isDomainError } from '../domain/common/errors.js';
import type { Cursor } from '../domain/common/pagination.js';
import { parseInput } from '../domain/common/validation.js';
import type { ApiKeyService } from '../services/api-keys.js';

/** Keys made from the command line are recorded as made by the system's CLI. */
export const CLI_ACTOR: Actor = { type: 'system', id: 'cli', name: 'cli' };

/** A mistake in the command line itself: exit status 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export interface Output {
  /** The command's result (stdout): the only thing scripts read. */
  out(text: string): void;
  /** Notes for the person at the terminal (stderr). */
  note(text: string): void;
}

const FLAG_OF: Record<string, string> = { name: '--name', scopes: '--scopes', expires_in: '--expires-in' };
const SCOPE_LIST = `${SCOPES.join(', ')}, * (all)`;

/**
 * Checks create's flags before anything connects to Redis, with messages that name the flags.
 * The service validates again; this only makes the command-line errors read well.
 */
export function parseCreateFlags(flags: { name?: string; scopes?: string; 'expires-in'?: string }): ApiKeyCreate {
  if (flags.name === undefined)
    throw new UsageError('--name is required (a label for the key, e.g. --name "deploy bot").');
  if (flags.scopes === undefined) throw new UsageError(`--scopes is required, comma-separated, from: ${SCOPE_LIST}.`);
  const scopes = flags.scopes
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const unknown = scopes.filter((s) => !ScopeSchema.safeParse(s).success);
  if (unknown.length > 0) {
    throw new UsageError(
      `--scopes: unknown scope${unknown.length > 1 ? 's' : ''} ${unknown.map((s) => `"${s}"`).join(', ')}; use ${SCOPE_LIST}.`,
    );
  }
  const body = {
    name: flags.name,
    scopes,
    ...(flags['expires-in'] === undefined ? {} : { expires_in: flags['expires-in'] }),
  };
  try {
    const parsed = parseInput(ApiKeyCreateSchema, body);
    if (parsed.expires_in !== undefined) parseExpiresIn(parsed.expires_in);
    return parsed;
  } catch (e) {
    throw asUsageError(e) ?? e;
  }
}

/** A validation failure from the domain, reworded to name the flags. */
export function asUsageError(e: unknown): UsageError | null {
  if (!isDomainError(e) || e.code !== 'validation_failed') return null;
  if (e.errors.length === 0) return new UsageError(e.message);
  return new UsageError(
    e.errors
      .map((fe) => {
        const field = fe.field.split('.')[0] ?? fe.field;
        return `${FLAG_OF[field] ?? field}: ${fe.message}`;
      })
      .join('\n'),
  );
}

export async function createKey(keys: ApiKeyService, input: ApiKeyCreate, json: boolean, io: Output): Promise<void> {
  const { key, token } = await keys.create(input, CLI_ACTOR);
  if (json) {
    io.out(
      `${JSON.stringify({ id: key.id, name: key.name, scopes: key.scopes, token, created_at: key.created_at, expires_at: key.expires_at })}\n`,
    );
    return;
  }
  io.out(
    [
      `Created API key ${key.id} "${key.name}"`,
      `  scopes:  ${key.scopes.join(', ')}`,
      `  expires: ${key.expires_at ?? 'never'}`,
      `  token:   ${token}`,
      '',
    ].join('\n'),
  );
  io.note('Store the token now: it is shown only once (Herald keeps only its SHA-256).\n');
}

export async function listKeys(keys: ApiKeyService, json: boolean, io: Output, now: Date): Promise<void> {
  const all: ApiKey[] = [];
  let cursor: Cursor | null = null;
  do {
    const page = await keys.list({ limit: 100, cursor });
    all.push(...page.data);
    cursor = page.nextCursor;
  } while (cursor !== null);
  if (json) {
    io.out(`${JSON.stringify(all)}\n`);
    return;
  }
  if (all.length === 0) {
    io.note('No API keys yet. Create one with: npm run --silent herald -- keys create --name NAME --scopes SCOPES\n');
    return;
  }
  io.out(formatKeyTable(all, now));
}

export async function revokeKey(keys: ApiKeyService, id: string, json: boolean, io: Output): Promise<void> {
  const before = await keys.get(id);
  const key = await keys.revoke(id, CLI_ACTOR);
  if (json) {
    io.out(`${JSON.stringify(key)}\n`);
    return;
  }
  io.out(
    before.revoked_at === null
      ? `Revoked ${key.id} "${key.name}" at ${key.revoked_at ?? ''}; its token is refused from now on.\n`
      : `${key.id} "${key.name}" was already revoked at ${key.revoked_at ?? ''}.\n`,
  );
}

/** A plain-text table, one key a row, newest first (the order the service lists them in). */
export function formatKeyTable(keys: ApiKey[], now: Date): string {
  const head = ['ID', 'NAME', 'SCOPES', 'CREATED', 'EXPIRES', 'LAST USED', 'REVOKED'];
  const rows = keys.map((k) => [
    k.id,
    k.name,
    k.scopes.join(','),
    shortTime(k.created_at),
    k.expires_at === null ? 'never' : `${shortTime(k.expires_at)}${keyState(k, now) === 'expired' ? ' (expired)' : ''}`,
    k.last_used_at === null ? 'never' : shortTime(k.last_used_at),
    k.revoked_at === null ? '-' : shortTime(k.revoked_at),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return `${[head, ...rows].map(line).join('\n')}\n`;
}

/** `2026-11-22 10:00:00Z`: the wire format without milliseconds, easier to scan. */
function shortTime(iso: string): string {
  return `${iso.slice(0, 19).replace('T', ' ')}Z`;
}
