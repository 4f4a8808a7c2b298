import { z } from 'zod';
import { channelOf } from '../channels/index.js';
import type { PublicStatus } from '../contracts/channel.js';
import type { Actor } from '../domain/common/actor.js';
import { iso } from '../domain/common/clock.js';
import { DomainError } from '../domain/common/errors.js';
import {
  DryRunSchema,
  ExecuteRequestSchema,
  RedeliverRequestSchema,
  newDelivery,
  publicStatusOf,
  type Delivery,
  type Execution,
  type RenderedContent,
} from '../domain/execution/execution.js';
import { assertWritable, type Incident } from '../domain/incident/incident.js';
import { newEvent, type IncidentEvent } from '../domain/incident/incident-event.js';
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
import type { Audience } from '../domain/audience/audience.js';
import { approvalExpiryMs } from '../domain/audience/audience.js';
import {
  newExecutionApprovals,
  pendingApproval,
  type ApprovalRecord,
  type ExecutionApprovals,
} from '../domain/execution/approval.js';
import type { StoredExecutionAudience } from '../domain/execution/execution.js';
import type { AudienceRepo } from '../ports/index.js';
import type { ApprovalService } from './approvals.js';
import { planAudiences, resolveAudienceKeys, type AudiencePart } from './audience-plan.js';
import { mapYielding } from '../domain/common/map-yielding.js';

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
  /** The audiences an execute may name (absent: executes know no audiences). */
  audiences?: Pick<AudienceRepo, 'getByKeys' | 'all'>;
  /** HERALD_DEFAULT_AUDIENCES: the audiences of an execute that names neither audiences nor connections. */
  defaultAudiences?: readonly string[];
  /** Held audiences' approvals: presented with executions, told to approvers, withdrawn by a retraction. */
  approvals?: ApprovalService;
}

/** One audience of a dry run or a form: what each of its connections would get. */
export interface PlannedAudience {
  key: string;
  name: string;
  visibility: 'internal' | 'external';
  approval_required: boolean;
  deliveries: PlannedDelivery[];
  skipped: AudiencePart['skipped'];
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
  /** Per audience of the execute (empty without audiences): what each would get. */
  audiences: {
    key: string;
    name: string;
    visibility: 'internal' | 'external';
    approval_required: boolean;
    total: number;
    deliveries: PreparedDelivery[];
    skipped: AudiencePart['skipped'];
  }[];
  /** Every audience a form may offer. */
  available_audiences: { key: string; name: string; visibility: 'internal' | 'external'; approval_required: boolean }[];
}

export interface PrepareOptions {
  /** The subset of connections the execute will target (default: every enabled one). */
  connection_ids?: string[];
  /** The audiences the execute will go to (not with connection_ids). */
  audiences?: string[];
  /** Deliveries rendered into the preview (the rest are only counted). */
  limit: number;
  /** What the preview shows where a value is still to be typed. */
  placeholder: (name: string) => string;
}

export type ExecuteResult =
  | { dryRun: true; deliveries: PlannedDelivery[]; audiences: PlannedAudience[] | null }
  | ({ dryRun: false } & ExecutionWithDeliveries);

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
        const audiences = await this.audiencesOf(body);
        const plan = await this.plan(promised, executionId, body.variables, body.connection_ids, audiences);
        if (dryRun) {
          return {
            dryRun: true,
            deliveries: plan.items.map(planned),
            audiences: plan.parts ? plannedAudiences(plan.parts, plan.items) : null,
          };
        }
        const clockNow = this.d.clock.now();
        const now = iso(clockNow);
        // A held delivery takes its place in the conversation only when approved.
        const threads = await this.d.conversations.threads(incident.id, [
          ...new Set(plan.items.filter((p) => !p.audience?.approval.required).map((p) => p.connection.id)),
        ]);
        const publicStatus = body.public_status ?? publicStatusOf(incident.status);
        const deliveries = await newDeliveries(
          this.d.ids,
          executionId,
          incident.id,
          plan.items,
          conversationPlaces(threads),
          publicStatus,
        );
        const templateVersions = Object.fromEntries(plan.templates.map((t) => [t.id, t.version]));
        const parts = plan.parts ? executionAudiences(plan.parts, plan.items, deliveries) : undefined;
        const execution: Execution = {
          id: executionId,
          incident_id: incident.id,
          variables: plan.variables,
          created_at: now,
          template_versions: templateVersions,
          delivery_ids: deliveries.map((x) => x.id),
          ...(parts ? { audiences: parts } : {}),
          public_status: publicStatus,
        };
        const approvals = plan.parts ? approvalsFor(execution, plan.parts, parts ?? [], actor, clockNow) : null;
        const cadence = cadenceAfterExecute(body.next_update_in, clockNow, actor);
        const next: Incident = {
          ...incident,
          execution_count: incident.execution_count + 1,
          last_executed_at: now,
          ...cadence,
          rev: incident.rev + 1,
        };
        const events = [
          newEvent(this.d.ids.next('event'), 'incident.executed', now, actor, {
            execution_id: executionId,
            deliveries: deliveries.length,
            template_versions: templateVersions,
            ...(parts ? { audiences: parts.map((a) => a.key) } : {}),
            ...(cadence.next_update_due_at !== null ? { next_update_due_at: cadence.next_update_due_at } : {}),
          }),
          ...approvalRequestedEvents(this.d.ids, approvals, now, actor),
        ];
        if (!(await this.d.repo.create(execution, deliveries, incident, next, events, threads, approvals)))
          return LOST_RACE;
        await queueCommitted(
          this.d,
          execution,
          deliveries.filter((x) => x.status !== 'pending_approval'),
        );
        if (approvals) this.d.approvals?.notifyLater(execution.id);
        return { dryRun: false, execution, deliveries, approvals };
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
    const { used } = await this.pairs(incident, body.connection_ids, await this.audiencesOf(body));
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
    if (opts.connection_ids !== undefined || opts.audiences !== undefined)
      parseInput(ExecuteRequestSchema, {
        ...(opts.connection_ids !== undefined ? { connection_ids: opts.connection_ids } : {}),
        ...(opts.audiences !== undefined ? { audiences: opts.audiences } : {}),
      });
    const audiences = await this.audiencesOf(opts);
    const { pairs, used, parts } = await this.pairs(incident, opts.connection_ids, audiences);
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
    const limit = Math.max(0, opts.limit);
    const present = (p: Pair & { content: RenderedContent }): PreparedDelivery => ({
      ...planned(p),
      connection_name: p.connection.name ?? p.connection.id,
      template_name: p.template?.name ?? null,
    });
    const shown = await renderYielding(pairs.slice(0, limit), ctx);
    const perAudience = await Promise.all(
      (parts ?? []).map(async (part) => ({
        key: part.audience.key,
        name: part.audience.name,
        visibility: part.audience.visibility,
        approval_required: part.audience.approval.required,
        total: part.own.length,
        // Each audience's own words, even where a pair is sent once for several audiences.
        deliveries: (await renderYielding(part.own.slice(0, limit), ctx)).map(present),
        skipped: part.skipped,
      })),
    );
    const all = this.d.audiences ? await this.d.audiences.all() : [];
    return {
      incident,
      templates: used.map((t) => ({ id: t.id, name: t.name, version: t.version })),
      variables,
      total: pairs.length,
      deliveries: shown.map(present),
      audiences: perAudience,
      available_audiences: all.map((a) => ({
        key: a.key,
        name: a.name,
        visibility: a.visibility,
        approval_required: a.approval.required,
      })),
    };
  }

  async get(incidentId: string, executionId: string): Promise<ExecutionWithDeliveries> {
    await incidentOr404(this.d.incidents, incidentId);
    const execution = await executionOr404(this.d.repo, incidentId, executionId);
    const [approvals] = await this.approvalsOf([execution]);
    return { execution, deliveries: await deliveriesOf(this.d.repo, execution), approvals: approvals ?? null };
  }

  async list(incidentId: string, page: PageRequest): Promise<Page<ExecutionWithDeliveries>> {
    await incidentOr404(this.d.incidents, incidentId);
    const result = await this.d.repo.listForIncident(incidentId, expectCursorKind(page, 'after'));
    const approvals = await this.approvalsOf(result.data);
    const data = await Promise.all(
      result.data.map(async (execution, i) => ({
        execution,
        deliveries: await deliveriesOf(this.d.repo, execution),
        approvals: approvals[i] ?? null,
      })),
    );
    return { data, nextCursor: result.nextCursor };
  }

  /** The approvals of those executions that held an audience (one read for all of them). */
  private async approvalsOf(executions: Execution[]): Promise<(ExecutionApprovals | null)[]> {
    const held = executions.map((e) => e.audiences?.some((a) => a.approval_required) ?? false);
    if (!this.d.approvals || !held.some(Boolean)) return executions.map(() => null);
    const ids = executions.filter((_, i) => held[i]).map((e) => e.id);
    const found = await this.d.approvals.of(ids);
    let at = 0;
    return held.map((h) => (h ? (found[at++] ?? null) : null));
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

  /**
   * The audiences an execute goes to: the ones it names (422 with connection_ids, 422 naming
   * unknown keys), else HERALD_DEFAULT_AUDIENCES (those of them that exist) when it names no
   * connections either, else none (today's rule: every enabled connection, or the listed ones).
   */
  private async audiencesOf(body: { audiences?: string[] | undefined; connection_ids?: string[] | undefined }) {
    if (body.audiences !== undefined && body.connection_ids !== undefined)
      throw new DomainError(
        'audiences_and_connection_ids',
        'Name audiences or connection_ids, not both: an audience already says where it is reached.',
        [{ field: 'audiences', code: 'audiences_and_connection_ids', message: 'Not with connection_ids.' }],
      );
    const repo = this.d.audiences;
    if (body.audiences !== undefined) {
      if (!repo) throw new DomainError('unknown_audience', 'There are no audiences.');
      return resolveAudienceKeys(body.audiences, await repo.getByKeys(body.audiences));
    }
    const defaults = this.d.defaultAudiences ?? [];
    if (body.connection_ids !== undefined || defaults.length === 0 || !repo) return null;
    const found = (await repo.getByKeys([...defaults])).filter((a): a is Audience => a !== null);
    return found.length > 0 ? found : null;
  }

  /** Every pair the execute makes (with its audience, when it names some), and the templates used. */
  private async pairs(
    incident: Incident,
    connectionIds: string[] | undefined,
    audiences: Audience[] | null = null,
  ): Promise<{ pairs: (Pair & { audience?: Audience })[]; used: Template[]; parts: AudiencePart[] | null }> {
    const templates = (await this.d.getTemplates(incident.template_ids)).filter((t): t is Template => t !== null);
    if (audiences) {
      const plan = planAudiences(audiences, await this.d.listConnections(), templates);
      return { pairs: plan.pairs, used: plan.used, parts: plan.parts };
    }
    const connections = targetConnections(await this.d.listConnections(), connectionIds);
    return { ...pairsFor(connections, templates), parts: null };
  }

  private async plan(
    incident: Incident,
    executionId: string,
    supplied: Record<string, string>,
    connectionIds: string[] | undefined,
    audiences: Audience[] | null,
  ) {
    const { pairs, used, parts } = await this.pairs(incident, connectionIds, audiences);
    const { values, missing } = resolveVariables(mergeDeclared(used), supplied);
    if (missing.length > 0) throw missingVariablesError(missing);
    const ctx = {
      incident: incidentView(incident, this.d.publicUrl, this.d.clock.now()),
      execution: { id: executionId },
      variables: values,
    };
    const rendered = await renderYielding(pairs, ctx);
    // renderYielding keeps the order: each rendering is its pair's.
    const items = rendered.map((r, i) => ({ ...r, audience: pairs[i]!.audience }));
    return { items, templates: used, variables: values, parts };
  }
}

type PlannedItem = Pair & { content: RenderedContent; audience?: Audience | undefined };

/** The execute's deliveries: a held one (its audience needs approval) gets its conversation place when approved. */
function newDeliveries(
  ids: IdGenerator,
  executionId: string,
  incidentId: string,
  items: PlannedItem[],
  place: ReturnType<typeof conversationPlaces>,
  publicStatus: PublicStatus,
): Promise<Delivery[]> {
  return mapYielding(items, (p) => {
    const id = ids.next('delivery');
    const held = p.audience?.approval.required ?? false;
    return newDelivery({
      id,
      executionId,
      incidentId,
      connectionId: p.connection.id,
      connectionType: p.connection.type,
      templateId: p.template?.id ?? null,
      templateVersion: p.template?.version ?? null,
      content: p.content,
      ...(held ? {} : place(p.connection.id, id)),
      audience: p.audience?.key ?? null,
      held,
      // What a status page shows with it; other channels have no public state.
      ...(channelOf(p.connection.type).publishesPublicly ? { publicStatus } : {}),
    });
  });
}

/** Per audience, what a dry run shows: each of its connections' rendering. */
function plannedAudiences(parts: AudiencePart[], items: PlannedItem[]): PlannedAudience[] {
  return parts.map((part) => ({
    key: part.audience.key,
    name: part.audience.name,
    visibility: part.audience.visibility,
    approval_required: part.audience.approval.required,
    deliveries: items.filter((x) => x.audience?.id === part.audience.id).map(planned),
    skipped: part.skipped,
  }));
}

/** The execution's record of its audiences: which deliveries each got, or why it got none. */
function executionAudiences(
  parts: AudiencePart[],
  items: PlannedItem[],
  deliveries: Delivery[],
): StoredExecutionAudience[] {
  return parts.map((part) => ({
    key: part.audience.key,
    name: part.audience.name,
    visibility: part.audience.visibility,
    delivery_ids: deliveries.filter((_, i) => items[i]!.audience?.id === part.audience.id).map((x) => x.id),
    skipped: part.skipped,
    approval_required: part.audience.approval.required && part.pairs.length > 0,
  }));
}

/** One pending approval per held audience that got deliveries; null when none is held. */
function approvalsFor(
  execution: Execution,
  parts: AudiencePart[],
  recorded: StoredExecutionAudience[],
  actor: Actor,
  now: Date,
): ExecutionApprovals | null {
  const records: ApprovalRecord[] = [];
  parts.forEach((part, i) => {
    const a = part.audience;
    const ids = recorded[i]?.delivery_ids ?? [];
    if (!a.approval.required || ids.length === 0) return;
    const approvers = a.approval.approvers;
    const ask = {
      audience_id: a.id,
      audience_key: a.key,
      approvers: {
        slack_user_ids: [...approvers.slack_user_ids],
        ...(approvers.api_key_scopes ? { api_key_scopes: [...approvers.api_key_scopes] } : {}),
      },
      four_eyes: a.approval.four_eyes,
      delivery_ids: ids,
    };
    records.push(pendingApproval(ask, actor, now, approvalExpiryMs(a.approval.expires_in)));
  });
  return newExecutionApprovals(execution, records);
}

function approvalRequestedEvents(
  ids: IdGenerator,
  approvals: ExecutionApprovals | null,
  now: string,
  actor: Actor,
): IncidentEvent[] {
  return (approvals?.audiences ?? []).map((r) =>
    newEvent(ids.next('event'), 'execution.approval_requested', now, actor, {
      execution_id: approvals!.execution_id,
      audience: r.audience_key,
      deliveries: r.delivery_ids.length,
      expires_at: r.expires_at,
    }),
  );
}
