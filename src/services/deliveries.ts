import type { Actor } from '../domain/actor.js';
import { SYSTEM_ACTOR } from '../domain/actor.js';
import { iso } from '../domain/clock.js';
import { MAX_ATTEMPTS, pacingFor, retryDelayMs } from '../domain/delivery-policy.js';
import { isTerminal, type Attempt, type Delivery } from '../domain/execution.js';
import type { Incident } from '../domain/incident.js';
import { newEvent, type IncidentEvent } from '../domain/incident-event.js';
import type { ChannelSenders, Clock, DeliveryQueue, DeliveryTarget, ExecutionRepo, IdGenerator, OutboundMessage, Pacer, ProcessOutcome, SendResult } from '../ports.js';

export interface DeliveryTargets {
  /** The connection with decrypted secrets, or null when it no longer exists. */
  get(connectionId: string): Promise<DeliveryTarget | null>;
  /** Marks the connection disabled (health.state = disabled) with a reason. */
  disable(connectionId: string, reason: string): Promise<void>;
  /** Health bookkeeping after each attempt. */
  recordOutcome(connectionId: string, ok: boolean, error: string | null): Promise<void>;
}

export interface DeliveryServiceDeps {
  repo: ExecutionRepo;
  targets: DeliveryTargets;
  senders: ChannelSenders;
  pacer: Pacer;
  queue: DeliveryQueue;
  clock: Clock;
  ids: IdGenerator;
  random: () => number;
  getIncident(id: string): Promise<Incident | null>;
  appendEvents(incidentId: string, events: IncidentEvent[]): Promise<void>;
  publicUrl: string | null;
  /** Told after every change of a delivery (the Slack announcement's receipts hook in here). */
  onDeliveryChanged?: (d: Delivery) => void;
  /** Told of every attempt recorded (metrics). */
  onAttempt?: (d: Delivery, a: Attempt) => void;
}


/** The queue id of a delivery's job: its id, plus the redeliver round (queue ids must be unique). */
export const jobIdOf = (d: Pick<Delivery, 'id' | 'round'>): string => (d.round === 0 ? d.id : `${d.id}-r${d.round}`);

/**
 * Sends one delivery: the use case behind every queue job. Idempotent by construction — it reads
 * the delivery first and does nothing for a terminal one, so a job run twice (a worker killed after
 * sending, before acknowledging) never sends a delivered message again, and a cut-off attempt is
 * recorded as `interrupted` with `possible_duplicate`.
 */
export class DeliveryService {
  constructor(private readonly d: DeliveryServiceDeps) {}

  async process(deliveryId: string): Promise<ProcessOutcome> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const r = await this.tryProcess(deliveryId);
      if (r !== 'conflict') return r;
    }
    // Something keeps changing the delivery (cancel racing us): look again shortly.
    return { kind: 'delay', ms: 1000, reason: 'retry' };
  }

  private async tryProcess(deliveryId: string): Promise<ProcessOutcome | 'conflict'> {
    let current = await this.d.repo.getDelivery(deliveryId);
    if (!current || isTerminal(current.status)) return { kind: 'done', status: current?.status ?? 'cancelled' };

    const target = await this.d.targets.get(current.connection_id);
    if (!target || !target.enabled) {
      const reason = target ? 'connection disabled' : 'connection deleted';
      return (await this.cancelOne(current, reason)) ? { kind: 'done', status: 'cancelled' } : 'conflict';
    }

    if (current.sending_since !== null) {
      // The last attempt started and never finished (the worker died): it may have been received.
      const cut: Delivery = {
        ...current,
        status: 'retrying',
        sending_since: null,
        possible_duplicate: true,
        attempts: [...current.attempts, attemptRecord(iso(this.d.clock.now()), 'interrupted', null, 'the attempt was cut off (worker stopped); it may have been delivered')],
        rev: current.rev + 1,
      };
      if (!(await this.write(current, cut))) return 'conflict';
      this.d.onAttempt?.(cut, cut.attempts.at(-1)!);
      current = cut;
      if (current.attempts.length >= MAX_ATTEMPTS) return this.finishFailed(current, 'too many attempts');
    }

    const wait = await this.d.pacer.take(target.id, pacingFor(target.type, target.rateLimitPerMinute));
    if (wait > 0) return { kind: 'delay', ms: wait, reason: 'pacing' };

    const startedAt = this.d.clock.now();
    const sending: Delivery = { ...current, status: 'sending', sending_since: iso(startedAt), rev: current.rev + 1 };
    if (!(await this.write(current, sending))) return 'conflict';

    const incident = await this.d.getIncident(current.incident_id);
    const message: OutboundMessage = {
      deliveryId: current.id,
      executionId: current.execution_id,
      incident: {
        id: current.incident_id,
        title: incident?.title ?? '',
        severity: incident?.severity ?? '',
        status: incident?.status ?? '',
        url: this.d.publicUrl ? `${this.d.publicUrl.replace(/\/$/, '')}/v1/incidents/${current.incident_id}` : null,
      },
      content: current.content,
    };
    let result: SendResult;
    try {
      result = await sendVia(this.d.senders, target, message);
    } catch (e) {
      // A sender bug must not lose the delivery: treat it as a retryable failure.
      result = { outcome: 'retryable', httpStatus: null, providerCode: null, latencyMs: null, retryAfterMs: null, error: `sender error: ${(e as Error).message}`, ambiguous: true };
    }
    return this.record(sending, target, result);
  }

  private async record(sending: Delivery, target: DeliveryTarget, result: SendResult): Promise<ProcessOutcome> {
    const at = iso(this.d.clock.now());
    const attempt: Attempt = {
      at: sending.sending_since ?? at,
      outcome: result.outcome === 'delivered' ? 'delivered' : result.outcome === 'retryable' ? 'retryable_failure' : 'permanent_failure',
      http_status: result.httpStatus,
      provider_code: result.providerCode,
      latency_ms: result.latencyMs === null ? null : Math.round(result.latencyMs),
      retry_after_ms: result.outcome === 'retryable' ? result.retryAfterMs : null,
      error: result.outcome === 'delivered' ? null : result.error,
    };
    const attempts = [...sending.attempts, attempt];
    let next: Delivery;
    let outcome: ProcessOutcome;
    if (result.outcome === 'delivered') {
      next = { ...sending, status: 'delivered', attempts, delivered_at: at, finished_at: at, sending_since: null, rev: sending.rev + 1 };
      outcome = { kind: 'done', status: 'delivered' };
    } else if (result.outcome === 'retryable' && attempts.length < MAX_ATTEMPTS) {
      const delay = retryDelayMs(attempts.length, result.retryAfterMs, this.d.random);
      next = { ...sending, status: 'retrying', attempts, sending_since: null, possible_duplicate: sending.possible_duplicate || result.ambiguous, rev: sending.rev + 1 };
      outcome = { kind: 'delay', ms: delay, reason: 'retry' };
    } else {
      next = { ...sending, status: 'failed', attempts, finished_at: at, sending_since: null, rev: sending.rev + 1 };
      outcome = { kind: 'done', status: 'failed' };
    }
    // The worker holds the job, so only a cancel can race this write; the send already happened,
    // so its record wins over the cancel (retry the write on the latest state).
    for (let i = 0; i < 5 && !(await this.write(sending, next)); i++) {
      const latest = await this.d.repo.getDelivery(sending.id);
      if (!latest) break;
      sending = latest;
      next = { ...next, rev: latest.rev + 1 };
    }
    this.d.onAttempt?.(next, attempt);
    await this.d.targets.recordOutcome(target.id, result.outcome === 'delivered', result.outcome === 'delivered' ? null : result.error);
    if (next.status === 'failed') await this.onFailed(next, attempt.error ?? 'failed');
    if (result.outcome === 'permanent' && result.disable) {
      await this.d.targets.disable(target.id, result.disable);
      await this.cancelForConnection(target.id, 'connection disabled');
    }
    return outcome;
  }

  private async finishFailed(d: Delivery, error: string): Promise<ProcessOutcome> {
    const at = iso(this.d.clock.now());
    const failed: Delivery = { ...d, status: 'failed', finished_at: at, rev: d.rev + 1 };
    if (!(await this.write(d, failed))) return { kind: 'delay', ms: 500, reason: 'retry' };
    await this.onFailed(failed, error);
    return { kind: 'done', status: 'failed' };
  }

  private async onFailed(d: Delivery, error: string): Promise<void> {
    const event = newEvent(this.d.ids.next('event'), 'delivery.failed', iso(this.d.clock.now()), SYSTEM_ACTOR, {
      execution_id: d.execution_id,
      delivery_id: d.id,
      connection_id: d.connection_id,
      error,
    });
    await this.d.appendEvents(d.incident_id, [event]);
  }

  /**
   * Cancels the queued and retrying deliveries of a connection (deleted or disabled). One being
   * sent right now is left to finish: its outcome is recorded as it happened.
   */
  async cancelForConnection(connectionId: string, reason: string): Promise<number> {
    const ids = await this.d.repo.activeForConnection(connectionId);
    let cancelled = 0;
    const jobIds: string[] = [];
    for (const id of ids) {
      for (let i = 0; i < 5; i++) {
        const d = await this.d.repo.getDelivery(id);
        if (!d || isTerminal(d.status) || d.status === 'sending') break;
        if (await this.cancelOne(d, reason)) {
          cancelled++;
          jobIds.push(jobIdOf(d));
          break;
        }
      }
    }
    await this.d.queue.remove(jobIds);
    return cancelled;
  }

  private async cancelOne(d: Delivery, reason: string): Promise<boolean> {
    const at = iso(this.d.clock.now());
    const next: Delivery = {
      ...d,
      status: 'cancelled',
      finished_at: at,
      sending_since: null,
      attempts: [...d.attempts, attemptRecord(at, 'cancelled', null, reason)],
      rev: d.rev + 1,
    };
    const ok = await this.write(d, next);
    if (ok) this.d.onAttempt?.(next, next.attempts.at(-1)!);
    return ok;
  }

  private async write(prev: Delivery, next: Delivery): Promise<boolean> {
    const ok = await this.d.repo.updateDelivery(prev, next);
    if (ok) this.d.onDeliveryChanged?.(next);
    return ok;
  }

  /** Re-queues an execution's failed deliveries (redeliver); returns how many. */
  async requeueFailed(deliveries: Delivery[], _actor: Actor): Promise<number> {
    const jobs = [];
    for (const d of deliveries) {
      if (d.status !== 'failed') continue;
      const next: Delivery = { ...d, status: 'queued', finished_at: null, round: d.round + 1, rev: d.rev + 1 };
      if (await this.d.repo.updateDelivery(d, next, { outbox: true })) {
        this.d.onDeliveryChanged?.(next);
        jobs.push({ deliveryId: next.id, jobId: jobIdOf(next) });
      }
    }
    await this.d.queue.enqueue(jobs);
    await this.d.repo.markEnqueued(jobs.map((j) => j.deliveryId));
    return jobs.length;
  }

  /**
   * Enqueues deliveries left in the outbox (committed, never confirmed on the queue: the process
   * died between the two). Job ids are stable, so re-adding a job that did make it is a no-op.
   */
  async sweepOutbox(olderThanMs: number): Promise<number> {
    const ids = await this.d.repo.pendingEnqueue(olderThanMs);
    if (ids.length === 0) return 0;
    const ds = await this.d.repo.getDeliveries(ids);
    const jobs = ds.filter((d): d is Delivery => d !== null && !isTerminal(d.status)).map((d) => ({ deliveryId: d.id, jobId: jobIdOf(d) }));
    await this.d.queue.enqueue(jobs);
    await this.d.repo.markEnqueued(ids);
    return jobs.length;
  }
}

function attemptRecord(at: string, outcome: Attempt['outcome'], httpStatus: number | null, error: string | null): Attempt {
  return { at, outcome, http_status: httpStatus, provider_code: null, latency_ms: null, retry_after_ms: null, error };
}

/**
 * Dispatches to the sender of the target's type. TypeScript cannot correlate `senders[t.type]`
 * with `t` across the union; the mapped ChannelSenders type guarantees they match.
 */
function sendVia(senders: ChannelSenders, target: DeliveryTarget, message: OutboundMessage): Promise<SendResult> {
  // typescript-eslint judges this assertion redundant while tsc needs it (the correlated union).
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion
  const sender: { send(t: DeliveryTarget, m: OutboundMessage): Promise<SendResult> } = senders[target.type] as never;
  return sender.send(target, message);
}
