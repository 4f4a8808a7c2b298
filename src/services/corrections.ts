import type { Actor } from '../domain/common/actor.js';
import { iso } from '../domain/common/clock.js';
import { DomainError } from '../domain/common/errors.js';
import {
  assertCorrectable,
  assertCorrectsSomething,
  CorrectRequestSchema,
  RetractRequestSchema,
} from '../domain/execution/conversation.js';
import { newDelivery, type Delivery, type Execution } from '../domain/execution/execution.js';
import { assertWritable, type Incident } from '../domain/incident/incident.js';
import { newEvent } from '../domain/incident/incident-event.js';
import { parseInput } from '../domain/common/validation.js';
import { incidentView } from '../domain/template/render.js';
import type { Template } from '../domain/template/template.js';
import type { Clock, ConversationRepo, ExecutionRepo, IdGenerator, IncidentRepo } from '../ports/index.js';
import { planCorrections } from './correction-plan.js';
import { mapYielding } from '../domain/common/map-yielding.js';
import type { ExecuteConnection } from './execution-plan.js';
import { queueCommitted, type QueueCommittedDeps } from './execution-queue.js';
import {
  conversationPlaces,
  deliveriesOf,
  executionOr404,
  incidentOr404,
  type ExecutionWithDeliveries,
} from './execution-records.js';
import { LOST_RACE, retryOnConflict } from './retry.js';
import type { ApprovalService } from './approvals.js';
import {
  newExecutionApprovals,
  pendingApproval,
  type ApprovalRecord,
  type ExecutionApprovals,
} from '../domain/execution/approval.js';
import type { StoredExecutionAudience } from '../domain/execution/execution.js';
import type { IncidentEvent } from '../domain/incident/incident-event.js';

/** What corrections need (ExecutionServiceDeps supplies it: corrections are queued like an execute). */
export interface CorrectionServiceDeps extends QueueCommittedDeps {
  incidents: Pick<IncidentRepo, 'get'>;
  repo: ExecutionRepo;
  /** One version of a template (corrections render with the version the message was made from). */
  getTemplateVersion(id: string, version: number): Promise<Template | null>;
  conversations: ConversationRepo;
  listConnections(): Promise<ExecuteConnection[]>;
  clock: Clock;
  ids: IdGenerator;
  publicUrl: string | undefined;
  /** Held audiences: a correction of an approved send is held again; a retraction withdraws what waits. */
  approvals?: ApprovalService;
}

/**
 * Corrections and retractions of an execution's delivered messages (docs/explanation/living-updates.md):
 * each is an execution of its own kind, with deliveries that edit, delete or follow up on the
 * originals (which action, per delivery, is correction-plan.ts's), queued like an execute's.
 */
export class CorrectionService {
  constructor(private readonly d: CorrectionServiceDeps) {}

  /**
   * Corrects an execution's delivered messages: renders them again with the corrected variables
   * over the execution's own (the same template versions), and edits each in place where the
   * platform can, else posts "Correction: …" in the incident's conversation. An execution of its
   * own kind, with deliveries, receipts and an `execution.corrected` event.
   */
  async correct(
    incidentId: string,
    executionId: string,
    input: unknown,
    actor: Actor,
  ): Promise<ExecutionWithDeliveries> {
    return this.actOn('correction', incidentId, executionId, actor, (execution) => {
      const body = parseInput(CorrectRequestSchema, input ?? {});
      assertCorrectsSomething(body);
      return { variables: { ...execution.variables, ...(body.variables ?? {}) }, note: body.note ?? null };
    });
  }

  /** Retracts an execution's delivered messages: deletes each where the platform can, else posts "Retracted: <reason>" in the conversation. */
  async retract(
    incidentId: string,
    executionId: string,
    input: unknown,
    actor: Actor,
  ): Promise<ExecutionWithDeliveries> {
    return this.actOn('retraction', incidentId, executionId, actor, (execution) => {
      const body = parseInput(RetractRequestSchema, input ?? {});
      return { variables: execution.variables, note: body.reason };
    });
  }

  private async actOn(
    kind: 'correction' | 'retraction',
    incidentId: string,
    executionId: string,
    actor: Actor,
    read: (target: Execution) => { variables: Record<string, string>; note: string | null },
  ): Promise<ExecutionWithDeliveries> {
    return retryOnConflict(
      async () => {
        const incident = await incidentOr404(this.d.incidents, incidentId);
        const target = await executionOr404(this.d.repo, incidentId, executionId);
        assertWritable(incident);
        assertCorrectable(target.kind, kind === 'correction' ? 'correct' : 'retract');
        const { variables, note } = read(target);
        // A retraction never waits: what still waits for approval is withdrawn (rejected, by whom, why).
        const withdrawn =
          kind === 'retraction'
            ? await this.d.approvals?.withdraw(target, actor, `Retracted: ${note ?? ''}`.trim(), false)
            : null;
        const delivered = (await deliveriesOf(this.d.repo, target)).filter((x) => x.status === 'delivered');
        if (delivered.length === 0 && withdrawn) return withdrawn;
        if (delivered.length === 0)
          throw new DomainError(
            'nothing_delivered',
            'None of this execution’s messages has been delivered yet, so there is nothing to correct or retract; try again once its receipts show them delivered.',
          );
        const planned = await this.planCorrection(kind, incident, target, delivered, variables, note);
        const id = this.d.ids.next('execution');
        // A correction of a send whose audience needed approval needs it again (a retraction never does).
        const [targetApprovals] =
          kind === 'correction' && this.d.approvals ? await this.d.approvals.of([target.id]) : [null];
        const heldBy = new Map(
          (targetApprovals?.audiences ?? []).filter((r) => r.state === 'approved').map((r) => [r.audience_key, r]),
        );
        const heldKey = (o: Delivery) => (o.audience && heldBy.has(o.audience) ? o.audience : null);
        const threads = await this.d.conversations.threads(incident.id, [
          ...new Set(planned.filter((p) => heldKey(p.original) === null).map((p) => p.connection.id)),
        ]);
        const deliveries = await this.newDeliveries(kind, id, incidentId, planned, threads, heldKey);
        const clockNow = this.d.clock.now();
        const now = iso(clockNow);
        const audiences = correctionAudiences(target, deliveries, heldBy);
        const execution: Execution = {
          id,
          incident_id: incidentId,
          variables,
          created_at: now,
          template_versions: target.template_versions,
          delivery_ids: deliveries.map((x) => x.id),
          kind,
          target_execution_id: target.id,
          note,
          ...(audiences ? { audiences } : {}),
        };
        const approvals = heldAgain(execution, deliveries, heldBy, actor, clockNow);
        const event = newEvent(
          this.d.ids.next('event'),
          kind === 'correction' ? 'execution.corrected' : 'execution.retracted',
          now,
          actor,
          {
            execution_id: id,
            target_execution_id: target.id,
            deliveries: deliveries.length,
            ...(kind === 'correction' ? { note } : { reason: note }),
          },
        );
        const events: IncidentEvent[] = [event, ...this.requestedEvents(approvals, now, actor)];
        // The incident itself does not change; comparing it keeps a close that races this from losing.
        if (!(await this.d.repo.create(execution, deliveries, incident, incident, events, threads, approvals)))
          return LOST_RACE;
        await queueCommitted(
          this.d,
          execution,
          deliveries.filter((x) => x.status !== 'pending_approval'),
        );
        if (approvals) this.d.approvals?.notifyLater(execution.id);
        return { execution, deliveries, approvals };
      },
      () => new DomainError('conflict', 'The incident kept changing meanwhile; try again.'),
    );
  }

  private newDeliveries(
    kind: 'correction' | 'retraction',
    executionId: string,
    incidentId: string,
    planned: Awaited<ReturnType<CorrectionService['planCorrection']>>,
    threads: Parameters<typeof conversationPlaces>[0],
    heldKey: (original: Delivery) => string | null,
  ): Promise<Delivery[]> {
    const place = conversationPlaces(threads);
    return mapYielding(planned, (p) => {
      const dId = this.d.ids.next('delivery');
      // A held one takes its place in the conversation when approved.
      const held = heldKey(p.original) !== null;
      return newDelivery({
        id: dId,
        executionId,
        incidentId,
        connectionId: p.connection.id,
        connectionType: p.connection.type,
        templateId: p.original.template_id,
        templateVersion: p.original.template_version,
        content: p.content,
        ...(held ? {} : place(p.connection.id, dId)),
        kind,
        targets: { deliveryId: p.original.id, action: p.action, message: p.target },
        audience: p.original.audience ?? null,
        held,
      });
    });
  }

  private requestedEvents(approvals: ExecutionApprovals | null, now: string, actor: Actor): IncidentEvent[] {
    return (approvals?.audiences ?? []).map((r) =>
      newEvent(this.d.ids.next('event'), 'execution.approval_requested', now, actor, {
        execution_id: approvals!.execution_id,
        audience: r.audience_key,
        deliveries: r.delivery_ids.length,
        expires_at: r.expires_at,
      }),
    );
  }

  private async planCorrection(
    kind: 'correction' | 'retraction',
    incident: Incident,
    target: Execution,
    delivered: Delivery[],
    variables: Record<string, string>,
    note: string | null,
  ) {
    const connections = new Map((await this.d.listConnections()).map((c) => [c.id, c]));
    const versions = new Map<string, Template | null>();
    for (const d of delivered) {
      if (d.template_id === null || d.template_version === null) continue;
      const key = `${d.template_id}@${d.template_version}`;
      if (!versions.has(key)) versions.set(key, await this.d.getTemplateVersion(d.template_id, d.template_version));
    }
    const ctx = {
      incident: incidentView(incident, this.d.publicUrl, this.d.clock.now()),
      execution: { id: target.id, ...(note !== null ? { note } : {}) },
      variables,
    };
    const planned = planCorrections(
      kind,
      delivered,
      connections,
      (d) => versions.get(`${d.template_id}@${d.template_version}`) ?? null,
      ctx,
    );
    if (planned.length === 0)
      throw new DomainError(
        'nothing_delivered',
        'Every connection this execution was delivered to has since been deleted or disabled.',
      );
    return planned;
  }
}

/** The correction's audiences: those of the corrected execution that its deliveries reach. */
function correctionAudiences(
  target: Execution,
  deliveries: Delivery[],
  heldBy: Map<string, ApprovalRecord>,
): StoredExecutionAudience[] | undefined {
  if (!target.audiences) return undefined;
  return target.audiences
    .map((a) => ({
      key: a.key,
      name: a.name,
      visibility: a.visibility,
      delivery_ids: deliveries.filter((d) => d.audience === a.key).map((d) => d.id),
      skipped: null,
      approval_required: heldBy.has(a.key),
    }))
    .filter((a) => a.delivery_ids.length > 0);
}

/**
 * One new pending approval per audience whose send needed approval, with the same approvers,
 * four-eyes rule and time to decide as that one had; null when nothing is held.
 */
function heldAgain(
  execution: Execution,
  deliveries: Delivery[],
  heldBy: Map<string, ApprovalRecord>,
  actor: Actor,
  now: Date,
): ExecutionApprovals | null {
  const records: ApprovalRecord[] = [];
  for (const [key, was] of heldBy) {
    const ids = deliveries.filter((d) => d.audience === key && d.status === 'pending_approval').map((d) => d.id);
    if (ids.length === 0) continue;
    const ttl = Date.parse(was.expires_at) - Date.parse(was.requested_at);
    records.push(pendingApproval({ ...was, delivery_ids: ids }, actor, now, ttl));
  }
  return newExecutionApprovals(execution, records);
}
