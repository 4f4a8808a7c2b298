import type { z } from 'zod';
import { DomainError, type FieldError } from './errors.js';

/**
 * Turns zod issues into the `errors[]` of a problem: one entry per field, with a dotted path
 * into the request (`variables.eta`, `3.name`) that the Slack modal also uses to place errors.
 */
export function toFieldErrors(issues: readonly z.core.$ZodIssue[], prefix: (string | number)[] = []): FieldError[] {
  const out: FieldError[] = [];
  for (const issue of issues) {
    const path = [...prefix, ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))];
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        out.push({ field: [...path, key].join('.'), code: 'unknown_field', message: `Unknown field "${key}".` });
      }
      continue;
    }
    if (issue.code === 'invalid_union' && issue.errors.length > 0) {
      // A union's branches each explain themselves; report the branch that got furthest.
      const best = [...issue.errors].sort((a, b) => b.length - a.length)[0] ?? [];
      const nested = toFieldErrors(best, path);
      if (nested.length > 0) {
        out.push(...nested);
        continue;
      }
    }
    const code = fieldCode(issue);
    // zod's default text for a missing value ("Invalid input: expected string, received undefined")
    // says less than the field's name does; a schema's own message is kept.
    const missing = code === 'required' && /^Invalid (input|option)/.test(issue.message);
    out.push({ field: path.join('.'), code, message: missing ? `${String(path[path.length - 1] ?? 'The body')} is required.` : issue.message });
  }
  return dedupeFieldErrors(out);
}

function fieldCode(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    // Both need the issue's input (safeParseInput): a missing field has none.
    case 'invalid_type':
      return issue.input === undefined ? 'required' : 'invalid_type';
    case 'too_big':
      return issue.origin === 'string' ? 'too_long' : issue.origin === 'array' ? 'too_many' : 'too_big';
    case 'too_small':
      return issue.origin === 'string' && issue.minimum === 1 ? 'required' : issue.origin === 'array' ? 'too_few' : 'too_small';
    case 'invalid_value':
      return issue.input === undefined ? 'required' : 'invalid_value';
    case 'invalid_format':
      return 'invalid_format';
    default:
      return 'invalid';
  }
}

/** Drops repeated (field, code) pairs: one entry per problem per field. */
export function dedupeFieldErrors(errors: FieldError[]): FieldError[] {
  const seen = new Set<string>();
  return errors.filter((e) => {
    const k = `${e.field}\u0000${e.code}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/**
 * safeParse that keeps each issue's input, so a present value of the wrong type is told apart
 * from a missing one (`invalid_type` vs `required`). The inputs never leave: toFieldErrors keeps
 * only the path, a code and the message.
 */
export function safeParseInput<S extends z.ZodType>(schema: S, input: unknown): z.ZodSafeParseResult<z.output<S>> {
  return schema.safeParse(input, { reportInput: true });
}

/** Parses `input` with `schema` or throws `validation_failed` with one entry per bad field. */
export function parseInput<S extends z.ZodType>(schema: S, input: unknown, prefix: (string | number)[] = []): z.output<S> {
  const r = safeParseInput(schema, input);
  if (r.success) return r.data;
  throw new DomainError('validation_failed', 'The request has invalid fields; see errors.', toFieldErrors(r.error.issues, prefix));
}
