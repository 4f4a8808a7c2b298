import { z } from 'zod';
import { DomainError, fieldError } from './errors.js';
import { LIMITS } from './limits.js';

/**
 * Cursor pagination of docs/api.md. A cursor is opaque to clients: base64url of a small JSON that
 * names the last item served (an id for id-ordered lists, an offset for append-only timelines).
 */
export interface PageRequest {
  limit: number;
  cursor: Cursor | null;
}

export type Cursor = { after: string } | { offset: number };

export interface Page<T> {
  data: T[];
  nextCursor: Cursor | null;
}

export const LimitSchema = z.coerce
  .number()
  .int()
  .min(1)
  .max(LIMITS.pageMax)
  .default(LIMITS.pageDefault)
  .meta({ description: `Page size, 1..${LIMITS.pageMax}.` });

export function encodeCursor(c: Cursor): string {
  return Buffer.from(JSON.stringify(c)).toString('base64url');
}

const CursorSchema = z.union([
  z.strictObject({ after: z.string().regex(/^[a-z]{3}_[0-9A-HJKMNP-TV-Z]{26}$/) }),
  z.strictObject({ offset: z.number().int().min(0) }),
]);

export function decodeCursor(raw: string): Cursor {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
    const r = CursorSchema.safeParse(parsed);
    if (r.success) return r.data;
  } catch {
    // fall through: any undecodable cursor is the same client error
  }
  throw new DomainError('invalid_cursor', 'The cursor is not one this API issued.');
}

/** Parses `limit` and `cursor` from raw query values into a PageRequest. */
export function parsePageRequest(limit: unknown, cursor: unknown): PageRequest {
  const l = LimitSchema.safeParse(limit === '' ? undefined : limit);
  if (!l.success)
    throw fieldError(
      'validation_failed',
      'limit',
      `limit must be an integer from 1 to ${LIMITS.pageMax}.`,
      'out_of_range',
    );
  if (cursor !== undefined && typeof cursor !== 'string')
    throw new DomainError('invalid_cursor', 'cursor must be a single string.');
  return { limit: l.data, cursor: cursor === undefined || cursor === '' ? null : decodeCursor(cursor) };
}

/**
 * A list pages either by id (`after`) or by position (`offset`); a cursor of the other kind was
 * issued by another list, and is refused rather than silently starting over from the top.
 */
export function expectCursorKind(page: PageRequest, kind: 'after' | 'offset'): PageRequest {
  if (page.cursor !== null && !(kind in page.cursor))
    throw new DomainError('invalid_cursor', 'The cursor is not one this list issued.');
  return page;
}
