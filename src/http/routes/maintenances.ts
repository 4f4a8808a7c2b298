import type { Router } from 'express';
import { z } from 'zod';
import { parseInput } from '../../domain/common/validation.js';
import {
  MaintenanceCreateSchema,
  MaintenancePatchSchema,
  MaintenanceSchema,
  MaintenanceStateSchema,
  MaintenanceUpdateCreateSchema,
  type StoredMaintenance,
} from '../../domain/maintenance/maintenance.js';
import type { MaintenanceService } from '../../services/maintenances.js';
import { actorOf } from '../context.js';
import { defineRoutes, mountRoutes, pathParam, queryList, type EdgeDeps } from '../endpoint.js';
import { etagOf, ifMatchRevision } from '../etag.js';
import { jsonResponse, respondOnCommit, sendStored } from '../middleware/idempotency.js';
import { idParam, json, ListQuery, problem } from '../operation-docs.js';
import { presentMaintenance } from '../presenters/maintenance.js';
import { pageSchema } from '../presenters/page.js';
import { getRoute, listRoute, patchRoute } from '../respond.js';

type Deps = EdgeDeps & { maintenances: MaintenanceService };

const FilterSchema = z.object({ status: z.array(MaintenanceStateSchema).optional() });
const FilterQuery = ListQuery.extend({
  status: z
    .string()
    .optional()
    .meta({ description: `Comma-separated: ${MaintenanceStateSchema.options.join(', ')}` }),
});

/** Create's 201, also what an Idempotency-Key replay answers (stored with the maintenance itself). */
export const maintenanceCreated = (m: StoredMaintenance) =>
  jsonResponse(201, presentMaintenance(m), { location: `/v1/maintenances/${m.id}`, etag: etagOf(m.rev) });

/** A manual update's 200, also what an Idempotency-Key replay answers. */
export const maintenanceCurrent = (m: StoredMaintenance) =>
  jsonResponse(200, presentMaintenance(m), { etag: etagOf(m.rev) });

export const maintenanceRouteTable = defineRoutes<Deps>({ tag: 'Maintenances', params: { id: idParam('id', 'mnt') } }, [
  {
    method: 'post',
    path: '/maintenances',
    scope: 'maintenances:write',
    doc: {
      operationId: 'createMaintenance',
      summary: 'Schedule a maintenance',
      description:
        'A maintenance window shown on the public status page. With `auto_transition` (default) Herald posts the reminder `remind_before` minutes ahead, starts it at `scheduled_for` and completes it at `scheduled_until`; its components show `under_maintenance` while it is in progress or verifying.',
      body: MaintenanceCreateSchema,
      etag: true,
      responses: {
        201: json(MaintenanceSchema, 'Created; Location and ETag set.'),
        422: problem('Invalid fields (times, window order, remind_before), or unknown_component.'),
      },
    },
    handle: async (req, res, d) => {
      // Stored with the maintenance itself: a crash after the commit still replays this.
      respondOnCommit(res, (e) => (e.kind === 'maintenance' ? maintenanceCreated(e.maintenance) : null));
      sendStored(res, maintenanceCreated(await d.maintenances.create(req.body, actorOf(res))));
    },
  },
  listRoute({
    path: '/maintenances',
    scope: 'maintenances:read',
    operationId: 'listMaintenances',
    summary: 'List maintenances (newest first)',
    query: FilterQuery,
    responses: {
      200: json(pageSchema(MaintenanceSchema, 'MaintenancePage'), 'A page of maintenances.'),
      400: problem('invalid_cursor'),
      422: problem('limit out of range or an unknown status.'),
    },
    list: (req, d: Deps, page) =>
      d.maintenances.list(parseInput(FilterSchema, { status: queryList(req.query.status) }), page),
    present: presentMaintenance,
  }),
  getRoute({
    path: '/maintenances/:id',
    scope: 'maintenances:read',
    operationId: 'getMaintenance',
    summary: 'Get a maintenance',
    noun: 'maintenance',
    schema: MaintenanceSchema,
    load: (id, d: Deps) => d.maintenances.get(id),
    revOf: (m) => m.rev,
    present: presentMaintenance,
  }),
  patchRoute({
    path: '/maintenances/:id',
    scope: 'maintenances:write',
    operationId: 'updateMaintenance',
    summary: 'Update a maintenance (scheduled_for only while scheduled)',
    body: MaintenancePatchSchema,
    responses: {
      200: json(MaintenanceSchema, 'Updated; the new ETag set.'),
      404: problem('not_found'),
      409: problem('conflict: the maintenance is completed.'),
      412: problem('If-Match is stale.'),
      422: problem('Invalid fields, scheduled_for after the start, or unknown_component.'),
    },
    update: (id, input, ifMatch, res, d: Deps) => d.maintenances.update(id, input, actorOf(res), ifMatch),
    revOf: (m) => m.rev,
    present: presentMaintenance,
  }),
  {
    method: 'delete',
    path: '/maintenances/:id',
    scope: 'maintenances:write',
    doc: {
      operationId: 'deleteMaintenance',
      summary: 'Delete a scheduled maintenance',
      ifMatch: true,
      responses: {
        204: { description: 'Deleted.' },
        404: problem('not_found'),
        409: problem('conflict: it has started (only a scheduled maintenance can be deleted).'),
        412: problem('If-Match is stale.'),
      },
    },
    handle: async (req, res, d) => {
      await d.maintenances.delete(pathParam(req, 'id'), actorOf(res), ifMatchRevision(req));
      res.status(204).end();
    },
  },
  {
    method: 'post',
    path: '/maintenances/:id/updates',
    scope: 'maintenances:write',
    doc: {
      operationId: 'addMaintenanceUpdate',
      summary: 'Post an update on a maintenance (may move its state forward)',
      description:
        'Appends an update (kind `update`) shown on the public page. `status` moves the maintenance forward (scheduled → in_progress → verifying → completed), never back.',
      body: MaintenanceUpdateCreateSchema,
      etag: true,
      responses: {
        200: json(MaintenanceSchema, 'The maintenance with the update; the new ETag set.'),
        404: problem('not_found'),
        409: problem('conflict: the maintenance is completed.'),
        422: problem('Invalid fields, or invalid_transition (a state back).'),
      },
    },
    handle: async (req, res, d) => {
      // Stored with the update itself: a retry with the same Idempotency-Key never posts it twice.
      respondOnCommit(res, (e) => (e.kind === 'maintenance' ? maintenanceCurrent(e.maintenance) : null));
      sendStored(res, maintenanceCurrent(await d.maintenances.addUpdate(pathParam(req, 'id'), req.body, actorOf(res))));
    },
  },
]);

export const maintenanceRoutes = (deps: Deps, router?: Router, prefix = ''): Router =>
  mountRoutes(deps, maintenanceRouteTable, router, prefix);
