import type { Router } from 'express';
import { defineRoutes, mountRoutes, type EdgeDeps } from '../endpoint.js';
import { buildOpenApiDocument } from '../openapi.js';

/** GET /v1/openapi.json: the one /v1 endpoint that needs no API key. */
export function openApiRoutes(deps: EdgeDeps): Router {
  const doc = JSON.stringify(buildOpenApiDocument());
  return mountRoutes(
    deps,
    defineRoutes<EdgeDeps>({ tag: 'OpenAPI', params: {} }, [
      {
        method: 'get',
        path: '/openapi.json',
        scope: null,
        doc: null,
        handle: (_req, res) => {
          res.type('application/json').send(doc);
        },
      },
    ]),
  );
}
