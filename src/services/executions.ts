import { z } from 'zod';
import type { Actor } from '../domain/common/actor.js';
import { iso } from '../domain/common/clock.js';
import { DomainError } from '../domain/common/errors.js';
import {
  DryRunSchema,
  ExecuteRequestSchema,
  RedeliverRequestSchema,
  newDelivery,
  type Execution,
} from '../domain/execution/execution.js';
import { assertWritable, type Incident } from '../domain/incident/incident.js';
import { newEvent } from '../domain/incident/incident-event.js';
import { expectCursorKind, type Page, type PageRequest } from '../domain/common/pagination.js';
import { incidentView } from '../domain/template/render.js';
import type { Template } from '../domain/template/template.js';
import { missingVariablesError, resolveVariables, type TemplateVariable } from '../domain/template/variables.js';
import { parseInput } from '../domain/common/validation.js';
import { cadenceAfterExecute } from '../domain/incident/update-cadence.js';
import type {
  Clock,
  ConversationRepo,
  DispatchBatch,
  ExecutionRepo,
  IdGenerator,
  IncidentRepo,
} from '../ports/index.js';
import { CorrectionService } from './corrections.js';
import type { DeliveryService } from './deliveries.js';
import {
  mergeDeclared,
  mergeDeclaredVariables,
  pairsFor,
  planned,
  renderYielding,
  targetConnections,
  type ExecuteConnection,
  type Pair,
  type PlannedDelivery,
} from './execution-plan.js';
import { queueCommitted } from './execution-queue.js';
import {
  conversationPlaces,
  deliveriesOf,
  executionOr404,
  incidentOr404,
  type ExecutionWithDeliveries,
} from './execution-records.js';
import { LOST_RACE, retryOnConflict } from './retry.js';

export { DISPATCH_CHUNK } from './execution-queue.js';
export { mergeDeclaredVariables, type ExecuteConnection, type ExecutionWithDeliveries, type PlannedDelivery };

export interface ExecutionServiceDeps {
  incidents: IncidentRepo;
  repo: ExecutionRepo;
  deliveries: DeliveryService;
  getTemplates(ids: string[]): Promise<(Template | null)[]>;
  /** One version of a template (corrections render with the version the message was made from). */
  getTemplateVersion(id: string, version: number): Promise<Template | null>;
  conversations: ConversationRepo;
  /** Every connection (execute fans out to all enabled ones, or a listed subset). */
  listConnections(): Promise<ExecuteConnection[]>;
  /** Puts an execution's new deliveries on the queue as dispatch jobs (DISPATCH_CHUNK deliveries each). */
  dispatch(batches: DispatchBatch[]): Promise<void>;
  clock: Clock;
  ids: IdGenerator;
  publicUrl: string | undefined;
  /** Told when queueing failed after the commit (the outbox sweep then queues; logged). */
  onError?: (what: string, err: unknown) => void;
}

/** What the execute modal shows before anything is sent (see `preview`). */
export interface ExecutePreview {
  /** The variables declared by the templates that will be sent (merged by name). */
  variables: TemplateVariable[];
  /** How many deliveries an execute would make. */
  total: number;
  /** The first `limit` of them, rendered with defaults and placeholders. */
  deliveries: PlannedDelivery[];
}

/** A declared variable as a form asks for it (see `prepare`). */
export interface PreparedVariable extends TemplateVariable {
  /** What the input starts with: the default (null: empty, to be typed). */
  prefill: string | null;
  /** What the preview renders for it: the default, else `placeholder(name)`. */
  preview: string;
}

/** A delivery of the preview, with the names a person recognises. */
export interface PreparedDelivery extends PlannedDelivery {
  /** The connection's name (its id when it has none). */
  connection_name: string;
  /** The template's name; null for the built-in message. */
  template_name: string | null;
}

/**
 * Everything a form needs before an execute (see `prepare`): which templates it uses, one input
 * per declared variable (merged by name) with what is prefilled, and the first deliveries rendered.
 */
export interface ExecutePreparation {
  incident: Incident;
  /** The incident's templates that target at least one of the connections, in attach order. */
  templates: { id: string; name: string; version: number }[];
  variables: PreparedVariable[];
  /** How many deliveries an execute would make. */
  total: number;
  /** The first `limit` of them, rendered with defaults and placeholders. */
  deliveries: PreparedDelivery[];
}

export interface PrepareOptions {
  /** The subset of connections the execute will target (default: every enabled one). */
  connection_ids?: string[];
  /** Deliveries rendered into the preview (the rest are only counted). */
  limit: number;
  /** What the preview shows where a value is still to be typed. */
  placeholder: (name: string) => string;
}

export type ExecuteResult =
  { dryRun: true; deliveries: PlannedDelivery[] } | ({ dryRun: false } & ExecutionWithDeliveries);

/**
 * Execute (docs/explanation/delivery-semantics.md): render every (connection × template that targets it) pair once,
 * store the execution and all its deliveries in one atomic step, then put them on the queue. The 202 is
 * answered only after the queue has them; a crash in between is covered by the outbox sweep.
 * Also what a form shows before an execute, reading executions back, and redelivering; corrections
 * and retractions are CorrectionService's (./corrections.ts), offered here for the edges.
 */
export class ExecutionService {
  private readonly corrections: CorrectionService;

  constructor(private readonly d: ExecutionServiceDeps) {
    this.corrections = new CorrectionService(d);
  }

  /** `opts.dryRun` is a boolean or the raw `?dry_run=` value, judged after the 404/409 checks. */
  async execute(incidentId: string, input: unknown, actor: Actor, opts: { dryRun: unknown }): Promise<ExecuteResult> {
    return retryOnConflict(
      async () => {
        const incident = await incidentOr404(this.d.incidents, incidentId);
        assertWritable(incident);
        const dryRun = parseInput(z.object({ dry_run: DryRunSchema }), { dry_run: opts.dryRun }).dry_run ?? false;
        const body = parseInput(ExecuteRequestSchema, input ?? {});
        const executionId = this.d.ids.next('execution');
        // `{{incident.next_update_at}}` says when THIS execute promises the next update.
        const promised = {
          ...incident,
          next_update_due_at: cadenceAfterExecute(body.next_update_in, this.d.clock.now(), actor).next_update_due_at,
        };
        const plan = await this.plan(promised, executionId, body.variables, body.connection_ids);
        if (dryRun) {
          return {
            dryRun: true,
            deliveries: plan.items.map(planned),
          };
        }
        const clockNow = this.d.clock.now();
        const now = iso(clockNow);
        const threads = await this.d.conversations.threads(incident.id, [
          ...new Set(plan.items.map((p) => p.connection.id)),
        ]);
        const place = conversationPlaces(threads);
        const deliveries = plan.items.map((p) => {
          const id = this.d.ids.next('delivery');
          return newDelivery({
            id,
            executionId,
            incidentId: incident.id,
            connectionId: p.connection.id,
            connectionType: p.connection.type,
            templateId: p.template?.id ?? null,
            templateVersion: p.template?.version ?? null,
            content: p.content,
            ...place(p.connection.id, id),
          });
        });
        const templateVersions = Object.fromEntries(plan.templates.map((t) => [t.id, t.version]));
        const execution: Execution = {
          id: executionId,
          incident_id: incident.id,
          variables: plan.variables,
          created_at: now,
          template_versions: templateVersions,
          delivery_ids: deliveries.map((x) => x.id),
        };
        const cadence = cadenceAfterExecute(body.next_update_in, clockNow, actor);
        const next: Incident = {
          ...incident,
          execution_count: incident.execution_count + 1,
          last_executed_at: now,
          ...cadence,
          rev: incident.rev + 1,
        };
        const event = newEvent(this.d.ids.next('event'), 'incident.executed', now, actor, {
          execution_id: executionId,
          deliveries: deliveries.length,
          template_versions: templateVersions,
          ...(cadence.next_update_due_at !== null ? { next_update_due_at: cadence.next_update_due_at } : {}),
        });
        if (!(await this.d.repo.create(execution, deliveries, incident, next, [event], threads))) return LOST_RACE;
        await queueCommitted(this.d, execution, deliveries);
        return { dryRun: false, execution, deliveries };
      },
      () => new DomainError('conflict', 'The incident kept changing while executing; try again.'),
    );
  }

  /**
   * The cheap part of execute, for an edge that must answer within a deadline (a Slack view
   * submission is acked within 3 s): the incident exists and is writable, the body is valid, some
   * enabled connection is targeted and every required variable has a value. Nothing is rendered
   * or stored; `execute` checks all of it again.
   */
  async precheck(incidentId: string, input: unknown): Promise<void> {
    const incident = await incidentOr404(this.d.incidents, incidentId);
    assertWritable(incident);
    const body = parseInput(ExecuteRequestSchema, input ?? {});
    const { used } = await this.pairs(incident, body.connection_ids);
    const { missing } = resolveVariables(mergeDeclared(used), body.variables);
    if (missing.length > 0) throw missingVariablesError(missing);
  }

  /**
   * What an execute would send, for a form that asks for the variables: the declared variables
   * and only the first `limit` deliveries rendered (defaults filled in, `placeholder(name)` for a
   * value still to be typed). Rendering every delivery of a large fan-out would cost seconds.
   */
  async preview(
    incidentId: string,
    opts: { limit: number; placeholder: (name: string) => string },
  ): Promise<ExecutePreview> {
    const p = await this.prepare(incidentId, opts);
    return {
      variables: p.variables.map(({ name, description, required, default: d }) => ({
        name,
        description,
        required,
        default: d,
      })),
      total: p.total,
      deliveries: p.deliveries.map(({ connection_name: _n, template_name: _t, ...d }) => d),
    };
  }

  /**
   * What a form shows before an execute, as plain data: the incident (404, closed 409 as execute
   * would), the templates the execute uses (those that target an enabled connection), one merged
   * declaration per variable with its prefill, and the first `limit` deliveries rendered with the
   * defaults and `placeholder(name)` for the values still to be typed. An edge only presents it.
   */
  async prepare(incidentId: string, opts: PrepareOptions): Promise<ExecutePreparation> {
    const incident = await incidentOr404(this.d.incidents, incidentId);
    assertWritable(incident);
    if (opts.connection_ids !== undefined) parseInput(ExecuteRequestSchema, { connection_ids: opts.connection_ids });
    const { pairs, used } = await this.pairs(incident, opts.connection_ids);
    const declared = mergeDeclaredVariables(used.map((t) => t.variables));
    const variables: PreparedVariable[] = declared.map((v) => ({
      ...v,
      prefill: v.default,
      preview: v.default ?? opts.placeholder(v.name),
    }));
    const values = Object.fromEntries(variables.map((v) => [v.name, v.preview]));
    const ctx = {
      incident: incidentView(incident, this.d.publicUrl, this.d.clock.now()),
      execution: { id: this.d.ids.next('execution') },
      variables: values,
    };
    const shown = await renderYielding(pairs.slice(0, Math.max(0, opts.limit)), ctx);
    return {
      incident,
      templates: used.map((t) => ({ id: t.id, name: t.name, version: t.version })),
      variables,
      total: pairs.length,
      deliveries: shown.map((p) => ({
        ...planned(p),
        connection_name: p.connection.name ?? p.connection.id,
        template_name: p.template?.name ?? null,
      })),
    };
  }

  async get(incidentId: string, executionId: string): Promise<ExecutionWithDeliveries> {
    await incidentOr404(this.d.incidents, incidentId);
    const execution = await executionOr404(this.d.repo, incidentId, executionId);
    return { execution, deliveries: await deliveriesOf(this.d.repo, execution) };
  }

  async list(incidentId: string, page: PageRequest): Promise<Page<ExecutionWithDeliveries>> {
    await incidentOr404(this.d.incidents, incidentId);
    const result = await this.d.repo.listForIncident(incidentId, expectCursorKind(page, 'after'));
    const data = await Promise.all(
      result.data.map(async (execution) => ({ execution, deliveries: await deliveriesOf(this.d.repo, execution) })),
    );
    return { data, nextCursor: result.nextCursor };
  }

  /** Re-queues the execution's failed deliveries → the execution (202). */
  async redeliver(
    incidentId: string,
    executionId: string,
    input: unknown,
    actor: Actor,
  ): Promise<ExecutionWithDeliveries> {
    const incident = await incidentOr404(this.d.incidents, incidentId);
    const execution = await executionOr404(this.d.repo, incidentId, executionId);
    assertWritable(incident);
    parseInput(RedeliverRequestSchema, input ?? {});
    await this.d.deliveries.requeueFailed(await deliveriesOf(this.d.repo, execution), actor);
    return { execution, deliveries: await deliveriesOf(this.d.repo, execution) };
  }

  /** Corrects an execution's delivered messages (see CorrectionService.correct). */
  correct(incidentId: string, executionId: string, input: unknown, actor: Actor): Promise<ExecutionWithDeliveries> {
    return this.corrections.correct(incidentId, executionId, input, actor);
  }

  /** Retracts an execution's delivered messages (see CorrectionService.retract). */
  retract(incidentId: string, executionId: string, input: unknown, actor: Actor): Promise<ExecutionWithDeliveries> {
    return this.corrections.retract(incidentId, executionId, input, actor);
  }

  /** Every (connection × template that targets it) pair, and the templates that are used. */
  private async pairs(
    incident: Incident,
    connectionIds: string[] | undefined,
  ): Promise<{ pairs: Pair[]; used: Template[] }> {
    const connections = targetConnections(await this.d.listConnections(), connectionIds);
    const templates = (await this.d.getTemplates(incident.template_ids)).filter((t): t is Template => t !== null);
    return pairsFor(connections, templates);
  }

  private async plan(
    incident: Incident,
    executionId: string,
    supplied: Record<string, string>,
    connectionIds: string[] | undefined,
  ) {
    const { pairs, used } = await this.pairs(incident, connectionIds);
    const { values, missing } = resolveVariables(mergeDeclared(used), supplied);
    if (missing.length > 0) throw missingVariablesError(missing);
    const ctx = {
      incident: incidentView(incident, this.d.publicUrl, this.d.clock.now()),
      execution: { id: executionId },
      variables: values,
    };
    const items = await renderYielding(pairs, ctx);
    return { items, templates: used, variables: values };
  }
}
