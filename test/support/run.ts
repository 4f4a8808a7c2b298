import { randomBytes } from 'node:crypto';

/**
 * Names of one test run and of one test file in it, which every key prefix a test takes
 * (uniquePrefix) starts with: `herald-test.<run>.<file>.` (dots: a prefix may not hold colons).
 * - The global setup picks the run's id and the test workers inherit it; it fails a run that
 *   leaves any key under the run's root on a shared Redis, without looking at anyone else's.
 * - The file setup (file-keys.ts) picks each file's id and deletes every key under the file's
 *   root once the file is done: whatever wrote them (the file's stores, its Heralds' BullMQ
 *   queues, a child process given one of its prefixes).
 * A process with neither (a tier without Redis) picks a run id of its own and no file id.
 */
export const RUN_ENV = 'HERALD_TEST_RUN';
export const FILE_ENV = 'HERALD_TEST_FILE';

export function runRoot(): string {
  process.env[RUN_ENV] ??= randomBytes(4).toString('hex');
  return `herald-test.${process.env[RUN_ENV]}`;
}

/** The calling test file's root when the file setup gave it one, else the run's. */
export function fileRoot(): string {
  const file = process.env[FILE_ENV];
  return file === undefined ? runRoot() : `${runRoot()}.${file}`;
}

/** SCAN pattern for every key under a root (all keys sit inside a `{prefix}` hash tag). */
export const underRoot = (root: string): string => `{${root}.*`;
