import type { Router } from 'express';
import {
  AudienceCreateSchema,
  AudiencePatchSchema,
  AudienceSchema,
  type Audience,
} from '../../domain/audience/audience.js';
import type { AudienceService } from '../../services/audiences.js';
import { defineRoutes, mountRoutes, pathParam, type EdgeDeps } from '../endpoint.js';
import { etagOf, ifMatchRevision } from '../etag.js';
import { jsonResponse, respondOnCommit, sendStored } from '../middleware/idempotency.js';
import { idParam, json, problem } from '../operation-docs.js';
import { presentAudience } from '../presenters/audience.js';
import { pageSchema } from '../presenters/page.js';
import { getRoute, listRoute, patchRoute } from '../respond.js';

type Deps = EdgeDeps & { audiences: AudienceService };

/** Create's 201, also what an Idempotency-Key replay answers (stored with the audience itself). */
export const audienceCreated = (a: Audience) =>
  jsonResponse(201, presentAudience(a), { location: `/v1/audiences/${a.id}`, etag: etagOf(a.rev) });

const REFERENCES =
  'unknown_connection / unknown_template (each unknown id named, as connection_ids.3; validation_failed when both kinds are), ';

export const audienceRouteTable = defineRoutes<Deps>({ tag: 'Audiences', params: { id: idParam('id', 'aud') } }, [
  {
    method: 'post',
    path: '/audiences',
    scope: 'audiences:write',
    doc: {
      operationId: 'createAudience',
      summary: 'Create an audience',
      description:
        'An audience is who hears what: the connections it is reached on, the templates it receives, and whether a second person approves a send to it first. Execute names audiences by `key`.',
      body: AudienceCreateSchema,
      etag: true,
      responses: {
        201: json(AudienceSchema, 'Created; Location and ETag set.'),
        409: problem('audience_key_taken: another audience has this key.'),
        422: problem(
          `Invalid fields, ${REFERENCES}invalid_approver (an approver is not a Slack user id), no_approvers (approval.required with nobody to approve).`,
        ),
      },
    },
    handle: async (req, res, d) => {
      // Stored with the audience itself: a crash after the commit still replays this.
      respondOnCommit(res, (e) => (e.kind === 'audience' ? audienceCreated(e.audience) : null));
      sendStored(res, audienceCreated(await d.audiences.create(req.body)));
    },
  },
  listRoute({
    path: '/audiences',
    scope: 'audiences:read',
    operationId: 'listAudiences',
    summary: 'List audiences (newest first)',
    responses: { 200: json(pageSchema(AudienceSchema, 'AudiencePage'), 'A page of audiences.') },
    list: (_req, d: Deps, page) => d.audiences.list(page),
    present: presentAudience,
  }),
  getRoute({
    path: '/audiences/:id',
    scope: 'audiences:read',
    operationId: 'getAudience',
    summary: 'Get an audience',
    noun: 'audience',
    schema: AudienceSchema,
    load: (id, d: Deps) => d.audiences.get(id),
    revOf: (a) => a.rev,
    present: presentAudience,
  }),
  patchRoute({
    path: '/audiences/:id',
    scope: 'audiences:write',
    operationId: 'updateAudience',
    summary: 'Update an audience (key is immutable; approval merges one level)',
    body: AudiencePatchSchema,
    responses: {
      200: json(AudienceSchema, 'Updated; the new ETag set.'),
      404: problem('not_found'),
      412: problem('If-Match is stale.'),
      422: problem(
        `Invalid fields (key: immutable), ${REFERENCES}invalid_approver, no_approvers (the approval after the change requires approval with nobody to approve).`,
      ),
    },
    update: (id, input, ifMatch, _res, d: Deps) => d.audiences.update(id, input, ifMatch),
    revOf: (a) => a.rev,
    present: presentAudience,
  }),
  {
    method: 'delete',
    path: '/audiences/:id',
    scope: 'audiences:write',
    doc: {
      operationId: 'deleteAudience',
      summary: 'Delete an audience',
      ifMatch: true,
      responses: {
        204: { description: 'Deleted.' },
        404: problem('not_found'),
        409: problem('audience_in_use: approvals for it are pending; the answer names their executions.'),
        412: problem('If-Match is stale.'),
      },
    },
    handle: async (req, res, d) => {
      await d.audiences.delete(pathParam(req, 'id'), ifMatchRevision(req));
      res.status(204).end();
    },
  },
]);

export const audienceRoutes = (deps: Deps, router?: Router, prefix = ''): Router =>
  mountRoutes(deps, audienceRouteTable, router, prefix);
