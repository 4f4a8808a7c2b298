import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHerald, StartupError } from '../../src/composition/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { startPrivateRedis } from '../support/child.js';
import { scanPrefix, uniquePrefix } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/**
 * A Herald refused at start-up (here: Slack half configured, found after the delivery queue was
 * opened) closes what it opened before it rejects. Its own Redis, so every connection seen there
 * is this Herald's: once they are all gone nothing can write, and the keys under its prefix are
 * those it had written when it rejected (the secret check) — its queue's keys do not appear later.
 */
let server: Awaited<ReturnType<typeof startPrivateRedis>>;
let observer: Redis;
let dataDir: string;

beforeAll(async () => {
  server = await startPrivateRedis([]);
  observer = new Redis(server.url, { connectionName: 'refused-startup-observer' });
  dataDir = mkdtempSync(join(tmpdir(), 'herald-refused-'));
});
afterAll(() => {
  observer?.disconnect();
  server?.kill();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

async function keysUnder(prefix: string): Promise<string[]> {
  const all: string[] = [];
  for await (const batch of scanPrefix(observer, prefix)) all.push(...batch);
  return all.sort();
}

/** The clients connected to the private Redis other than the observer itself. */
async function heraldConnections(): Promise<string[]> {
  const list = String(await observer.client('LIST'));
  return list.split('\n').filter((l) => l.trim() !== '' && !l.includes('name=refused-startup-observer'));
}

describe('a Herald refused at start-up', () => {
  it('closes its queue and every connection before it rejects, and writes no key after', async () => {
    const prefix = uniquePrefix('refused');
    const config = loadConfig({
      HERALD_KEY_PREFIX: prefix,
      HERALD_DATA_DIR: dataDir,
      HERALD_SECRET_KEY: randomBytes(32).toString('base64'),
      HERALD_ROLE: 'api',
      SLACK_SIGNING_SECRET: 's',
    });
    await expect(
      createHerald({ config, redisUrl: server.url, log: createLogger('silent'), worker: false }),
    ).rejects.toThrow(StartupError);
    const atRefusal = await keysUnder(prefix);

    // A closed client's connection is gone from the server's list as soon as the server reads the close.
    let left: string[] = [];
    await waitFor(async () => (left = await heraldConnections()).length === 0, {
      timeoutMs: 15_000,
      what: 'the refused Herald to close every connection it opened',
    }).catch((e: unknown) => {
      throw new Error(`${String(e)}; still open: ${left.join(' / ')}`);
    });
    const after = await keysUnder(prefix);
    expect(after).toEqual(atRefusal);
    expect(after.filter((k) => k.includes(':bull:'))).toEqual([]);
  });
});
