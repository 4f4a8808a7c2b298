import { randomBytes } from 'node:crypto';
import { afterAll } from 'vitest';
import { testRedisUrl, sweepRoot } from './redis.js';
import { FILE_ENV, fileRoot } from './run.js';

/**
 * A setup file of the tiers that use the shared test Redis (vitest.config.ts): gives the test file
 * an id, so every prefix it takes (uniquePrefix) sits under the file's root, and deletes every key
 * under that root once the file is done. The hook is registered before the file's own, so it runs
 * after them (vitest runs after-hooks in reverse order): after the file has closed its Heralds,
 * queues and child processes, whose late writes (a BullMQ marker, a retry scheduled on the way
 * out) a prefix dropped before they stopped would miss.
 */
process.env[FILE_ENV] = randomBytes(3).toString('hex');
const root = fileRoot();

afterAll(async () => {
  await sweepRoot(testRedisUrl(), root);
});
