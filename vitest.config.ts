import { defineConfig } from 'vitest/config';

/**
 * The test tiers, one vitest project each, so one `vitest run` runs several in parallel (as
 * `npm test` does) and `vitest run --project <name>` runs one (the `test:<tier>` scripts):
 * - unit: pure tests, no Redis and no global setup (they pass with Redis
 *   down, in seconds);
 * - integration: the stores, scripts and services against the shared test Redis, and the port
 *   contracts run against both the in-memory fakes and the Redis adapters;
 * - e2e: a whole Herald (in process or the built dist/) over HTTP, Slack and the peers;
 * - slow: killed processes, Redis outages, the deploy files;
 * - browser: the status page in Debian's Chromium, run alone after the tiers above;
 * - failover: Redis Cluster and Sentinel of their own, run alone after everything else.
 * Every project inherits the settings below (`extends: true`).
 */
/** The shared test Redis (global setup) and each file's key sweep (file-keys.ts). */
const redis = { globalSetup: ['test/support/global-setup.ts'], setupFiles: ['test/support/file-keys.ts'] };

export default defineConfig({
  test: {
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Two cores: a few files at once keeps Redis and the sinks honest without starving them.
    maxWorkers: 4,
    reporters: ['default', './test/support/summary-reporter.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts', 'test/docs/**/*.test.ts'],
          // Pure tests with no module mocks: a worker keeps its imported modules from one file to
          // the next instead of loading src/ again for each, which was most of this tier's time.
          isolate: false,
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts', 'test/service/**/*.test.ts', 'test/contracts/**/*.test.ts'],
          ...redis,
        },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts', 'test/hostile/**/*.test.ts'],
          ...redis,
        },
      },
      {
        extends: true,
        test: { name: 'slow', include: ['test/faults/**/*.test.ts', 'test/deploy/**/*.test.ts'], ...redis },
      },
      // A real Chromium per file: run after the other tiers (npm test), so a browser's CPU is not
      // taken from the tests that measure Herald's own timing (Slack's 3 s, the Redis deadline).
      { extends: true, test: { name: 'browser', include: ['test/browser/**/*.test.ts'], ...redis } },
      // Starts its own Redis Cluster and Sentinel servers: no shared Redis.
      { extends: true, test: { name: 'failover', include: ['test/failover/**/*.test.ts'] } },
    ],
  },
});
