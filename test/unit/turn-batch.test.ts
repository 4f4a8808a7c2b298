import { describe, expect, it } from 'vitest';
import { openDeadline, withDeadline } from '../../src/domain/common/unavailable.js';
import { decodedEach, turnBatched } from '../../src/store/turn-batch.js';

/** A batched doubler that notes every batch it is given. */
function doubler(maxBatch?: number) {
  const batches: number[][] = [];
  const run = turnBatched(async (items: readonly number[]) => {
    batches.push([...items]);
    return items.map((n) => (n < 0 ? new Error(`negative: ${n}`) : n * 2));
  }, maxBatch);
  return { run, batches };
}

describe('turnBatched', () => {
  it('runs the calls of one turn as one batch, in order, and answers each its own', async () => {
    const { run, batches } = doubler();
    await expect(Promise.all([run(1), run(2), run(3)])).resolves.toEqual([2, 4, 6]);
    expect(batches).toEqual([[1, 2, 3]]);
  });

  it('gathers the calls made later in the same turn: after a microtask, from process.nextTick', async () => {
    const { run, batches } = doubler();
    // All before the batch goes out (setImmediate runs once the turn's callbacks are done).
    const answers = Promise.all([
      run(1),
      Promise.resolve().then(() => run(2)),
      new Promise<number>((resolve) => process.nextTick(() => resolve(run(3)))),
    ]);
    await expect(answers).resolves.toEqual([2, 4, 6]);
    expect(batches).toEqual([[1, 2, 3]]);
  });

  it('starts a new batch for calls made after the batch went out', async () => {
    const { run, batches } = doubler();
    await run(1);
    await run(2);
    expect(batches).toEqual([[1], [2]]);
  });

  it('an Error answers only its own call; a failed batch fails all of its calls', async () => {
    const { run } = doubler();
    const [a, b, c] = await Promise.allSettled([run(1), run(-1), run(3)]);
    expect(a).toEqual({ status: 'fulfilled', value: 2 });
    expect(b.status === 'rejected' && (b.reason as Error).message).toBe('negative: -1');
    expect(c).toEqual({ status: 'fulfilled', value: 6 });

    const failing = turnBatched(async (_: readonly number[]): Promise<number[]> => {
      throw new Error('Redis is away');
    });
    const all = await Promise.allSettled([failing(1), failing(2)]);
    expect(all.map((r) => r.status === 'rejected' && (r.reason as Error).message)).toEqual([
      'Redis is away',
      'Redis is away',
    ]);
  });

  it('splits a turn larger than the batch bound', async () => {
    const { run, batches } = doubler(2);
    await expect(Promise.all([1, 2, 3, 4, 5].map(run))).resolves.toEqual([2, 4, 6, 8, 10]);
    expect(batches).toEqual([[1, 2], [3, 4], [5]]);
  });

  it("runs a call made while serving a request alone, at once, so that it races the request's deadline", async () => {
    const { run, batches } = doubler();
    const deadline = openDeadline(60_000);
    try {
      const inRequest = withDeadline(deadline, () => Promise.all([run(1), run(2)]));
      const outside = Promise.all([run(3), run(4)]);
      await expect(inRequest).resolves.toEqual([2, 4]);
      await expect(outside).resolves.toEqual([6, 8]);
      expect(batches).toEqual([[1], [2], [3, 4]]);
    } finally {
      deadline.end();
    }
  });

  it('never answers from a cache: the same item asked twice is run twice', async () => {
    const { run, batches } = doubler();
    await Promise.all([run(7), run(7)]);
    await run(7);
    expect(batches).toEqual([[7, 7], [7]]);
  });
});

describe('decodedEach', () => {
  it('decodes each value on its own: missing ones are null, one that does not decode is its own error', () => {
    const out = decodedEach(['{"a":1}', null, '{not json', '{"a":2}'], (raw) => JSON.parse(raw) as { a: number });
    expect(out[0]).toEqual({ a: 1 });
    expect(out[1]).toBeNull();
    expect(out[2]).toBeInstanceOf(Error);
    expect(out[3]).toEqual({ a: 2 });
  });
});
