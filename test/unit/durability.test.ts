/**
 * How many replicas a durable write waits for (src/store/durability.ts): the configured number,
 * but no more than are online on the primary, none when none are; no durable write at all while a
 * Sentinel failover is under way. Over a fake connection that records what it is sent.
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import {
  awaitReplicas,
  durableWriter,
  onlineReplicas,
  ONLINE_REPLICAS_TTL_MS,
  ReplicaWaitError,
  replicasToWait,
  requireReplicas,
} from '../../src/store/durability.js';
import type { FailoverSignal } from '../../src/store/failover-watch.js';
import type { RedisClient } from '../../src/store/redis-connect.js';

const info = (role: 'master' | 'slave', states: string[]) =>
  [
    '# Replication',
    `role:${role}`,
    `connected_slaves:${states.length}`,
    ...states.map((s, i) => `slave${i}:ip=127.0.0.1,port=${7000 + i},state=${s},offset=42,lag=0`),
    'master_repl_offset:42',
    '',
  ].join('\r\n');

describe('replicasToWait', () => {
  it('is the configured number, capped by the replicas online', () => {
    expect(replicasToWait(2, 2)).toBe(2);
    expect(replicasToWait(2, 3)).toBe(2);
    expect(replicasToWait(2, 1)).toBe(1);
    expect(replicasToWait(1, 0)).toBe(0);
    expect(replicasToWait(2, -1)).toBe(0);
  });
});

describe('onlineReplicas', () => {
  it('counts the replicas INFO replication shows online, not those still syncing', () => {
    expect(onlineReplicas(info('master', ['online', 'online']))).toBe(2);
    expect(onlineReplicas(info('master', ['online', 'wait_bgsave', 'send_bulk']))).toBe(1);
    expect(onlineReplicas(info('master', []))).toBe(0);
  });

  it('says -1 for a node that is not a primary', () => {
    expect(onlineReplicas(info('slave', []))).toBe(-1);
    expect(onlineReplicas('')).toBe(-1);
  });
});

/** A connection that answers INFO with `replication` and WAIT with `acks`, and records commands. */
class FakeWriter extends EventEmitter {
  sent: string[] = [];
  replication = info('master', ['online']);
  acks = 1;
  call(command: string, ...args: (string | number)[]): Promise<unknown> {
    this.sent.push([command, ...args].join(' '));
    if (command === 'INFO') return Promise.resolve(this.replication);
    if (command === 'WAIT') return Promise.resolve(Math.min(Number(args[0]), this.acks));
    return Promise.reject(new Error(`unexpected ${command}`));
  }
}

function setup(configured: number, failover?: FailoverSignal) {
  const client = new EventEmitter() as unknown as RedisClient;
  const writer = new FakeWriter();
  requireReplicas(client, { replicas: configured, timeoutMs: 500 }, writer as unknown as RedisClient, failover);
  return { client, writer };
}

describe('awaitReplicas', () => {
  it('waits for the configured replicas when as many are online', async () => {
    const { client, writer } = setup(2);
    writer.replication = info('master', ['online', 'online']);
    writer.acks = 2;
    expect(durableWriter(client)).toBe(writer);
    await awaitReplicas(client, 'k');
    expect(writer.sent).toEqual(['INFO replication', 'WAIT 2 500']);
  });

  it('waits only for the replicas online when fewer than configured are', async () => {
    const { client, writer } = setup(2);
    writer.replication = info('master', ['online', 'send_bulk']);
    await awaitReplicas(client, 'k');
    expect(writer.sent).toEqual(['INFO replication', 'WAIT 1 500']);
  });

  it('sends no WAIT when no replica is online (a new primary whose replicas are not back yet)', async () => {
    const { client, writer } = setup(1);
    writer.replication = info('master', []);
    await awaitReplicas(client, 'k');
    expect(writer.sent).toEqual(['INFO replication']);
  });

  it('fails (503) when fewer replicas than online confirm in time', async () => {
    const { client, writer } = setup(2);
    writer.replication = info('master', ['online', 'online']);
    writer.acks = 1;
    await expect(awaitReplicas(client, 'k')).rejects.toMatchObject({
      name: 'ReplicaWaitError',
      acknowledged: 1,
      required: 2,
    });
  });

  it('refuses on a node that is not a primary', async () => {
    const { client, writer } = setup(1);
    writer.replication = info('slave', []);
    await expect(awaitReplicas(client, 'k')).rejects.toBeInstanceOf(ReplicaWaitError);
  });

  it('reuses a recent count, and reads it again once the connection reconnects', async () => {
    const { client, writer } = setup(2);
    writer.replication = info('master', ['online', 'online']);
    writer.acks = 2;
    await awaitReplicas(client, 'k');
    await awaitReplicas(client, 'k');
    expect(writer.sent.filter((c) => c.startsWith('INFO'))).toHaveLength(1);
    // Reconnected (a failover moved it): the old primary's count is not used on the new one.
    writer.replication = info('master', []);
    writer.emit('ready');
    writer.sent = [];
    await awaitReplicas(client, 'k');
    expect(writer.sent).toEqual(['INFO replication']);
  });

  it('reads a stale count again in the background, using the last one meanwhile', async () => {
    const { client, writer } = setup(2);
    writer.replication = info('master', ['online', 'online']);
    writer.acks = 2;
    await awaitReplicas(client, 'k');
    await new Promise((r) => setTimeout(r, ONLINE_REPLICAS_TTL_MS + 20));
    writer.replication = info('master', ['online']);
    writer.sent = [];
    await awaitReplicas(client, 'k');
    // This write waited for the two it knew of, and started a fresh read for the next ones.
    expect(writer.sent).toEqual(['INFO replication', 'WAIT 2 500']);
    writer.sent = [];
    await awaitReplicas(client, 'k');
    expect(writer.sent).toEqual(['WAIT 1 500']);
  });
});

describe('a Sentinel failover under way', () => {
  class Signal implements FailoverSignal {
    generation = 0;
    reason: string | null = null;
    refusal(): string | null {
      return this.reason;
    }
  }

  it('refuses a durable write before it is made, and acknowledges again once it is over', async () => {
    const signal = new Signal();
    const { client, writer } = setup(1, signal);
    signal.reason = 'a Sentinel failover of the primary is under way';
    expect(() => durableWriter(client)).toThrow(ReplicaWaitError);
    await expect(awaitReplicas(client, 'k')).rejects.toThrow(/failover/);
    expect(writer.sent).toEqual([]);
    signal.reason = null;
    expect(durableWriter(client)).toBe(writer);
    await awaitReplicas(client, 'k');
  });

  it('does not acknowledge a write during which a failover began', async () => {
    const signal = new Signal();
    const { client, writer } = setup(1, signal);
    // The failover begins (and is even over) while the WAIT is out.
    const call = writer.call.bind(writer);
    writer.call = (command, ...args) => {
      if (command === 'WAIT') signal.generation++;
      return call(command, ...args);
    };
    await expect(awaitReplicas(client, 'k')).rejects.toThrow(/failover began/);
  });
});
