import type { RedisClient as Redis } from './redis-connect.js';
import type { Delivery } from '../domain/execution/execution.js';
import type { MessageRef } from '../domain/execution/conversation.js';
import type { ConversationRepo, ThreadRoot, Threads, ThreadState } from '../ports/index.js';
import type { Change } from './commit.js';
import type { Keys } from './keys.js';
import { luaScript, runScript } from './scripts.js';
import { decodedEach, turnBatched } from './turn-batch.js';

/**
 * The conversation of an incident with each connection (docs/explanation/living-updates.md), in two hashes
 * keyed by connection id, each with one writer:
 *
 * - `inc:<id>:threads` — `<sequence>|<last delivery id>`, written by the commit of an execute,
 *   correction, retraction or approval. Each such commit also counts up the hash's `revision`
 *   field and checks the revision it read, so two commits never hand out the same sequence number:
 *   one check, where a check per connection made a fan-out to 10,000 connections decode and run
 *   10,000 of them while Redis served no one else. Concurrent commits to one incident's
 *   conversations then go one after the other (the loser reads again), even to other connections;
 * - `inc:<id>:roots` — the first delivered message, `{ref, delivery_id}`, written by the worker
 *   when a message that starts the conversation is delivered (HSETNX: the first one stays), and
 *   removed when that message is retracted, so the next update starts a new conversation.
 */

/**
 * thread_root_clear — forgets the conversation's first message if it is still `delivery_id`.
 * KEYS[1] the roots hash; ARGV[1] connection id, ARGV[2] delivery id. Returns 1 when removed.
 */
const ROOT_CLEAR_LUA = luaScript(
  'thread_root_clear',
  `
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local root = cjson.decode(raw)
if root.delivery_id ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
return 1
`,
);

export class RedisConversationRepo implements ConversationRepo {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  async threads(incidentId: string, connectionIds: string[]): Promise<Threads> {
    const out = new Map<string, ThreadState>();
    if (connectionIds.length === 0) return Object.assign(out, { revision: null });
    // One HMGET: the revision and the conversations as of one moment.
    const [revision, ...raw] = await this.redis.hmget(
      this.keys.incidentThreads(incidentId),
      REVISION,
      ...connectionIds,
    );
    connectionIds.forEach((id, i) => out.set(id, parseThread(raw[i] ?? null)));
    return Object.assign(out, { revision: revision ?? null });
  }

  /** The conversation's first message; the reads of one turn go as one HMGET per incident (turn-batch.ts). */
  root(incidentId: string, connectionId: string): Promise<ThreadRoot | null> {
    return this.rootOne({ incidentId, connectionId });
  }

  private readonly rootOne = turnBatched(async (asks: readonly { incidentId: string; connectionId: string }[]) => {
    // Which asks are of which incident: one HMGET each.
    const byIncident = new Map<string, number[]>();
    asks.forEach((a, i) => {
      const at = byIncident.get(a.incidentId);
      if (at) at.push(i);
      else byIncident.set(a.incidentId, [i]);
    });
    const roots: (ThreadRoot | null | Error)[] = [];
    await Promise.all(
      [...byIncident].map(async ([incidentId, at]) => {
        const fields = at.map((i) => asks[i]!.connectionId);
        const raw = await this.redis.hmget(this.keys.incidentThreadRoots(incidentId), ...fields);
        decodedEach(raw, parseRoot).forEach((root, j) => (roots[at[j]!] = root));
      }),
    );
    return roots;
  });

  async startIfNone(incidentId: string, connectionId: string, root: ThreadRoot): Promise<void> {
    await this.redis.hsetnx(
      this.keys.incidentThreadRoots(incidentId),
      connectionId,
      JSON.stringify({ ref: root.ref, delivery_id: root.deliveryId }),
    );
  }

  async forget(incidentId: string, connectionId: string, deliveryId: string): Promise<void> {
    await runScript(
      this.redis,
      ROOT_CLEAR_LUA,
      [this.keys.incidentThreadRoots(incidentId)],
      [connectionId, deliveryId],
    );
  }
}

function parseRoot(raw: string): ThreadRoot {
  const parsed = JSON.parse(raw) as { ref: MessageRef; delivery_id: string };
  return { ref: parsed.ref, deliveryId: parsed.delivery_id };
}

function parseThread(raw: string | null): ThreadState {
  if (raw === null) return { sequence: 0, lastDeliveryId: null, raw: null };
  const bar = raw.indexOf('|');
  return { sequence: Number(raw.slice(0, bar)) || 0, lastDeliveryId: raw.slice(bar + 1) || null, raw };
}

/** The threads hash's revision field (connection ids start with `con_`, so none is named so). */
const REVISION = 'revision';

/**
 * Adds to an execute's (or correction's, or approval's) commit: the incident's conversations must
 * still be at the revision read, and each moves on to its last new delivery.
 */
export function advanceThreads(
  change: Change,
  keys: Keys,
  incidentId: string,
  read: Threads,
  deliveries: Delivery[],
): void {
  const last = new Map<string, Delivery>();
  for (const d of deliveries) {
    const seen = last.get(d.connection_id);
    if (!seen || (d.sequence ?? 0) > (seen.sequence ?? 0)) last.set(d.connection_id, d);
  }
  if (last.size === 0) return;
  const key = keys.incidentThreads(incidentId);
  const fields: string[] = [];
  for (const [connectionId, d] of last) fields.push(connectionId, `${d.sequence ?? 1}|${d.id}`);
  change
    .expectHashField(key, REVISION, read.revision)
    .write('HINCRBY', key, REVISION, 1)
    .writeItems('HSET', key, fields, 2);
}
