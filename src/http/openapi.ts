import { OpenAPIRegistry, OpenApiGeneratorV31 } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import type { SCOPES } from '../domain/api-key.js';
import {
  ConnectionCreatedSchema,
  ConnectionCreateSchema,
  ConnectionPatchSchema,
  ConnectionSchema,
  ConnectionTestRequestSchema,
  ConnectionTestResultSchema,
} from '../domain/connection.js';
import { ERROR_CODES } from '../domain/errors.js';
import { ExecuteRequestSchema, ExecutionSchema, RedeliverRequestSchema } from '../domain/execution.js';
import { IncidentCloseSchema, IncidentCreateSchema, IncidentPatchSchema, IncidentSchema, SeveritySchema, StatusSchema } from '../domain/incident.js';
import { IncidentEventSchema } from '../domain/incident-event.js';
import { LIMITS } from '../domain/limits.js';
import { ChannelTypeSchema } from '../domain/channel-types.js';
import {
  TemplateBulkCreateSchema,
  TemplateCreateSchema,
  TemplatePatchSchema,
  TemplatePreviewsSchema,
  TemplateRenderRequestSchema,
  TemplateSchema,
} from '../domain/template.js';

/**
 * The OpenAPI 3.1 document, generated from the same zod schemas that validate requests (STYLE §2).
 * `npm run openapi` writes it to manifest/openapi.json; a test fails when that file is stale.
 */

const ProblemSchema = z
  .object({
    type: z.string().meta({ example: 'urn:herald:problem:validation_failed' }),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    code: z.enum(ERROR_CODES),
    request_id: z.string(),
    errors: z.array(z.object({ field: z.string().meta({ example: 'variables.eta' }), code: z.string(), message: z.string() })),
  })
  .meta({ id: 'Problem', description: 'RFC 9457 problem details. `code` is stable; `errors[].field` is a dotted path into the request.' });

const PaginationSchema = z
  .object({ next_cursor: z.string().nullable(), limit: z.number().int() })
  .meta({ id: 'Pagination', description: 'Pass next_cursor back as `cursor` for the next page; null on the last page.' });

const page = (item: z.ZodType, id: string) => z.object({ data: z.array(item), pagination: PaginationSchema }).meta({ id });

const DryRunSchema = z
  .object({
    dry_run: z.literal(true),
    deliveries: z.array(
      z.object({
        connection_id: z.string(),
        connection_type: ChannelTypeSchema,
        template_id: z.string().nullable(),
        template_version: z.number().int().nullable(),
        subject: z.string(),
        body: z.string(),
      }),
    ),
  })
  .meta({ id: 'ExecuteDryRun' });

const idParam = (name: string, prefix: string) => z.string().meta({ param: { name, in: 'path' }, example: `${prefix}_01JH3ZK6X2B8V4N0Q7R5T9W1YC` });
const ListQuery = z.object({
  limit: z.number().int().min(1).max(LIMITS.pageMax).optional().meta({ description: `1..${LIMITS.pageMax}, default ${LIMITS.pageDefault}` }),
  cursor: z.string().optional().meta({ description: 'Opaque cursor from pagination.next_cursor.' }),
});

const problem = (description: string) => ({ description, content: { 'application/problem+json': { schema: ProblemSchema } } });
const json = (schema: z.ZodType, description: string) => ({ description, content: { 'application/json': { schema } } });
const common = {
  401: problem('Missing, malformed, unknown, expired or revoked API key (WWW-Authenticate says which).'),
  403: problem('The key lacks the scope this endpoint needs (WWW-Authenticate names it).'),
  429: problem('Per-key rate limit reached; Retry-After says when to retry.'),
  503: problem("service_unavailable: Herald can't reach its database (Redis down, paused or unreachable). Retry after Retry-After; a POST with the same Idempotency-Key never takes effect twice."),
};
const body = (schema: z.ZodType, required = true) => ({ body: { required, content: { 'application/json': { schema } } } });

type Method = 'get' | 'post' | 'patch' | 'delete';
interface Op {
  method: Method;
  path: string;
  summary: string;
  scope: (typeof SCOPES)[number];
  tag: string;
  request?: Record<string, unknown>;
  responses: Record<number, unknown>;
}

export function buildOpenApiDocument(): object {
  const registry = new OpenAPIRegistry();
  registry.registerComponent('securitySchemes', 'bearer', {
    type: 'http',
    scheme: 'bearer',
    description: 'An API key: `hld_` + 49 base62 characters, made with `npm run herald -- keys create` or the Slack App Home.',
  });

  const inc = { id: idParam('id', 'inc') };
  const tpl = { id: idParam('id', 'tpl') };
  const con = { id: idParam('id', 'con') };
  const exe = { id: idParam('id', 'inc'), executionId: idParam('executionId', 'exe') };
  const ops: Op[] = [
    { method: 'post', path: '/incidents', summary: 'Create an incident', scope: 'incidents:write', tag: 'Incidents', request: body(IncidentCreateSchema), responses: { 201: json(IncidentSchema, 'Created; Location and ETag headers set.'), 422: problem('Invalid fields, or unknown_template.') } },
    {
      method: 'get',
      path: '/incidents',
      summary: 'List incidents (newest first)',
      scope: 'incidents:read',
      tag: 'Incidents',
      request: { query: ListQuery.extend({ status: z.string().optional().meta({ description: `Comma-separated: ${StatusSchema.options.join(', ')}` }), severity: z.string().optional().meta({ description: `Comma-separated: ${SeveritySchema.options.join(', ')}` }) }) },
      responses: { 200: json(page(IncidentSchema, 'IncidentPage'), 'A page of incidents.'), 400: problem('invalid_cursor'), 422: problem('limit out of range or an unknown filter value.') },
    },
    { method: 'get', path: '/incidents/{id}', summary: 'Get an incident', scope: 'incidents:read', tag: 'Incidents', request: { params: z.object(inc) }, responses: { 200: json(IncidentSchema, 'The incident; ETag header set.'), 404: problem('not_found') } },
    {
      method: 'patch',
      path: '/incidents/{id}',
      summary: 'Update an incident (status moves along its state machine; closed is terminal)',
      scope: 'incidents:write',
      tag: 'Incidents',
      request: { params: z.object(inc), ...body(IncidentPatchSchema) },
      responses: { 200: json(IncidentSchema, 'Updated (or unchanged for a no-op).'), 404: problem('not_found'), 409: problem('incident_closed'), 412: problem('If-Match is stale.'), 422: problem('Invalid fields, empty patch, use_close_endpoint.') },
    },
    { method: 'post', path: '/incidents/{id}/close', summary: 'Close an incident (terminal)', scope: 'incidents:write', tag: 'Incidents', request: { params: z.object(inc), ...body(IncidentCloseSchema, false) }, responses: { 200: json(IncidentSchema, 'The closed incident.'), 404: problem('not_found'), 409: problem('incident_closed') } },
    { method: 'get', path: '/incidents/{id}/events', summary: 'The incident timeline (oldest first)', scope: 'incidents:read', tag: 'Incidents', request: { params: z.object(inc), query: ListQuery }, responses: { 200: json(page(IncidentEventSchema, 'IncidentEventPage'), 'A page of events.'), 404: problem('not_found') } },
    {
      method: 'post',
      path: '/incidents/{id}/execute',
      summary: 'Execute: deliver the incident to every connection',
      scope: 'incidents:execute',
      tag: 'Executions',
      request: { params: z.object(inc), query: z.object({ dry_run: z.enum(['true', 'false']).optional().meta({ description: 'true: render and return what would be sent; nothing is queued.' }) }), ...body(ExecuteRequestSchema, false) },
      responses: {
        202: json(ExecutionSchema, 'Every delivery is durably queued; Location points at the execution.'),
        200: json(DryRunSchema, 'dry_run=true: what each connection would get.'),
        404: problem('not_found'),
        409: problem('incident_closed'),
        422: problem('missing_variables, no_connections, unknown_connection or invalid fields.'),
      },
    },
    { method: 'get', path: '/incidents/{id}/executions', summary: 'List executions (newest first)', scope: 'incidents:read', tag: 'Executions', request: { params: z.object(inc), query: ListQuery }, responses: { 200: json(page(ExecutionSchema, 'ExecutionPage'), 'A page of executions with their deliveries.'), 404: problem('not_found') } },
    { method: 'get', path: '/incidents/{id}/executions/{executionId}', summary: 'Get an execution with per-delivery receipts', scope: 'incidents:read', tag: 'Executions', request: { params: z.object(exe) }, responses: { 200: json(ExecutionSchema, 'The execution.'), 404: problem('not_found') } },
    {
      method: 'post',
      path: '/incidents/{id}/executions/{executionId}/redeliver',
      summary: 'Re-queue the failed deliveries of an execution',
      scope: 'incidents:execute',
      tag: 'Executions',
      request: { params: z.object(exe), ...body(RedeliverRequestSchema, false) },
      responses: { 202: json(ExecutionSchema, 'The execution, failed deliveries queued again.'), 404: problem('not_found'), 409: problem('incident_closed') },
    },
    {
      method: 'post',
      path: '/templates',
      summary: 'Create a template (object) or up to 100 at once (array, all or nothing)',
      scope: 'templates:write',
      tag: 'Templates',
      request: { body: { required: true, content: { 'application/json': { schema: z.union([TemplateCreateSchema, TemplateBulkCreateSchema]) } } } },
      responses: { 201: json(z.union([TemplateSchema, z.object({ data: z.array(TemplateSchema) })]), 'Created (bulk: {"data": [...]}).'), 409: problem('template_name_taken'), 422: problem('Invalid fields, undeclared_variable.') },
    },
    { method: 'get', path: '/templates', summary: 'List templates (newest first)', scope: 'templates:read', tag: 'Templates', request: { query: ListQuery }, responses: { 200: json(page(TemplateSchema, 'TemplatePage'), 'A page of templates.') } },
    { method: 'get', path: '/templates/{id}', summary: 'Get a template', scope: 'templates:read', tag: 'Templates', request: { params: z.object(tpl) }, responses: { 200: json(TemplateSchema, 'The template; ETag header set.'), 404: problem('not_found') } },
    { method: 'patch', path: '/templates/{id}', summary: 'Update a template (creates version + 1)', scope: 'templates:write', tag: 'Templates', request: { params: z.object(tpl), ...body(TemplatePatchSchema) }, responses: { 200: json(TemplateSchema, 'The new version.'), 404: problem('not_found'), 409: problem('template_name_taken'), 412: problem('If-Match is stale.'), 422: problem('Invalid fields.') } },
    { method: 'delete', path: '/templates/{id}', summary: 'Delete a template', scope: 'templates:write', tag: 'Templates', request: { params: z.object(tpl) }, responses: { 204: { description: 'Deleted.' }, 404: problem('not_found'), 409: problem('template_in_use: attached to a non-closed incident.'), 412: problem('If-Match is stale.') } },
    { method: 'get', path: '/templates/{id}/versions', summary: 'List versions (newest first)', scope: 'templates:read', tag: 'Templates', request: { params: z.object(tpl), query: ListQuery }, responses: { 200: json(page(TemplateSchema, 'TemplateVersionPage'), 'A page of versions.'), 404: problem('not_found') } },
    { method: 'get', path: '/templates/{id}/versions/{n}', summary: 'Get one version', scope: 'templates:read', tag: 'Templates', request: { params: z.object({ ...tpl, n: z.string().meta({ param: { name: 'n', in: 'path' }, example: '1' }) }) }, responses: { 200: json(TemplateSchema, 'That version.'), 404: problem('not_found') } },
    { method: 'post', path: '/templates/{id}/render', summary: 'Preview for all eight channel types (nothing is sent)', scope: 'templates:read', tag: 'Templates', request: { params: z.object(tpl), ...body(TemplateRenderRequestSchema, false) }, responses: { 200: json(TemplatePreviewsSchema, 'One preview per channel type.'), 404: problem('not_found'), 422: problem('missing_variables or invalid fields.') } },
    { method: 'post', path: '/connections', summary: 'Create a connection', scope: 'connections:write', tag: 'Connections', request: body(ConnectionCreateSchema), responses: { 201: json(ConnectionCreatedSchema, 'Created; a webhook connection carries its signing_secret once.'), 422: problem('Invalid config, destination_not_allowed, legacy_webhook_not_supported.') } },
    { method: 'get', path: '/connections', summary: 'List connections (newest first)', scope: 'connections:read', tag: 'Connections', request: { query: ListQuery }, responses: { 200: json(page(ConnectionSchema, 'ConnectionPage'), 'A page of connections (secrets never returned).') } },
    { method: 'get', path: '/connections/{id}', summary: 'Get a connection', scope: 'connections:read', tag: 'Connections', request: { params: z.object(con) }, responses: { 200: json(ConnectionSchema, 'The connection; ETag header set.'), 404: problem('not_found') } },
    { method: 'patch', path: '/connections/{id}', summary: 'Update a connection (config merges; secrets kept unless sent)', scope: 'connections:write', tag: 'Connections', request: { params: z.object(con), ...body(ConnectionPatchSchema) }, responses: { 200: json(ConnectionSchema, 'Updated.'), 404: problem('not_found'), 412: problem('If-Match is stale.'), 422: problem('Invalid config, secret_required, destination_not_allowed.') } },
    { method: 'delete', path: '/connections/{id}', summary: 'Delete a connection (cancels its queued deliveries)', scope: 'connections:write', tag: 'Connections', request: { params: z.object(con) }, responses: { 204: { description: 'Deleted.' }, 404: problem('not_found'), 412: problem('If-Match is stale.') } },
    { method: 'post', path: '/connections/{id}/test', summary: 'Test a connection (the outcome is data: always 200)', scope: 'connections:write', tag: 'Connections', request: { params: z.object(con), ...body(ConnectionTestRequestSchema, false) }, responses: { 200: json(ConnectionTestResultSchema, 'The test result, also stored as last_test.'), 404: problem('not_found') } },
  ];

  for (const op of ops) {
    registry.registerPath({
      method: op.method,
      path: op.path,
      summary: op.summary,
      tags: [op.tag],
      security: [{ bearer: [] }],
      description: `Scope: \`${op.scope}\`.`,
      request: op.request,
      responses: { ...op.responses, ...common },
    });
  }

  const generator = new OpenApiGeneratorV31(registry.definitions);
  return generator.generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'Herald API',
      version: '1.0.0',
      description:
        'Incident communication: declare, template, execute to every channel, with a receipt per delivery. ' +
        'Conventions: problem+json errors, cursor pagination, Idempotency-Key on POST, ETag/If-Match, per-key rate limits (RateLimit headers).',
    },
    servers: [{ url: '/v1' }],
  });
}
