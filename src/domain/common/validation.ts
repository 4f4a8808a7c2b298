import { ZodError, type z } from 'zod';
import { DomainError, type FieldError } from './errors.js';
import { kindOfKey, textViolation, type TextKind } from './text-policy.js';

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
    case 'custom': {
      // A check that names its own code (the text policy's control_character and the like).
      const own: unknown = issue.params?.code;
      return typeof own === 'string' ? own : 'invalid';
    }
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
  // The text policy first, on the input as sent: a schema's `.trim()` would otherwise drop a
  // trailing U+FEFF or U+2028 before any check saw it. Every service parses its input here, so
  // a Slack submission meets the same rule as a /v1 body (a /v1 body the reader already walked
  // is not walked twice).
  const findings = isObject(input) && TEXT_CHECKED.has(input) ? [] : textFindings(input);
  if (findings.length > 0) {
    return {
      success: false,
      error: new ZodError(
        findings.map((f) => ({
          code: 'custom' as const,
          path: f.path,
          message: f.message,
          params: { code: f.code },
          input: undefined,
        })),
      ),
    } as z.ZodSafeParseResult<z.output<S>>;
  }
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

/** At most this many hygiene errors are reported: enough to fix a form, never a huge answer. */
const MAX_HYGIENE_ERRORS = 20;

/** A string the text policy refuses, with its path (keys as they are, array indexes as strings). */
interface TextFinding {
  path: string[];
  code: string;
  message: string;
}

/**
 * A value on textFindings' walk. Each node points at its parent: the path is built only for a
 * string in error, so a body nested 20,000 levels deep costs linear time, not a copy of the path
 * per level.
 */
interface TextNode {
  value: unknown;
  key: string | null;
  parent: TextNode | null;
  kind: TextKind;
}

/** The path of `n`, from the body's root. */
function pathOf(n: TextNode): string[] {
  const parts: string[] = [];
  for (let at: TextNode | null = n; at !== null && at.key !== null; at = at.parent) parts.push(at.key);
  return parts.reverse();
}

/**
 * Every string of `value` — object keys included — that breaks the text policy (text-policy.ts),
 * each with its path. Iterative, so a deeply nested body cannot exhaust the stack.
 */
function textFindings(value: unknown): TextFinding[] {
  const found: TextFinding[] = [];
  const stack: TextNode[] = [{ value, key: null, parent: null, kind: 'one_line' }];
  while (stack.length > 0 && found.length < MAX_HYGIENE_ERRORS) {
    const node = stack.pop()!;
    const v = node.value;
    if (typeof v === 'string') {
      const problem = textViolation(v, node.kind);
      if (problem) {
        const path = pathOf(node);
        found.push({ path, code: problem.code, message: `${path.join('.') || 'The value'} ${problem.message}` });
      }
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--)
        stack.push({ value: v[i] as unknown, key: String(i), parent: node, kind: node.kind });
    } else if (v !== null && typeof v === 'object') {
      const entries = Object.entries(v as Record<string, unknown>);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, child] = entries[i]!;
        const keyProblem = textViolation(key, 'one_line');
        if (keyProblem) {
          found.push({
            path: pathOf({ value: child, key, parent: node, kind: 'one_line' }),
            code: keyProblem.code,
            message: `A field name ${keyProblem.message}`,
          });
          continue;
        }
        stack.push({ value: child, key, parent: node, kind: kindOfKey(key, node.kind) });
      }
    }
  }
  return found;
}

/**
 * Every string of a parsed JSON request — object keys included — that breaks the text policy
 * (text-policy.ts), as `errors[]` entries. Applied to every /v1 body in one place
 * (http/middleware/body.ts), so no endpoint stores what the policy refuses.
 */
export function textHygieneErrors(value: unknown): FieldError[] {
  const findings = textFindings(value);
  if (findings.length === 0 && isObject(value)) TEXT_CHECKED.add(value);
  return findings.map((f) => ({ field: f.path.join('.'), code: f.code, message: f.message }));
}

/**
 * Parsed bodies the policy found clean (http/middleware/body.ts walks each one): safeParseInput
 * skips walking them again. Weak, so a request's body is forgotten with the request. A body is
 * the client's JSON, which Herald reads and never writes into.
 */
const TEXT_CHECKED = new WeakSet<object>();

const isObject = (v: unknown): v is object => typeof v === 'object' && v !== null;

/**
 * A refinement for lists whose entries must not repeat: each repeat is a `duplicate` issue at its
 * index (`connection_ids.3`, or `components.2.id` with `at: ['id']`), so the 422 names it.
 */
export function noRepeats<T>(idOf: (item: T) => string, at: (string | number)[] = []) {
  return (list: T[], ctx: z.RefinementCtx): void => {
    const seen = new Set<string>();
    list.forEach((item, i) => {
      const id = idOf(item);
      if (seen.has(id))
        ctx.addIssue({
          code: 'custom',
          path: [i, ...at],
          input: id,
          message: `${id} is listed twice.`,
          params: { code: 'duplicate' },
        });
      seen.add(id);
    });
  };
}
