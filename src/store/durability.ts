import { Cluster } from 'ioredis';
import type { Config } from '../config.js';
import type { FailoverSignal } from './failover-watch.js';
import type { RedisClient } from './redis-connect.js';

/**
 * How many replicas must hold a write before Herald acknowledges it (HERALD_REDIS_WAIT_REPLICAS,
 * HERALD_REDIS_WAIT_TIMEOUT_MS; docs/operations/failover.md).
 *
 * Redis replicates asynchronously: a primary that answered a write and then died may not have
 * passed it on, and the replica the sentinels (or the Cluster) promote then never had it. After
 * each commit that a request acknowledges, Herald sends WAIT on the same connection (WAIT counts
 * the replicas that hold everything that connection wrote), for the configured number of
 * replicas or the number online on the primary if fewer (replicasToWait). Fewer replicas than
 * asked within the time-out fail the request with 503: the write may exist, and the client's retry
 * with the same Idempotency-Key answers it without doing it twice. While a Sentinel failover is
 * under way no durable write is made or acknowledged (failover-watch.ts).
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
    /** Set when the write was refused before its WAIT (a failover under way, …). */
    readonly refusal?: string,
  ) {
    super(
      refusal === undefined
        ? `WAIT: ${acknowledged} of ${required} replicas acknowledged the write in time`
        : `durable write refused: ${refusal}`,
    );
    this.name = 'ReplicaWaitError';
  }
}

/**
 * How many replicas a durable write waits for: as many as are configured, but no more than are
 * online on the primary now (INFO replication, `slaveN:…,state=online`). A WAIT for a replica that
 * is not there would only time out: after a failover the new primary has fewer replicas in sync
 * until the old one rejoins, and its writes are acknowledged at once, protected by the replicas it
 * has (docs/operations/failover.md says what this costs). Negative `online`: the node is not a
 * primary; no write is acknowledged there.
 */
export function replicasToWait(configured: number, online: number): number {
  return Math.max(0, Math.min(configured, online));
}

/**
 * The replicas an INFO replication answer shows online, or -1 when the node is not a primary.
 * A replica still loading its copy (state=wait_bgsave, send_bulk) holds nothing yet.
 */
export function onlineReplicas(info: string): number {
  if (!/^role:master\s*$/m.test(info)) return -1;
  return info.split(/\r?\n/).filter((line) => /^slave\d+:.*\bstate=online\b/.test(line)).length;
}

/** How long a count of online replicas is used before it is read again (in the background). */
export const ONLINE_REPLICAS_TTL_MS = 500;

/**
 * The count of online replicas of the node a durable writer writes to, cached briefly and read
 * again off the hot path: a write uses the last count and, once it is older than
 * ONLINE_REPLICAS_TTL_MS, starts a fresh read for the writes after it. A count is dropped as soon
 * as the writer may be on another node (it reconnected, or a Cluster's slot map changed): the next
 * write then waits for a fresh one, so a count read on an old primary is never used on a new one.
 */
class OnlineReplicas {
  private node = 0;
  private last: { node: number; count: number; at: number } | undefined;
  private reading: Promise<number> | undefined;

  constructor(
    private readonly writer: RedisClient,
    private readonly now: () => number = Date.now,
  ) {
    const moved = (): void => {
      this.node++;
    };
    writer.on('ready', moved);
    writer.on('close', moved);
    if (writer instanceof Cluster) for (const e of ['refresh', '+node', '-node']) writer.on(e, moved);
  }

  async count(key: string): Promise<number> {
    const last = this.last;
    if (last === undefined || last.node !== this.node) return this.read(key);
    if (this.now() - last.at >= ONLINE_REPLICAS_TTL_MS) this.read(key).catch(() => undefined);
    return last.count;
  }

  private read(key: string): Promise<number> {
    this.reading ??= (async () => {
      const node = this.node;
      try {
        const count = onlineReplicas(String(await sendOnNodeOf(this.writer, key, 'INFO', 'replication')));
        if (node === this.node) this.last = { node, count, at: this.now() };
        return count;
      } finally {
        this.reading = undefined;
      }
    })();
    return this.reading;
  }
}

interface Durable {
  wait: ReplicaWait;
  /** The connection durable writes and their WAIT go on. */
  writer: RedisClient;
  replicas: OnlineReplicas;
  /** What the sentinels say of a failover (Sentinel only; failover-watch.ts). */
  failover: FailoverSignal | undefined;
}

const durables = new WeakMap<RedisClient, Durable>();

/**
 * Makes the writes that must survive a failover, when made through `client`, go through `writer`
 * and wait for replicas there (no-op for undefined). WAIT blocks the connection that sends it
 * until the replicas answer (up to its time-out when they do not): on a connection of its own it
 * holds up only the other durable writes, never the reads and other commands of `client`.
 * `failover` (Sentinel): while it says a failover is under way, no durable write is made or
 * acknowledged.
 */
export function requireReplicas(
  client: RedisClient,
  wait: ReplicaWait | undefined,
  writer: RedisClient,
  failover?: FailoverSignal,
): void {
  if (wait !== undefined) durables.set(client, { wait, writer, replicas: new OnlineReplicas(writer), failover });
}

/** Throws (503) when a durable write must not be made or acknowledged now. */
function refuseDuringFailover(d: Durable): void {
  const refusal = d.failover?.refusal(d.writer) ?? null;
  if (refusal !== null) throw new ReplicaWaitError(0, d.wait.replicas, refusal);
}

/**
 * The connection a write that must survive a failover goes on: `client`'s durable writer, if any.
 * Throws ReplicaWaitError (a 503) while a Sentinel failover is under way: the write would go to
 * a primary that is being replaced.
 */
export function durableWriter(client: RedisClient): RedisClient {
  const d = durables.get(client);
  if (d === undefined) return client;
  refuseDuringFailover(d);
  return d.writer;
}

/**
 * Waits until the replicas online on the primary, up to the configured number, hold what
 * `client`'s durable writer has written, if replicas are required. Call after writing through
 * durableWriter(client). `key` is one the write touched (on a Cluster it says which node's
 * connection wrote it). A failover that began while the write was on its way fails it too.
 */
export async function awaitReplicas(client: RedisClient, key: string): Promise<void> {
  const d = durables.get(client);
  if (d === undefined) return;
  const generation = d.failover?.generation;
  refuseDuringFailover(d);
  const online = await d.replicas.count(key);
  if (online < 0) throw new ReplicaWaitError(0, d.wait.replicas, 'the node written to is not a primary');
  const required = replicasToWait(d.wait.replicas, online);
  if (required > 0) {
    const acknowledged = Number(await sendOnNodeOf(d.writer, key, 'WAIT', required, d.wait.timeoutMs));
    if (acknowledged < required) throw new ReplicaWaitError(acknowledged, required);
  }
  refuseDuringFailover(d);
  if (d.failover !== undefined && d.failover.generation !== generation) {
    throw new ReplicaWaitError(0, d.wait.replicas, 'a Sentinel failover began while the write was made');
  }
}

/**
 * awaitReplicas for a batch of writes (turn-batch.ts): null once they last, else the error, which
 * answers each write the batch made (it may not outlive a failover).
 */
export function replicaWaitError(client: RedisClient, key: string): Promise<Error | null> {
  return awaitReplicas(client, key).then(
    () => null,
    (err: unknown) => (err instanceof Error ? err : new Error('waiting for replicas failed')),
  );
}

/**
 * A command without keys (WAIT, INFO) on the connection that wrote `key`. One server: the
 * client's own connection. A Cluster routes a command without keys to any node, so it rides in a
 * pipeline behind a command on `key`, which goes to (and over the one connection to) the node
 * holding it.
 */
async function sendOnNodeOf(
  writer: RedisClient,
  key: string,
  ...command: [string, ...(string | number)[]]
): Promise<unknown> {
  if (!(writer instanceof Cluster)) return writer.call(...command);
  const results = await writer
    .pipeline()
    .exists(key)
    .call(...command)
    .exec();
  const [err, answer] = results?.[1] ?? [new Error(`${command[0]} got no answer`), 0];
  if (err) throw err;
  return answer;
}
