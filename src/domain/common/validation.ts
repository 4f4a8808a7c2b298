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
    out.push({
      field: path.join('.'),
      code,
      message: missing ? `${String(path[path.length - 1] ?? 'The body')} is required.` : issue.message,
    });
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
      return issue.origin === 'string' && issue.minimum === 1
        ? 'required'
        : issue.origin === 'array'
          ? 'too_few'
          : 'too_small';
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
export function parseInput<S extends z.ZodType>(
  schema: S,
  input: unknown,
  prefix: (string | number)[] = [],
): z.output<S> {
  const r = safeParseInput(schema, input);
  if (r.success) return r.data;
  throw new DomainError(
    'validation_failed',
    'The request has invalid fields; see errors.',
    toFieldErrors(r.error.issues, prefix),
  );
}

// ── text hygiene ─────────────────────────────────────────────────────────────────────────────

/**
 * Fields whose text people write in several lines (descriptions, message bodies, notes): there
 * a tab, a newline and a CRLF are text. Everything under `variables` counts too (values typed
 * at execute, defaults declared on a template). Every other string is one line.
 */
const FREE_TEXT_KEYS: ReadonlySet<string> = new Set([
  'description',
  'impact',
  'body',
  'html',
  'notes',
  'note',
  'resolution_summary',
  'summary',
  'message',
  'text',
  'default',
]);

/** A UTF-16 surrogate half without its partner: not a character, and not encodable as UTF-8. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
// eslint-disable-next-line no-control-regex -- finding control characters is the point
const CONTROL_ONE_LINE = /[\u0000-\u001F]/;
// eslint-disable-next-line no-control-regex -- tab, LF and CR-before-LF are allowed in free text
const CONTROL_FREE_TEXT = /[\u0000-\u0008\u000B-\u000C\u000E-\u001F]|\r(?!\n)/;

/** At most this many hygiene errors are reported: enough to fix a form, never a huge answer. */
const MAX_HYGIENE_ERRORS = 20;

function hygieneProblem(text: string, freeText: boolean): { code: string; message: string } | null {
  if (LONE_SURROGATE.test(text))
    return { code: 'invalid_unicode', message: 'The text contains a lone UTF-16 surrogate (not a character).' };
  if (text.includes('\u0000')) return { code: 'control_character', message: 'The text contains a NUL character.' };
  if ((freeText ? CONTROL_FREE_TEXT : CONTROL_ONE_LINE).test(text)) {
    return {
      code: 'control_character',
      message: freeText
        ? 'The text contains a control character (only tab and line breaks are allowed).'
        : 'The text contains a control character or line break (this field is one line).',
    };
  }
  return null;
}

/**
 * Every string of a parsed JSON request — object keys included — that holds what no Herald text
 * may: lone surrogates (`"\ud800"` escapes), NUL, and C0 control characters other than tab and
 * newline in free text (FREE_TEXT_KEYS). Applied to every /v1 body in one place (http/middleware/body.ts),
 * so no endpoint stores them. Iterative, so a deeply nested body cannot exhaust the stack.
 */
export function textHygieneErrors(value: unknown): FieldError[] {
  // Each node points at its parent: the path is built only for a string in error, so a body
  // nested 20,000 levels deep costs linear time, not a copy of the path per level.
  interface Node {
    value: unknown;
    key: string | null;
    parent: Node | null;
    freeText: boolean;
  }
  const pathOf = (n: Node): string => {
    const parts: string[] = [];
    for (let at: Node | null = n; at !== null && at.key !== null; at = at.parent) parts.push(at.key);
    return parts.reverse().join('.');
  };
  const errors: FieldError[] = [];
  const stack: Node[] = [{ value, key: null, parent: null, freeText: false }];
  while (stack.length > 0 && errors.length < MAX_HYGIENE_ERRORS) {
    const node = stack.pop()!;
    const v = node.value;
    if (typeof v === 'string') {
      const problem = hygieneProblem(v, node.freeText);
      if (problem) errors.push({ field: pathOf(node), ...problem });
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--)
        stack.push({ value: v[i] as unknown, key: String(i), parent: node, freeText: node.freeText });
    } else if (v !== null && typeof v === 'object') {
      const entries = Object.entries(v as Record<string, unknown>);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, child] = entries[i]!;
        const keyProblem = hygieneProblem(key, false);
        if (keyProblem) {
          errors.push({
            field: pathOf({ value: child, key, parent: node, freeText: false }),
            code: keyProblem.code,
            message: `The field name: ${keyProblem.message}`,
          });
          continue;
        }
        const freeText = node.freeText || key === 'variables' || FREE_TEXT_KEYS.has(key);
        stack.push({ value: child, key, parent: node, freeText });
      }
    }
  }
  return errors;
}
