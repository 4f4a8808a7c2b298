import type { Delivery, Execution } from '../domain/execution/execution.js';
import type { DispatchBatch, ExecutionRepo } from '../ports/index.js';
import { follows } from './deliveries.js';

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

/** What queueing a committed execution needs (ExecutionServiceDeps supplies it). */
export interface QueueCommittedDeps {
  repo: Pick<ExecutionRepo, 'markDispatched'>;
  /** Puts an execution's new deliveries on the queue as dispatch jobs (DISPATCH_CHUNK deliveries each). */
  dispatch(batches: DispatchBatch[]): Promise<void>;
  /** Told when queueing failed after the commit (the outbox sweep then queues; logged). */
  onError?: (what: string, err: unknown) => void;
}

/**
 * Puts committed deliveries on the queue, waiting at most ENQUEUE_WAIT_MS: the execution is
 * committed with its outbox entries, so a worker's sweep queues whatever this does not, and the
 * 202 stays true. Answering 5xx here would invite a retry that sends everything twice, and
 * waiting on a Redis that just went away would answer late (BullMQ's own connection never gives
 * up a command); a late enqueue still lands, and job ids make it harmless.
 */
export async function queueCommitted(
  d: QueueCommittedDeps,
  execution: Execution,
  deliveries: Delivery[],
  /** The outbox score they were committed with: the execution's `created_at`, or an approval's time. */
  claim: number = Date.parse(execution.created_at),
): Promise<void> {
  const ids = deliveries.map((x) => x.id);
  const queued = d
    .dispatch(dispatchBatches(execution.incident_id, claim, deliveries))
    .then(() => d.repo.markDispatched(ids, claim))
    .then(
      () => true,
      (err: unknown) => {
        d.onError?.('queueing an execution (the outbox sweep will)', err);
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
    d.onError?.(
      'queueing an execution took too long (the outbox sweep will)',
      new Error(`not queued within ${ENQUEUE_WAIT_MS} ms`),
    );
}
