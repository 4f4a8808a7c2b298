import { createServer, type AddressInfo, type Socket } from 'node:net';
import { Cluster, type ChainableCommander } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { releaseSettledPipelines } from '../../src/store/pipeline-release.js';
import { connectRedis } from '../../src/store/redis-connect.js';
import { testRedisUrl, useTestRedis } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/**
 * A settled pipeline lets go of its commands, replies and promise (src/store/pipeline-release.ts):
 * otherwise a promoted one keeps later batches alive through young-generation collections, which
 * cost the API its p99 on Node 24. And nothing a caller sees changes.
 */
const t = useTestRedis('pipeline-release', () =>
  connectRedis({ kind: 'standalone', url: testRedisUrl() }, { use: 'request', name: 'herald-test-pipeline-release' }),
);
const { prefix } = t;
const k = (s: string) => `{${prefix}}:${s}`;

interface Internals {
  _queue: unknown[];
  _result: unknown[];
  promise: Promise<unknown> | null;
}

/** Records every pipeline the client makes (auto-pipelining's included) while `run` runs. */
async function pipelinesDuring<T>(run: () => Promise<T>): Promise<{ value: T; made: ChainableCommander[] }> {
  const made: ChainableCommander[] = [];
  const create = t.redis.pipeline.bind(t.redis);
  t.redis.pipeline = (commands?: unknown[][]) => {
    const p = create(commands);
    made.push(p);
    return p;
  };
  try {
    return { value: await run(), made };
  } finally {
    t.redis.pipeline = create;
  }
}

describe('the ioredis internals the release relies on (src/store/pipeline-release.ts)', () => {
  // If an ioredis upgrade renames or reshapes these, the release would quietly set fields nothing
  // reads (and keep nothing from being retained): this fails first, so the release is revisited.
  it('a pipeline keeps its commands in _queue, its replies in _result, and settles through promise/resolve/reject', () => {
    const p = t.redis.pipeline().get(k('shape')).get(k('shape'));
    const internals = p as unknown as Internals & Record<string, unknown>;
    expect(Array.isArray(internals._queue)).toBe(true);
    expect(internals._queue).toHaveLength(2);
    expect(Array.isArray(internals._result)).toBe(true);
    expect(internals.promise).toBeInstanceOf(Promise);
    expect(typeof internals.resolve).toBe('function');
    expect(typeof internals.reject).toBe('function');
    expect(internals.isCluster).toBe(false);
    // fillResult (every reply) and exec read and write these very fields.
    const proto = Object.getPrototypeOf(p) as { fillResult: () => void; exec: () => void };
    expect(String(proto.fillResult)).toMatch(/this\._queue\[position\]/);
    expect(String(proto.fillResult)).toMatch(/this\._result\[position\] = value/);
    expect(String(proto.fillResult)).toMatch(/this\.resolve\(/);
    void p.exec();
  });
});

describe('settled pipelines', () => {
  it('an auto-pipelined batch answers every command, then its pipeline holds none of them', async () => {
    await t.redis.mset(k('a'), 'A', k('b'), 'B');
    const { value, made } = await pipelinesDuring(() =>
      Promise.all(Array.from({ length: 64 }, (_, i) => t.redis.mget(k(i % 2 ? 'a' : 'b'), k('none')))),
    );
    expect(value).toHaveLength(64);
    value.forEach((v, i) => expect(v).toEqual([i % 2 ? 'A' : 'B', null]));
    // The batch went out as (at least) one auto-pipeline, and each has let go once settled.
    expect(made.length).toBeGreaterThan(0);
    // Its release runs in a reaction queued behind the callers' own: one turn later at most.
    await new Promise((r) => setImmediate(r));
    for (const p of made) {
      const internals = p as unknown as Internals;
      expect(internals._queue).toEqual([]);
      expect(internals._result).toEqual([]);
      expect(internals.promise).toBeNull();
      expect(p.length).toBe(0);
    }
  });

  it('an explicit pipeline still resolves with every reply and error, in order', async () => {
    const p = t.redis.pipeline().set(k('c'), '1').incr(k('c')).hset(k('c'), 'f', 'v').get(k('c'));
    const results = await p.exec();
    expect(results?.map(([err]) => err?.message.slice(0, 9) ?? null)).toEqual([null, null, 'WRONGTYPE', null]);
    expect(results?.map(([, v]) => v)).toEqual(['OK', 2, undefined, '2']);
    await new Promise((r) => setImmediate(r));
    expect((p as unknown as Internals)._queue).toEqual([]);
  });

  it('a MULTI still returns its results, and a failed exec still reaches its caller', async () => {
    expect(await t.redis.multi().set(k('d'), 'x').get(k('d')).exec()).toEqual([
      [null, 'OK'],
      [null, 'x'],
    ]);
    // A command Redis refuses inside MULTI aborts the transaction: exec rejects, as ever.
    await expect(t.redis.multi().set(k('e'), '1').call('set', k('e')).exec()).rejects.toThrow(/EXECABORT/);
    expect(await t.redis.exists(k('e'))).toBe(0);
  });
});

/** What the fake Redis below answers to INFO, the ready check: done loading, a primary. */
const INFO = 'loading:0\r\nrole:master';

/**
 * A Redis of a few lines (node:net, RESP): answers the connection's set-up itself and holds every
 * GET until the test says how many to answer; `drop` closes the connections as a dying primary's
 * would. It lets a test decide exactly which replies arrive after a pipeline has failed.
 */
async function holdingRedis() {
  const sockets = new Set<Socket>();
  const held: Socket[] = [];
  let received = 0;
  const reply = (socket: Socket, name: string): void => {
    // RESP2 only: HELLO refused as an old Redis would, the ready check told loading is done.
    if (name === 'hello') socket.write("-ERR unknown command 'hello'\r\n");
    else if (name === 'info') socket.write(`$${INFO.length}\r\n${INFO}\r\n`);
    else if (name === 'get') {
      received += 1;
      held.push(socket);
    } else socket.write('+OK\r\n');
  };
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let buffered = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        const parsed = parseCommand(buffered);
        if (parsed === undefined) return;
        buffered = buffered.subarray(parsed.used);
        reply(socket, parsed.name);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    received: () => received,
    /** Answers the next `n` held GETs, each with "v". */
    answer(n: number): void {
      for (const socket of held.splice(0, n)) socket.write('$1\r\nv\r\n');
    },
    drop(): void {
      held.length = 0;
      for (const socket of sockets) socket.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** One RESP command (an array of bulk strings) off the front of `buf`: its name and length, or undefined while incomplete. */
function parseCommand(buf: Buffer): { name: string; used: number } | undefined {
  const line = (from: number): { text: string; next: number } | undefined => {
    const end = buf.indexOf('\r\n', from);
    return end < 0 ? undefined : { text: buf.toString('latin1', from + 1, end), next: end + 2 };
  };
  const head = line(0);
  if (head === undefined) return undefined;
  let at = head.next;
  let name = '';
  for (let i = 0; i < Number(head.text); i++) {
    const len = line(at);
    if (len === undefined || buf.length < len.next + Number(len.text) + 2) return undefined;
    if (i === 0) name = buf.toString('latin1', len.next, len.next + Number(len.text)).toLowerCase();
    at = len.next + Number(len.text) + 2;
  }
  return { name, used: at };
}

describe('a pipeline that fails before its commands have answered', () => {
  it('keeps them, so late replies and connection errors raise nothing, and every caller gets the failure', async () => {
    const redis = await holdingRedis();
    const client = connectRedis(
      { kind: 'standalone', url: `redis://127.0.0.1:${redis.port}` },
      { use: 'request', name: 'herald-test-pipeline-release-failed' },
    );
    client.on('error', () => undefined);
    const escaped: unknown[] = [];
    const escape = (e: unknown): void => {
      escaped.push(e);
    };
    process.on('unhandledRejection', escape);
    process.on('uncaughtException', escape);
    const made: ChainableCommander[] = [];
    try {
      await waitFor(() => client.status === 'ready', { timeoutMs: 30_000, what: 'the fake Redis to be ready' });
      const create = client.pipeline.bind(client);
      client.pipeline = (commands?: unknown[][]) => {
        const p = create(commands);
        made.push(p);
        return p;
      };
      // Eight callers in one tick: one auto-pipelined batch of eight GETs.
      const calls = Promise.allSettled(Array.from({ length: 8 }, (_, i) => client.get(`k${i}`)));
      await waitFor(() => redis.received() === 8, { timeoutMs: 30_000, what: 'the batch to reach the fake Redis' });
      expect(made).toHaveLength(1);
      const internals = made[0] as unknown as Internals & { reject: (e: Error) => void };
      const commands = [...internals._queue] as { promise: Promise<unknown> }[];
      expect(commands).toHaveLength(8);
      // Three replies arrive; then ioredis gives up on the pipeline, as it does when it cannot
      // route or finish sending one (its own reject, with its own connection-closed message),
      // while five commands are still on the wire.
      redis.answer(3);
      await Promise.all(commands.slice(0, 3).map((c) => c.promise));
      internals.reject(new Error('Connection is closed.'));
      const outcomes = await calls;
      expect(outcomes.map((o) => (o.status === 'rejected' ? (o.reason as Error).message : o.value))).toEqual(
        Array(8).fill('Connection is closed.'),
      );
      // The rest still reach fillResult: two late replies, then three errors as the connection drops.
      redis.answer(2);
      await Promise.all(commands.slice(3, 5).map((c) => c.promise));
      redis.drop();
      const late = await Promise.allSettled(commands.slice(5).map((c) => c.promise));
      expect(late.map((o) => o.status)).toEqual(['rejected', 'rejected', 'rejected']);
      // An unhandled rejection is reported once the microtasks that raised it have run.
      await new Promise((r) => setImmediate(r));
      await new Promise((r) => setImmediate(r));
      expect(escaped).toEqual([]);
      // A failed pipeline keeps what it carried (until it is collected).
      expect(internals._queue).toHaveLength(8);
    } finally {
      process.off('unhandledRejection', escape);
      process.off('uncaughtException', escape);
      client.disconnect();
      await redis.close();
    }
  });
});

describe('a Cluster pipeline', () => {
  it('is left as ioredis made it: a Cluster pipeline re-runs itself, and its late reports read its queue', async () => {
    // No node needs to answer: the pipeline is only created, never run.
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
    const prototypeExec = Object.getPrototypeOf(cluster.pipeline()).exec as unknown;
    releaseSettledPipelines(cluster);
    const pipeline = cluster.pipeline();
    expect((pipeline as unknown as { isCluster: boolean }).isCluster).toBe(true);
    expect(Object.hasOwn(pipeline, 'exec')).toBe(false);
    expect(Object.getPrototypeOf(pipeline).exec).toBe(prototypeExec);
    cluster.disconnect();
  });
});
