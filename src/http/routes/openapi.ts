import type { Router } from 'express';
import { defineRoutes, mountRoutes, type EdgeDeps } from '../endpoint.js';

/**
 * GET /v1/openapi.json: the one /v1 endpoint that needs no API key. The document is built from
 * the route tables on the first request and kept: building it (and loading zod-to-openapi) at
 * start-up cost every process memory and start time for a document few of them are asked for.
 */
export function openApiRoutes(deps: EdgeDeps, router?: Router, prefix = ''): Router {
  let doc: Promise<string> | null = null;
  const document = (): Promise<string> =>
    (doc ??= import('../openapi.js').then((m) => JSON.stringify(m.buildOpenApiDocument())));
  return mountRoutes(
    deps,
    defineRoutes<EdgeDeps>({ tag: 'OpenAPI', params: {} }, [
      {
        method: 'get',
        path: '/openapi.json',
        scope: null,
        doc: null,
        handle: async (_req, res) => {
          res.type('application/json').send(await document());
        },
      },
    ]),
    router,
    prefix,
  );
}
