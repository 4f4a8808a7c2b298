import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

/**
 * src/runtime/v8-tuning.ts, in a process of its own (V8's flags are per process): under an
 * allocation rate that takes V8's default young generation to 32 MB, it stops growing at 8 MB, or
 * at 16 MB when two doublings come before the check after a collection (see the module); a size
 * the operator gave Node wins.
 */
const PROGRAM = `
import { getHeapSpaceStatistics } from 'node:v8';
if (process.env.TUNED === '1') await import(${JSON.stringify(new URL('../../src/runtime/v8-tuning.ts', import.meta.url).href)});
// A busy server's pattern: much short-lived garbage, and some of it surviving a while.
const keep = [];
for (let round = 0; round < 80; round++) {
  for (let i = 0; i < 20000; i++) keep.push({ text: 'x'.repeat(20) + i, pair: [i, i + 1] });
  keep.splice(0, keep.length - 50000);
  await new Promise((resolve) => setImmediate(resolve));
}
const young = getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size;
process.stdout.write(String(young));
`;

function youngGenerationMB(nodeArgs: string[], tuned = true): number {
  const r = spawnSync(process.execPath, [...nodeArgs, '--import', 'tsx', '--input-type=module', '-e', PROGRAM], { encoding: 'utf8', timeout: 120_000, env: { ...process.env, TUNED: tuned ? '1' : '0' } });
  if (r.status !== 0) throw new Error(`exit ${r.status}: ${r.stderr}`);
  return Number(r.stdout) / 2 ** 20;
}

describe('the heap settings', () => {
  it("cap the young generation below V8's own 32 MB", { timeout: 150_000 }, () => {
    // The workload does take V8's default to its maximum...
    expect(youngGenerationMB([], false)).toBe(32);
    // ...and the tuned process stops short of it.
    expect(youngGenerationMB([])).toBeLessThanOrEqual(16);
  });

  it("leave it alone when the operator sized it (node's own flag wins)", { timeout: 150_000 }, () => {
    expect(youngGenerationMB(['--max-semi-space-size=16'])).toBeGreaterThan(8);
  });
});
