import type { Router } from 'express';
import { z } from 'zod';
import {
  ExecuteRequestSchema,
  RedeliverRequestSchema,
  type Delivery,
  type Execution,
} from '../../domain/execution/execution.js';
import { CorrectRequestSchema, RetractRequestSchema } from '../../domain/execution/conversation.js';
import type { ExecutionService, ExecutionWithDeliveries } from '../../services/executions.js';
import { actorOf } from '../context.js';
import { defineRoutes, mountRoutes, pathParam, type EdgeDeps, type Route } from '../endpoint.js';
import { jsonResponse, respondOnCommit, sendStored } from '../middleware/idempotency.js';
import { idParam, json, problem } from '../operation-docs.js';
import { ExecuteDryRunSchema, ExecutionSchema, presentDryRun, presentExecution } from '../presenters/execution.js';
import { pageSchema } from '../presenters/page.js';
import { listRoute } from '../respond.js';

type Deps = EdgeDeps & { executions: ExecutionService };

/** Execute's 202, as stored for Idempotency-Key replays. */
export const accepted = (execution: Execution, deliveries: Delivery[]) =>
  jsonResponse(202, presentExecution(execution, deliveries), {
    location: `/v1/incidents/${execution.incident_id}/executions/${execution.id}`,
  });

const present = ({ execution, deliveries }: ExecutionWithDeliveries) => presentExecution(execution, deliveries);

export const executionRouteTable = defineRoutes<Deps>(
  { tag: 'Executions', params: { id: idParam('id', 'inc'), executionId: idParam('executionId', 'exe') } },
  [
    {
      method: 'post',
      path: '/incidents/:id/execute',
      scope: 'incidents:execute',
      execute: true,
      // Every field is optional, so an empty POST executes with no variables.
      body: 'optional',
      doc: {
        operationId: 'executeIncident',
        summary: 'Execute: deliver the incident to every connection',
        query: z.object({
          dry_run: z
            .enum(['true', 'false'])
            .optional()
            .meta({ description: 'true: render and return what would be sent; nothing is queued.' }),
        }),
        body: ExecuteRequestSchema,
        responses: {
          202: json(ExecutionSchema, 'Every delivery is durably queued; Location points at the execution.'),
          200: json(ExecuteDryRunSchema, 'dry_run=true: what each connection would get.'),
          404: problem('not_found'),
          409: problem('incident_closed'),
          422: problem('missing_variables, no_connections, unknown_connection or invalid fields.'),
        },
      },
      handle: async (req, res, d) => {
        // The 202 is stored with the execution and its deliveries: a retry after a crash gets this
        // execution, never a second fan-out.
        respondOnCommit(res, (e) => (e.kind === 'execution' ? accepted(e.execution, e.deliveries) : null));
        const result = await d.executions.execute(pathParam(req, 'id'), req.body, actorOf(res), {
          dryRun: req.query.dry_run,
        });
        if (result.dryRun) {
          res.status(200).json(presentDryRun(result.deliveries));
          return;
        }
        sendStored(res, accepted(result.execution, result.deliveries));
      },
    },
    listRoute({
      path: '/incidents/:id/executions',
      scope: 'incidents:read',
      operationId: 'listExecutions',
      summary: 'List executions (newest first)',
      responses: {
        200: json(pageSchema(ExecutionSchema, 'ExecutionPage'), 'A page of executions with their deliveries.'),
        404: problem('not_found'),
      },
      list: (req, d: Deps, page) => d.executions.list(pathParam(req, 'id'), page),
      present,
    }),
    {
      method: 'get',
      path: '/incidents/:id/executions/:executionId',
      scope: 'incidents:read',
      doc: {
        operationId: 'getExecution',
        summary: 'Get an execution with per-delivery receipts',
        responses: { 200: json(ExecutionSchema, 'The execution.'), 404: problem('not_found') },
      },
      handle: async (req, res, d) => {
        res.json(present(await d.executions.get(pathParam(req, 'id'), pathParam(req, 'executionId'))));
      },
    },
    {
      method: 'post',
      path: '/incidents/:id/executions/:executionId/redeliver',
      scope: 'incidents:execute',
      body: 'optional',
      doc: {
        operationId: 'redeliverExecution',
        summary: 'Re-queue the failed deliveries of an execution',
        body: RedeliverRequestSchema,
        responses: {
          202: json(ExecutionSchema, 'The execution, failed deliveries queued again.'),
          404: problem('not_found'),
          409: problem('incident_closed'),
        },
      },
      handle: async (req, res, d) => {
        const id = pathParam(req, 'id');
        const found = await d.executions.redeliver(id, pathParam(req, 'executionId'), req.body, actorOf(res));
        res.status(202).location(`/v1/incidents/${id}/executions/${found.execution.id}`).json(present(found));
      },
    },
    correctionRoute(
      'correct',
      'correctExecution',
      'Correct an execution: edit its delivered messages in place, or post a correction in their conversation',
      CorrectRequestSchema,
      'correction',
    ),
    correctionRoute(
      'retract',
      'retractExecution',
      'Retract an execution: delete its delivered messages, or post a retraction in their conversation',
      RetractRequestSchema,
      'retraction',
    ),
  ],
);

/**
 * POST …/correct and …/retract: executions of their own kind, answered 202 like execute (every
 * delivery durably queued) and stored with the commit for Idempotency-Key replays.
 */
function correctionRoute(
  verb: 'correct' | 'retract',
  operationId: string,
  summary: string,
  body: z.ZodType,
  kind: 'correction' | 'retraction',
): Route<Deps> {
  return {
    method: 'post',
    path: `/incidents/:id/executions/:executionId/${verb}`,
    scope: 'incidents:execute',
    execute: true,
    doc: {
      operationId,
      summary,
      description:
        kind === 'correction'
          ? 'Renders the execution\'s delivered messages again with the corrected variables (over its own; the same template versions). Where the platform can edit (Slack bot, Discord, Telegram) each message is edited in place; elsewhere a "Correction:" message is posted in the incident\'s conversation. Timeline: `execution.corrected`.'
          : 'Deletes the execution\'s delivered messages where the platform can (Slack bot, Discord, Telegram); elsewhere a "Retracted: <reason>" message is posted in the incident\'s conversation. Timeline: `execution.retracted`.',
      body,
      responses: {
        202: json(ExecutionSchema, `The ${kind}, every delivery durably queued; Location points at it.`),
        404: problem('not_found'),
        409: problem(
          'incident_closed, not_correctable (a correction or retraction cannot itself be corrected) or nothing_delivered (none of its messages is delivered yet).',
        ),
        422: problem('Invalid fields.'),
      },
    },
    handle: async (req, res, d) => {
      respondOnCommit(res, (e) => (e.kind === 'execution' ? accepted(e.execution, e.deliveries) : null));
      const act =
        verb === 'correct' ? d.executions.correct.bind(d.executions) : d.executions.retract.bind(d.executions);
      const result = await act(pathParam(req, 'id'), pathParam(req, 'executionId'), req.body, actorOf(res));
      sendStored(res, accepted(result.execution, result.deliveries));
    },
  };
}

export const executionRoutes = (deps: Deps, router?: Router, prefix = ''): Router =>
  mountRoutes(deps, executionRouteTable, router, prefix);
