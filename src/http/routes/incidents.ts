import type { Router } from 'express';
import { z } from 'zod';
import {
  IncidentCloseSchema,
  IncidentCreateSchema,
  IncidentPatchSchema,
  IncidentSchema,
  SeveritySchema,
  StatusSchema,
  type Incident,
} from '../../domain/incident/incident.js';
import { IncidentEventSchema } from '../../domain/incident/incident-event.js';
import { parseInput } from '../../domain/common/validation.js';
import type { IncidentService } from '../../services/incidents.js';
import { actorOf } from '../context.js';
import { defineRoutes, mountRoutes, pathParam, queryList, type EdgeDeps } from '../endpoint.js';
import { etagOf, ifMatchRevision } from '../etag.js';
import { jsonResponse, respondOnCommit, sendStored } from '../middleware/idempotency.js';
import { idParam, json, ListQuery, problem } from '../operation-docs.js';
import { presentIncident } from '../presenters/incident.js';
import { pageSchema } from '../presenters/page.js';
import { getRoute, listRoute, patchRoute } from '../respond.js';

type Deps = EdgeDeps & { incidents: IncidentService };

const FilterSchema = z.object({
  status: z.array(StatusSchema).optional(),
  severity: z.array(SeveritySchema).optional(),
});
const FilterQuery = ListQuery.extend({
  status: z
    .string()
    .optional()
    .meta({ description: `Comma-separated: ${StatusSchema.options.join(', ')}` }),
  severity: z
    .string()
    .optional()
    .meta({ description: `Comma-separated: ${SeveritySchema.options.join(', ')}` }),
});

/** The answers of create and close, as stored for Idempotency-Key replays. */
export const created = (incident: Incident) =>
  jsonResponse(201, presentIncident(incident), {
    location: `/v1/incidents/${incident.id}`,
    etag: etagOf(incident.rev),
  });
export const current = (incident: Incident) =>
  jsonResponse(200, presentIncident(incident), { etag: etagOf(incident.rev) });

export const incidentRouteTable = defineRoutes<Deps>({ tag: 'Incidents', params: { id: idParam('id', 'inc') } }, [
  {
    method: 'post',
    path: '/incidents',
    scope: 'incidents:write',
    doc: {
      operationId: 'createIncident',
      summary: 'Create an incident',
      body: IncidentCreateSchema,
      etag: true,
      responses: {
        201: json(IncidentSchema, 'Created; Location and ETag headers set.'),
        422: problem(
          'Invalid fields, unknown_template, or unknown_component (each unknown id named, as components.0.id).',
        ),
      },
    },
    handle: async (req, res, d) => {
      // Stored with the incident itself, so a crash right after the commit still replays this.
      respondOnCommit(res, (e) => (e.kind === 'incident' ? created(e.incident) : null));
      sendStored(res, created(await d.incidents.create(req.body, actorOf(res))));
    },
  },
  listRoute({
    path: '/incidents',
    scope: 'incidents:read',
    operationId: 'listIncidents',
    summary: 'List incidents (newest first)',
    query: FilterQuery,
    responses: {
      200: json(pageSchema(IncidentSchema, 'IncidentPage'), 'A page of incidents.'),
      400: problem('invalid_cursor'),
      422: problem('limit out of range or an unknown filter value.'),
    },
    list: (req, d: Deps, page) =>
      d.incidents.list(
        parseInput(FilterSchema, { status: queryList(req.query.status), severity: queryList(req.query.severity) }),
        page,
      ),
    present: presentIncident,
  }),
  getRoute({
    path: '/incidents/:id',
    scope: 'incidents:read',
    operationId: 'getIncident',
    summary: 'Get an incident',
    noun: 'incident',
    schema: IncidentSchema,
    load: (id, d: Deps) => d.incidents.get(id),
    revOf: (i) => i.rev,
    present: presentIncident,
  }),
  patchRoute({
    path: '/incidents/:id',
    scope: 'incidents:write',
    operationId: 'updateIncident',
    summary: 'Update an incident (status moves along its state machine; closed is terminal)',
    body: IncidentPatchSchema,
    responses: {
      200: json(IncidentSchema, 'Updated (or unchanged for a no-op).'),
      404: problem('not_found'),
      409: problem('incident_closed'),
      412: problem('If-Match is stale.'),
      422: problem('Invalid fields, empty patch, use_close_endpoint, unknown_component.'),
    },
    update: (id, input, ifMatch, res, d: Deps) => d.incidents.update(id, input, actorOf(res), ifMatch),
    revOf: (i) => i.rev,
    present: presentIncident,
  }),
  {
    method: 'post',
    path: '/incidents/:id/close',
    scope: 'incidents:write',
    body: 'optional',
    doc: {
      operationId: 'closeIncident',
      summary: 'Close an incident (terminal)',
      body: IncidentCloseSchema,
      ifMatch: true,
      etag: true,
      responses: {
        200: json(IncidentSchema, 'The closed incident.'),
        404: problem('not_found'),
        409: problem('incident_closed'),
      },
    },
    handle: async (req, res, d) => {
      respondOnCommit(res, (e) => (e.kind === 'incident' ? current(e.incident) : null));
      sendStored(
        res,
        current(await d.incidents.close(pathParam(req, 'id'), req.body, actorOf(res), ifMatchRevision(req))),
      );
    },
  },
  listRoute({
    path: '/incidents/:id/events',
    scope: 'incidents:read',
    operationId: 'listIncidentEvents',
    summary: 'The incident timeline (oldest first)',
    responses: {
      200: json(pageSchema(IncidentEventSchema, 'IncidentEventPage'), 'A page of events.'),
      404: problem('not_found'),
    },
    list: (req, d: Deps, page) => d.incidents.events(pathParam(req, 'id'), page),
    present: (e) => e,
  }),
]);

export const incidentRoutes = (deps: Deps, router?: Router, prefix = ''): Router =>
  mountRoutes(deps, incidentRouteTable, router, prefix);
