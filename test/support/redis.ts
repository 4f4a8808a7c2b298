import { randomBytes } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { createKeys, type Keys } from '../../src/store/keys.js';
import { fileRoot, underRoot } from './run.js';
import { waitFor } from './wait.js';

export const testRedisUrl = (): string => process.env.HERALD_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/**
 * A key prefix no other test uses, under the calling file's root (see run.ts): the file's keys
 * are swept when it ends, and the global setup fails a run that leaves any in a shared Redis.
 */
export const uniquePrefix = (label = 't'): string => `${fileRoot()}.${label}-${randomBytes(6).toString('hex')}`;

/**
 * Every key under a prefix's hash tag, a batch at a time. SCAN is per node: on a Cluster, the
 * tag's slot lives on one master, so each is asked.
 */
export async function* scanPrefix(redis: Redis | Cluster, prefix: string): AsyncGenerator<string[]> {
  for (const node of redis instanceof Cluster ? redis.nodes('master') : [redis]) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `{${prefix}}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) yield keys;
    } while (cursor !== '0');
  }
}

/** Deletes every key under a prefix's hash tag (tests clean up after themselves). */
export async function dropPrefix(redis: Redis | Cluster, prefix: string): Promise<void> {
  // One hash tag, one slot: a multi-key DEL is legal on a Cluster too.
  for await (const keys of scanPrefix(redis, prefix)) await redis.del(...keys);
}

/**
 * Deletes every key under a root of prefixes (run.ts) on a standalone Redis, with a connection of
 * its own (the one that wrote them may be closed by now), and returns them. The keys span many
 * hash tags (slots), which only a standalone Redis takes in one UNLINK: the shared test Redis is.
 */
export async function sweepRoot(url: string, root: string): Promise<string[]> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  redis.on('error', () => undefined);
  const swept: string[] = [];
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', underRoot(root), 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
      swept.push(...keys);
    } while (cursor !== '0');
    return swept;
  } finally {
    redis.disconnect();
  }
}

/** Deletes a prefix's keys with a connection of its own (after the Herald that wrote them quit). */
export async function dropPrefixAt(url: string, prefix: string): Promise<void> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  redis.on('error', () => undefined);
  try {
    await dropPrefix(redis, prefix);
  } finally {
    redis.disconnect();
  }
}

/** Waits until a Redis at `url` answers PING (a server a test has just started). */
export async function waitForRedis(url: string, timeoutMs: number): Promise<void> {
  await waitFor(
    async () => {
      const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      r.on('error', () => undefined);
      try {
        await r.connect();
        return (await r.ping()) === 'PONG';
      } finally {
        r.disconnect();
      }
    },
    { what: `redis-server at ${url}`, timeoutMs, intervalMs: 50 },
  );
}

export function connectTestRedis(): Redis {
  return new Redis(testRedisUrl());
}

/** A test file's own corner of the test Redis: see useTestRedis. */
export interface TestRedis<C extends Redis | Cluster = Redis> {
  /** Connected in beforeAll (reading it earlier throws). */
  readonly redis: C;
  readonly prefix: string;
  readonly keys: Keys;
}

/**
 * A connection to the test Redis for the calling file's tests, under a prefix of its own: the
 * connection opens before the file's tests, and after them its keys are dropped and it quits.
 * `connect` opens another kind (Herald's own, from connectRedis) in place of a plain client.
 */
export function useTestRedis(label: string): TestRedis;
export function useTestRedis<C extends Redis | Cluster>(label: string, connect: () => C): TestRedis<C>;
export function useTestRedis(
  label: string,
  connect: () => Redis | Cluster = connectTestRedis,
): TestRedis<Redis | Cluster> {
  const prefix = uniquePrefix(label);
  let client: Redis | Cluster | undefined;
  beforeAll(() => {
    client = connect();
  });
  afterAll(async () => {
    if (!client) return;
    await dropPrefix(client, prefix);
    await client.quit();
  });
  return {
    get redis() {
      if (!client) throw new Error('the test Redis is connected in beforeAll');
      return client;
    },
    prefix,
    keys: createKeys(prefix),
  };
}

/**
 * `redis` as a store sees it, noting the arguments of every call of the named commands (scripts
 * are passed as one array, scripts.ts, so each call's arguments are flattened): what a test of
 * how many round trips a store makes, or what it sends, reads back.
 */
export function notingCalls<R extends object>(
  redis: R,
  commands: readonly string[],
): { client: R; calls: unknown[][] } {
  const calls: unknown[][] = [];
  const client = new Proxy(redis, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      const fn = value as (...a: unknown[]) => unknown;
      return (...args: unknown[]) => {
        if (typeof prop === 'string' && commands.includes(prop)) calls.push(args.flat());
        return fn.apply(target, args);
      };
    },
  });
  return { client, calls };
}
