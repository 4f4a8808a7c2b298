import { LIMITS } from '../domain/common/limits.js';
import {
  OpenAPIRegistry,
  OpenApiGeneratorV31,
  type ResponseConfig,
  type RouteConfig,
} from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import { bodyModeOf, openApiPath, type OperationDoc, type Route, type RouteTable } from './endpoint.js';
import { problem } from './operation-docs.js';
import { audienceRouteTable } from './routes/audiences.js';
import { componentRouteTable } from './routes/components.js';
import { maintenanceRouteTable } from './routes/maintenances.js';
import { connectionRouteTable } from './routes/connections.js';
import { executionRouteTable } from './routes/executions.js';
import { incidentRouteTable } from './routes/incidents.js';
import { templateRouteTable } from './routes/templates.js';
import { eventEndpointRouteTable, registerEventWebhooks } from './routes/event-endpoints.js';
import { subscriberRouteTable } from './routes/subscribers.js';

/**
 * The OpenAPI 3.1 document, generated from the route tables that mount the API and the same zod
 * schemas that validate requests, so a route cannot exist without its operation.
 * `npm run openapi` writes it to manifest/openapi.json; a test fails when that file is stale.
 */

/** In the document's order. */
const TABLES: readonly RouteTable<never>[] = [
  incidentRouteTable,
  executionRouteTable,
  templateRouteTable,
  connectionRouteTable,
  audienceRouteTable,
  componentRouteTable,
  maintenanceRouteTable,
  eventEndpointRouteTable,
  subscriberRouteTable,
];

const common = {
  401: problem('Missing, malformed, unknown, expired or revoked API key (WWW-Authenticate says which).'),
  403: problem('The key lacks the scope this endpoint needs (WWW-Authenticate names it).'),
  429: problem('Per-key rate limit reached; Retry-After says when to retry.'),
  503: problem(
    "service_unavailable: Herald can't reach its database (Redis down, paused or unreachable). Retry after Retry-After; a POST with the same Idempotency-Key never takes effect twice.",
  ),
};

/** One documented route, as the document sees it. */
interface Op {
  method: Route<never>['method'];
  /** The largest body it reads, in bytes (Route.bodyLimit). */
  bodyLimit: number;
  /** OpenAPI syntax: `/incidents/{id}`. */
  path: string;
  doc: OperationDoc;
}

export function buildOpenApiDocument(): object {
  const registry = new OpenAPIRegistry();
  registry.registerComponent('securitySchemes', 'bearer', {
    type: 'http',
    scheme: 'bearer',
    description:
      'An API key: `hld_` + 49 base62 characters, made with `npm run herald -- keys create` or the Slack App Home.',
  });
  registerHeaders(registry);
  for (const table of TABLES)
    for (const route of table.routes) if (route.doc) registry.registerPath(operationOf(table, route, route.doc));
  registerWebhooks(registry);
  registerEventWebhooks(registry);

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

function operationOf(table: RouteTable<never>, route: Route<never>, doc: OperationDoc): RouteConfig {
  if (route.scope === null) throw new Error(`${route.method} ${route.path}: a documented operation needs a scope`);
  const op: Op = {
    method: route.method,
    path: openApiPath(route.path),
    doc,
    bodyLimit: route.bodyLimit ?? LIMITS.bodyBytes,
  };
  const headers = {
    ...(op.method === 'post' ? { 'Idempotency-Key': IdempotencyKeyHeader } : {}),
    ...(doc.ifMatch ? { 'If-Match': IfMatchHeader } : {}),
  };
  const request: NonNullable<RouteConfig['request']> = {
    ...paramsOf(table, route.path),
    ...(doc.query ? { query: doc.query } : {}),
    ...(doc.body
      ? { body: { required: bodyModeOf(route) === 'required', content: { 'application/json': { schema: doc.body } } } }
      : {}),
    ...(Object.keys(headers).length > 0 ? { headers: z.object(headers) } : {}),
  };
  return {
    method: op.method,
    path: op.path,
    operationId: doc.operationId,
    summary: doc.summary,
    tags: [table.tag],
    security: [{ bearer: [] }],
    description: doc.description ? `${doc.description}\n\nScope: \`${route.scope}\`.` : `Scope: \`${route.scope}\`.`,
    request: Object.keys(request).length > 0 ? request : undefined,
    responses: completeResponses(op),
  };
}

/** The path's parameters, in the path's order, as the table describes them. */
function paramsOf(table: RouteTable<never>, path: string): { params?: z.ZodObject } {
  const names = [...path.matchAll(/:([A-Za-z]\w*)/g)].map((m) => m[1]!);
  if (names.length === 0) return {};
  const shape: Record<string, z.ZodType> = {};
  for (const name of names) {
    const schema = table.params[name];
    if (schema === undefined) throw new Error(`${path}: the ${table.tag} table does not describe :${name}`);
    shape[name] = schema;
  }
  return { params: z.object(shape) };
}

// ── what every operation shares: headers, the statuses the request chain can answer ──────────

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
const IfMatchHeader = z.string().optional().meta({
  description:
    'The ETag last read (`"r3"`): the write applies only if the record is still at that revision, else 412 precondition_failed.',
  example: '"r3"',
});

const header = (name: string) => ({ $ref: `#/components/headers/${name}` });

function registerHeaders(registry: OpenAPIRegistry): void {
  const str = { type: 'string' } as const;
  const headers: Record<string, { description: string; schema: object; required?: boolean }> = {
    'X-Request-Id': {
      description: 'The request id, also in problem bodies and logs; a valid incoming X-Request-Id is reused.',
      schema: str,
    },
    Location: { description: 'The created resource (or the execution an execute queued).', schema: str },
    ETag: { description: 'The revision of the resource (`"r3"`); send it back as If-Match.', schema: str },
    RateLimit: {
      description: 'Remaining requests per policy (IETF RateLimit fields): `"default";r=599;t=60`.',
      schema: str,
    },
    'RateLimit-Policy': {
      description: 'Each policy applied: `"default";q=600;w=60` (and `"execute"` on execute).',
      schema: str,
    },
    'Retry-After': {
      description: 'Seconds to wait before retrying.',
      schema: { type: 'integer', minimum: 0 },
      required: true,
    },
    'Idempotent-Replayed': {
      description: '`true` when this is the stored answer of an earlier request with the same Idempotency-Key.',
      schema: { type: 'string', enum: ['true'] },
    },
    'WWW-Authenticate': {
      description:
        'Bearer challenge: `error="invalid_token"`, or `error="insufficient_scope", scope="…"` naming the missing scope.',
      schema: str,
      required: true,
    },
  };
  for (const [name, h] of Object.entries(headers)) registry.registerComponent('headers', name, h);
}

/** A response object with the headers its status carries; problem descriptions are merged. */
function completeResponses(op: Op): Record<number, ResponseConfig> {
  const extra: Record<number, string> = {
    400: 'invalid_path (malformed percent-encoding in the path), invalid_cursor, bad_request.',
    431: 'request_headers_too_large: the request headers exceed 16 KiB.',
  };
  if (op.doc.body) {
    extra[400] += ' invalid_json: the body is not JSON, not UTF-8, or its Content-Encoding does not decode.';
    extra[413] = `payload_too_large: the body is over ${Math.round(op.bodyLimit / 1024)} KiB.`;
    extra[415] = 'unsupported_media_type: the body must be application/json (UTF-8), identity, gzip, deflate or br.';
    extra[422] =
      'validation_failed: a field is invalid (errors[].field names it), including control characters and lone surrogates in text.';
  }
  if (op.method === 'post') {
    extra[409] =
      'idempotency_key_in_use: a request with this Idempotency-Key is still running; retry after Retry-After.';
    extra[422] = `${extra[422] ?? ''} idempotency_key_reused: this Idempotency-Key was used with another body.`.trim();
  }
  if (op.path.includes('{')) extra[404] = 'not_found: no such resource (also for a malformed id).';
  if (op.doc.ifMatch) extra[412] = 'precondition_failed: If-Match no longer matches the current ETag.';

  const all: Record<number, ResponseConfig> = { ...op.doc.responses, ...common };
  for (const [status, text] of Object.entries(extra)) {
    const code = Number(status);
    const existing = all[code];
    const description = existing?.description ?? '';
    all[code] = existing
      ? { ...existing, description: description.includes(text) ? description : `${description} ${text}` }
      : problem(text);
  }
  const out: Record<number, ResponseConfig> = {};
  for (const [status, response] of Object.entries(all)) {
    const code = Number(status);
    const headers: Record<string, unknown> = { 'X-Request-Id': header('X-Request-Id') };
    if (code !== 401)
      Object.assign(headers, { RateLimit: header('RateLimit'), 'RateLimit-Policy': header('RateLimit-Policy') });
    if (code === 201 || code === 202) headers.Location = header('Location');
    if ((code === 200 || code === 201) && op.doc.etag) headers.ETag = header('ETag');
    if (op.method === 'post' && code >= 200 && code < 300)
      headers['Idempotent-Replayed'] = header('Idempotent-Replayed');
    if (code === 429 || code === 503) headers['Retry-After'] = header('Retry-After');
    if (code === 409 && op.method === 'post') headers['Retry-After'] = { ...header('Retry-After') };
    if (code === 401 || code === 403) headers['WWW-Authenticate'] = header('WWW-Authenticate');
    out[code] = { ...response, headers: headers as ResponseConfig['headers'] };
  }
  return out;
}

/** What a `webhook` connection receives: the payload and its Standard Webhooks headers. */
function registerWebhooks(registry: OpenAPIRegistry): void {
  const payload = z
    .object({
      type: z.enum(['incident.executed', 'execution.corrected', 'execution.retracted', 'connection.test']).meta({
        description:
          '`incident.executed` for an execute; `execution.corrected` / `execution.retracted` for a correction or retraction of an earlier delivery (`target_delivery_id`); `connection.test` for a connection test with send_message (then `test` is true).',
      }),
      test: z.boolean(),
      delivery_id: z.string().meta({
        description: 'The delivery: the same on every retry of it (also webhook-id).',
        example: 'dlv_01JH3ZK6X2B8V4N0Q7R5T9W1YC',
      }),
      execution_id: z.string().meta({ example: 'exe_01JH3ZK6X2B8V4N0Q7R5T9W1YC' }),
      incident: z.object({
        id: z.string(),
        title: z.string(),
        severity: z.string(),
        status: z.string(),
        url: z.string().nullable().meta({ description: 'HERALD_PUBLIC_URL + the incident path; null when unset.' }),
      }),
      incident_id: z.string().meta({
        description:
          'The incident: every message of one incident carries it, so a receiver can keep one conversation per incident.',
      }),
      sequence: z.number().int().nullable().meta({
        description:
          "The message's place in this incident's conversation with this connection: 1, 2, 3, … (null for a connection test).",
      }),
      previous_delivery_id: z
        .string()
        .nullable()
        .meta({ description: 'The delivery before it in the same conversation; null for the first (and for a test).' }),
      target_delivery_id: z.string().nullable().meta({
        description:
          'For a correction or retraction: the delivery it corrects or retracts (whose message the receiver should replace or withdraw); null otherwise.',
      }),
      subject: z.string(),
      body: z.string(),
      timestamp: z
        .string()
        .meta({ description: 'When this attempt was made (ISO 8601).', example: '2026-11-22T10:00:00.000Z' }),
    })
    .meta({ id: 'WebhookPayload' });
  registry.registerWebhook({
    method: 'post',
    path: 'incidentDelivery',
    operationId: 'receiveIncidentDelivery',
    summary: 'What a webhook connection receives on each delivery attempt',
    description:
      'Signed per Standard Webhooks (standardwebhooks.com): verify `webhook-signature` = `v1,` + base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>`, ' +
      "keyed with the base64-decoded part of the connection's `whsec_…` secret, and drop a repeated webhook-id (a retry). " +
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
    responses: {
      200: { description: 'Accepted (any 2xx).' },
      500: { description: 'Any 5xx, 408 or 429: retried with backoff.' },
    },
  });
}

/**
 * Request bodies describe their defaults in words instead of `default`: code generators (such as
 * openapi-typescript in its default settings) make a field with a `default` required, which
 * would refuse the README's own minimal bodies. Responses keep every field required as sent.
 */
function describeRequestDefaults<T extends object>(doc: T): T {
  const d = doc as {
    paths?: Record<string, Record<string, { requestBody?: unknown }>>;
    components?: { schemas?: Record<string, unknown> };
  };
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
