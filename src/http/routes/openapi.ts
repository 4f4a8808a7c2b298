import { Router } from 'express';
import { endpoint, type EdgeDeps } from '../endpoint.js';
import { buildOpenApiDocument } from '../openapi.js';

/** GET /v1/openapi.json: the one /v1 endpoint that needs no API key. */
export function openApiRoutes(deps: EdgeDeps): Router {
  const r = Router();
  const doc = JSON.stringify(buildOpenApiDocument());
  endpoint(r, deps, '/openapi.json', {
    get: {
      scope: null,
      handler: (_req, res) => {
        res.type('application/json').send(doc);
      },
    },
  });
  return r;
}
