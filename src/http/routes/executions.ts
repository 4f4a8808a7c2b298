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
import { actorOf, apiKeyOf } from '../context.js';
import { DecideRequestSchema, type ExecutionApprovals } from '../../domain/execution/approval.js';
import type { ApprovalService } from '../../services/approvals.js';
import { defineRoutes, mountRoutes, pathParam, type EdgeDeps, type Route } from '../endpoint.js';
import { jsonResponse, respondOnCommit, sendStored } from '../middleware/idempotency.js';
import { idParam, json, problem } from '../operation-docs.js';
import { ExecuteDryRunSchema, ExecutionSchema, presentDryRun, presentExecution } from '../presenters/execution.js';
import { pageSchema } from '../presenters/page.js';
import { listRoute } from '../respond.js';
import { DomainError } from '../../domain/common/errors.js';
import type { NoticeTally } from '../../ports/subscribers.js';
import type { SubscriberAdminService } from '../../services/subscriber-admin.js';
import { SubscriberReceiptSchema } from '../presenters/subscriber.js';
import { ReceiptQuery, sendReceipts } from './subscribers.js';

/**
 * The status page's subscribers told of an execution (the notices its status page deliveries
 * opened): absent where subscribers are not composed, and then executions show no tally.
 */
export type ExecutionSubscriberReceipts = Pick<SubscriberAdminService, 'executionTally' | 'executionRecipients'>;

type Deps = EdgeDeps & {
  executions: ExecutionService;
  approvals: ApprovalService;
  subscribers?: ExecutionSubscriberReceipts;
};

/** Execute's 202, as stored for Idempotency-Key replays. */
export const accepted = (execution: Execution, deliveries: Delivery[], approvals: ExecutionApprovals | null = null) =>
  jsonResponse(202, presentExecution(execution, deliveries, approvals), {
    location: `/v1/incidents/${execution.incident_id}/executions/${execution.id}`,
  });

/** An approve / reject answer (200), as stored for Idempotency-Key replays. */
const decided = (execution: Execution, deliveries: Delivery[], approvals: ExecutionApprovals | null = null) =>
  jsonResponse(200, presentExecution(execution, deliveries, approvals));

const present = (
  { execution, deliveries, approvals }: ExecutionWithDeliveries,
  subscribers: NoticeTally | null = null,
) => presentExecution(execution, deliveries, approvals ?? null, subscribers);

/** With the tally of its subscriber notices, where subscribers are composed. */
async function presentWithTally(found: ExecutionWithDeliveries, d: Deps) {
  return present(found, d.subscribers ? await d.subscribers.executionTally(found.execution.id) : null);
}

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
          422: problem(
            'missing_variables, no_connections, unknown_connection, unknown_audience, audiences_and_connection_ids or invalid fields.',
          ),
        },
      },
      handle: async (req, res, d) => {
        // The 202 is stored with the execution and its deliveries: a retry after a crash gets this
        // execution, never a second fan-out.
        respondOnCommit(res, (e) =>
          e.kind === 'execution' ? accepted(e.execution, e.deliveries, e.approvals ?? null) : null,
        );
        const result = await d.executions.execute(pathParam(req, 'id'), req.body, actorOf(res), {
          dryRun: req.query.dry_run,
        });
        if (result.dryRun) {
          res.status(200).json(presentDryRun(result.deliveries, result.audiences));
          return;
        }
        sendStored(res, accepted(result.execution, result.deliveries, result.approvals ?? null));
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
      list: async (req, d: Deps, page) => {
        const found = await d.executions.list(pathParam(req, 'id'), page);
        return { data: await Promise.all(found.data.map((e) => presentWithTally(e, d))), nextCursor: found.nextCursor };
      },
      present: (view) => view,
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
        res.json(
          await presentWithTally(await d.executions.get(pathParam(req, 'id'), pathParam(req, 'executionId')), d),
        );
      },
    },
    {
      method: 'get',
      path: '/executions/:executionId/subscribers',
      scope: 'incidents:read',
      doc: {
        operationId: 'listExecutionSubscribers',
        summary: "The status page subscribers' receipts of an execution",
        description:
          "One receipt per subscriber of each notice the execution's status page deliveries opened (nearly always one), notice by notice. The totals are the execution's `subscribers`.",
        query: ReceiptQuery,
        responses: {
          200: json(pageSchema(SubscriberReceiptSchema, 'SubscriberReceiptPage'), 'A page of receipts.'),
          404: problem('not_found: no such execution, or it opened no subscriber notice.'),
          422: problem('Invalid state.'),
        },
      },
      handle: (req, res, d) => {
        const executionId = pathParam(req, 'executionId');
        const receipts = d.subscribers;
        if (!receipts) throw new DomainError('not_found', `Execution ${executionId} opened no subscriber notice.`);
        return sendReceipts(req, res, (state, limit, cursor) =>
          receipts.executionRecipients(executionId, state, limit, cursor),
        );
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
    decisionRoute('approve'),
    decisionRoute('reject'),
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
      respondOnCommit(res, (e) =>
        e.kind === 'execution' ? accepted(e.execution, e.deliveries, e.approvals ?? null) : null,
      );
      const act =
        verb === 'correct' ? d.executions.correct.bind(d.executions) : d.executions.retract.bind(d.executions);
      const result = await act(pathParam(req, 'id'), pathParam(req, 'executionId'), req.body, actorOf(res));
      sendStored(res, accepted(result.execution, result.deliveries, result.approvals ?? null));
    },
  };
}

/**
 * POST …/approve and …/reject: one decision on the execution's held audiences, committed once
 * with its answer (Idempotency-Key replays it), 200 with the execution as it is after it.
 */
function decisionRoute(verb: 'approve' | 'reject'): Route<Deps> {
  return {
    method: 'post',
    path: `/incidents/:id/executions/:executionId/${verb}`,
    scope: 'approvals:write',
    body: 'optional',
    doc: {
      operationId: verb === 'approve' ? 'approveExecution' : 'rejectExecution',
      summary:
        verb === 'approve'
          ? "Approve an execution's held audiences: their deliveries are queued at once"
          : "Reject an execution's held audiences: their deliveries are cancelled",
      description:
        (verb === 'approve'
          ? 'Queues the held deliveries of each approved audience, in one atomic step with the decision (timeline `execution.approved`).'
          : 'Cancels the held deliveries of each rejected audience (timeline `execution.rejected`); nothing is sent to them.') +
        " Without `audiences`, decides every pending audience of the execution that the caller may decide. An API key may decide an audience only when the audience's `approval.approvers.api_key_scopes` lists a scope the key holds.",
      body: DecideRequestSchema,
      responses: {
        200: json(ExecutionSchema, "The execution after the decision, with each audience's approval."),
        403: problem(
          'not_an_approver (the caller is not an approver of the audience) or four_eyes (the requester may not decide their own send).',
        ),
        404: problem('not_found'),
        409: problem(
          'not_pending (already approved, rejected or expired: the detail says which and who) or incident_closed.',
        ),
        422: problem('unknown_audience or invalid fields.'),
      },
    },
    handle: async (req, res, d) => {
      respondOnCommit(res, (e) =>
        e.kind === 'execution' ? decided(e.execution, e.deliveries, e.approvals ?? null) : null,
      );
      const key = apiKeyOf(res);
      const result = await d.approvals.decideRequest(
        verb,
        pathParam(req, 'id'),
        pathParam(req, 'executionId'),
        req.body,
        actorOf(res),
        key.scopes,
      );
      sendStored(res, decided(result.execution, result.deliveries, result.approvals ?? null));
    },
  };
}

export const executionRoutes = (deps: Deps, router?: Router, prefix = ''): Router =>
  mountRoutes(deps, executionRouteTable, router, prefix);
