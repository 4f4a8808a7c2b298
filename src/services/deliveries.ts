import type { Actor } from '../domain/common/actor.js';
import type { Delivery } from '../domain/execution/execution.js';
import type { DeliveryHint, DispatchBatch, DispatchClaim, ProcessOutcome, QueuedJob } from '../ports/index.js';
import { DeliveryAdmin } from './delivery-admin.js';
import { DeliveryRecords, type DeliveryServiceDeps } from './delivery-common.js';
import { DeliveryEngine } from './delivery-engine.js';

export {
  follows,
  jobIdOf,
  queuedJobOf,
  type DeliveryServiceDeps,
  type DeliveryTargets,
  type SendPacer,
} from './delivery-common.js';
export { THREAD_WAIT_DEFAULT_MS } from './delivery-conversation.js';

/**
 * The delivery use cases, as the worker, the execution service and the composition root see
 * them: sending one delivery (the engine, delivery-engine.ts) and administering many (cancel a
 * gone connection's, redeliver, hand to the queue: delivery-admin.ts), over one set of ports.
 */
export class DeliveryService {
  private readonly engine: DeliveryEngine;
  private readonly admin: DeliveryAdmin;

  constructor(d: DeliveryServiceDeps) {
    const records = new DeliveryRecords(d);
    this.admin = new DeliveryAdmin(d, records);
    this.engine = new DeliveryEngine(d, records, (id, reason) => this.admin.cancelForConnection(id, reason));
  }

  /** Sends one delivery: the use case behind every queue job (see DeliveryEngine.process). */
  process(deliveryId: string, hint?: DeliveryHint): Promise<ProcessOutcome> {
    return this.engine.process(deliveryId, hint);
  }

  /** Cancels the queued and retrying deliveries of a connection (deleted or disabled); their count. */
  cancelForConnection(connectionId: string, reason: string): Promise<number> {
    return this.admin.cancelForConnection(connectionId, reason);
  }

  /** Re-queues an execution's failed deliveries (redeliver); returns how many. */
  requeueFailed(deliveries: Delivery[], actor: Actor): Promise<number> {
    return this.admin.requeueFailed(deliveries, actor);
  }

  /** A dispatch job's first step: which of its deliveries are this worker's to send. */
  claimDispatch(batch: DispatchBatch): Promise<DispatchClaim> {
    return this.admin.claimDispatch(batch);
  }

  /** Puts deliveries on the queue, a job each (a dispatch job's hand-offs). */
  handOff(jobs: QueuedJob[]): Promise<void> {
    return this.admin.handOff(jobs);
  }

  /** Enqueues deliveries left in the outbox (committed, never confirmed on the queue); their count. */
  sweepOutbox(olderThanMs: number): Promise<number> {
    return this.admin.sweepOutbox(olderThanMs);
  }
}
