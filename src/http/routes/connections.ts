import type { Router } from 'express';
import { z } from 'zod';
import { ChannelTypeSchema } from '../../channels/index.js';
import {
  ConnectionCreateSchema,
  ConnectionPatchSchema,
  ConnectionTestRequestSchema,
  ConnectionTestResultSchema,
  type ConnectionRecord,
} from '../../domain/connection/connection.js';
import { parseInput } from '../../domain/common/validation.js';
import type { ConnectionService } from '../../services/connections.js';
import { defineRoutes, mountRoutes, pathParam, queryList, queryString, type EdgeDeps } from '../endpoint.js';
import { actorOf } from '../context.js';
import { etagOf, ifMatchRevision } from '../etag.js';
import { jsonResponse, respondOnCommit, sendStored } from '../middleware/idempotency.js';
import { idParam, json, problem } from '../operation-docs.js';
import { ConnectionCreatedSchema, ConnectionSchema, presentConnection } from '../presenters/connection.js';
import { pageSchema } from '../presenters/page.js';
import { getRoute, listRoute, patchRoute } from '../respond.js';

type Deps = EdgeDeps & { connections: ConnectionService };

const FilterSchema = z.object({
  type: z.array(ChannelTypeSchema).optional(),
  enabled: z
    .enum(['true', 'false'], { message: 'enabled is true or false.' })
    .transform((v) => v === 'true')
    .optional(),
});

/** Create's 201; a webhook's signing secret is shown here, once. */
export const connectionCreated = (connection: ConnectionRecord, signingSecret: string | null) =>
  jsonResponse(
    201,
    signingSecret === null
      ? presentConnection(connection)
      : { ...presentConnection(connection), signing_secret: signingSecret },
    {
      location: `/v1/connections/${connection.id}`,
      etag: etagOf(connection.rev),
    },
  );

export const connectionRouteTable = defineRoutes<Deps>({ tag: 'Connections', params: { id: idParam('id', 'con') } }, [
  {
    method: 'post',
    path: '/connections',
    scope: 'connections:write',
    doc: {
      operationId: 'createConnection',
      summary: 'Create a connection',
      body: ConnectionCreateSchema,
      etag: true,
      responses: {
        201: json(ConnectionCreatedSchema, 'Created; a webhook connection carries its signing_secret once.'),
        422: problem('Invalid config, destination_not_allowed, legacy_webhook_not_supported.'),
      },
    },
    handle: async (req, res, d) => {
      // Stored (sealed) with the connection itself: a crash after the commit still replays this.
      respondOnCommit(res, (e) => (e.kind === 'connection' ? connectionCreated(e.connection, e.signingSecret) : null));
      const { connection, signingSecret } = await d.connections.create(req.body);
      sendStored(res, connectionCreated(connection, signingSecret));
    },
  },
  listRoute({
    path: '/connections',
    scope: 'connections:read',
    operationId: 'listConnections',
    summary: 'List connections (newest first)',
    responses: {
      200: json(pageSchema(ConnectionSchema, 'ConnectionPage'), 'A page of connections (secrets never returned).'),
    },
    list: (req, d: Deps, page) =>
      d.connections.list(
        parseInput(FilterSchema, { type: queryList(req.query.type), enabled: queryString(req.query.enabled) }),
        page,
      ),
    present: presentConnection,
  }),
  getRoute({
    path: '/connections/:id',
    scope: 'connections:read',
    operationId: 'getConnection',
    summary: 'Get a connection',
    noun: 'connection',
    schema: ConnectionSchema,
    load: (id, d: Deps) => d.connections.get(id),
    revOf: (c) => c.rev,
    present: presentConnection,
  }),
  patchRoute({
    path: '/connections/:id',
    scope: 'connections:write',
    operationId: 'updateConnection',
    summary: 'Update a connection (config merges; secrets kept unless sent)',
    body: ConnectionPatchSchema,
    responses: {
      200: json(ConnectionSchema, 'Updated.'),
      404: problem('not_found'),
      412: problem('If-Match is stale.'),
      422: problem('Invalid config, secret_required, destination_not_allowed.'),
    },
    update: (id, input, ifMatch, _res, d: Deps) => d.connections.update(id, input, ifMatch),
    revOf: (c) => c.rev,
    present: presentConnection,
  }),
  {
    method: 'delete',
    path: '/connections/:id',
    scope: 'connections:write',
    doc: {
      operationId: 'deleteConnection',
      summary: 'Delete a connection (cancels its queued deliveries)',
      ifMatch: true,
      responses: { 204: { description: 'Deleted.' }, 404: problem('not_found'), 412: problem('If-Match is stale.') },
    },
    handle: async (req, res, d) => {
      await d.connections.delete(pathParam(req, 'id'), ifMatchRevision(req));
      res.status(204).end();
    },
  },
  {
    method: 'post',
    path: '/connections/:id/test',
    scope: 'connections:write',
    body: 'optional',
    doc: {
      operationId: 'testConnection',
      summary: 'Test a connection (the outcome is data: always 200)',
      body: ConnectionTestRequestSchema,
      responses: {
        200: json(ConnectionTestResultSchema, 'The test result, also stored as last_test.'),
        404: problem('not_found'),
      },
    },
    handle: async (req, res, d) => {
      res.json(await d.connections.test(pathParam(req, 'id'), req.body, actorOf(res)));
    },
  },
]);

export const connectionRoutes = (deps: Deps, router?: Router, prefix = ''): Router =>
  mountRoutes(deps, connectionRouteTable, router, prefix);
