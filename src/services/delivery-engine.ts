import { channelOf } from '../channels/index.js';
import { SYSTEM_ACTOR } from '../domain/common/actor.js';
import { iso } from '../domain/common/clock.js';
import { decideRetry, pacingFor, type PaceStep, type RetryDecision } from '../domain/execution/delivery-policy.js';
// A namespace: each status change reads as what it is (transition.recordDelivered(…)).
import * as transition from '../domain/execution/delivery-state.js';
import { isSendable, type Delivery } from '../domain/execution/execution.js';
import { nextHealth, sendVia, type ConnectionHealth } from '../domain/connection/connection.js';
import type { Incident } from '../domain/incident/incident.js';
import { incidentUrl } from '../domain/template/render.js';
import { newEvent, type IncidentEvent } from '../domain/incident/incident-event.js';
import type {
  DeliveryHint,
  DeliveryTarget,
  OutboundMessage,
  ProcessOutcome,
  SendResult,
  ThreadRoot,
} from '../ports/index.js';
import { follows, must, untilWritten, type DeliveryRecords, type DeliveryServiceDeps } from './delivery-common.js';
import { ConversationPlacer, THREAD_WAIT_DEFAULT_MS, type Place } from './delivery-conversation.js';
import { LOST_RACE, type Attempt as RaceAttempt } from './retry.js';
import { SingleFlight } from './single-flight.js';

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
 * The delivery engine: sends one delivery, the use case behind every queue job (administering
 * deliveries is delivery-admin.ts'). Idempotent by construction — it reads the delivery first and
 * does nothing for a terminal one, so a job run twice (a worker killed after sending, before
 * acknowledging) never sends a delivered message again, and a cut-off attempt is recorded as
 * `interrupted` with `possible_duplicate`. Every "not yet" (backoff, Retry-After, a pacing slot)
 * is kept on the record as `not_before`, so a job that runs early only waits again; so is the
 * start of an update's wait for its conversation's first message (`thread_wait`, see
 * delivery-conversation.ts), so a restarted worker keeps its bound.
 */
export class DeliveryEngine {
  /** Incident reads in flight, by id: the deliveries of one execute start together and share one. */
  private readonly incidentReads = new SingleFlight<string, Incident | null>();

  private readonly placer: ConversationPlacer;

  constructor(
    private readonly d: DeliveryServiceDeps,
    private readonly records: DeliveryRecords,
    /** Delivery administration's cancel, for a connection found dead (see record). */
    private readonly cancelForConnection: (connectionId: string, reason: string) => Promise<number>,
  ) {
    this.placer = new ConversationPlacer({
      repo: d.repo,
      conversations: d.conversations,
      clock: d.clock,
      threadWaitMs: d.threadWaitMs ?? THREAD_WAIT_DEFAULT_MS,
    });
  }

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
    // Finished, or held for an approval (a stray job must never send it: the approval queues it).
    if (!current || !isSendable(current.status)) return { kind: 'done', status: current?.status ?? 'cancelled' };
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
      return (await this.records.cancelOne(current, reason)) === 'cancelled'
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
    const place = await this.placer.place(current, target, reads.root);
    if ('wait' in place) {
      // Its conversation's first message is still being sent: look again later, without holding
      // a worker. The wait's start is recorded once, so its bound holds across restarts.
      if (!current.thread_wait) {
        const held = must(transition.holdForThread(current, place.wait.firstId, new Date(nowMs)));
        if (!(await this.d.repo.updateDelivery(current, held))) return LOST_RACE;
      }
      return { kind: 'delay', ms: place.wait.ms, reason: 'thread' };
    }
    const incident = await reads.incident;
    const sending: Delivery = {
      ...must(transition.startSending(current, this.d.clock.now(), place.waited)),
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
        !(await this.records.write(current, failed, {
          events: [this.failedEvent(failed, `${cutAttempt.error ?? ''} (${decision.reason})`)],
        }))
      )
        return LOST_RACE;
      this.d.onAttempt?.(failed, cutAttempt);
      return { kind: 'done', status: 'failed' };
    }
    const cut = must(transition.recordInterrupted(current, now));
    if (!(await this.records.write(current, cut))) return LOST_RACE;
    this.d.onAttempt?.(cut, cutAttempt);
    return cut;
  }

  /**
   * Paces the send and, when it may go now, marks the delivery `sending`, in one atomic step
   * (SendPacer.paceAndStart): `reserve` (when it holds no slot yet) then, if that slot is now,
   * `take` (see Pacer), then the record's compare-and-set.
   */
  private async paceAndStart(
    current: Delivery,
    sending: Delivery,
    target: DeliveryTarget,
  ): Promise<PaceStep | typeof LOST_RACE> {
    const rule = pacingFor(channelOf(target.type).pacing, target.rateLimitPerMinute);
    const step = await this.d.pacer.paceAndStart(current, sending, rule, !current.paced);
    if (step === null) return LOST_RACE;
    if (step.step === 'send') this.d.onDeliveryChanged?.(sending);
    return step;
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
      ...(d.public_status !== undefined ? { publicStatus: d.public_status } : {}),
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
        ? this.guarded('recording the conversation', () => this.placer.advance(delivered, place))
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
        return (await this.records.write(prev, next, { events })) ? undefined : LOST_RACE;
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

/** How soon a job whose delivery kept changing under it (DELIVERY_WRITE_ATTEMPTS lost races) runs again. */
const STILL_RACING_DELAY_MS = 1000;
