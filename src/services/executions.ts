import { z } from 'zod';
import type { Actor } from '../domain/common/actor.js';
import type { ChannelType } from '../channels/index.js';
import type { MessageFormat } from '../channels/channel.js';
import { formatOf } from '../domain/connection/connection.js';
import { iso } from '../domain/common/clock.js';
import { DomainError, notFound, type FieldError } from '../domain/common/errors.js';
import {
  DryRunSchema,
  ExecuteRequestSchema,
  RedeliverRequestSchema,
  newDelivery,
  type Delivery,
  type Execution,
  type RenderedContent,
} from '../domain/execution/execution.js';
import { isId } from '../domain/common/ids.js';
import { assertWritable, type Incident } from '../domain/incident/incident.js';
import { newEvent } from '../domain/incident/incident-event.js';
import { expectCursorKind, type Page, type PageRequest } from '../domain/common/pagination.js';
import { defaultMessageSource, incidentView, renderMessage } from '../domain/template/render.js';
import { sourceForChannel, type Template } from '../domain/template/template.js';
import { missingVariablesError, resolveVariables, type TemplateVariable } from '../domain/template/variables.js';
import { parseInput } from '../domain/common/validation.js';
import { LOST_RACE, retryOnConflict } from './retry.js';
import type {
  Clock,
  ConversationRepo,
  DispatchBatch,
  ExecutionRepo,
  IdGenerator,
  IncidentRepo,
  QueuedJob,
  ThreadState,
} from '../ports/index.js';
import {
  assertCorrectable,
  assertCorrectsSomething,
  CorrectRequestSchema,
  RetractRequestSchema,
} from '../domain/execution/conversation.js';
import { cadenceAfterExecute } from '../domain/incident/update-cadence.js';
import { planCorrections } from './correction-plan.js';
import { follows, queuedJobOf, type DeliveryService } from './deliveries.js';

/** What execute needs to know of a connection (no secrets). */
export interface ExecuteConnection {
  id: string;
  type: ChannelType;
  enabled: boolean;
  config: Record<string, unknown>;
  /** Shown by `prepare` (a connection record has one); the id stands in without it. */
  name?: string;
  /** The connection's secrets by name (values are not looked at: only whether one is set). */
  secrets?: Record<string, unknown>;
}

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
  enqueue(jobs: QueuedJob[]): Promise<void>;
  /**
   * Puts an execute's new deliveries on the queue as dispatch jobs (DISPATCH_CHUNK deliveries
   * each) instead of a job each. Without it, execute uses `enqueue`.
   */
  dispatch?(batches: DispatchBatch[]): Promise<void>;
  clock: Clock;
  ids: IdGenerator;
  publicUrl: string | undefined;
  /** Told when queueing failed after the commit (the outbox sweep then queues; logged). */
  onError?: (what: string, err: unknown) => void;
}

export interface PlannedDelivery {
  connection_id: string;
  connection_type: ChannelType;
  template_id: string | null;
  template_version: number | null;
  subject: string;
  body: string;
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

/** An execution and its deliveries, as stored: each edge (HTTP, Slack) presents them its own way. */
export interface ExecutionWithDeliveries {
  execution: Execution;
  deliveries: Delivery[];
}

export type ExecuteResult =
  { dryRun: true; deliveries: PlannedDelivery[] } | ({ dryRun: false } & ExecutionWithDeliveries);

/**
 * The most deliveries one dispatch job carries. A worker sends a job's deliveries itself, so this
 * is also how an execute spreads over several worker processes: an execute of 1,000 is 20 jobs.
 * Queue work per delivery is what it saves (about three scripts and 35 Redis commands a job).
 */
export const DISPATCH_CHUNK = 50;

/**
 * An execute's new deliveries as dispatch jobs (see DispatchBatch), DISPATCH_CHUNK at most in
 * each. `claim` is the outbox score they were committed with: their execution's `created_at`.
 */
function dispatchBatches(incidentId: string, claim: number, deliveries: Delivery[]): DispatchBatch[] {
  const batches: DispatchBatch[] = [];
  for (let i = 0; i < deliveries.length; i += DISPATCH_CHUNK) {
    const chunk = deliveries
      .slice(i, i + DISPATCH_CHUNK)
      .map((d) => ({ deliveryId: d.id, connectionId: d.connection_id, follows: follows(d) }));
    batches.push({ jobId: `dsp-${chunk[0]?.deliveryId ?? ''}`, incidentId, claim, deliveries: chunk });
  }
  return batches;
}

/** How long the 202 waits for the queue once the execution is committed (the outbox covers the rest). */
const ENQUEUE_WAIT_MS = 1000;

/**
 * Execute (README "Delivery semantics"): render every (connection × template that targets it) pair once, store the
 * execution and all its deliveries in one atomic step, then put them on the queue. The 202 is
 * answered only after the queue has them; a crash in between is covered by the outbox sweep.
 */
export class ExecutionService {
  constructor(private readonly d: ExecutionServiceDeps) {}

  /** `opts.dryRun` is a boolean or the raw `?dry_run=` value, judged after the 404/409 checks. */
  async execute(incidentId: string, input: unknown, actor: Actor, opts: { dryRun: unknown }): Promise<ExecuteResult> {
    return retryOnConflict(
      async () => {
        const incident = await this.getIncident(incidentId);
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
        await this.queueCommitted(execution, deliveries);
        return { dryRun: false, execution, deliveries };
      },
      () => new DomainError('conflict', 'The incident kept changing while executing; try again.'),
    );
  }

  /**
   * Puts committed deliveries on the queue, waiting at most ENQUEUE_WAIT_MS: the execution is
   * committed with its outbox entries, so a worker's sweep queues whatever this does not, and the
   * 202 stays true. Answering 5xx here would invite a retry that sends everything twice, and
   * waiting on a Redis that just went away would answer late (BullMQ's own connection never gives
   * up a command); a late enqueue still lands, and job ids make it harmless.
   */
  private async queueCommitted(execution: Execution, deliveries: Delivery[]): Promise<void> {
    const ids = deliveries.map((x) => x.id);
    const claim = Date.parse(execution.created_at);
    const dispatch = this.d.dispatch?.bind(this.d);
    const sent = dispatch
      ? dispatch(dispatchBatches(execution.incident_id, claim, deliveries)).then(() =>
          this.d.repo.markDispatched(ids, claim),
        )
      : this.d.enqueue(deliveries.map(queuedJobOf)).then(() => this.d.repo.markEnqueued(ids));
    const queued = sent.then(
      () => true,
      (err: unknown) => {
        this.d.onError?.('queueing an execution (the outbox sweep will)', err);
        return true;
      },
    );
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), ENQUEUE_WAIT_MS);
    });
    const inTime = await Promise.race([queued, late]);
    clearTimeout(timer);
    if (!inTime)
      this.d.onError?.(
        'queueing an execution took too long (the outbox sweep will)',
        new Error(`not queued within ${ENQUEUE_WAIT_MS} ms`),
      );
  }

  /**
   * The cheap part of execute, for an edge that must answer within a deadline (a Slack view
   * submission is acked within 3 s): the incident exists and is writable, the body is valid, some
   * enabled connection is targeted and every required variable has a value. Nothing is rendered
   * or stored; `execute` checks all of it again.
   */
  async precheck(incidentId: string, input: unknown): Promise<void> {
    const incident = await this.getIncident(incidentId);
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
    const incident = await this.getIncident(incidentId);
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
    await this.getIncident(incidentId);
    const execution = isId('execution', executionId) ? await this.d.repo.get(executionId) : null;
    if (!execution || execution.incident_id !== incidentId) throw notFound('Execution', executionId);
    return { execution, deliveries: await this.deliveriesOf(execution) };
  }

  async list(incidentId: string, page: PageRequest): Promise<Page<ExecutionWithDeliveries>> {
    await this.getIncident(incidentId);
    const result = await this.d.repo.listForIncident(incidentId, expectCursorKind(page, 'after'));
    const data = await Promise.all(
      result.data.map(async (execution) => ({ execution, deliveries: await this.deliveriesOf(execution) })),
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
    const incident = await this.getIncident(incidentId);
    const execution = isId('execution', executionId) ? await this.d.repo.get(executionId) : null;
    if (!execution || execution.incident_id !== incidentId) throw notFound('Execution', executionId);
    assertWritable(incident);
    parseInput(RedeliverRequestSchema, input ?? {});
    await this.d.deliveries.requeueFailed(await this.deliveriesOf(execution), actor);
    return { execution, deliveries: await this.deliveriesOf(execution) };
  }

  /**
   * Corrects an execution's delivered messages (README "Living updates"): renders them again with
   * the corrected variables over the execution's own (the same template versions), and edits each
   * in place where the platform can, else posts "Correction: …" in the incident's conversation.
   * An execution of its own kind, with deliveries, receipts and an `execution.corrected` event.
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
        const incident = await this.getIncident(incidentId);
        const target = isId('execution', executionId) ? await this.d.repo.get(executionId) : null;
        if (!target || target.incident_id !== incidentId) throw notFound('Execution', executionId);
        assertWritable(incident);
        assertCorrectable(target.kind, kind === 'correction' ? 'correct' : 'retract');
        const { variables, note } = read(target);
        const delivered = (await this.deliveriesOf(target)).filter((x) => x.status === 'delivered');
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
        await this.queueCommitted(execution, deliveries);
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

  private async getIncident(id: string): Promise<Incident> {
    const incident = isId('incident', id) ? await this.d.incidents.get(id) : null;
    if (!incident) throw notFound('Incident', id);
    return incident;
  }

  /**
   * The execution's deliveries, read in chunks: a fan-out of thousands of long messages is tens of
   * megabytes of JSON, and parsing it in one go would hold the event loop (and every Slack ack of
   * this process) for that long. The announcement's receipts read this on every refresh.
   */
  private async deliveriesOf(e: Execution): Promise<Delivery[]> {
    const out: Delivery[] = [];
    for (let i = 0; i < e.delivery_ids.length; i += DELIVERY_READ_CHUNK) {
      const chunk = await this.d.repo.getDeliveries(e.delivery_ids.slice(i, i + DELIVERY_READ_CHUNK));
      for (const x of chunk) if (x !== null) out.push(x);
    }
    return out;
  }

  /** Every (connection × template that targets it) pair, and the templates that are used. */
  private async pairs(
    incident: Incident,
    connectionIds: string[] | undefined,
  ): Promise<{ pairs: Pair[]; used: Template[] }> {
    const connections = await this.targetConnections(connectionIds);
    const templates = (await this.d.getTemplates(incident.template_ids)).filter((t): t is Template => t !== null);
    const pairs: Pair[] = [];
    if (templates.length === 0) {
      for (const c of connections) pairs.push({ connection: c, template: null });
    } else {
      for (const t of templates) {
        for (const c of connections)
          if (t.connection_ids.length === 0 || t.connection_ids.includes(c.id))
            pairs.push({ connection: c, template: t });
      }
    }
    if (pairs.length === 0) {
      throw new DomainError('no_connections', "No enabled connection is targeted by this incident's templates.");
    }
    return { pairs, used: templates.filter((t) => pairs.some((p) => p.template === t)) };
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

  private async targetConnections(ids: string[] | undefined): Promise<ExecuteConnection[]> {
    const all = await this.d.listConnections();
    if (ids === undefined) {
      const enabled = all.filter((c) => c.enabled);
      if (enabled.length === 0)
        throw new DomainError('no_connections', 'There is no enabled connection to deliver to.');
      return enabled;
    }
    const byId = new Map(all.map((c) => [c.id, c]));
    const errors: FieldError[] = [];
    const picked: ExecuteConnection[] = [];
    const seen = new Set<string>();
    // Errors point at the caller's own index (`connection_ids.3`); a repeated id counts once.
    ids.forEach((id, i) => {
      if (seen.has(id)) return;
      seen.add(id);
      const c = byId.get(id);
      if (!c)
        errors.push({
          field: `connection_ids.${i}`,
          code: 'unknown_connection',
          message: `Connection ${id} does not exist.`,
        });
      else if (!c.enabled)
        errors.push({
          field: `connection_ids.${i}`,
          code: 'connection_disabled',
          message: `Connection ${id} is disabled.`,
        });
      else picked.push(c);
    });
    if (errors.some((e) => e.code === 'unknown_connection'))
      throw new DomainError('unknown_connection', 'Some connection_ids do not exist.', errors);
    if (errors.length > 0) throw new DomainError('no_connections', 'Some listed connections are disabled.', errors);
    return picked;
  }
}

/**
 * One declaration per name across templates (in order): required if any template requires it,
 * the first default and the first non-empty description found.
 */
export function mergeDeclaredVariables(lists: readonly (readonly TemplateVariable[])[]): TemplateVariable[] {
  const byName = new Map<string, TemplateVariable>();
  for (const list of lists) {
    for (const v of list) {
      const seen = byName.get(v.name);
      if (!seen) byName.set(v.name, { ...v });
      else
        byName.set(v.name, {
          name: v.name,
          description: seen.description || v.description,
          required: seen.required || v.required,
          default: seen.default ?? v.default,
        });
    }
  }
  return [...byName.values()];
}

function mergeDeclared(templates: Template[]): TemplateVariable[] {
  return mergeDeclaredVariables(templates.map((t) => t.variables));
}

/**
 * Hands out each new delivery's place in its connection's conversation: the next sequence number
 * and the delivery before it (several templates to one connection follow one another).
 */
function conversationPlaces(
  threads: Map<string, ThreadState>,
): (connectionId: string, deliveryId: string) => { sequence: number; previousDeliveryId: string | null } {
  const at = new Map([...threads].map(([k, v]) => [k, { sequence: v.sequence, last: v.lastDeliveryId }]));
  return (connectionId, deliveryId) => {
    const cur = at.get(connectionId) ?? { sequence: 0, last: null };
    at.set(connectionId, { sequence: cur.sequence + 1, last: deliveryId });
    return { sequence: cur.sequence + 1, previousDeliveryId: cur.last };
  };
}

interface Pair {
  connection: ExecuteConnection;
  template: Template | null;
}

type RenderContext = Parameters<typeof renderMessage>[1];

/** Deliveries read per round trip (each round trip lets other work run in between). */
const DELIVERY_READ_CHUNK = 200;

/** How long rendering may hold the event loop before letting other work (requests, acks) run. */
const RENDER_SLICE_MS = 10;

/**
 * Renders every pair, yielding to the event loop every ~10 ms: a fan-out of thousands of long
 * messages takes seconds of CPU, and in a process that also serves Slack and /v1 that must not
 * hold every other request (Slack wants its acks within 3 s) until it is done.
 */
async function renderYielding(pairs: Pair[], ctx: RenderContext): Promise<(Pair & { content: RenderedContent })[]> {
  const out: (Pair & { content: RenderedContent })[] = [];
  // One execute renders the same (template, channel, format) for many connections: 200 webhooks
  // are one rendering, not 200. A format is the same when its escaping is the same function (a
  // format built from its connection's config, like Telegram's parse mode, is a new closure each
  // time and simply renders again); the context is the execute's own, so it is part of no key.
  const rendered = new Map<string, Map<MessageFormat['escape'], RenderedContent>>();
  let sliceStart = performance.now();
  for (const p of pairs) {
    const format = formatOf(p.connection);
    const key = `${p.template?.id ?? ''}@${p.template?.version ?? ''}|${p.connection.type}|${format.html ? 'html' : 'text'}`;
    let byEscape = rendered.get(key);
    if (!byEscape) rendered.set(key, (byEscape = new Map<MessageFormat['escape'], RenderedContent>()));
    let content = byEscape.get(format.escape);
    if (!content) {
      const source = p.template ? sourceForChannel(p.template, p.connection.type) : defaultMessageSource();
      content = renderMessage(source, ctx, format);
      byEscape.set(format.escape, content);
    }
    out.push({ ...p, content });
    if (performance.now() - sliceStart >= RENDER_SLICE_MS) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      sliceStart = performance.now();
    }
  }
  return out;
}

function planned(p: Pair & { content: RenderedContent }): PlannedDelivery {
  return {
    connection_id: p.connection.id,
    connection_type: p.connection.type,
    template_id: p.template?.id ?? null,
    template_version: p.template?.version ?? null,
    subject: p.content.subject,
    body: p.content.body,
  };
}
