import { afterEach, describe, expect, it } from 'vitest';
import { CHILD_DEADLINE_MS, childEnv, freePort, spawnEntry, stopChild, type Child } from '../support/child.js';
import { dropPrefixAt, testRedisUrl, uniquePrefix } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/**
 * HERALD_MEMORY_TRIM_IDLE_MS through the built entry point: the trimmer is started, sees the loop
 * idle, and asks V8 for its collection through the inspector (runtime/memory-trim.ts; the unit
 * test proves the rule and that the collection shrinks the young generation).
 *
 * A burst's growth of the young generation depends on what survives, which a test cannot steer,
 * so the young generation is made large from the start instead, with V8's own start-up flag:
 * 16 MB semi-spaces, over the 8 MB growth the trimmer gives back.
 */
let child: Child | undefined;
const prefix = uniquePrefix('trim');
afterEach(async () => {
  await stopChild(child);
  child = undefined;
  // What the child wrote at start-up (its secret check, its queue), once it has stopped.
  await dropPrefixAt(testRedisUrl(), prefix);
});

interface TrimLine {
  msg: string;
  young_before: number;
  young_after: number;
}

const trimLines = (c: Child): TrimLine[] =>
  c
    .stdout()
    .split('\n')
    .filter((l) => l.includes('memory given back'))
    .map((l) => JSON.parse(l) as TrimLine);

describe('memory trim in a running Herald', () => {
  it('gives memory back once idle, through the inspector, and says so in the debug log', async () => {
    const port = await freePort();
    child = spawnEntry(
      'main',
      [],
      childEnv({
        // The test Redis and a test prefix: the file's keys are swept when it ends.
        REDIS_URL: testRedisUrl(),
        HERALD_KEY_PREFIX: prefix,
        PORT: String(port),
        HOST: '127.0.0.1',
        LOG_LEVEL: 'debug',
        HERALD_MEMORY_TRIM_IDLE_MS: '300',
      }),
      // Not in NODE_OPTIONS: Node refuses this flag there.
      ['--min-semi-space-size=16'],
    );
    const c = child;
    await waitFor(
      () => {
        if (c.proc.exitCode !== null) throw new Error(`exited early: ${c.stderr()}${c.stdout()}`);
        return trimLines(c).length > 0;
      },
      { timeoutMs: CHILD_DEADLINE_MS, intervalMs: 100, what: 'the idle trim line' },
    );
    const [line] = trimLines(c);
    expect(line?.young_before).toBeGreaterThanOrEqual(8 * 1024 * 1024);
    expect(c.stderr()).not.toMatch(/memory trim failed/);
    expect(c.stdout()).not.toMatch(/memory trim failed/);
  });
});
