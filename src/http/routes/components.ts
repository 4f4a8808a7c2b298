import type { Router } from 'express';
import {
  ComponentCreateSchema,
  ComponentPatchSchema,
  ComponentSchema,
  type StoredComponent,
} from '../../domain/component/component.js';
import { IncidentEventSchema } from '../../domain/incident/incident-event.js';
import type { ComponentService } from '../../services/components.js';
import { actorOf } from '../context.js';
import { defineRoutes, mountRoutes, pathParam, type EdgeDeps } from '../endpoint.js';
import { etagOf, ifMatchRevision } from '../etag.js';
import { jsonResponse, respondOnCommit, sendStored } from '../middleware/idempotency.js';
import { idParam, json, problem } from '../operation-docs.js';
import { presentComponent } from '../presenters/component.js';
import { pageSchema } from '../presenters/page.js';
import { getRoute, listRoute, patchRoute } from '../respond.js';

type Deps = EdgeDeps & { components: ComponentService };

/** Create's 201, also what an Idempotency-Key replay answers (stored with the component itself). */
export const componentCreated = (c: StoredComponent) =>
  jsonResponse(201, presentComponent(c), { location: `/v1/components/${c.id}`, etag: etagOf(c.rev) });

export const componentRouteTable = defineRoutes<Deps>({ tag: 'Components', params: { id: idParam('id', 'cmp') } }, [
  {
    method: 'post',
    path: '/components',
    scope: 'components:write',
    doc: {
      operationId: 'createComponent',
      summary: 'Create a component',
      description:
        'A part of the service the public status page lists. Its `status` is the worst impact of the open incidents and active maintenances naming it, else the manual status set here.',
      body: ComponentCreateSchema,
      etag: true,
      responses: {
        201: json(ComponentSchema, 'Created; Location and ETag set.'),
        409: problem('component_name_taken: another component has this name (ignoring case).'),
        422: problem('Invalid fields; too_many when Herald holds the most components it may.'),
      },
    },
    handle: async (req, res, d) => {
      // Stored with the component itself: a crash after the commit still replays this.
      respondOnCommit(res, (e) => (e.kind === 'component' ? componentCreated(e.component) : null));
      sendStored(res, componentCreated(await d.components.create(req.body)));
    },
  },
  listRoute({
    path: '/components',
    scope: 'components:read',
    operationId: 'listComponents',
    summary: 'List components (newest first)',
    responses: { 200: json(pageSchema(ComponentSchema, 'ComponentPage'), 'A page of components.') },
    list: (_req, d: Deps, page) => d.components.list(page),
    present: presentComponent,
  }),
  getRoute({
    path: '/components/:id',
    scope: 'components:read',
    operationId: 'getComponent',
    summary: 'Get a component',
    noun: 'component',
    schema: ComponentSchema,
    load: (id, d: Deps) => d.components.get(id),
    revOf: (c) => c.rev,
    present: presentComponent,
  }),
  patchRoute({
    path: '/components/:id',
    scope: 'components:write',
    operationId: 'updateComponent',
    summary: 'Update a component (status sets the manual status)',
    body: ComponentPatchSchema,
    responses: {
      200: json(ComponentSchema, 'Updated; the new ETag set.'),
      404: problem('not_found'),
      409: problem('component_name_taken: another component has this name (ignoring case).'),
      412: problem('If-Match is stale (an incident or maintenance changing its impacts moves the ETag too).'),
      422: problem('Invalid fields.'),
    },
    update: (id, input, ifMatch, res, d: Deps) => d.components.update(id, input, actorOf(res), ifMatch),
    revOf: (c) => c.rev,
    present: presentComponent,
  }),
  {
    method: 'delete',
    path: '/components/:id',
    scope: 'components:write',
    doc: {
      operationId: 'deleteComponent',
      summary: 'Delete a component',
      ifMatch: true,
      responses: {
        204: { description: 'Deleted.' },
        404: problem('not_found'),
        409: problem(
          'component_in_use: an open incident impacts it or a maintenance not completed names it; the answer names them.',
        ),
        412: problem('If-Match is stale.'),
      },
    },
    handle: async (req, res, d) => {
      await d.components.delete(pathParam(req, 'id'), ifMatchRevision(req));
      res.status(204).end();
    },
  },
  listRoute({
    path: '/components/:id/events',
    scope: 'components:read',
    operationId: 'listComponentEvents',
    summary: "The component's own timeline (oldest first)",
    responses: {
      200: json(pageSchema(IncidentEventSchema, 'ComponentEventPage'), 'A page of events.'),
      404: problem('not_found'),
    },
    list: (req, d: Deps, page) => d.components.events(pathParam(req, 'id'), page),
    present: (e) => e,
  }),
]);

export const componentRoutes = (deps: Deps, router?: Router, prefix = ''): Router =>
  mountRoutes(deps, componentRouteTable, router, prefix);
