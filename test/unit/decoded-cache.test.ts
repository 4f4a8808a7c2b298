import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isShared } from '../../src/domain/common/shared-record.js';
import { presentPage, pageJson } from '../../src/http/presenters/page.js';
import { DecodedCache } from '../../src/store/decoded-cache.js';

interface Rec {
  id: string;
  n: number;
  tags: string[];
  by: { name: string };
}

const decodeCounting = () => {
  const calls = { n: 0 };
  const cache = new DecodedCache<Rec>(3, (text) => {
    calls.n++;
    return JSON.parse(text) as Rec;
  });
  return { cache, calls };
};
const text = (id: string, n: number) => JSON.stringify({ id, n, tags: ['a'], by: { name: 'x' } });

describe('DecodedCache (store/decoded-cache.ts)', () => {
  it('hands back the same record for the same text, and decodes a changed text anew', () => {
    const { cache, calls } = decodeCounting();
    const a = cache.get('r1', text('r1', 1));
    expect(cache.get('r1', text('r1', 1))).toBe(a);
    expect(calls.n).toBe(1);
    const b = cache.get('r1', text('r1', 2));
    expect(b).not.toBe(a);
    expect(b.n).toBe(2);
    expect(calls.n).toBe(2);
    // The older text again is a change too: never a stale record.
    expect(cache.get('r1', text('r1', 1)).n).toBe(1);
  });

  it('shares its records frozen, with what they hold: a change in place throws', () => {
    const { cache } = decodeCounting();
    const r = cache.get('r1', text('r1', 1));
    expect(isShared(r)).toBe(true);
    expect(() => {
      (r as { n: number }).n = 5;
    }).toThrow(TypeError);
    expect(() => r.tags.push('b')).toThrow(TypeError);
    expect(() => {
      r.by.name = 'y';
    }).toThrow(TypeError);
  });

  it('keeps at most `max` records, dropping the oldest first', () => {
    const { cache, calls } = decodeCounting();
    for (const id of ['r1', 'r2', 'r3', 'r4']) cache.get(id, text(id, 1));
    expect(calls.n).toBe(4);
    cache.get('r4', text('r4', 1));
    cache.get('r2', text('r2', 1));
    expect(calls.n).toBe(4);
    cache.get('r1', text('r1', 1)); // dropped when r4 came
    expect(calls.n).toBe(5);
  });
});

describe('pageJson (http/presenters/page.ts)', () => {
  it('is exactly JSON.stringify of presentPage, from items written as JSON', () => {
    const item = fc.record({
      id: fc.string(),
      n: fc.integer(),
      note: fc.option(fc.string(), { nil: null }),
      tags: fc.array(fc.string()),
    });
    fc.assert(
      fc.property(
        fc.array(item, { maxLength: 30 }),
        fc.option(fc.record({ offset: fc.nat() }), { nil: null }),
        fc.integer({ min: 1, max: 100 }),
        (data, nextCursor, limit) => {
          const page = { data, nextCursor };
          const req = { limit, cursor: null };
          const present = (x: (typeof data)[number]) => ({ id: x.id, n: x.n, note: x.note, tags: x.tags });
          expect(pageJson(page, req, (x) => JSON.stringify(present(x)))).toBe(
            JSON.stringify(presentPage(page, req, present)),
          );
        },
      ),
    );
  });
});
