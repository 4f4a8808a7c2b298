import { describe, expect, it } from 'vitest';
import { createIdGenerator, isId } from '../../src/domain/common/ids.js';

/** Prefixed ULIDs from the batched random source (src/domain/common/ids.ts). */
describe('ids', () => {
  it('are well-formed, unique and sort by creation, also within one millisecond and past a batch of randomness', () => {
    const ids = createIdGenerator(() => 1_780_000_000_000);
    const made = Array.from({ length: 2000 }, () => ids.next('delivery'));
    for (const id of made) expect(isId('delivery', id)).toBe(true);
    expect(new Set(made).size).toBe(made.length);
    expect([...made].sort()).toEqual(made);
  });

  it('draw their random part afresh each millisecond, spread over all 32 symbols', () => {
    let ms = 1_780_000_000_000;
    const ids = createIdGenerator(() => ms++);
    const firstRandom = new Map<string, number>();
    const randomParts = new Set<string>();
    for (let i = 0; i < 3200; i++) {
      const random = ids.next('event').slice(4 + 10);
      randomParts.add(random);
      firstRandom.set(random[0]!, (firstRandom.get(random[0]!) ?? 0) + 1);
    }
    expect(randomParts.size).toBe(3200);
    // 32 symbols, ~100 each: every one appears, none is more than twice its share.
    expect(firstRandom.size).toBe(32);
    for (const n of firstRandom.values()) expect(n).toBeLessThan(200);
  });
});
