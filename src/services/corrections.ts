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
        const delivered = (await deliveriesOf(this.d.repo, target)).filter((x) => x.status === 'delivered');
        if (delivered.length === 0)
          throw new DomainError(
            'nothing_delivered',
            'None of this execution’s messages has been delivered yet, so there is nothing to correct or retract; try again once its receipts show them delivered.',
          );
        const planned = await this.planCorrection(kind, incident, target, delivered, variables, note);
        const id = this.d.ids.next('execution');
        const threads = await this.d.conversations.threads(incident.id, [
          ...new Set(planned.map((p) => p.connection.id)),
        ]);
        const place = conversationPlaces(threads);
        const deliveries = planned.map((p) => {
          const dId = this.d.ids.next('delivery');
          return newDelivery({
            id: dId,
            executionId: id,
            incidentId,
            connectionId: p.connection.id,
            connectionType: p.connection.type,
            templateId: p.original.template_id,
            templateVersion: p.original.template_version,
            content: p.content,
            ...place(p.connection.id, dId),
            kind,
            targets: { deliveryId: p.original.id, action: p.action, message: p.target },
          });
        });
        const now = iso(this.d.clock.now());
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
        };
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
        // The incident itself does not change; comparing it keeps a close that races this from losing.
        if (!(await this.d.repo.create(execution, deliveries, incident, incident, [event], threads))) return LOST_RACE;
        await queueCommitted(this.d, execution, deliveries);
        return { execution, deliveries };
      },
      () => new DomainError('conflict', 'The incident kept changing meanwhile; try again.'),
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
