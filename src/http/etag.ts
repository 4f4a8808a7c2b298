import type { Request, Response } from 'express';
import { DomainError } from '../domain/common/errors.js';

/** ETags are the record's revision: strong, opaque to clients. */
export function setEtag(res: Response, rev: number): void {
  res.setHeader('ETag', etagOf(rev));
}

export const etagOf = (rev: number): string => `"r${rev}"`;

/**
 * The revision named by If-Match, or null when there is none (or `*`). A value we could never
 * have issued cannot match, so it is 412 like any stale one; so is a weak tag (`W/"r3"`), since
 * If-Match compares strongly (RFC 9110 §13.1.1).
 */
export function ifMatchRevision(req: Request): number | null {
  const raw = req.get('If-Match');
  if (raw === undefined || raw.trim() === '*') return null;
  const m = /^\s*"r(\d{1,15})"\s*$/.exec(raw);
  if (!m) throw new DomainError('precondition_failed', 'If-Match does not match the current ETag.');
  return Number(m[1]);
}
