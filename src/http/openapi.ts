import { OpenAPIRegistry, OpenApiGeneratorV31, type ResponseConfig } from '@asteasolutions/zod-to-openapi';
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
import { ChannelTypeSchema } from '../channels/index.js';
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

  registerHeaders(registry);
  for (const op of ops) {
    const operationId = OPERATION_IDS[`${op.method} ${op.path}`];
    if (operationId === undefined) throw new Error(`no operationId for ${op.method} ${op.path}`);
    const hasBody = op.request !== undefined && 'body' in op.request;
    const ifMatch = IF_MATCH.has(`${op.method} ${op.path}`);
    const headers = {
      ...(op.method === 'post' ? { 'Idempotency-Key': IdempotencyKeyHeader } : {}),
      ...(ifMatch ? { 'If-Match': IfMatchHeader } : {}),
    };
    registry.registerPath({
      method: op.method,
      path: op.path,
      operationId,
      summary: op.summary,
      tags: [op.tag],
      security: [{ bearer: [] }],
      description: `Scope: \`${op.scope}\`.`,
      request: Object.keys(headers).length > 0 ? { ...op.request, headers: z.object(headers) } : op.request,
      responses: completeResponses(op, { hasBody, ifMatch }),
    });
  }
  registerWebhooks(registry);

  const generator = new OpenApiGeneratorV31(registry.definitions);
  const doc = generator.generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'Herald API',
      version: '1.0.0',
      license: { name: 'MIT', identifier: 'MIT' },
      description:
        'Incident communication: declare, template, execute to every channel, with a receipt per delivery. ' +
        'Conventions: problem+json errors, cursor pagination, Idempotency-Key on POST, ETag/If-Match, per-key rate limits (RateLimit headers).',
    },
    servers: [{ url: '/v1' }],
  });
  return describeRequestDefaults(doc);
}

// ── what every operation shares: ids, headers, the statuses the request chain can answer ──────

const OPERATION_IDS: Record<string, string> = {
  'post /incidents': 'createIncident',
  'get /incidents': 'listIncidents',
  'get /incidents/{id}': 'getIncident',
  'patch /incidents/{id}': 'updateIncident',
  'post /incidents/{id}/close': 'closeIncident',
  'get /incidents/{id}/events': 'listIncidentEvents',
  'post /incidents/{id}/execute': 'executeIncident',
  'get /incidents/{id}/executions': 'listExecutions',
  'get /incidents/{id}/executions/{executionId}': 'getExecution',
  'post /incidents/{id}/executions/{executionId}/redeliver': 'redeliverExecution',
  'post /templates': 'createTemplates',
  'get /templates': 'listTemplates',
  'get /templates/{id}': 'getTemplate',
  'patch /templates/{id}': 'updateTemplate',
  'delete /templates/{id}': 'deleteTemplate',
  'get /templates/{id}/versions': 'listTemplateVersions',
  'get /templates/{id}/versions/{n}': 'getTemplateVersion',
  'post /templates/{id}/render': 'renderTemplate',
  'post /connections': 'createConnection',
  'get /connections': 'listConnections',
  'get /connections/{id}': 'getConnection',
  'patch /connections/{id}': 'updateConnection',
  'delete /connections/{id}': 'deleteConnection',
  'post /connections/{id}/test': 'testConnection',
};

/** Writes that honour If-Match (the routes call ifMatchRevision). */
const IF_MATCH = new Set(['patch /incidents/{id}', 'post /incidents/{id}/close', 'patch /templates/{id}', 'delete /templates/{id}', 'patch /connections/{id}', 'delete /connections/{id}']);

const IdempotencyKeyHeader = z
  .string()
  .min(1)
  .max(255)
  .optional()
  .meta({
    description:
      'Makes the POST safe to retry: the same key with the same body within 24 h replays the stored answer (Idempotent-Replayed: true) and never takes effect twice; ' +
      'another body → 422 idempotency_key_reused; while the first is still running → 409 idempotency_key_in_use (retry after Retry-After).',
    example: 'deploy-4711-execute',
  });
const IfMatchHeader = z
  .string()
  .optional()
  .meta({ description: 'The ETag last read (`"r3"`): the write applies only if the record is still at that revision, else 412 precondition_failed.', example: '"r3"' });

const header = (name: string) => ({ $ref: `#/components/headers/${name}` });

function registerHeaders(registry: OpenAPIRegistry): void {
  const str = { type: 'string' } as const;
  const headers: Record<string, { description: string; schema: object; required?: boolean }> = {
    'X-Request-Id': { description: 'The request id, also in problem bodies and logs; a valid incoming X-Request-Id is reused.', schema: str },
    Location: { description: 'The created resource (or the execution an execute queued).', schema: str },
    ETag: { description: 'The revision of the resource (`"r3"`); send it back as If-Match.', schema: str },
    RateLimit: { description: 'Remaining requests per policy (IETF RateLimit fields): `"default";r=599;t=60`.', schema: str },
    'RateLimit-Policy': { description: 'Each policy applied: `"default";q=600;w=60` (and `"execute"` on execute).', schema: str },
    'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer', minimum: 0 }, required: true },
    'Idempotent-Replayed': { description: '`true` when this is the stored answer of an earlier request with the same Idempotency-Key.', schema: { type: 'string', enum: ['true'] } },
    'WWW-Authenticate': { description: 'Bearer challenge: `error="invalid_token"`, or `error="insufficient_scope", scope="…"` naming the missing scope.', schema: str, required: true },
  };
  for (const [name, h] of Object.entries(headers)) registry.registerComponent('headers', name, h);
}

interface Shape {
  hasBody: boolean;
  ifMatch: boolean;
}

/** A response object with the headers its status carries; problem descriptions are merged. */
function completeResponses(op: Op, shape: Shape): Record<number, ResponseConfig> {
  const extra: Record<number, string> = {
    400: 'invalid_path (malformed percent-encoding in the path), invalid_cursor, bad_request.',
    431: 'request_headers_too_large: the request headers exceed 16 KiB.',
  };
  if (shape.hasBody) {
    extra[400] += ' invalid_json: the body is not JSON, not UTF-8, or its Content-Encoding does not decode.';
    extra[413] = 'payload_too_large: the body is over 256 KiB.';
    extra[415] = 'unsupported_media_type: the body must be application/json (UTF-8), identity, gzip, deflate or br.';
    extra[422] = 'validation_failed: a field is invalid (errors[].field names it), including control characters and lone surrogates in text.';
  }
  if (op.method === 'post') {
    extra[409] = 'idempotency_key_in_use: a request with this Idempotency-Key is still running; retry after Retry-After.';
    extra[422] = `${extra[422] ?? ''} idempotency_key_reused: this Idempotency-Key was used with another body.`.trim();
  }
  if (op.path.includes('{')) extra[404] = 'not_found: no such resource (also for a malformed id).';
  if (shape.ifMatch) extra[412] = 'precondition_failed: If-Match no longer matches the current ETag.';

  const all: Record<number, unknown> = { ...op.responses, ...common };
  for (const [status, text] of Object.entries(extra)) {
    const code = Number(status);
    const existing = all[code] as { description: string } | undefined;
    all[code] = existing ? { ...existing, description: existing.description.includes(text) ? existing.description : `${existing.description} ${text}` } : problem(text);
  }
  const out: Record<number, ResponseConfig> = {};
  for (const [status, response] of Object.entries(all)) {
    const code = Number(status);
    const headers: Record<string, unknown> = { 'X-Request-Id': header('X-Request-Id') };
    if (code !== 401) Object.assign(headers, { RateLimit: header('RateLimit'), 'RateLimit-Policy': header('RateLimit-Policy') });
    if (code === 201 || code === 202) headers.Location = header('Location');
    if ((code === 200 || code === 201) && /^\/(incidents|templates|connections)(\/\{id\}(\/close)?)?$/.test(op.path) && op.method !== 'get') headers.ETag = header('ETag');
    if (code === 200 && op.method === 'get' && /^\/(incidents|templates|connections)\/\{id\}$/.test(op.path)) headers.ETag = header('ETag');
    if (op.method === 'post' && code >= 200 && code < 300) headers['Idempotent-Replayed'] = header('Idempotent-Replayed');
    if (code === 429 || code === 503) headers['Retry-After'] = header('Retry-After');
    if (code === 409 && op.method === 'post') headers['Retry-After'] = { ...header('Retry-After') };
    if (code === 401 || code === 403) headers['WWW-Authenticate'] = header('WWW-Authenticate');
    out[code] = { ...(response as ResponseConfig), headers: headers as ResponseConfig['headers'] };
  }
  return out;
}

/** What a `webhook` connection receives: the payload and its Standard Webhooks headers. */
function registerWebhooks(registry: OpenAPIRegistry): void {
  const payload = z
    .object({
      type: z.enum(['incident.executed', 'connection.test']).meta({ description: '`connection.test` for a connection test with send_message (then `test` is true).' }),
      test: z.boolean(),
      delivery_id: z.string().meta({ description: 'The delivery: the same on every retry of it (also webhook-id).', example: 'dlv_01JH3ZK6X2B8V4N0Q7R5T9W1YC' }),
      execution_id: z.string().meta({ example: 'exe_01JH3ZK6X2B8V4N0Q7R5T9W1YC' }),
      incident: z.object({ id: z.string(), title: z.string(), severity: z.string(), status: z.string(), url: z.string().nullable().meta({ description: 'HERALD_PUBLIC_URL + the incident path; null when unset.' }) }),
      subject: z.string(),
      body: z.string(),
      timestamp: z.string().meta({ description: 'When this attempt was made (ISO 8601).', example: '2026-11-22T10:00:00.000Z' }),
    })
    .meta({ id: 'WebhookPayload' });
  registry.registerWebhook({
    method: 'post',
    path: 'incidentDelivery',
    operationId: 'receiveIncidentDelivery',
    summary: 'What a webhook connection receives on each delivery attempt',
    description:
      'Signed per Standard Webhooks (standardwebhooks.com): verify `webhook-signature` = `v1,` + base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>`, ' +
      'keyed with the base64-decoded part of the connection\'s `whsec_…` secret, and drop a repeated webhook-id (a retry). ' +
      "The connection's own configured headers are sent too. Answer 2xx to accept; 408, 429 (with Retry-After) and 5xx are retried, other statuses fail the delivery.",
    tags: ['Webhooks'],
    // Herald signs the request (webhook-signature); the receiver needs no credentials from it.
    security: [],
    request: {
      headers: z.object({
        'webhook-id': z.string().meta({ description: 'The delivery id: stable across retries.' }),
        'webhook-timestamp': z.string().meta({ description: 'Unix seconds of this attempt.' }),
        'webhook-signature': z.string().meta({ description: '`v1,<base64 HMAC-SHA256>`.' }),
      }),
      body: { required: true, content: { 'application/json': { schema: payload } } },
    },
    responses: { 200: { description: 'Accepted (any 2xx).' }, 500: { description: 'Any 5xx, 408 or 429: retried with backoff.' } },
  });
}

/**
 * Request bodies describe their defaults in words instead of `default`: code generators (such as
 * openapi-typescript in its default settings) make a field with a `default` required, which
 * would refuse the README's own minimal bodies. Responses keep every field required as sent.
 */
function describeRequestDefaults<T extends object>(doc: T): T {
  const d = doc as { paths?: Record<string, Record<string, { requestBody?: unknown }>>; components?: { schemas?: Record<string, unknown> } };
  const schemas = d.components?.schemas ?? {};
  const seen = new Set<string>();
  // `properties` maps names to schemas: a property may itself be called "default".
  const visit = (node: unknown, isPropertyMap = false): void => {
    if (node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) return node.forEach((n) => visit(n));
    const o = node as Record<string, unknown>;
    if (isPropertyMap) {
      for (const v of Object.values(o)) visit(v);
      return;
    }
    if (typeof o.$ref === 'string') {
      const name = o.$ref.split('/').pop()!;
      if (!seen.has(name)) {
        seen.add(name);
        visit(schemas[name]);
      }
      return;
    }
    if ('default' in o) {
      const text = `Default: ${JSON.stringify(o.default)}.`;
      o.description = typeof o.description === 'string' ? `${o.description} ${text}` : text;
      delete o.default;
    }
    for (const [k, v] of Object.entries(o)) visit(v, k === 'properties');
  };
  for (const ops of Object.values(d.paths ?? {})) for (const op of Object.values(ops)) visit(op.requestBody);
  return doc;
}
