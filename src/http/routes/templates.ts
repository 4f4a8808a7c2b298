import type { Request, Router } from 'express';
import { z } from 'zod';
import { fieldError } from '../../domain/common/errors.js';
import { LIMITS } from '../../domain/common/limits.js';
import { parsePageRequest } from '../../domain/common/pagination.js';
import {
  TemplateBulkCreateSchema,
  TemplateCreateSchema,
  TemplatePatchSchema,
  TemplateRenderRequestSchema,
  TemplateSchema,
  type Template,
} from '../../domain/template/template.js';
import { parseInput } from '../../domain/common/validation.js';
import { SEARCH_MAX_PAGES, type TemplateService } from '../../services/templates.js';
import { apiKeyOf } from '../context.js';
import { defineRoutes, mountRoutes, pathParam, type EdgeDeps } from '../endpoint.js';
import { etagOf } from '../etag.js';
import { jsonResponse, respondOnCommit, sendStored } from '../middleware/idempotency.js';
import { idParam, json, ListQuery, problem } from '../operation-docs.js';
import { pageSchema, presentPage } from '../presenters/page.js';
import { presentTemplate, TemplatePreviewsSchema } from '../presenters/template.js';
import { deleteRoute, getRoute, listRoute, patchRoute, sendPage } from '../respond.js';

type Deps = EdgeDeps & { templates: TemplateService };

const bulkCreated = (templates: Template[]) => jsonResponse(201, { data: templates.map(presentTemplate) });
const created = (template: Template) =>
  jsonResponse(201, presentTemplate(template), {
    location: `/v1/templates/${template.id}`,
    etag: etagOf(template.version),
  });

/** The catalogue a search reads (TemplateService.search stops there, to stay fast). */
const SEARCHED = SEARCH_MAX_PAGES * LIMITS.pageMax;

const SearchSchema = z.object({
  q: z
    .string({ error: 'q is one text value; give it once.' })
    .trim()
    .min(1, 'q needs at least one non-space character; leave it out to list every template.')
    .max(LIMITS.templateName, `q is at most ${LIMITS.templateName} characters, as long as a template name can be.`),
});

const SearchQuery = ListQuery.extend({
  q: z
    .string()
    .optional()
    .meta({
      description:
        `Search by name: templates whose name contains q (case-insensitive, trimmed), newest first, among the ${SEARCHED} newest. ` +
        'Answers the first `limit` matches in one page (next_cursor is null) and takes no cursor. A blank q is refused (422).',
    }),
});

/** The trimmed `q`, or null when it is absent; refuses a blank one, and a cursor beside it (a search is one page). */
function searchOf(req: Request): string | null {
  if (req.query.q === undefined) return null;
  const { q } = parseInput(SearchSchema, { q: req.query.q });
  if (req.query.cursor !== undefined && req.query.cursor !== '')
    throw fieldError(
      'validation_failed',
      'cursor',
      'A search (q) answers its first `limit` matches in one page; it takes no cursor.',
      'not_allowed',
    );
  return q;
}

export const templateRouteTable = defineRoutes<Deps>(
  {
    tag: 'Templates',
    params: { id: idParam('id', 'tpl'), n: z.string().meta({ param: { name: 'n', in: 'path' }, example: '1' }) },
  },
  [
    {
      method: 'post',
      path: '/templates',
      scope: 'templates:write',
      doc: {
        operationId: 'createTemplates',
        summary: 'Create a template (object) or up to 100 at once (array, all or nothing)',
        body: z.union([TemplateCreateSchema, TemplateBulkCreateSchema]),
        etag: true,
        responses: {
          201: json(
            z.union([TemplateSchema, z.object({ data: z.array(TemplateSchema) })]),
            'Created (bulk: {"data": [...]}).',
          ),
          409: problem('template_name_taken'),
          422: problem('Invalid fields, undeclared_variable.'),
        },
      },
      handle: async (req, res, d) => {
        // The one JSON-array body of the API: a bulk create, all or nothing (README "A walk through the API").
        const bulk = Array.isArray(req.body);
        const answer = (templates: Template[]) =>
          bulk ? bulkCreated(templates) : templates[0] ? created(templates[0]) : null;
        // Stored with the templates themselves: a crash after the commit still replays this.
        respondOnCommit(res, (e) => (e.kind === 'templates' ? answer(e.templates) : null));
        const templates = bulk ? await d.templates.createMany(req.body) : [await d.templates.create(req.body)];
        const stored = answer(templates);
        if (stored) sendStored(res, stored);
      },
    },
    {
      method: 'get',
      path: '/templates',
      scope: 'templates:read',
      doc: {
        operationId: 'listTemplates',
        summary: 'List templates (newest first), or search them by name (q)',
        query: SearchQuery,
        responses: {
          200: json(pageSchema(TemplateSchema, 'TemplatePage'), 'A page of templates.'),
          422: problem('validation_failed: limit out of range, a blank or over-long q, or q with a cursor.'),
        },
      },
      handle: async (req, res, d) => {
        const q = searchOf(req);
        if (q === null) return sendPage(req, res, (page) => d.templates.list(page), presentTemplate);
        const page = parsePageRequest(req.query.limit, undefined);
        res.json(
          presentPage({ data: await d.templates.search(q, page.limit), nextCursor: null }, page, presentTemplate),
        );
      },
    },
    getRoute({
      path: '/templates/:id',
      scope: 'templates:read',
      operationId: 'getTemplate',
      summary: 'Get a template',
      noun: 'template',
      schema: TemplateSchema,
      load: (id, d: Deps) => d.templates.get(id),
      revOf: (t) => t.version,
      present: presentTemplate,
    }),
    patchRoute({
      path: '/templates/:id',
      scope: 'templates:write',
      operationId: 'updateTemplate',
      summary: 'Update a template (creates version + 1)',
      body: TemplatePatchSchema,
      responses: {
        200: json(TemplateSchema, 'The new version.'),
        404: problem('not_found'),
        409: problem('template_name_taken'),
        412: problem('If-Match is stale.'),
        422: problem('Invalid fields.'),
      },
      update: (id, input, ifMatch, _res, d: Deps) => d.templates.update(id, input, ifMatch),
      revOf: (t) => t.version,
      present: presentTemplate,
    }),
    deleteRoute<Deps>({
      path: '/templates/:id',
      scope: 'templates:write',
      operationId: 'deleteTemplate',
      summary: 'Delete a template',
      responses: { 409: problem('template_in_use: attached to a non-closed incident.') },
      remove: (id, ifMatch, d) => d.templates.delete(id, ifMatch),
    }),
    listRoute({
      path: '/templates/:id/versions',
      scope: 'templates:read',
      operationId: 'listTemplateVersions',
      summary: 'List versions (newest first)',
      responses: {
        200: json(pageSchema(TemplateSchema, 'TemplateVersionPage'), 'A page of versions.'),
        404: problem('not_found'),
      },
      list: (req, d: Deps, page) => d.templates.versions(pathParam(req, 'id'), page),
      present: presentTemplate,
    }),
    {
      method: 'get',
      path: '/templates/:id/versions/:n',
      scope: 'templates:read',
      doc: {
        operationId: 'getTemplateVersion',
        summary: 'Get one version',
        responses: { 200: json(TemplateSchema, 'That version.'), 404: problem('not_found') },
      },
      handle: async (req, res, d) => {
        res.json(presentTemplate(await d.templates.version(pathParam(req, 'id'), pathParam(req, 'n'))));
      },
    },
    {
      method: 'post',
      path: '/templates/:id/render',
      scope: 'templates:read',
      // `{}` is a valid request for a template without required variables, so no body is too.
      body: 'optional',
      doc: {
        operationId: 'renderTemplate',
        summary: 'Preview for all nine channel types (nothing is sent)',
        body: TemplateRenderRequestSchema,
        responses: {
          200: json(TemplatePreviewsSchema, 'One preview per channel type.'),
          404: problem('not_found'),
          422: problem('missing_variables or invalid fields.'),
        },
      },
      handle: async (req, res, d) => {
        // Rendering from a real incident reads its title, description and impact: that is
        // incident data, so the key needs incidents:read too (checked before anything is read).
        if (namesIncident(req.body)) d.keys.requireScope(apiKeyOf(res), 'incidents:read');
        res.json({ previews: await d.templates.render(pathParam(req, 'id'), req.body) });
      },
    },
  ],
);

export const templateRoutes = (deps: Deps, router?: Router, prefix = ''): Router =>
  mountRoutes(deps, templateRouteTable, router, prefix);

/** True when a render request asks for a real incident (`incident_id` present and not null). */
function namesIncident(body: unknown): boolean {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return false;
  const id = (body as Record<string, unknown>).incident_id;
  return id !== undefined && id !== null;
}
