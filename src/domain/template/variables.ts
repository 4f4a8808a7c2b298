import { z } from 'zod';
import { DomainError } from '../common/errors.js';
import { LIMITS } from '../common/limits.js';

/**
 * Caller variables: declared on templates (`variables[]`) and supplied at render preview and
 * execute (`variables: {name: value}`). One schema and one resolution rule for both.
 */

/**
 * Names a variable can never take: `incident` and `execution` hold the built-ins (a variable of
 * that name would shadow them) and `__proto__` cannot be a plain object key.
 */
export const RESERVED_VARIABLE_NAMES: ReadonlySet<string> = new Set(['incident', 'execution', '__proto__']);

export const VARIABLE_DESCRIPTION_MAX = 500;

const nameMessage = 'Variable names start with a letter or _ and hold up to 64 letters, digits or _.';
const reservedMessage = (name: string) => `"${name}" is reserved for the built-in placeholders.`;

export const VariableNameSchema = z
  .string()
  .regex(LIMITS.variableName, nameMessage)
  .refine((n) => !RESERVED_VARIABLE_NAMES.has(n), { error: (issue) => reservedMessage(String(issue.input)) });

/** `{name: value}` as supplied by a caller: ≤ 50 names, values ≤ 4,000 characters (docs/api.md). */
export const VariablesSchema = z
  .record(
    z.string(),
    z.string().max(LIMITS.variableValue, `Variable values are at most ${LIMITS.variableValue} characters.`),
  )
  .superRefine(
    (vars, ctx) => {
      const names = Object.keys(vars);
      if (names.length > LIMITS.variables) {
        ctx.addIssue({
          code: 'too_big',
          origin: 'array',
          maximum: LIMITS.variables,
          inclusive: true,
          input: vars,
          message: `At most ${LIMITS.variables} variables.`,
        });
      }
      for (const name of names) {
        if (!LIMITS.variableName.test(name))
          ctx.addIssue({ code: 'custom', path: [name], input: name, message: nameMessage });
        else if (RESERVED_VARIABLE_NAMES.has(name))
          ctx.addIssue({ code: 'custom', path: [name], input: name, message: reservedMessage(name) });
      }
      // Run even when a value is bad, so one response names every bad field (but not for a non-object).
    },
    { when: (payload) => typeof payload.value === 'object' && payload.value !== null && !Array.isArray(payload.value) },
  )
  .meta({
    id: 'Variables',
    description: 'Variable values by name (strings). Names not used by a template are ignored.',
  });
export type Variables = z.infer<typeof VariablesSchema>;

export const TemplateVariableSchema = z
  .strictObject({
    name: VariableNameSchema,
    description: z
      .string()
      .max(VARIABLE_DESCRIPTION_MAX, `description is at most ${VARIABLE_DESCRIPTION_MAX} characters.`)
      .default(''),
    required: z.boolean().default(true),
    default: z
      .string()
      .max(LIMITS.variableValue, `default is at most ${LIMITS.variableValue} characters.`)
      .nullable()
      .default(null),
  })
  .meta({
    id: 'TemplateVariable',
    description: 'A declared variable. A required one with no default must be supplied.',
  });
export type TemplateVariable = z.output<typeof TemplateVariableSchema>;

export interface ResolvedVariables {
  /** Every supplied value, with defaults filled in for declared variables left blank. */
  values: Record<string, string>;
  /** Required declared variables with neither a value nor a default, in declaration order. */
  missing: string[];
}

/**
 * Applies the declared variables to the supplied values: a blank or absent value takes the
 * default; a required variable left without one is missing. Values nobody declared pass through
 * (the default message lists them; a template cannot reference them).
 */
export function resolveVariables(
  declared: readonly TemplateVariable[],
  supplied: Readonly<Record<string, string>>,
): ResolvedVariables {
  const values: Record<string, string> = {};
  for (const [name, value] of Object.entries(supplied)) if (!RESERVED_VARIABLE_NAMES.has(name)) values[name] = value;
  const missing: string[] = [];
  for (const v of declared) {
    // Own properties only: a name like `constructor` must not find Object.prototype's.
    const given = Object.hasOwn(values, v.name) ? values[v.name] : undefined;
    if (given !== undefined && given.trim() !== '') continue;
    if (v.default !== null) values[v.name] = v.default;
    else if (v.required) missing.push(v.name);
    else values[v.name] = given ?? '';
  }
  return { values, missing };
}

/** The 422 of docs/explanation/delivery-semantics.md for missing variables: one `errors[]` entry per name. */
export function missingVariablesError(names: readonly string[]): DomainError {
  return new DomainError(
    'missing_variables',
    `Missing required variables: ${names.join(', ')}.`,
    names.map((n) => ({ field: `variables.${n}`, code: 'required', message: `Variable "${n}" is required.` })),
  );
}
