import type { PaceStep, PacingRule } from '../domain/execution/delivery-policy.js';
// A namespace: each status change reads as what it is (transition.cancel(…)).
import * as transition from '../domain/execution/delivery-state.js';
import { isSendable, type Attempt, type Delivery } from '../domain/execution/execution.js';
import type { Incident } from '../domain/incident/incident.js';
import type { IncidentEvent } from '../domain/incident/incident-event.js';
import type {
  ChannelSenders,
  Clock,
  ConversationRepo,
  DeliveryQueue,
  DeliveryTarget,
  ExecutionRepo,
  IdGenerator,
  Pacer,
  QueuedJob,
} from '../ports/index.js';
import { DELIVERY_WRITE_ATTEMPTS, LOST_RACE, retryOnConflict, type Attempt as RaceAttempt } from './retry.js';

/**
 * What the delivery engine (delivery-engine.ts) and delivery administration (delivery-admin.ts)
 * share: their dependencies, the queue jobs of a delivery, and the guarded writes of its record.
 */

export interface DeliveryTargets {
  /** The connection with decrypted secrets, or null when it no longer exists. */
  get(connectionId: string): Promise<DeliveryTarget | null>;
  /** Marks the connection disabled (health.state = disabled) with a reason. */
  disable(connectionId: string, reason: string): Promise<void>;
  /** Health bookkeeping after each attempt. */
  recordOutcome(connectionId: string, ok: boolean, error: string | null): Promise<void>;
}

/**
 * A Pacer that also runs the send path's steps as one each: the engine's one way to pace a send
 * (the Redis adapter runs each as one script, one round trip).
 */
export interface SendPacer extends Pacer {
  /** `reserve` (when `reserveFirst`: the delivery holds no slot yet) then, only if that slot is now, `take`. */
  paceSend(connectionId: string, rule: PacingRule, reserveFirst: boolean): Promise<PaceStep>;
  /**
   * paceSend and, when the delivery may send now, its `sending` record written over `prev` by
   * compare-and-set (as ExecutionRepo.updateDelivery), as one atomic step: the last one before a
   * send. Null when the stored record is not `prev`: then no slot or token is taken either.
   */
  paceAndStart(prev: Delivery, sending: Delivery, rule: PacingRule, reserveFirst: boolean): Promise<PaceStep | null>;
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
  /**
   * HERALD_THREAD_WAIT_MS: how long an update waits for its conversation's first message while
   * that one is still being sent (0: it does not wait). Default THREAD_WAIT_DEFAULT_MS.
   */
  threadWaitMs?: number;
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

/**
 * The queue jobs of those deliveries that exist and are not final yet (what a sweep or hand-off
 * queues). One held for an approval is not queued: only its approval releases it.
 */
export const jobsOfUnfinished = (ds: (Delivery | null)[]): QueuedJob[] =>
  ds.filter((d): d is Delivery => d !== null && isSendable(d.status)).map(queuedJobOf);

/** The delivery record's writes, with the listeners told of each change. */
export class DeliveryRecords {
  constructor(private readonly d: Pick<DeliveryServiceDeps, 'repo' | 'clock' | 'onDeliveryChanged' | 'onAttempt'>) {}

  async write(prev: Delivery, next: Delivery, opts: { events?: IncidentEvent[] } = {}): Promise<boolean> {
    const ok = await this.d.repo.updateDelivery(prev, next, opts);
    if (ok) this.d.onDeliveryChanged?.(next);
    return ok;
  }

  /** Cancels `d` as read: refused when it is terminal already, LOST_RACE when it changed since. */
  async cancelOne(d: Delivery, reason: string): Promise<'cancelled' | 'refused' | typeof LOST_RACE> {
    const next = transition.cancel(d, reason, this.d.clock.now());
    if (transition.isRefused(next)) return 'refused';
    if (!(await this.write(d, next))) return LOST_RACE;
    this.d.onAttempt?.(next, next.attempts.at(-1)!);
    return 'cancelled';
  }
}

/**
 * A transition the service only asks for where it is legal (it read the status first): a refusal
 * means the record is not what the machine allows, so the job fails loudly instead of writing it.
 */
export function must(t: transition.Transitioned): Delivery {
  if (transition.isRefused(t)) throw t;
  return t;
}

class StillRacing extends Error {}

/**
 * retryOnConflict with a delivery's bound (DELIVERY_WRITE_ATTEMPTS); a writer that keeps losing
 * does not throw but falls back to `giveUp` (look again later, or let the record stand).
 */
export async function untilWritten<T>(attempt: (n: number) => Promise<RaceAttempt<T>>, giveUp: () => T): Promise<T> {
  try {
    return await retryOnConflict(attempt, () => new StillRacing(), { attempts: DELIVERY_WRITE_ATTEMPTS });
  } catch (err) {
    if (err instanceof StillRacing) return giveUp();
    throw err;
  }
}
