import type { Actor } from '../domain/common/actor.js';
import { SYSTEM_ACTOR } from '../domain/common/actor.js';
import { iso } from '../domain/common/clock.js';
import {
  decideRetry,
  pacingFor,
  type PaceStep,
  type PacingRule,
  type RetryDecision,
} from '../domain/execution/delivery-policy.js';
// A namespace: each status change reads as what it is (transition.recordDelivered(…)).
import * as transition from '../domain/execution/delivery-state.js';
import { isTerminal, type Attempt, type Delivery } from '../domain/execution/execution.js';
import { conversationOf, nextHealth, sendVia, type ConnectionHealth } from '../domain/connection/connection.js';
import type { Incident } from '../domain/incident/incident.js';
import { incidentUrl } from '../domain/template/render.js';
import { newEvent, type IncidentEvent } from '../domain/incident/incident-event.js';
import type {
  ChannelSenders,
  Clock,
  ConversationRepo,
  ThreadRoot,
  DeliveryHint,
  DeliveryQueue,
  DeliveryTarget,
  DispatchBatch,
  DispatchClaim,
  QueuedJob,
  ExecutionRepo,
  IdGenerator,
  MessageAction,
  MessageRef,
  OutboundMessage,
  Pacer,
  ProcessOutcome,
  SendResult,
} from '../ports/index.js';
import { DELIVERY_WRITE_ATTEMPTS, LOST_RACE, retryOnConflict, type Attempt as RaceAttempt } from './retry.js';
import { SingleFlight } from './single-flight.js';

export interface DeliveryTargets {
  /** The connection with decrypted secrets, or null when it no longer exists. */
  get(connectionId: string): Promise<DeliveryTarget | null>;
  /** Marks the connection disabled (health.state = disabled) with a reason. */
  disable(connectionId: string, reason: string): Promise<void>;
  /** Health bookkeeping after each attempt. */
  recordOutcome(connectionId: string, ok: boolean, error: string | null): Promise<void>;
}

/**
 * A Pacer that can also run the send path's `reserve`-then-`take` as one step (one round trip
 * per delivery instead of two); without it the service makes the two calls.
 */
export interface SendPacer extends Pacer {
  paceSend?(connectionId: string, rule: PacingRule, reserveFirst: boolean): Promise<PaceStep>;
  /**
   * paceSend and, when the delivery may send now, its `sending` record written over `prev` by
   * compare-and-set (as ExecutionRepo.updateDelivery), as one atomic step: the last one before a
   * send in one round trip. Null when the stored record is not `prev`: then no slot or token is
   * taken either. Without it the service paces, then writes.
   */
  paceAndStart?(prev: Delivery, sending: Delivery, rule: PacingRule, reserveFirst: boolean): Promise<PaceStep | null>;
}

export interface DeliveryServiceDeps {
  repo: ExecutionRepo;
  targets: DeliveryTargets;
  senders: ChannelSenders;
  pacer: SendPacer;
  queue: DeliveryQueue;
  clock: Clock;
  ids: IdGenerator;
  random: () => number;
  getIncident(id: string): Promise<Incident | null>;
  conversations: ConversationRepo;
  publicUrl: string | null;
  /** Told after every change of a delivery (the Slack announcement's receipts hook in here). */
  onDeliveryChanged?: (d: Delivery) => void;
  /** Told of every attempt recorded (metrics). */
  onAttempt?: (d: Delivery, a: Attempt) => void;
  /**
   * Told when bookkeeping after a recorded attempt failed (connection health, disabling a dead
   * connection). The delivery's own record stands; the error is only reported (logged).
   */
  onError?: (what: string, err: unknown) => void;
}

/** The queue id of a delivery's job: its id, plus the redeliver round (queue ids must be unique). */
export const jobIdOf = (d: Pick<Delivery, 'id' | 'round'>): string => (d.round === 0 ? d.id : `${d.id}-r${d.round}`);

/** Whether sending `d` reads its conversation's first message: an update after the first. */
export const follows = (d: Delivery): boolean => (d.sequence ?? 1) > 1 && d.planned_action === undefined;

/** A delivery's queue job, with the hint that lets the worker read everything in one round trip. */
export const queuedJobOf = (d: Delivery): QueuedJob => ({
  deliveryId: d.id,
  jobId: jobIdOf(d),
  hint: { incidentId: d.incident_id, connectionId: d.connection_id, follows: follows(d) },
});

/** The queue jobs of those deliveries that exist and are not final yet (what a sweep or hand-off queues). */
const jobsOfUnfinished = (ds: (Delivery | null)[]): QueuedJob[] =>
  ds.filter((d): d is Delivery => d !== null && !isTerminal(d.status)).map(queuedJobOf);

/** What a send reads besides the delivery: started together, each met where it is needed. */
interface Reads {
  incidentId: string;
  connectionId: string;
  follows: boolean;
  target: Promise<DeliveryTarget | null>;
  incident: Promise<Incident | null>;
  root: Promise<ThreadRoot | null> | null;
}

/**
 * Sends one delivery: the use case behind every queue job. Idempotent by construction — it reads
 * the delivery first and does nothing for a terminal one, so a job run twice (a worker killed after
 * sending, before acknowledging) never sends a delivered message again, and a cut-off attempt is
 * recorded as `interrupted` with `possible_duplicate`. Every "not yet" (backoff, Retry-After, a
 * pacing slot) is kept on the record as `not_before`, so a job that runs early only waits again.
 */
export class DeliveryService {
  /** Incident reads in flight, by id: the deliveries of one execute start together and share one. */
  private readonly incidentReads = new SingleFlight<string, Incident | null>();

  constructor(private readonly d: DeliveryServiceDeps) {}

  async process(deliveryId: string, hint?: DeliveryHint): Promise<ProcessOutcome> {
    return untilWritten(
      () => this.tryProcess(deliveryId, hint),
      // Something keeps changing the delivery (cancel racing us): look again shortly.
      (): ProcessOutcome => ({ kind: 'delay', ms: STILL_RACING_DELAY_MS, reason: 'retry' }),
    );
  }

  /**
   * Starts the reads a send needs besides the delivery: its connection, its incident (for the
   * message) and, for an update, its conversation's first message (whether it is used depends on
   * the connection). Each answer, or failure, is met only where it is needed, as if read there.
   */
  private startReads(where: DeliveryHint): Reads {
    const reads: Reads = {
      ...where,
      target: this.d.targets.get(where.connectionId),
      incident: this.readIncident(where.incidentId),
      root: where.follows ? this.d.conversations.root(where.incidentId, where.connectionId) : null,
    };
    for (const p of [reads.target, reads.incident, reads.root]) p?.catch(() => undefined);
    return reads;
  }

  /**
   * The incident, read once for every delivery that asks while a read of it is under way: an
   * execute's deliveries start together (as many as the worker's concurrency), and each would
   * otherwise read the same record. A delivery may get the answer of a read sent a moment before
   * it asked: what it would have got had the reads gone out in one batch, as they do anyway.
   */
  private readIncident(id: string): Promise<Incident | null> {
    return this.incidentReads.run(id, () => this.d.getIncident(id));
  }

  private async tryProcess(deliveryId: string, hint: DeliveryHint | undefined): Promise<RaceAttempt<ProcessOutcome>> {
    // With the job's hint, everything is read in the delivery's own round trip.
    const early = hint ? this.startReads(hint) : null;
    let current = await this.d.repo.getDelivery(deliveryId);
    if (!current || isTerminal(current.status)) return { kind: 'done', status: current?.status ?? 'cancelled' };
    const reads =
      early &&
      early.incidentId === current.incident_id &&
      early.connectionId === current.connection_id &&
      early.follows === follows(current)
        ? early
        : this.startReads({
            incidentId: current.incident_id,
            connectionId: current.connection_id,
            follows: follows(current),
          });
    const target = await reads.target;
    if (!target || !target.enabled) {
      const reason = target ? 'connection disabled' : 'connection deleted';
      return (await this.cancelOne(current, reason)) === 'cancelled'
        ? { kind: 'done', status: 'cancelled' }
        : LOST_RACE;
    }

    if (current.sending_since !== null) {
      const r = await this.recordInterrupted(current);
      if (r === LOST_RACE || 'kind' in r) return r;
      current = r;
    }

    // Not before its time: a retry's backoff or Retry-After, or its reserved pacing slot.
    const nowMs = this.d.clock.now().getTime();
    if (current.not_before !== null) {
      const wait = Date.parse(current.not_before) - nowMs;
      if (wait > 0) return { kind: 'delay', ms: wait, reason: current.paced ? 'pacing' : 'retry' };
    }
    // Whatever can fail without sending happens before the delivery is marked `sending`, so a
    // crash here is never mistaken for a cut-off send.
    const place = await this.placeInConversation(current, target, reads.root);
    const incident = await reads.incident;
    const sending: Delivery = {
      ...must(transition.startSending(current, this.d.clock.now())),
      action: place.action,
      reply_to: place.thread,
    };
    // Pacing delays, never drops, and is no attempt. A delivery reserves its slot once and sleeps
    // until it; then, like any other, it takes a send token, waiting briefly if several slots fell
    // due together (workers woke late), so actual sends never outrun the rate. Only with a token
    // is it marked `sending`.
    const pace = await this.paceAndStart(current, sending, target);
    if (pace === LOST_RACE) return LOST_RACE;
    if (pace.step !== 'send') {
      // Its slot is reserved already (just now, or before): remember that, so it is not reserved
      // twice. Nothing a reader sees changed, so no listener is told.
      if (!current.paced) {
        const held = must(transition.holdForPacing(current, new Date(nowMs + pace.waitMs)));
        if (!(await this.d.repo.updateDelivery(current, held))) return LOST_RACE;
      }
      return { kind: 'delay', ms: pace.waitMs, reason: 'pacing' };
    }

    // Built only for a send: a delivery that must wait for pacing does not need it yet.
    const message = this.messageOf(current, incident, place);
    let result: SendResult;
    try {
      result = await sendVia(this.d.senders, target, message);
    } catch (e) {
      // A sender bug must not lose the delivery: treat it as a retryable failure.
      result = {
        outcome: 'retryable',
        httpStatus: null,
        providerCode: null,
        latencyMs: null,
        retryAfterMs: null,
        error: `sender error: ${(e as Error).message}`,
        ambiguous: true,
      };
    }
    return this.record(sending, target, result, place);
  }

  /**
   * Where this message goes in the incident's conversation with the connection (README "Living
   * updates"), decided when it is sent, since the conversation's first message may have been
   * delivered only just now: a correction or retraction does what it planned (edit, delete, or a
   * note); an update replies under the first message, or edits it in `edit` mode, or posts on its
   * own in `new_message` mode or while there is no first message yet.
   */
  private async placeInConversation(
    d: Delivery,
    target: DeliveryTarget,
    rootRead: Promise<ThreadRoot | null> | null,
  ): Promise<Place> {
    const mode = target.updateMode ?? 'thread';
    const threaded = mode !== 'new_message';
    if (d.planned_action === 'edit' || d.planned_action === 'delete')
      return { action: d.planned_action, target: d.target ?? null, thread: null, threaded };
    const alone: Place = { action: 'post', target: null, thread: null, threaded };
    const can = conversationOf(target);
    // The first message to this connection has nothing to continue (and needs no read).
    if (!threaded || (d.sequence ?? 1) <= 1 || !(can.thread || (mode === 'edit' && can.edit))) return alone;
    const root = await (rootRead ?? this.d.conversations.root(d.incident_id, d.connection_id));
    if (!root) return alone;
    if (mode === 'edit' && can.edit && (d.execution_kind ?? 'announcement') === 'announcement')
      return { action: 'edit', target: root.ref, thread: null, threaded };
    return can.thread ? { ...alone, thread: root.ref } : alone;
  }

  /**
   * The last attempt started and never finished (its worker died): it may have been received. It
   * is recorded as `interrupted` (an attempt of the budget) with `possible_duplicate`; our own
   * crash is no reason to back off, so the next attempt may go at once.
   */
  private async recordInterrupted(current: Delivery): Promise<Delivery | ProcessOutcome | typeof LOST_RACE> {
    const now = this.d.clock.now();
    const cutAttempt = transition.interruptedAttempt(now);
    const decision = decideRetry({
      ...transition.roundBudgetAfter(current, cutAttempt, now),
      retryAfterMs: 0,
      random: this.d.random,
    });
    if (!decision.retry) {
      const failed = must(transition.recordFailed(current, cutAttempt, now));
      if (
        !(await this.write(current, failed, {
          events: [this.failedEvent(failed, `${cutAttempt.error ?? ''} (${decision.reason})`)],
        }))
      )
        return LOST_RACE;
      this.d.onAttempt?.(failed, cutAttempt);
      return { kind: 'done', status: 'failed' };
    }
    const cut = must(transition.recordInterrupted(current, now));
    if (!(await this.write(current, cut))) return LOST_RACE;
    this.d.onAttempt?.(cut, cutAttempt);
    return cut;
  }

  /**
   * Paces the send and, when it may go now, marks the delivery `sending`: one atomic step where
   * the pacer offers it (SendPacer.paceAndStart, one round trip), otherwise `reserve`
   * (when it holds no slot yet) then, if that slot is now, `take` (see Pacer), then the write.
   */
  private async paceAndStart(
    current: Delivery,
    sending: Delivery,
    target: DeliveryTarget,
  ): Promise<PaceStep | typeof LOST_RACE> {
    const rule = pacingFor(target.type, target.rateLimitPerMinute);
    const reserveFirst = !current.paced;
    if (this.d.pacer.paceAndStart) {
      const step = await this.d.pacer.paceAndStart(current, sending, rule, reserveFirst);
      if (step === null) return LOST_RACE;
      if (step.step === 'send') this.d.onDeliveryChanged?.(sending);
      return step;
    }
    const step = await this.pace(target.id, rule, reserveFirst);
    if (step.step !== 'send') return step;
    return (await this.write(current, sending)) ? step : LOST_RACE;
  }

  private async pace(connectionId: string, rule: PacingRule, reserveFirst: boolean): Promise<PaceStep> {
    if (this.d.pacer.paceSend) return this.d.pacer.paceSend(connectionId, rule, reserveFirst);
    if (reserveFirst) {
      const wait = await this.d.pacer.reserve(connectionId, rule);
      if (wait > 0) return { step: 'reserved', waitMs: wait };
    }
    const wait = await this.d.pacer.take(connectionId, rule);
    return wait > 0 ? { step: 'take', waitMs: wait } : { step: 'send' };
  }

  private messageOf(d: Delivery, incident: Incident | null, place: Place): OutboundMessage {
    return {
      action: place.action,
      target: place.target,
      thread: place.thread,
      conversation: {
        sequence: d.sequence ?? 1,
        previousDeliveryId: d.previous_delivery_id ?? null,
        kind: d.execution_kind ?? 'announcement',
        targetDeliveryId: d.target_delivery_id ?? null,
        threaded: place.threaded,
      },
      deliveryId: d.id,
      executionId: d.execution_id,
      incident: {
        id: d.incident_id,
        title: incident?.title ?? '',
        severity: incident?.severity ?? '',
        status: incident?.status ?? '',
        url: incidentUrl(this.d.publicUrl, d.incident_id),
      },
      content: d.content,
    };
  }

  private async record(
    sending: Delivery,
    target: DeliveryTarget,
    result: SendResult,
    place: Place,
  ): Promise<ProcessOutcome> {
    const now = this.d.clock.now();
    const attempt = transition.sendAttempt(sending, result, now);
    let next: Delivery;
    let outcome: ProcessOutcome;
    let events: IncidentEvent[] = [];
    if (result.outcome === 'delivered') {
      next = {
        ...must(transition.recordDelivered(sending, attempt, now)),
        message: place.action === 'delete' ? null : (result.message ?? null),
      };
      outcome = { kind: 'done', status: 'delivered' };
    } else {
      const decision: RetryDecision =
        result.outcome === 'retryable'
          ? decideRetry({
              ...transition.roundBudgetAfter(sending, attempt, now),
              retryAfterMs: result.retryAfterMs,
              random: this.d.random,
            })
          : { retry: false, reason: '' };
      if (decision.retry) {
        const ambiguous = result.outcome === 'retryable' && result.ambiguous;
        next = must(
          transition.recordRetry(sending, attempt, {
            notBefore: new Date(now.getTime() + decision.delayMs),
            ambiguous,
          }),
        );
        outcome = { kind: 'delay', ms: decision.delayMs, reason: 'retry' };
      } else {
        next = must(transition.recordFailed(sending, attempt, now));
        outcome = { kind: 'done', status: 'failed' };
        events = [this.failedEvent(next, decision.reason ? `${result.error} (${decision.reason})` : result.error)];
      }
    }
    // Bookkeeping about the connection: its failure must not change what happened to the
    // delivery, so it runs beside the record's write (the two share a round trip) and never throws.
    // A success on a connection that was healthy when this send read it changes nothing, so the
    // common case costs no read-modify-write of the connection. (Had another delivery failed in
    // between, that failure stands until the connection's next success: the same order of
    // events a write here could have met.)
    const ok = result.outcome === 'delivered';
    const health = healthChanges(target.health, ok ? { ok: true } : { ok: false, error: result.error })
      ? this.guarded('recording connection health', () =>
          this.d.targets.recordOutcome(target.id, ok, ok ? null : result.error),
        )
      : Promise.resolve();
    // A delivered message's place in the conversation is what was sent, whatever the record's
    // write meets: it is written beside that write too (the same round trip), not after it.
    const delivered = next;
    const conversation =
      result.outcome === 'delivered'
        ? this.guarded('recording the conversation', () => this.advanceConversation(delivered, place))
        : Promise.resolve();
    // A connection found dead is disabled before the failure is written, so whoever sees the
    // delivery failed (an execution's status, a poller) also sees the connection disabled; its
    // health is written first, so the disabled state is the one that stays.
    const disable = result.outcome === 'permanent' ? result.disable : undefined;
    if (disable) {
      await health;
      await this.guarded('disabling a dead connection', () => this.d.targets.disable(target.id, disable));
    }
    // The worker holds the job, so only a cancel can race this write; the send already happened,
    // so its record wins over the cancel (retry the write on the latest state). Should it keep
    // losing, or the delivery be gone, the attempt is still reported and the outcome stands.
    let prev = sending;
    await untilWritten(
      async (n): Promise<RaceAttempt<void>> => {
        if (n > 0) {
          const latest = await this.d.repo.getDelivery(sending.id);
          if (!latest) return;
          prev = latest;
          next = transition.supersede(next, latest);
        }
        return (await this.write(prev, next, { events })) ? undefined : LOST_RACE;
      },
      () => undefined,
    );
    this.d.onAttempt?.(next, attempt);
    await health;
    await conversation;
    if (disable)
      await this.guarded("cancelling a disabled connection's deliveries", () =>
        this.cancelForConnection(target.id, 'connection disabled'),
      );
    return outcome;
  }

  /**
   * A delivered update that started the conversation becomes its first message (the first
   * recorded stays); a retracted first message is forgotten, so the next update starts afresh.
   */
  private async advanceConversation(d: Delivery, place: Place): Promise<void> {
    if (
      place.action === 'post' &&
      place.thread === null &&
      d.message &&
      (d.execution_kind ?? 'announcement') === 'announcement'
    ) {
      await this.d.conversations.startIfNone(d.incident_id, d.connection_id, { ref: d.message, deliveryId: d.id });
    } else if (place.action === 'delete' && d.target_delivery_id) {
      await this.d.conversations.forget(d.incident_id, d.connection_id, d.target_delivery_id);
    }
  }

  private failedEvent(d: Delivery, error: string): IncidentEvent {
    return newEvent(this.d.ids.next('event'), 'delivery.failed', iso(this.d.clock.now()), SYSTEM_ACTOR, {
      execution_id: d.execution_id,
      delivery_id: d.id,
      connection_id: d.connection_id,
      error,
    });
  }

  private async guarded(what: string, fn: () => Promise<unknown>): Promise<void> {
    try {
      await fn();
    } catch (err) {
      this.d.onError?.(what, err);
    }
  }

  /**
   * Cancels the queued and retrying deliveries of a connection (deleted or disabled). One being
   * sent right now is left to finish: its outcome is recorded as it happened. The pacing slots
   * they held are forgotten with them, so a re-enabled connection does not wait for ghosts.
   */
  async cancelForConnection(connectionId: string, reason: string): Promise<number> {
    const ids = await this.d.repo.activeForConnection(connectionId);
    let cancelled = 0;
    const jobIds: string[] = [];
    for (const id of ids) {
      const jobId = await untilWritten(
        async (): Promise<RaceAttempt<string | null>> => {
          const d = await this.d.repo.getDelivery(id);
          // Gone, or being sent right now: that one is left to finish.
          if (!d || d.status === 'sending') return null;
          const r = await this.cancelOne(d, reason);
          return r === 'cancelled' ? jobIdOf(d) : r === 'refused' ? null : LOST_RACE;
        },
        () => null,
      );
      if (jobId !== null) {
        cancelled++;
        jobIds.push(jobId);
      }
    }
    await this.d.queue.remove(jobIds);
    await this.d.pacer.reset(connectionId);
    return cancelled;
  }

  /** Cancels `d` as read: refused when it is terminal already, LOST_RACE when it changed since. */
  private async cancelOne(d: Delivery, reason: string): Promise<'cancelled' | 'refused' | typeof LOST_RACE> {
    const next = transition.cancel(d, reason, this.d.clock.now());
    if (transition.isRefused(next)) return 'refused';
    if (!(await this.write(d, next))) return LOST_RACE;
    this.d.onAttempt?.(next, next.attempts.at(-1)!);
    return 'cancelled';
  }

  private async write(prev: Delivery, next: Delivery, opts: { events?: IncidentEvent[] } = {}): Promise<boolean> {
    const ok = await this.d.repo.updateDelivery(prev, next, opts);
    if (ok) this.d.onDeliveryChanged?.(next);
    return ok;
  }

  /**
   * Re-queues an execution's failed deliveries (redeliver); returns how many. Each starts a new
   * round with a fresh budget — MAX_ATTEMPTS attempts within the retry window, counted from its
   * first new attempt. Earlier attempts stay on record, and `possible_duplicate` stays if set.
   */
  async requeueFailed(deliveries: Delivery[], _actor: Actor): Promise<number> {
    const jobs = [];
    for (const d of deliveries) {
      // Only a failed delivery is redelivered; any other is left as it is.
      const next = transition.requeue(d);
      if (transition.isRefused(next)) continue;
      if (await this.d.repo.updateDelivery(d, next, { outbox: true })) {
        this.d.onDeliveryChanged?.(next);
        jobs.push(queuedJobOf(next));
      }
    }
    try {
      await this.d.queue.enqueue(jobs);
      await this.d.repo.markEnqueued(jobs.map((j) => j.deliveryId));
    } catch (err) {
      // Committed with their outbox entries: a worker's sweep queues them (see execute).
      this.d.onError?.('queueing redelivered deliveries (the outbox sweep will)', err);
    }
    return jobs.length;
  }

  /**
   * A dispatch job's first step (README "Delivery semantics"): takes its deliveries from the
   * outbox. Those it takes no job, sweep or other worker can be sending, so the worker may send
   * them as if it held each one's own job; the rest are given jobs of their own (`handOff`), as
   * the outbox sweep gives any delivery it finds: job ids are stable, so one queued already is
   * not queued twice. A worker that died half-way through a batch leaves the job to be run again
   * after its lock expires: the run takes nothing and hands every delivery not yet final on.
   */
  async claimDispatch(batch: DispatchBatch): Promise<DispatchClaim> {
    const taken = new Set(
      await this.d.repo.claimOutbox(
        batch.deliveries.map((x) => x.deliveryId),
        batch.claim,
      ),
    );
    const mine: QueuedJob[] = [];
    const rest: string[] = [];
    for (const x of batch.deliveries) {
      // A new delivery's job id is its own id (round 0, see jobIdOf).
      if (taken.has(x.deliveryId))
        mine.push({
          deliveryId: x.deliveryId,
          jobId: x.deliveryId,
          hint: { incidentId: batch.incidentId, connectionId: x.connectionId, follows: x.follows },
        });
      else rest.push(x.deliveryId);
    }
    const theirs = jobsOfUnfinished(await this.d.repo.getDeliveries(rest));
    return { mine, theirs };
  }

  /** Puts deliveries on the queue, a job each (a dispatch job's hand-offs). */
  handOff(jobs: QueuedJob[]): Promise<void> {
    return this.d.queue.enqueue(jobs);
  }

  /**
   * Enqueues deliveries left in the outbox (committed, never confirmed on the queue: the process
   * died between the two). Job ids are stable, so re-adding a job that did make it is a no-op.
   */
  async sweepOutbox(olderThanMs: number): Promise<number> {
    const ids = await this.d.repo.takeOutbox(olderThanMs);
    if (ids.length === 0) return 0;
    const ds = await this.d.repo.getDeliveries(ids);
    const jobs = jobsOfUnfinished(ds);
    await this.d.queue.enqueue(jobs);
    await this.d.repo.markEnqueued(ids);
    return jobs.length;
  }
}

/** Whether an outcome moves a connection's health as read (the state, the streak or the error). */
function healthChanges(seen: ConnectionHealth, outcome: { ok: true } | { ok: false; error: string }): boolean {
  const after = nextHealth(seen, outcome);
  return (
    after.state !== seen.state ||
    after.consecutive_failures !== seen.consecutive_failures ||
    after.last_error !== seen.last_error
  );
}

/** Where a message goes in its conversation (see placeInConversation). */
interface Place {
  action: MessageAction;
  target: MessageRef | null;
  thread: MessageRef | null;
  threaded: boolean;
}

/** How soon a job whose delivery kept changing under it (DELIVERY_WRITE_ATTEMPTS lost races) runs again. */
const STILL_RACING_DELAY_MS = 1000;

/**
 * A transition the service only asks for where it is legal (it read the status first): a refusal
 * means the record is not what the machine allows, so the job fails loudly instead of writing it.
 */
function must(t: transition.Transitioned): Delivery {
  if (transition.isRefused(t)) throw t;
  return t;
}

class StillRacing extends Error {}

/**
 * retryOnConflict with a delivery's bound (DELIVERY_WRITE_ATTEMPTS); a writer that keeps losing
 * does not throw but falls back to `giveUp` (look again later, or let the record stand).
 */
async function untilWritten<T>(attempt: (n: number) => Promise<RaceAttempt<T>>, giveUp: () => T): Promise<T> {
  try {
    return await retryOnConflict(attempt, () => new StillRacing(), { attempts: DELIVERY_WRITE_ATTEMPTS });
  } catch (err) {
    if (err instanceof StillRacing) return giveUp();
    throw err;
  }
}
