import { Router } from 'express';
import { z } from 'zod';
import { presentIncident, SeveritySchema, StatusSchema, type Incident } from '../../domain/incident.js';
import { parsePageRequest } from '../../domain/pagination.js';
import { parseInput } from '../../domain/validation.js';
import type { IncidentService } from '../../services/incidents.js';
import { actorOf } from '../context.js';
import { endpoint, queryList, type EdgeDeps } from '../endpoint.js';
import { etagOf, ifMatchRevision, setEtag } from '../etag.js';
import { jsonResponse, respondOnCommit, sendStored } from '../idempotency.js';
import { presentPage } from '../present.js';

const FilterSchema = z.object({
  status: z.array(StatusSchema).optional(),
  severity: z.array(SeveritySchema).optional(),
});

/** The answers of create and close, as stored for Idempotency-Key replays. */
export const created = (incident: Incident) =>
  jsonResponse(201, presentIncident(incident), { location: `/v1/incidents/${incident.id}`, etag: etagOf(incident.rev) });
export const current = (incident: Incident) => jsonResponse(200, presentIncident(incident), { etag: etagOf(incident.rev) });

export function incidentRoutes(deps: EdgeDeps & { incidents: IncidentService }): Router {
  const r = Router();
  const svc = deps.incidents;

  endpoint(r, deps, '/incidents', {
    post: {
      scope: 'incidents:write',
      handler: async (req, res) => {
        // Stored with the incident itself, so a crash right after the commit still replays this.
        respondOnCommit(res, (e) => (e.kind === 'incident' ? created(e.incident) : null));
        sendStored(res, created(await svc.create(req.body, actorOf(res))));
      },
    },
    get: {
      scope: 'incidents:read',
      handler: async (req, res) => {
        const page = parsePageRequest(req.query.limit, req.query.cursor);
        const filter = parseInput(FilterSchema, { status: queryList(req.query.status), severity: queryList(req.query.severity) });
        const result = await svc.list(filter, page);
        res.json(presentPage(result, page, presentIncident));
      },
    },
  });

  endpoint(r, deps, '/incidents/:id', {
    get: {
      scope: 'incidents:read',
      handler: async (req, res) => {
        const incident = await svc.get(String(req.params.id));
        setEtag(res, incident.rev);
        res.json(presentIncident(incident));
      },
    },
    patch: {
      scope: 'incidents:write',
      handler: async (req, res) => {
        const incident = await svc.update(String(req.params.id), req.body, actorOf(res), ifMatchRevision(req));
        setEtag(res, incident.rev);
        res.json(presentIncident(incident));
      },
    },
  });

  endpoint(r, deps, '/incidents/:id/close', {
    post: {
      scope: 'incidents:write',
      body: 'optional',
      handler: async (req, res) => {
        respondOnCommit(res, (e) => (e.kind === 'incident' ? current(e.incident) : null));
        sendStored(res, current(await svc.close(String(req.params.id), req.body, actorOf(res), ifMatchRevision(req))));
      },
    },
  });

  endpoint(r, deps, '/incidents/:id/events', {
    get: {
      scope: 'incidents:read',
      handler: async (req, res) => {
        const page = parsePageRequest(req.query.limit, req.query.cursor);
        const result = await svc.events(String(req.params.id), page);
        res.json(presentPage(result, page, (e) => e));
      },
    },
  });

  return r;
}
