import type { OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import type { Router } from 'express';
import { z } from 'zod';
import { EVENT_SCHEMAS, eventDescription } from '../../domain/event/catalog.js';
import {
  EndpointCreateSchema,
  EndpointPatchSchema,
  EndpointSchema,
  EndpointTestResultSchema,
  EndpointWithSecretSchema,
  EventDeliverySchema,
  presentEndpoint,
  presentEventDelivery,
  ReplayResultSchema,
  ReplaySchema,
  RotateSecretSchema,
  type EndpointRecord,
} from '../../domain/event/endpoint.js';
import type { EventEndpointService } from '../../services/events.js';
import { defineRoutes, mountRoutes, pathParam, type EdgeDeps } from '../endpoint.js';
import { etagOf } from '../etag.js';
import { jsonResponse, respondOnCommit, sendStored } from '../middleware/idempotency.js';
import { idParam, json, problem } from '../operation-docs.js';
import { pageSchema } from '../presenters/page.js';
import { deleteRoute, getRoute, listRoute, patchRoute } from '../respond.js';

type Deps = EdgeDeps & { events: EventEndpointService; nowMs: () => number };

/** An answer carrying the signing secret (create, rotate): shown this once, stored sealed for a replay. */
const withSecret = (status: 200 | 201, e: EndpointRecord, secret: string, nowMs: number) =>
  jsonResponse(
    status,
    { ...presentEndpoint(e, nowMs), signing_secret: secret },
    { ...(status === 201 ? { location: `/v1/event-endpoints/${e.id}` } : {}), etag: etagOf(e.rev) },
  );

const DeliveryParams = { id: idParam('id', 'evp'), deliveryId: idParam('deliveryId', 'evd') };

export const eventEndpointRouteTable = defineRoutes<Deps>({ tag: 'Event endpoints', params: DeliveryParams }, [
  {
    method: 'post',
    path: '/event-endpoints',
    scope: 'events:write',
    doc: {
      operationId: 'createEventEndpoint',
      summary: 'Create an event endpoint (its signing secret is shown once)',
      description:
        'Herald POSTs the events it subscribes to (docs/events.md), signed per Standard Webhooks. The `whsec_…` secret is in this answer only.',
      body: EndpointCreateSchema,
      etag: true,
      responses: {
        201: json(EndpointWithSecretSchema, 'Created, with its signing_secret (shown once).'),
        422: problem('validation_failed (at most 50 endpoints), destination_not_allowed.'),
      },
    },
    handle: async (req, res, d) => {
      respondOnCommit(res, (e) =>
        e.kind === 'event_endpoint' ? withSecret(201, e.endpoint, e.signingSecret, d.nowMs()) : null,
      );
      const { endpoint, signingSecret } = await d.events.create(req.body);
      sendStored(res, withSecret(201, endpoint, signingSecret, d.nowMs()));
    },
  },
  listRoute({
    path: '/event-endpoints',
    scope: 'events:read',
    operationId: 'listEventEndpoints',
    summary: 'List event endpoints (newest first)',
    responses: { 200: json(pageSchema(EndpointSchema, 'EventEndpointPage'), 'A page of endpoints (no secrets).') },
    list: (_req, d: Deps, page) => d.events.list(page),
    present: (e: EndpointRecord) => presentEndpoint(e, Date.now()),
  }),
  getRoute<Deps, EndpointRecord>({
    path: '/event-endpoints/:id',
    scope: 'events:read',
    operationId: 'getEventEndpoint',
    summary: 'Get an event endpoint',
    noun: 'event endpoint',
    schema: EndpointSchema,
    load: (id, d: Deps) => d.events.get(id),
    revOf: (e) => e.rev,
    present: (e) => presentEndpoint(e, Date.now()),
  }),
  patchRoute<Deps, EndpointRecord>({
    path: '/event-endpoints/:id',
    scope: 'events:write',
    operationId: 'updateEventEndpoint',
    summary: 'Update an event endpoint',
    body: EndpointPatchSchema,
    responses: {
      200: json(EndpointSchema, 'Updated.'),
      404: problem('not_found'),
      412: problem('If-Match is stale.'),
      422: problem('validation_failed, destination_not_allowed.'),
    },
    update: (id, input, ifMatch, _res, d: Deps) => d.events.update(id, input, ifMatch),
    revOf: (e) => e.rev,
    present: (e) => presentEndpoint(e, Date.now()),
  }),
  deleteRoute<Deps>({
    path: '/event-endpoints/:id',
    scope: 'events:write',
    operationId: 'deleteEventEndpoint',
    summary: 'Delete an event endpoint (its pending deliveries are dropped)',
    responses: {},
    remove: (id, ifMatch, d) => d.events.delete(id, ifMatch),
  }),
  {
    method: 'post',
    path: '/event-endpoints/:id/rotate-secret',
    scope: 'events:write',
    body: 'optional',
    doc: {
      operationId: 'rotateEventEndpointSecret',
      summary: 'Rotate the signing secret (the old one keeps signing during the overlap)',
      body: RotateSecretSchema,
      etag: true,
      responses: {
        200: json(EndpointWithSecretSchema, 'The new signing_secret (shown once).'),
        404: problem('not_found'),
        422: problem('validation_failed'),
      },
    },
    handle: async (req, res, d) => {
      respondOnCommit(res, (e) =>
        e.kind === 'event_endpoint' ? withSecret(200, e.endpoint, e.signingSecret, d.nowMs()) : null,
      );
      const { endpoint, signingSecret } = await d.events.rotateSecret(pathParam(req, 'id'), req.body);
      sendStored(res, withSecret(200, endpoint, signingSecret, d.nowMs()));
    },
  },
  listRoute({
    path: '/event-endpoints/:id/deliveries',
    scope: 'events:read',
    operationId: 'listEventDeliveries',
    summary: "An endpoint's delivery log (newest first)",
    responses: {
      200: json(pageSchema(EventDeliverySchema, 'EventEndpointDeliveryPage'), 'Deliveries with their attempts.'),
      404: problem('not_found'),
    },
    list: (req, d: Deps, page) => d.events.deliveries(pathParam(req, 'id'), page),
    present: presentEventDelivery,
  }),
  {
    method: 'post',
    path: '/event-endpoints/:id/deliveries/:deliveryId/retry',
    scope: 'events:write',
    body: 'optional',
    doc: {
      operationId: 'retryEventDelivery',
      summary: 'Send a delivery again now (a finished one as a new delivery, same webhook-id)',
      body: z.strictObject({}).meta({ id: 'EventDeliveryRetry' }),
      responses: { 202: json(EventDeliverySchema, 'Queued.'), 404: problem('not_found') },
    },
    handle: async (req, res, d) => {
      const delivery = await d.events.retryDelivery(pathParam(req, 'id'), pathParam(req, 'deliveryId'));
      res.status(202).json(presentEventDelivery(delivery));
    },
  },
  {
    method: 'post',
    path: '/event-endpoints/:id/replay',
    scope: 'events:write',
    doc: {
      operationId: 'replayEvents',
      summary: 'Send kept events of a time range again, with their original webhook-ids',
      body: ReplaySchema,
      responses: {
        202: json(ReplayResultSchema, 'Queued.'),
        404: problem('not_found'),
        422: problem('validation_failed'),
      },
    },
    handle: async (req, res, d) => {
      res.status(202).json(await d.events.replay(pathParam(req, 'id'), req.body));
    },
  },
  {
    method: 'post',
    path: '/event-endpoints/:id/test',
    scope: 'events:write',
    body: 'optional',
    doc: {
      operationId: 'testEventEndpoint',
      summary: "Send a signed ping and answer the receiver's reply (the outcome is data: always 200)",
      body: z.strictObject({}).meta({ id: 'EventEndpointTest' }),
      responses: { 200: json(EndpointTestResultSchema, 'What the receiver answered.'), 404: problem('not_found') },
    },
    handle: async (req, res, d) => {
      res.json(await d.events.test(pathParam(req, 'id')));
    },
  },
]);

export const eventEndpointRoutes = (deps: Deps, router?: Router, prefix = ''): Router =>
  mountRoutes(deps, eventEndpointRouteTable, router, prefix);

/** The event catalog in the OpenAPI `webhooks` section: one entry, one schema per event type. */
export function registerEventWebhooks(registry: OpenAPIRegistry): void {
  for (const [type, schema] of Object.entries(EVENT_SCHEMAS)) {
    registry.registerWebhook({
      method: 'post',
      path: `event.${type}`,
      operationId: `receiveEvent_${type.replace(/[^a-z0-9]+/gi, '_')}`,
      summary: `Event \`${type}\``,
      description: `${eventDescription(type)} Sent to event endpoints subscribed to it (docs/events.md), signed per Standard Webhooks: verify with the endpoint's \`whsec_…\` secret; \`webhook-id\` is the event id (drop repeats).`,
      tags: ['Events'],
      security: [],
      request: {
        headers: z.object({
          'webhook-id': z.string().meta({ description: 'The event id: the same on every retry and replay.' }),
          'webhook-timestamp': z.string().meta({ description: 'Unix seconds of this attempt.' }),
          'webhook-signature': z
            .string()
            .meta({ description: 'Space-separated `v1,<base64>` signatures: two during a secret rotation.' }),
        }),
        body: { required: true, content: { 'application/json': { schema } } },
      },
      responses: {
        200: { description: 'Accepted (any 2xx).' },
        410: { description: 'Gone: Herald disables the endpoint.' },
        500: { description: 'Anything else (or no answer in 10 s): retried on the schedule.' },
      },
    });
  }
}
