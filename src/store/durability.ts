import { Cluster } from 'ioredis';
import type { Config } from '../config.js';
import type { RedisClient } from './redis-connect.js';

/**
 * How many replicas must hold a write before Herald acknowledges it (HERALD_REDIS_WAIT_REPLICAS,
 * HERALD_REDIS_WAIT_TIMEOUT_MS; docs/operations/failover.md).
 *
 * Redis replicates asynchronously: a primary that answered a write and then died may not have
 * passed it on, and the replica the sentinels (or the Cluster) promote then never had it. After
 * each commit that a request acknowledges, Herald sends WAIT on the same connection (WAIT counts
 * the replicas that hold everything that connection wrote). Fewer replicas than asked within the
 * time-out fail the request with 503: the write may exist, and the client's retry with the same
 * Idempotency-Key answers it without doing it twice.
 */
export interface ReplicaWait {
  replicas: number;
  timeoutMs: number;
}

export function replicaWaitFromConfig(
  config: Pick<Config, 'HERALD_REDIS_WAIT_REPLICAS' | 'HERALD_REDIS_WAIT_TIMEOUT_MS'>,
): ReplicaWait | undefined {
  return config.HERALD_REDIS_WAIT_REPLICAS > 0
    ? { replicas: config.HERALD_REDIS_WAIT_REPLICAS, timeoutMs: config.HERALD_REDIS_WAIT_TIMEOUT_MS }
    : undefined;
}

/** The error of a write that fewer replicas than required acknowledged in time (answered 503). */
export class ReplicaWaitError extends Error {
  constructor(
    readonly acknowledged: number,
    readonly required: number,
  ) {
    super(`WAIT: ${acknowledged} of ${required} replicas acknowledged the write in time`);
    this.name = 'ReplicaWaitError';
  }
}

interface Durable {
  wait: ReplicaWait;
  /** The connection durable writes and their WAIT go on. */
  writer: RedisClient;
}

const durables = new WeakMap<RedisClient, Durable>();

/**
 * Makes the writes that must survive a failover, when made through `client`, go through `writer`
 * and wait for replicas there (no-op for undefined). WAIT blocks the connection that sends it
 * until the replicas answer (up to its time-out when they do not): on a connection of its own it
 * holds up only the other durable writes, never the reads and other commands of `client`.
 */
export function requireReplicas(client: RedisClient, wait: ReplicaWait | undefined, writer: RedisClient): void {
  if (wait !== undefined) durables.set(client, { wait, writer });
}

/** The connection a write that must survive a failover goes on: `client`'s durable writer, if any. */
export function durableWriter(client: RedisClient): RedisClient {
  return durables.get(client)?.writer ?? client;
}

/**
 * Waits until the configured number of replicas hold what `client`'s durable writer has written,
 * if replicas are required. Call after writing through durableWriter(client). `key` is one the
 * write touched (on a Cluster it says which node's connection wrote it).
 */
export async function awaitReplicas(client: RedisClient, key: string): Promise<void> {
  const durable = durables.get(client);
  if (durable === undefined) return;
  const { wait, writer } = durable;
  const acknowledged = Number(await sendWait(writer, key, wait));
  if (acknowledged < wait.replicas) throw new ReplicaWaitError(acknowledged, wait.replicas);
}

/**
 * WAIT on the connection that wrote `key`. One server: the client's own connection. A Cluster
 * routes a command without keys to any node, so WAIT rides in a pipeline behind a command on
 * `key`, which goes to (and over the one connection to) the node holding it.
 */
async function sendWait(writer: RedisClient, key: string, wait: ReplicaWait): Promise<unknown> {
  if (!(writer instanceof Cluster)) return writer.call('WAIT', wait.replicas, wait.timeoutMs);
  const results = await writer.pipeline().exists(key).call('WAIT', wait.replicas, wait.timeoutMs).exec();
  const [err, count] = results?.[1] ?? [new Error('WAIT got no answer'), 0];
  if (err) throw err;
  return count;
}
