import { Router } from 'express';
import { presentExecution, type ExecutionView } from '../../domain/execution.js';
import { parsePageRequest } from '../../domain/pagination.js';
import type { ExecutionService } from '../../services/executions.js';
import { actorOf } from '../context.js';
import { endpoint, type EdgeDeps } from '../endpoint.js';
import { jsonResponse, respondOnCommit, sendStored } from '../idempotency.js';
import { presentPage } from '../present.js';

/** Execute's 202, as stored for Idempotency-Key replays. */
export const accepted = (execution: ExecutionView) =>
  jsonResponse(202, execution, { location: `/v1/incidents/${execution.incident_id}/executions/${execution.id}` });

export function executionRoutes(deps: EdgeDeps & { executions: ExecutionService }): Router {
  const r = Router();
  const svc = deps.executions;

  endpoint(r, deps, '/incidents/:id/execute', {
    post: {
      scope: 'incidents:execute',
      execute: true,
      // Every field is optional, so an empty POST executes with no variables.
      body: 'optional',
      handler: async (req, res) => {
        const id = String(req.params.id);
        // The 202 is stored with the execution and its deliveries: a retry after a crash gets this
        // execution, never a second fan-out.
        respondOnCommit(res, (e) => (e.kind === 'execution' ? accepted(presentExecution(e.execution, e.deliveries)) : null));
        const result = await svc.execute(id, req.body, actorOf(res), { dryRun: req.query.dry_run });
        if (result.dryRun) {
          res.status(200).json({ dry_run: true, deliveries: result.deliveries });
          return;
        }
        sendStored(res, accepted(result.execution));
      },
    },
  });

  endpoint(r, deps, '/incidents/:id/executions', {
    get: {
      scope: 'incidents:read',
      handler: async (req, res) => {
        const page = parsePageRequest(req.query.limit, req.query.cursor);
        res.json(presentPage(await svc.list(String(req.params.id), page), page, (e) => e));
      },
    },
  });

  endpoint(r, deps, '/incidents/:id/executions/:executionId', {
    get: {
      scope: 'incidents:read',
      handler: async (req, res) => {
        res.json(await svc.get(String(req.params.id), String(req.params.executionId)));
      },
    },
  });

  endpoint(r, deps, '/incidents/:id/executions/:executionId/redeliver', {
    post: {
      scope: 'incidents:execute',
      body: 'optional',
      handler: async (req, res) => {
        const id = String(req.params.id);
        const execution = await svc.redeliver(id, String(req.params.executionId), req.body, actorOf(res));
        res.status(202).location(`/v1/incidents/${id}/executions/${execution.id}`).json(execution);
      },
    },
  });

  return r;
}
