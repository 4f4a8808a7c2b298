import { Router } from 'express';
import { z } from 'zod';
import { ChannelTypeSchema } from '../../channels/index.js';
import { presentConnection, type ConnectionRecord } from '../../domain/connection.js';
import { parsePageRequest } from '../../domain/pagination.js';
import { parseInput } from '../../domain/validation.js';
import type { ConnectionService } from '../../services/connections.js';
import { endpoint, queryList, queryString, type EdgeDeps } from '../endpoint.js';
import { etagOf, ifMatchRevision, setEtag } from '../etag.js';
import { jsonResponse, respondOnCommit, sendStored } from '../idempotency.js';
import { presentPage } from '../present.js';

const FilterSchema = z.object({
  type: z.array(ChannelTypeSchema).optional(),
  enabled: z
    .enum(['true', 'false'], { message: 'enabled is true or false.' })
    .transform((v) => v === 'true')
    .optional(),
});

/** Create's 201; a webhook's signing secret is shown here, once. */
export const connectionCreated = (connection: ConnectionRecord, signingSecret: string | null) =>
  jsonResponse(201, signingSecret === null ? presentConnection(connection) : { ...presentConnection(connection), signing_secret: signingSecret }, {
    location: `/v1/connections/${connection.id}`,
    etag: etagOf(connection.rev),
  });

export function connectionRoutes(deps: EdgeDeps & { connections: ConnectionService }): Router {
  const r = Router();
  const svc = deps.connections;

  endpoint(r, deps, '/connections', {
    post: {
      scope: 'connections:write',
      handler: async (req, res) => {
        // Stored (sealed) with the connection itself: a crash after the commit still replays this.
        respondOnCommit(res, (e) => (e.kind === 'connection' ? connectionCreated(e.connection, e.signingSecret) : null));
        const { connection, signingSecret } = await svc.create(req.body);
        sendStored(res, connectionCreated(connection, signingSecret));
      },
    },
    get: {
      scope: 'connections:read',
      handler: async (req, res) => {
        const page = parsePageRequest(req.query.limit, req.query.cursor);
        const filter = parseInput(FilterSchema, { type: queryList(req.query.type), enabled: queryString(req.query.enabled) });
        const result = await svc.list(filter, page);
        res.json(presentPage(result, page, presentConnection));
      },
    },
  });

  endpoint(r, deps, '/connections/:id', {
    get: {
      scope: 'connections:read',
      handler: async (req, res) => {
        const connection = await svc.get(String(req.params.id));
        setEtag(res, connection.rev);
        res.json(presentConnection(connection));
      },
    },
    patch: {
      scope: 'connections:write',
      handler: async (req, res) => {
        const connection = await svc.update(String(req.params.id), req.body, ifMatchRevision(req));
        setEtag(res, connection.rev);
        res.json(presentConnection(connection));
      },
    },
    delete: {
      scope: 'connections:write',
      handler: async (req, res) => {
        await svc.delete(String(req.params.id), ifMatchRevision(req));
        res.status(204).end();
      },
    },
  });

  endpoint(r, deps, '/connections/:id/test', {
    post: {
      scope: 'connections:write',
      body: 'optional',
      handler: async (req, res) => {
        res.json(await svc.test(String(req.params.id), req.body));
      },
    },
  });

  return r;
}
