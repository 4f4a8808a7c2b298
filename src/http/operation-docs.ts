import type { ResponseConfig } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import { ERROR_CODES } from '../domain/common/errors.js';
import { LIMITS } from '../domain/common/limits.js';

/**
 * The pieces route tables describe their operations with (src/http/routes/*.ts): kept apart from
 * the document builder so a route module never imports it (the builder imports the routes).
 */

export const ProblemSchema = z
  .object({
    type: z.string().meta({ example: 'urn:herald:problem:validation_failed' }),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    code: z.enum(ERROR_CODES),
    request_id: z.string(),
    errors: z.array(
      z.object({ field: z.string().meta({ example: 'variables.eta' }), code: z.string(), message: z.string() }),
    ),
  })
  .meta({
    id: 'Problem',
    description: 'RFC 9457 problem details. `code` is stable; `errors[].field` is a dotted path into the request.',
  });

export const problem = (description: string): ResponseConfig => ({
  description,
  content: { 'application/problem+json': { schema: ProblemSchema } },
});
export const json = (schema: z.ZodType, description: string): ResponseConfig => ({
  description,
  content: { 'application/json': { schema } },
});

/** A path parameter holding an id of the given prefix (`inc`, `tpl`, …), for its example. */
export const idParam = (name: string, prefix: string) =>
  z.string().meta({ param: { name, in: 'path' }, example: `${prefix}_01JH3ZK6X2B8V4N0Q7R5T9W1YC` });

/** `limit` and `cursor` as parsePageRequest reads them. */
export const ListQuery = z.object({
  limit: z
    .number()
    .int()
    .min(1)
    .max(LIMITS.pageMax)
    .optional()
    .meta({ description: `1..${LIMITS.pageMax}, default ${LIMITS.pageDefault}` }),
  cursor: z.string().optional().meta({ description: 'Opaque cursor from pagination.next_cursor.' }),
});
