import type { Actor } from '../domain/common/actor.js';
// A namespace: each status change reads as what it is (transition.requeue(…)).
import * as transition from '../domain/execution/delivery-state.js';
import type { Delivery } from '../domain/execution/execution.js';
import type { DispatchBatch, DispatchClaim, QueuedJob } from '../ports/index.js';
import {
  jobIdOf,
  jobsOfUnfinished,
  queuedJobOf,
  untilWritten,
  type DeliveryRecords,
  type DeliveryServiceDeps,
} from './delivery-common.js';
import { LOST_RACE, type Attempt as RaceAttempt } from './retry.js';

/**
 * Delivery administration: what is done to deliveries besides sending them — cancelling a gone
 * connection's, redelivering failed ones, handing them to the queue (dispatch jobs, the outbox
 * sweep). Sending is the engine's (delivery-engine.ts).
 */
export class DeliveryAdmin {
  constructor(
    private readonly d: Pick<DeliveryServiceDeps, 'repo' | 'queue' | 'pacer' | 'onDeliveryChanged' | 'onError'>,
    private readonly records: DeliveryRecords,
  ) {}

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
          const r = await this.records.cancelOne(d, reason);
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
   * A dispatch job's first step (docs/explanation/delivery-semantics.md): takes its deliveries from the
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
