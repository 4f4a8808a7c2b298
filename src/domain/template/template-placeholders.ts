import Mustache from 'mustache';
import { DomainError, type FieldError } from '../common/errors.js';
import { LIMITS } from '../common/limits.js';
import { RESERVED_VARIABLE_NAMES, type TemplateVariable } from './variables.js';

/**
 * What a template's Mustache text uses, and whether it is allowed: logic-less Mustache with
 * escaped placeholders only (docs/explanation/delivery-semantics.md). `{{{x}}}` / `{{&x}}` would bypass the per-channel
 * escaping and partials `{{>x}}` would pull in text from nowhere, so both are refused at write time.
 */

/** The placeholders every template may use without declaring them (docs/explanation/delivery-semantics.md). */
export const BUILT_IN_PLACEHOLDERS: ReadonlySet<string> = new Set([
  'incident.id',
  'incident.title',
  'incident.severity',
  'incident.status',
  'incident.description',
  'incident.impact',
  'incident.resolution_summary',
  'incident.url',
  'incident.next_update_at',
  'execution.id',
]);

/** A Mustache token: [type, value, start, end, children?, …]. */
export type MustacheToken = [string, string, number, number, ...unknown[]];

/**
 * Parses with a fresh Writer: the default one caches every template it ever saw, which in a
 * long-running server holding user-supplied templates is an unbounded memory leak.
 */
export function parseMustache(text: string): MustacheToken[] {
  return new Mustache.Writer().parse(text) as MustacheToken[];
}

/** A template text and where it sits in the request (`body`, `variants.slack.body`). */
export interface TemplateText {
  field: string;
  text: string;
}

/** One use of a caller variable. */
export interface VariableUse {
  name: string;
  field: string;
  /** False when the value is printed unguarded, which makes a derived variable required. */
  optional: boolean;
}

export interface PlaceholderAnalysis {
  uses: VariableUse[];
  errors: FieldError[];
}

/**
 * Lists the variables each text uses and what is wrong with it. A name used as a section
 * (`{{#eta}}…{{/eta}}`, `{{^eta}}…`) is an optional use, and so is a value printed inside a
 * section of the same name (`{{#eta}}ETA: {{eta}}{{/eta}}`), the idiom for optional values.
 */
export function analyzePlaceholders(texts: readonly TemplateText[]): PlaceholderAnalysis {
  const out: PlaceholderAnalysis = { uses: [], errors: [] };
  for (const { field, text } of texts) {
    let tokens: MustacheToken[];
    try {
      tokens = parseMustache(text);
    } catch (e) {
      out.errors.push({ field, code: 'invalid_syntax', message: `Invalid Mustache: ${(e as Error).message}.` });
      continue;
    }
    walk(tokens, field, [], out);
  }
  return out;
}

function walk(
  tokens: readonly MustacheToken[],
  field: string,
  sections: readonly string[],
  out: PlaceholderAnalysis,
): void {
  for (const token of tokens) {
    const [type, name] = token;
    switch (type) {
      case '&':
        out.errors.push({
          field,
          code: 'unescaped_placeholder',
          message: `{{{${name}}}} and {{&${name}}} print a value unescaped, which could inject mentions or markup; use {{${name}}}.`,
        });
        break;
      case '>':
        out.errors.push({ field, code: 'partial_not_allowed', message: `Partials ({{>${name}}}) are not supported.` });
        break;
      case 'name':
        use(name, field, sections, false, out);
        break;
      case '#':
      case '^': {
        use(name, field, sections, true, out);
        const children = Array.isArray(token[4]) ? (token[4] as MustacheToken[]) : [];
        walk(children, field, type === '#' ? [...sections, name] : sections, out);
        break;
      }
      default:
        break; // text, comments, delimiter changes
    }
  }
}

function use(
  name: string,
  field: string,
  sections: readonly string[],
  asSection: boolean,
  out: PlaceholderAnalysis,
): void {
  if (name === '.') {
    // `{{.}}` is the current section's value; outside a section it would print the whole context.
    if (asSection || sections.length === 0) {
      out.errors.push({
        field,
        code: 'invalid_placeholder',
        message: '{{.}} may only be used inside a {{#name}}…{{/name}} section.',
      });
    }
    return;
  }
  if (BUILT_IN_PLACEHOLDERS.has(name)) return;
  if (LIMITS.variableName.test(name) && !RESERVED_VARIABLE_NAMES.has(name)) {
    out.uses.push({ name, field, optional: asSection || sections.includes(name) });
    return;
  }
  const builtIns = [...BUILT_IN_PLACEHOLDERS].join(', ');
  const message = /^(incident|execution)(\.|$)/.test(name)
    ? `{{${name}}} is not a built-in placeholder; the built-ins are ${builtIns}.`
    : `{{${name}}} is not a valid variable name (letters, digits and _, starting with a letter or _).`;
  out.errors.push({ field, code: 'invalid_placeholder', message });
}

/** Variables derived from placeholders, in order of first use: required unless every use is optional. */
export function deriveVariables(uses: readonly VariableUse[]): TemplateVariable[] {
  const byName = new Map<string, TemplateVariable>();
  for (const u of uses) {
    const seen = byName.get(u.name);
    if (seen) seen.required ||= !u.optional;
    else byName.set(u.name, { name: u.name, description: '', required: !u.optional, default: null });
  }
  return [...byName.values()];
}

/**
 * Checks the texts and settles `variables[]`: declared ones (when given) must cover every
 * placeholder, else 422 `undeclared_variable` pointing at each field using one; when none are
 * declared they are derived. Syntax problems are 422 `validation_failed`.
 */
export function settleVariables(
  texts: readonly TemplateText[],
  declared: TemplateVariable[] | null,
): TemplateVariable[] {
  const { uses, errors } = analyzePlaceholders(texts);
  if (errors.length > 0)
    throw new DomainError('validation_failed', 'The template has invalid placeholders; see errors.', errors);
  if (declared === null) {
    const derived = deriveVariables(uses);
    // The same cap as declared variables: past it, no caller could ever supply them all.
    if (derived.length > LIMITS.variables) {
      const message = `The template uses ${derived.length} variables; at most ${LIMITS.variables}.`;
      throw new DomainError('validation_failed', message, [{ field: 'variables', code: 'too_many', message }]);
    }
    return derived;
  }
  const names = new Set(declared.map((v) => v.name));
  const seen = new Set<string>();
  const undeclared: FieldError[] = [];
  for (const u of uses) {
    const key = `${u.field}\u0000${u.name}`;
    if (names.has(u.name) || seen.has(key)) continue;
    seen.add(key);
    undeclared.push({
      field: u.field,
      code: 'undeclared_variable',
      message: `{{${u.name}}} is neither declared in variables nor a built-in.`,
    });
  }
  if (undeclared.length > 0)
    throw new DomainError(
      'undeclared_variable',
      'The template uses variables it does not declare; see errors.',
      undeclared,
    );
  return declared;
}
