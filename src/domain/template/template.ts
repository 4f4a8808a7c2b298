import { z } from 'zod';
import { CHANNEL_TYPES, type ChannelType } from '../../contracts/channel.js';
import { emptyPatch } from '../common/errors.js';
import { LIMITS } from '../common/limits.js';
import type { MessageSource } from './render.js';
import { settleVariables, type TemplateText } from './template-placeholders.js';
import { TemplateVariableSchema, VariablesSchema, type TemplateVariable } from './variables.js';

/** Most connections one template can target; empty means every connection (docs/explanation/delivery-semantics.md). */
export const TEMPLATE_CONNECTIONS_MAX = 100;

const templateText = (field: string) =>
  z.string().max(LIMITS.templateBody, `${field} is at most ${LIMITS.templateBody} characters.`);
const name = z
  .string()
  .trim()
  .min(1, 'name is required.')
  .max(LIMITS.templateName, `name is at most ${LIMITS.templateName} characters.`);
const description = z.string().max(LIMITS.longText, `description is at most ${LIMITS.longText} characters.`);
const body = templateText('body').min(1, 'body is required.');

const VariantInputSchema = z.strictObject({ subject: templateText('subject').nullable().optional(), body }).meta({
  id: 'TemplateVariantInput',
  description: 'Overrides the template for one channel type; subject falls back to the template subject.',
});

const variantInputShape = Object.fromEntries(CHANNEL_TYPES.map((t) => [t, VariantInputSchema.optional()])) as {
  [K in ChannelType]: z.ZodOptional<typeof VariantInputSchema>;
};
const VariantsInputSchema = z.strictObject(variantInputShape).meta({
  id: 'TemplateVariantsInput',
  description: 'Per channel type overrides. On PATCH the whole object is replaced.',
});

const DeclaredVariablesSchema = z
  .array(TemplateVariableSchema)
  .max(LIMITS.variables, `At most ${LIMITS.variables} variables.`)
  .superRefine((vars, ctx) => {
    const seen = new Set<string>();
    vars.forEach((v, i) => {
      if (seen.has(v.name))
        ctx.addIssue({
          code: 'custom',
          path: [i, 'name'],
          input: v.name,
          message: `Variable "${v.name}" is declared twice.`,
        });
      seen.add(v.name);
    });
  });

const ConnectionIdsSchema = z
  .array(z.string().min(1).max(64))
  .max(TEMPLATE_CONNECTIONS_MAX, `At most ${TEMPLATE_CONNECTIONS_MAX} connections.`)
  .refine((ids) => new Set(ids).size === ids.length, 'connection_ids must not repeat.');

export const TemplateCreateSchema = z
  .strictObject({
    name,
    description: description.default(''),
    subject: templateText('subject').default(''),
    body,
    variants: VariantsInputSchema.default({}),
    variables: DeclaredVariablesSchema.optional().meta({
      description:
        'Declared variables. When omitted they are derived from the placeholders: a name used only as a section is optional, others required.',
    }),
    connection_ids: ConnectionIdsSchema.default([]),
  })
  .meta({ id: 'TemplateCreate' });
export type TemplateCreate = z.output<typeof TemplateCreateSchema>;

/** The bulk body as a batch: 1..100 items, each then judged on its own (TemplateCreateSchema). */
export const TemplateBatchSchema = z
  .array(z.unknown())
  .min(1, 'Send at least one template.')
  .max(LIMITS.bulkTemplates, `At most ${LIMITS.bulkTemplates} templates per request.`);

/** The bulk body as documented (OpenAPI); the service validates it item by item, reporting all. */
export const TemplateBulkCreateSchema = z
  .array(TemplateCreateSchema)
  .min(1, 'Send at least one template.')
  .max(LIMITS.bulkTemplates, `At most ${LIMITS.bulkTemplates} templates per request.`)
  .meta({ id: 'TemplateBulkCreate', description: 'All or nothing: one invalid or taken name fails the whole batch.' });

export const TemplatePatchSchema = z
  .strictObject({
    name: name.optional(),
    description: description.optional(),
    subject: templateText('subject').optional(),
    body: body.optional(),
    variants: VariantsInputSchema.optional(),
    variables: DeclaredVariablesSchema.nullable()
      .optional()
      .meta({ description: 'Replaces the declared variables; null derives them from the placeholders again.' }),
    connection_ids: ConnectionIdsSchema.optional(),
  })
  .meta({ id: 'TemplatePatch' });
export type TemplatePatch = z.output<typeof TemplatePatchSchema>;

export const TemplateVariantSchema = z
  .object({ subject: z.string().nullable(), body: z.string() })
  .meta({ id: 'TemplateVariant' });
export type TemplateVariant = z.infer<typeof TemplateVariantSchema>;
const variantShape = Object.fromEntries(CHANNEL_TYPES.map((t) => [t, TemplateVariantSchema.optional()])) as {
  [K in ChannelType]: z.ZodOptional<typeof TemplateVariantSchema>;
};

export const TemplateSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    description: z.string(),
    subject: z.string(),
    body: z.string(),
    variants: z.object(variantShape),
    variables: z.array(TemplateVariableSchema),
    connection_ids: z.array(z.string()),
    version: z.number().int().min(1),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'Template' });
export type TemplateWire = z.infer<typeof TemplateSchema>;
export type Variants = TemplateWire['variants'];

/**
 * The stored template: the wire shape plus whether `variables` were declared by the caller (kept
 * on later edits and checked) or derived (derived again when the text changes). `version` is
 * also the ETag and compare-and-set revision: every change is a new version.
 */
export type Template = TemplateWire & { variables_declared: boolean };

export const TemplateRenderRequestSchema = z
  .strictObject({
    variables: VariablesSchema.default({}),
    incident_id: z
      .string()
      .min(1)
      .max(64)
      .nullable()
      .optional()
      .meta({ description: 'Render the built-ins from this incident; a sample incident otherwise.' }),
  })
  .meta({ id: 'TemplateRenderRequest' });

/** Name uniqueness ignores case and Unicode compatibility forms: "Outage" and "outage" clash. */
export function templateNameKey(templateName: string): string {
  return templateName.normalize('NFKC').toLowerCase();
}

/** Every Mustache text of a template, with the request field it came from. */
export function templateTexts(t: Pick<Template, 'subject' | 'body' | 'variants'>): TemplateText[] {
  const texts: TemplateText[] = [
    { field: 'subject', text: t.subject },
    { field: 'body', text: t.body },
  ];
  for (const type of CHANNEL_TYPES) {
    const v = t.variants[type];
    if (!v) continue;
    if (v.subject !== null) texts.push({ field: `variants.${type}.subject`, text: v.subject });
    texts.push({ field: `variants.${type}.body`, text: v.body });
  }
  return texts;
}

/** Variants in channel-type order with `subject` always present (null = the template's). */
function normalizeVariants(input: z.output<typeof VariantsInputSchema>): Variants {
  const out: Variants = {};
  for (const type of CHANNEL_TYPES) {
    const v = input[type];
    if (v) out[type] = { subject: v.subject ?? null, body: v.body };
  }
  return out;
}

export function newTemplate(id: string, input: TemplateCreate, now: string): Template {
  const variants = normalizeVariants(input.variants);
  const variables = settleVariables(
    templateTexts({ subject: input.subject, body: input.body, variants }),
    input.variables ?? null,
  );
  return {
    id,
    name: input.name,
    description: input.description,
    subject: input.subject,
    body: input.body,
    variants,
    variables,
    connection_ids: input.connection_ids,
    version: 1,
    created_at: now,
    updated_at: now,
    variables_declared: input.variables !== undefined,
  };
}

/**
 * Applies a PATCH: a new version when anything changes, the template itself when nothing does
 * (no empty versions). Declared variables stay declared and are re-checked against the new
 * text; derived ones are derived again.
 */
export function applyTemplatePatch(current: Template, patch: TemplatePatch, now: string): Template {
  if (Object.keys(patch).length === 0) {
    throw emptyPatch();
  }
  const variants = patch.variants ? normalizeVariants(patch.variants) : current.variants;
  const subject = patch.subject ?? current.subject;
  const templateBody = patch.body ?? current.body;
  const declared: TemplateVariable[] | null =
    patch.variables !== undefined ? patch.variables : current.variables_declared ? current.variables : null;
  const variables = settleVariables(templateTexts({ subject, body: templateBody, variants }), declared);
  const content: Template = {
    ...current,
    name: patch.name ?? current.name,
    description: patch.description ?? current.description,
    subject,
    body: templateBody,
    variants,
    variables,
    connection_ids: patch.connection_ids ?? current.connection_ids,
    variables_declared: declared !== null,
  };
  if (JSON.stringify(content) === JSON.stringify(current)) return current;
  return { ...content, version: current.version + 1, updated_at: now };
}

/** The text a channel type gets: its variant if the template has one, else the default. */
export function sourceForChannel(
  t: Pick<Template, 'subject' | 'body' | 'variants'>,
  channel: ChannelType,
): MessageSource {
  const v = t.variants[channel];
  return v ? { subject: v.subject ?? t.subject, body: v.body } : { subject: t.subject, body: t.body };
}
