import { describe, expect, it } from 'vitest';
import { mapYielding } from '../../src/domain/common/map-yielding.js';

/** Holds the CPU for `ms` (a delivery's making, drawn out). */
const spin = (ms: number) => {
  const until = performance.now() + ms;
  while (performance.now() < until);
};

describe('mapYielding', () => {
  it('maps in order, letting other work run between slices of about 10 ms', async () => {
    let others = 0;
    let mapping = true;
    const other = () => {
      others++;
      if (mapping) setImmediate(other);
    };
    setImmediate(other);
    const out = await mapYielding(
      Array.from({ length: 40 }, (_, i) => i),
      (i) => {
        spin(1);
        return i * 2;
      },
    );
    mapping = false;
    expect(out).toEqual(Array.from({ length: 40 }, (_, i) => i * 2));
    // 40 ms of work in slices of 10 ms: other work ran in between, several times.
    expect(others).toBeGreaterThanOrEqual(3);
  });

  it('maps nothing to nothing', async () => {
    expect(await mapYielding([], () => 1)).toEqual([]);
  });
});
