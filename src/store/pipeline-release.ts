import type { ChainableCommander } from 'ioredis';
import type { RedisClient } from './redis-client.js';

/**
 * What ioredis keeps on a pipeline object after it has settled: its commands, their replies and
 * its own settled promise (which holds the result array). Not part of ioredis' typed interface
 * (`_queue` and `_result` are private), so named here, once.
 */
interface PipelineInternals {
  _queue: unknown[];
  _result: unknown[];
  promise: Promise<unknown> | null;
  resolve: (result: unknown) => void;
  reject: (error: Error) => void;
  isCluster: boolean;
}

const noop = (): void => undefined;

/** Lets a settled pipeline's commands, replies and promise go (see releaseSettledPipelines). */
function release(internals: PipelineInternals): void {
  internals._queue = [];
  internals._result = [];
  internals.promise = null;
  internals.resolve = noop;
  internals.reject = noop;
}

/**
 * Makes every pipeline `client.pipeline()` creates let go of its commands, replies and promise
 * once it has settled. Auto-pipelining (request connections) creates one such pipeline per batch
 * of commands: thousands a second under load.
 *
 * Why: a finished pipeline is garbage, but ioredis leaves it pointing at everything it carried.
 * V8's young-generation collection (the scavenger) keeps alive whatever an old-generation object
 * points at, dead or not, until the next full collection. So once a pipeline object happens to
 * be promoted, the commands, replies and promises of the batches that follow it are kept, copied
 * and promoted too. Measured on Node 24 with `--trace-gc-nvp` (docs/performance.md): with 64
 * concurrent reads, 10 % of everything a read allocated was promoted, 4–5 MB per scavenge, and
 * each scavenge stopped the process for 4–6 ms instead of under 1 ms. Those pauses were the
 * read p99. With the references dropped: 0.8 MB per scavenge over Herald's read and list loads,
 * pauses of 1.7 ms on average; a plain ioredis loop of 64 concurrent auto-pipelined MGETs went
 * from 10.6 to 0.2 MB per scavenge and from ~150,000 to ~180,000–200,000 commands a second.
 *
 * Only once exec has fulfilled: ioredis fulfils a pipeline once, after every command has answered
 * (Pipeline.fillResult counts the replies down; a Cluster redirection re-sends before that), and
 * hands callers a copy of the results, so nothing reads these fields afterwards. The queue and
 * results become empty arrays (so `length` still reads 0); a pipeline is not run twice (ioredis
 * refuses that for MULTI).
 *
 * A rejected pipeline is left as it is. A rejection does not wait for the commands: ioredis
 * rejects a pipeline it cannot route or finish sending (a Cluster without a slot map, keys across
 * slots, a HIMPORT preparation or send that fails part-way), and every command already sent still
 * reports its reply, or its connection error once the connection closes, to fillResult, which
 * reads `_queue[position]`. Emptied, that threw a TypeError for each late command, each one an
 * unhandled rejection. Failed pipelines are rare; keeping one until the next full collection
 * costs nothing worth saving.
 *
 * Cluster pipelines are left alone too. When a node fails, a Cluster pipeline re-runs itself
 * (Pipeline.fillResult: connectionClosed, TRYAGAIN, MOVED call exec again) and may fulfil from one
 * round while commands of another still report to fillResult; ioredis tolerates those late reports
 * only because its queue is still there. Emptied, each threw a TypeError as an unhandled rejection
 * (seen when a Cluster master was killed).
 */
export function releaseSettledPipelines(client: RedisClient): void {
  const create = client.pipeline.bind(client);
  client.pipeline = (commands?: unknown[][]): ChainableCommander => {
    const pipeline = create(commands);
    const exec = pipeline.exec.bind(pipeline);
    const internals = pipeline as unknown as PipelineInternals;
    if (internals.isCluster) return pipeline;
    pipeline.exec = (...args: Parameters<ChainableCommander['exec']>) => {
      const settled = exec(...args);
      // A branch of its own: the caller still gets the result or the failure. The failure side
      // keeps everything (see above) and only marks this branch's rejection as handled, so an
      // ignored failed exec raises no unhandled-rejection warning; Herald awaits every exec,
      // which the lint's no-floating-promises rule holds it to. (Unnamed, as every callback on
      // a path each command takes: StallWatch in domain/common/unavailable.ts says why.)
      settled.then(() => release(internals), noop);
      return settled;
    };
    return pipeline;
  };
}
