import { monotonicFactory } from 'ulid';

/** Resource prefixes of README "Conventions worth knowing". */
export const ID_PREFIX = {
  incident: 'inc',
  template: 'tpl',
  connection: 'con',
  execution: 'exe',
  delivery: 'dlv',
  apiKey: 'key',
  event: 'evt',
} as const;

export type IdKind = keyof typeof ID_PREFIX;

export interface IdGenerator {
  next(kind: IdKind): string;
}

/**
 * Prefixed ULIDs, monotonic within a millisecond so ids sort by creation. The clock is injected
 * so tests can pin time.
 */
export function createIdGenerator(now: () => number = Date.now): IdGenerator {
  const ulid = monotonicFactory();
  return { next: (kind) => `${ID_PREFIX[kind]}_${ulid(now())}` };
}

const ULID = '[0-9A-HJKMNP-TV-Z]{26}';
const patterns = Object.fromEntries(
  Object.entries(ID_PREFIX).map(([k, p]) => [k, new RegExp(`^${p}_${ULID}$`)]),
) as Record<IdKind, RegExp>;

/** True when `id` is well-formed for its kind: a malformed id is simply "not found". */
export function isId(kind: IdKind, id: string): boolean {
  return patterns[kind].test(id);
}
