import DataLoader from 'dataloader';
import { currentDeadline } from '../domain/common/unavailable.js';

/**
 * The most calls one batch carries. A batched script holds Redis for all its items at once, so
 * this bounds how long another client can wait behind one. The worker's default concurrency (50)
 * fits in one batch.
 */
export const TURN_BATCH_MAX = 64;

/**
 * Gathers the calls made during one turn of the event loop and runs them as one: `run` gets every
 * item asked for since the turn began, in order, and answers each (an Error answers that item
 * alone; a rejection answers them all). Used where the worker asks Redis the same thing once per
 * delivery (its record, its connection, its compare-and-set): fifty deliveries that finish their
 * sends in the same turn then cost one command instead of fifty. That is a round trip's worth of
 * client and server CPU per delivery, and the sends spend it nowhere else.
 *
 * The batch goes out on `setImmediate`, as ioredis' auto-pipelining does: after the I/O callbacks
 * of this turn (every reply and response that arrived together), never later than the commands
 * would have been written anyway. DataLoader does the gathering; its cache is off, since a record
 * read must be the stored one, not the one a turn before.
 *
 * A call made while serving a request runs alone, at once, as before: its command must race that
 * request's deadline (store/deadline.ts), which a batch sent from another context would not, and
 * the worker's calls must not fail because some request's deadline passed.
 */
export function turnBatched<I, O>(
  run: (items: readonly I[]) => Promise<readonly (O | Error)[]>,
  maxBatch = TURN_BATCH_MAX,
): (item: I) => Promise<O> {
  const loader = new DataLoader<I, O>(run, {
    cache: false,
    maxBatchSize: maxBatch,
    batchScheduleFn: (dispatch) => setImmediate(dispatch),
  });
  const alone = async (item: I): Promise<O> => {
    const [answer] = await run([item]);
    if (answer instanceof Error) throw answer;
    return answer as O;
  };
  return (item) => (currentDeadline() === undefined ? loader.load(item) : alone(item));
}

/**
 * A batch's stored values, each decoded on its own (missing ones as null): a value that does not
 * decode answers only its own call with the error, as it would have alone.
 */
export function decodedEach<T>(raws: readonly (string | null)[], decode: (raw: string) => T): (T | null | Error)[] {
  return raws.map((raw) => {
    if (raw === null) return null;
    try {
      return decode(raw);
    } catch (err) {
      return err instanceof Error ? err : new Error('a stored value could not be decoded');
    }
  });
}
