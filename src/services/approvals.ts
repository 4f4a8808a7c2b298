import type { Actor } from '../domain/common/actor.js';
import { SYSTEM_ACTOR } from '../domain/common/actor.js';
import { iso } from '../domain/common/clock.js';
import { DomainError } from '../domain/common/errors.js';
import { parseInput } from '../domain/common/validation.js';
import {
  decide as decideApprovals,
  DecideRequestSchema,
  expire,
  unnotified,
  viewOf,
  withdraw,
  type ApprovalRecord,
  type DecideOutcome,
  type ExecutionApprovals,
} from '../domain/execution/approval.js';
import * as transition from '../domain/execution/delivery-state.js';
import { isHeld, type Delivery, type Execution } from '../domain/execution/execution.js';
import { assertWritable } from '../domain/incident/incident.js';
import { newEvent, type IncidentEvent } from '../domain/incident/incident-event.js';
import type {
  ApprovalNotifier,
  ApprovalRepo,
  Clock,
  ConversationRepo,
  DispatchBatch,
  ExecutionRepo,
  IdGenerator,
  IncidentRepo,
  ThreadState,
  Threads,
} from '../ports/index.js';
import { queueCommitted } from './execution-queue.js';
import {
  conversationPlaces,
  deliveriesOf,
  executionOr404,
  incidentOr404,
  type ExecutionWithDeliveries,
} from './execution-records.js';
import { LOST_RACE, retryOnConflict } from './retry.js';

/**
 * Approvals (docs/explanation/approval.md): deciding an execution's held audiences, expiring the
 * ones nobody decided in time, withdrawing them when the execution is retracted, and telling
 * their approvers (ApprovalNotifier) durably. Every decision is one atomic commit
 * (ApprovalRepo.commit): the approval's state, its held deliveries queued (with their
 * conversation places and outbox entries) or cancelled, the timeline event and the audience's
 * pending index, so an approval is never recorded without its sending, nor sent twice.
 */

export interface ApprovalServiceDeps {
  incidents: Pick<IncidentRepo, 'get'>;
  repo: ExecutionRepo;
  approvals: ApprovalRepo;
  conversations: ConversationRepo;
  dispatch(batches: DispatchBatch[]): Promise<void>;
  clock: Clock;
  ids: IdGenerator;
  /** Tells approvers; a LateApprovalNotifier (nobody until the Slack edge attaches). */
  notifier: ApprovalNotifier;
  /** How long a worker holds an expiry or a notice before another may take it over. */
  leaseMs: number;
  /** Told after a decision changed deliveries (the announcement's receipts). */
  onDeliveryChanged?: (d: Delivery) => void;
  onError?: (what: string, err: unknown) => void;
}

export interface DecideInput {
  decision: 'approve' | 'reject';
  reason?: string;
  audiences?: string[];
}

const EVENT_OF: Record<'approved' | 'rejected' | 'expired', IncidentEvent['type']> = {
  approved: 'execution.approved',
  rejected: 'execution.rejected',
  expired: 'execution.approval_expired',
};

/**
 * The attach-once stand-in the services are built with: the Slack edge exists only after them
 * (it is built over them), so the composition root attaches it (or null, Slack off) before the
 * worker starts. Attached to nothing, approvers are told nothing and approvals still work.
 */
export class LateApprovalNotifier implements ApprovalNotifier {
  private target: ApprovalNotifier | null = null;
  private attached = false;

  attach(target: ApprovalNotifier | null): void {
    if (this.attached) throw new Error('the approval notifier is already attached');
    this.attached = true;
    this.target = target;
  }

  /** Whether someone is there to be told (else the notice is left to a process that has them). */
  get active(): boolean {
    return this.target !== null;
  }

  async notify(notice: Parameters<ApprovalNotifier['notify']>[0]): Promise<void> {
    await this.target?.notify(notice);
  }
}

export class ApprovalService {
  constructor(private readonly d: ApprovalServiceDeps) {}

  /**
   * Approves or rejects an execution's held audiences (`input.audiences`, default every pending
   * one `actor` may decide). `keyScopes`: an API key's scopes (who may approve by key). Answers the
   * execution after the decision; 409 not_pending, 403 not_an_approver / four_eyes otherwise.
   */
  async decide(
    incidentId: string,
    executionId: string,
    input: DecideInput,
    actor: Actor,
    keyScopes: readonly string[] = [],
  ): Promise<ExecutionWithDeliveries> {
    const { decision, ...body } = input;
    return this.decideRequest(decision, incidentId, executionId, body, actor, keyScopes);
  }

  /** The API's approve / reject: `body` is the request's (`reason`, `audiences`), checked strictly. */
  async decideRequest(
    decision: 'approve' | 'reject',
    incidentId: string,
    executionId: string,
    input: unknown,
    actor: Actor,
    keyScopes: readonly string[] = [],
  ): Promise<ExecutionWithDeliveries> {
    const body = parseInput(DecideRequestSchema, input ?? {});
    const result = await retryOnConflict(
      async () => {
        const incident = await incidentOr404(this.d.incidents, incidentId);
        const execution = await executionOr404(this.d.repo, incidentId, executionId);
        const approvals = await this.d.approvals.get(execution.id);
        if (!approvals) throw new DomainError('not_pending', 'This execution has no approval to decide.');
        const outcome = decideApprovals(
          approvals,
          { decision, reason: body.reason, audiences: body.audiences },
          actor,
          keyScopes,
          this.d.clock.now(),
        );
        // Sending to a closed incident's audiences is refused like any execute (rejecting is not).
        if (decision === 'approve') assertWritable(incident);
        return this.commit(execution, approvals, outcome, actor, true);
      },
      () => new DomainError('conflict', 'The approval kept changing meanwhile; try again.'),
    );
    this.afterCommit(result);
    return result;
  }

  /**
   * A retraction withdraws the execution's still-pending part (it never waits for approval):
   * each pending approval is rejected by `actor`, the reason saying so, its held deliveries
   * cancelled. Null when nothing was pending. `asEffect`: the commit stores the idempotent answer.
   */
  async withdraw(
    execution: Execution,
    actor: Actor,
    reason: string,
    asEffect: boolean,
  ): Promise<ExecutionWithDeliveries | null> {
    const result = await retryOnConflict(
      async () => {
        const approvals = await this.d.approvals.get(execution.id);
        if (!approvals) return null;
        const outcome = withdraw(approvals, actor, reason, this.d.clock.now());
        if (!outcome) return null;
        return this.commit(execution, approvals, outcome, actor, asEffect);
      },
      () => new DomainError('conflict', 'The approval kept changing meanwhile; try again.'),
    );
    if (result) this.afterCommit(result);
    return result;
  }

  /** The approvals of these executions (for presenting them), in order. */
  async of(executionIds: string[]): Promise<(ExecutionApprovals | null)[]> {
    return this.d.approvals.getMany(executionIds);
  }

  /**
   * The worker's sweep: expires the approvals past their time, and tells approvers what they
   * were not told yet. Returns how many executions it handled.
   */
  async runDue(limit = 50): Promise<number> {
    const nowMs = this.d.clock.now().getTime();
    let handled = 0;
    for (const id of await this.d.approvals.claimDue(nowMs, this.d.leaseMs, limit)) {
      try {
        await this.expireOne(id);
        handled++;
      } catch (err) {
        // Left leased: it is tried again when the lease lapses.
        this.d.onError?.(`expiring the approvals of execution ${id}`, err);
      }
    }
    for (const id of await this.d.approvals.claimToNotify(nowMs, this.d.leaseMs, limit)) {
      try {
        await this.notifyOne(id, true);
        handled++;
      } catch (err) {
        this.d.onError?.(`notifying the approvers of execution ${id}`, err);
      }
    }
    return handled;
  }

  /**
   * Tells the approvers of every approval of the execution whose state they were not told yet.
   * `sweep`: the worker's sweep, the last word: with nobody to tell there (Slack off), the state
   * is recorded as told. Elsewhere a process without a notifier (an API-only process) leaves it
   * to the sweep, so a split deployment never marks a notice sent that nobody sent.
   */
  async notifyOne(executionId: string, sweep = false): Promise<void> {
    if (!sweep && this.d.notifier instanceof LateApprovalNotifier && !this.d.notifier.active) return;
    const approvals = await this.d.approvals.get(executionId);
    if (!approvals) return;
    const todo = unnotified(approvals);
    if (todo.length === 0) {
      await this.d.approvals.markNotified(approvals, approvals);
      return;
    }
    const execution = await this.d.repo.get(executionId);
    const incident = execution ? await this.d.incidents.get(execution.incident_id) : null;
    if (!execution || !incident) return;
    const told = new Map<string, ApprovalRecord['state']>();
    for (const r of todo) {
      const held = (await this.d.repo.getDeliveries(r.delivery_ids)).filter((x): x is Delivery => x !== null);
      const part = execution.audiences?.find((a) => a.key === r.audience_key);
      await this.d.notifier.notify({
        incident,
        execution,
        audience: {
          key: r.audience_key,
          name: part?.name ?? r.audience_key,
          visibility: part?.visibility ?? 'external',
          delivery_ids: part?.delivery_ids ?? r.delivery_ids,
          skipped: null,
          approval: viewOf(r),
        },
        approvers: { slack_user_ids: r.approvers.slack_user_ids },
        deliveries: held,
      });
      told.set(r.audience_key, r.state);
    }
    await retryOnConflict(
      async (n) => {
        const cur = n === 0 ? approvals : await this.d.approvals.get(executionId);
        if (!cur) return true;
        const next: ExecutionApprovals = {
          ...cur,
          audiences: cur.audiences.map((r) =>
            told.get(r.audience_key) === r.state ? { ...r, notified_state: r.state } : r,
          ),
        };
        return (await this.d.approvals.markNotified(cur, next)) ? true : LOST_RACE;
      },
      () => new DomainError('conflict', 'The approval kept changing while recording its notice.'),
    );
  }

  private async expireOne(executionId: string): Promise<void> {
    const result = await retryOnConflict(
      async () => {
        const approvals = await this.d.approvals.get(executionId);
        if (!approvals) return null;
        const outcome = expire(approvals, this.d.clock.now());
        if (!outcome) {
          // Claimed early (its lease) or decided meanwhile: back on the schedule as the record says.
          await this.d.approvals.settle(approvals);
          return null;
        }
        const execution = await this.d.repo.get(executionId);
        if (!execution) return null;
        return this.commit(execution, approvals, outcome, SYSTEM_ACTOR, false);
      },
      () => new DomainError('conflict', 'The approval kept changing while expiring it.'),
    );
    if (result) this.afterCommit(result);
  }

  /** One decision as one commit: LOST_RACE when anything it read changed meanwhile. */
  private async commit(
    execution: Execution,
    approvals: ExecutionApprovals,
    outcome: DecideOutcome,
    actor: Actor,
    asEffect: boolean,
  ): Promise<(ExecutionWithDeliveries & { released: Delivery[] }) | typeof LOST_RACE> {
    const nowDate = this.d.clock.now();
    const now = iso(nowDate);
    const all = await deliveriesOf(this.d.repo, execution);
    const byId = new Map(all.map((x) => [x.id, x]));
    const changes: { prev: Delivery; next: Delivery }[] = [];
    const releasing: Delivery[] = [];
    for (const r of outcome.decided)
      for (const id of r.delivery_ids) {
        const held = byId.get(id);
        if (!held || !isHeld(held.status)) continue; // cancelled meanwhile (its connection went)
        if (r.state === 'approved') releasing.push(held);
        else {
          const reason =
            r.state === 'expired' ? 'approval expired' : r.reason ? `rejected: ${r.reason}` : 'approval rejected';
          changes.push({ prev: held, next: mustTransition(transition.cancel(held, reason, nowDate)) });
        }
      }
    let threads: Threads = Object.assign(new Map<string, ThreadState>(), { revision: null });
    if (releasing.length > 0) {
      threads = await this.d.conversations.threads(execution.incident_id, [
        ...new Set(releasing.map((x) => x.connection_id)),
      ]);
      const place = conversationPlaces(threads);
      for (const held of releasing)
        changes.push({
          prev: held,
          next: mustTransition(transition.release(held, place(held.connection_id, held.id))),
        });
    }
    const changed = new Map(changes.map((c) => [c.next.id, c.next]));
    const deliveries = all.map((x) => changed.get(x.id) ?? x);
    const events = outcome.decided.map((r) =>
      newEvent(this.d.ids.next('event'), EVENT_OF[r.state as 'approved' | 'rejected' | 'expired'], now, actor, {
        execution_id: execution.id,
        audience: r.audience_key,
        deliveries: r.delivery_ids.length,
        ...(r.reason !== null ? { reason: r.reason } : {}),
      }),
    );
    const claim = nowDate.getTime();
    const ok = await this.d.approvals.commit({
      prev: approvals,
      next: outcome.next,
      deliveries: changes,
      threads,
      claim,
      events,
      ended: outcome.decided.map((r) => r.audience_id),
      tally: changes.some((c) => c.next.status === 'cancelled') ? await this.d.approvals.tally(execution.id) : {},
      at: now,
      nowMs: claim,
      ...(asEffect ? { effect: { kind: 'execution' as const, execution, deliveries, approvals: outcome.next } } : {}),
    });
    if (!ok) return LOST_RACE;
    return {
      execution,
      deliveries,
      approvals: outcome.next,
      released: changes.filter((c) => c.next.status === 'queued').map((c) => ({ ...c.next })),
    };
  }

  /** Queues what was released (the outbox covers a crash), then tells the approvers. */
  private afterCommit(result: ExecutionWithDeliveries & { released?: Delivery[] }): void {
    const released = result.released ?? [];
    delete result.released;
    for (const d of result.deliveries) if (d.status !== 'pending_approval') this.d.onDeliveryChanged?.(d);
    const claim = this.d.clock.now().getTime();
    const work = async () => {
      if (released.length > 0) await queueCommitted(this.d, { ...result.execution }, released, claim);
      await this.notifyOne(result.execution.id);
    };
    work().catch((err: unknown) => this.d.onError?.('after an approval decision (the worker sweep retries)', err));
  }

  /** Told of a new execution with held audiences: tells its approvers now (the sweep retries). */
  notifyLater(executionId: string): void {
    this.notifyOne(executionId).catch((err: unknown) =>
      this.d.onError?.('notifying approvers (the worker sweep retries)', err),
    );
  }
}

function mustTransition(t: transition.Transitioned): Delivery {
  if (transition.isRefused(t)) throw t;
  return t;
}
