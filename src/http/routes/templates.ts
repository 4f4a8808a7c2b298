import { Router } from 'express';
import { parsePageRequest } from '../../domain/pagination.js';
import { presentTemplate, type Template } from '../../domain/template.js';
import type { TemplateService } from '../../services/templates.js';
import { apiKeyOf } from '../context.js';
import { endpoint, type EdgeDeps } from '../endpoint.js';
import { etagOf, ifMatchRevision, setEtag } from '../etag.js';
import { jsonResponse, respondOnCommit, sendStored } from '../idempotency.js';
import { presentPage } from '../present.js';

const bulkCreated = (templates: Template[]) => jsonResponse(201, { data: templates.map(presentTemplate) });
const created = (template: Template) => jsonResponse(201, presentTemplate(template), { location: `/v1/templates/${template.id}`, etag: etagOf(template.version) });

export function templateRoutes(deps: EdgeDeps & { templates: TemplateService }): Router {
  const r = Router();
  const svc = deps.templates;

  endpoint(r, deps, '/templates', {
    post: {
      scope: 'templates:write',
      handler: async (req, res) => {
        // The one JSON-array body of the API: a bulk create, all or nothing (README "A walk through the API").
        const bulk = Array.isArray(req.body);
        const answer = (templates: Template[]) => (bulk ? bulkCreated(templates) : templates[0] ? created(templates[0]) : null);
        // Stored with the templates themselves: a crash after the commit still replays this.
        respondOnCommit(res, (e) => (e.kind === 'templates' ? answer(e.templates) : null));
        const templates = bulk ? await svc.createMany(req.body) : [await svc.create(req.body)];
        const stored = answer(templates);
        if (stored) sendStored(res, stored);
      },
    },
    get: {
      scope: 'templates:read',
      handler: async (req, res) => {
        const page = parsePageRequest(req.query.limit, req.query.cursor);
        res.json(presentPage(await svc.list(page), page, presentTemplate));
      },
    },
  });

  endpoint(r, deps, '/templates/:id', {
    get: {
      scope: 'templates:read',
      handler: async (req, res) => {
        const template = await svc.get(String(req.params.id));
        setEtag(res, template.version);
        res.json(presentTemplate(template));
      },
    },
    patch: {
      scope: 'templates:write',
      handler: async (req, res) => {
        const template = await svc.update(String(req.params.id), req.body, ifMatchRevision(req));
        setEtag(res, template.version);
        res.json(presentTemplate(template));
      },
    },
    delete: {
      scope: 'templates:write',
      handler: async (req, res) => {
        await svc.delete(String(req.params.id), ifMatchRevision(req));
        res.status(204).end();
      },
    },
  });

  endpoint(r, deps, '/templates/:id/versions', {
    get: {
      scope: 'templates:read',
      handler: async (req, res) => {
        const page = parsePageRequest(req.query.limit, req.query.cursor);
        res.json(presentPage(await svc.versions(String(req.params.id), page), page, presentTemplate));
      },
    },
  });

  endpoint(r, deps, '/templates/:id/versions/:n', {
    get: {
      scope: 'templates:read',
      handler: async (req, res) => {
        res.json(presentTemplate(await svc.version(String(req.params.id), String(req.params.n))));
      },
    },
  });

  endpoint(r, deps, '/templates/:id/render', {
    post: {
      scope: 'templates:read',
      // `{}` is a valid request for a template without required variables, so no body is too.
      body: 'optional',
      handler: async (req, res) => {
        // Rendering from a real incident reads its title, description and impact: that is
        // incident data, so the key needs incidents:read too (checked before anything is read).
        if (namesIncident(req.body)) deps.keys.requireScope(apiKeyOf(res), 'incidents:read');
        res.json({ previews: await svc.render(String(req.params.id), req.body) });
      },
    },
  });

  return r;
}

/** True when a render request asks for a real incident (`incident_id` present and not null). */
function namesIncident(body: unknown): boolean {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return false;
  const id = (body as Record<string, unknown>).incident_id;
  return id !== undefined && id !== null;
}
