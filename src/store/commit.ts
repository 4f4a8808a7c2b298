import type { RedisClient as Redis } from './redis-connect.js';
import { DomainError } from '../domain/common/errors.js';
import type { CommittedEffect } from '../ports/index.js';
import { currentDeadline } from '../domain/common/unavailable.js';
import { awaitReplicas, durableWriter } from './durability.js';
import { currentIdempotentScope } from './idempotency.js';
import { luaScript, runScript } from './scripts.js';

/**
 * commit — an atomic compare-and-set over several keys, in one Lua script.
 *
 * Why a script and not WATCH/MULTI: one ioredis connection is shared by every request, and WATCH
 * state belongs to the connection, so concurrent WATCHes would watch each other's keys. The script
 * runs the checks and the writes as one step, so check-then-write can never interleave.
 *
 * KEYS    every key the change checks or writes (all under the one hash tag, see keys.ts)
 * ARGV[1] JSON array of checks, each {k = key index (1-based), op, v?, f?, r?}:
 *           op "eq"      GET key == v          ("absent" when v is missing: the key must not exist)
 *           op "exists"  EXISTS key == 1
 *           op "empty"   SCARD key == 0
 *           op "hget"    HGET key f == v       (v missing: the field must not exist)
 *         r (exists only): the check holds for each of the r keys from index k on (EXISTS of
 *         up to 1,000 keys at a time)
 * ARGV[2] JSON array of writes, each {c = command, k = key index, n = how many arguments, r?}, run
 *         in order; commands: SET DEL ZADD ZREM SADD SREM HSET HDEL RPUSH HINCRBY PEXPIRE PERSIST
 *         XADD XTRIM (the event outbox stream, store/timeline.ts). With r, the command runs once on
 *         each of the r keys from index k on, each time with the next n arguments: an execute's
 *         thousands of per-delivery writes are then a few entries to decode, not one each
 * ARGV[3…] the writes' arguments, in order, n of them per write. Plain arguments, not inside the
 *         JSON: an execute's change carries every delivery's record (megabytes for a large
 *         fan-out), and JSON-encoding them again (every quote escaped) and decoding them in the
 *         script blocked Herald's event loop for hundreds of ms (docs/performance.md).
 * Returns 0 when every check held and every write ran, else the 1-based index of the first
 * failed check (nothing written).
 */
const COMMIT_LUA = luaScript(
  'commit',
  `
local checks = cjson.decode(ARGV[1])
local writes = cjson.decode(ARGV[2])
local function holds(c, key)
  local ok
  if c.op == 'eq' then
    local cur = redis.call('GET', key)
    if c.v == nil then ok = (cur == false) else ok = (cur == c.v) end
  elseif c.op == 'exists' then
    ok = redis.call('EXISTS', key) == 1
  elseif c.op == 'empty' then
    ok = redis.call('SCARD', key) == 0
  elseif c.op == 'hget' then
    local cur = redis.call('HGET', key, c.f)
    if c.v == nil then ok = (cur == false) else ok = (cur == c.v) end
  else
    error('commit: unknown check ' .. tostring(c.op))
  end
  return ok
end
for i, c in ipairs(checks) do
  if c.r then
    if c.op ~= 'exists' then return redis.error_reply('commit: a repeated check must be exists') end
    -- EXISTS of many keys at once counts those that exist (a key named twice, twice).
    for j = 0, c.r - 1, 1000 do
      local m = math.min(1000, c.r - j)
      if redis.call('EXISTS', unpack(KEYS, c.k + j, c.k + j + m - 1)) ~= m then return i end
    end
  elseif not holds(c, KEYS[c.k]) then return i end
end
local allowed = {SET=1, DEL=1, ZADD=1, ZREM=1, SADD=1, SREM=1, HSET=1, HDEL=1, RPUSH=1, HINCRBY=1, PEXPIRE=1,
  PERSIST=1, XADD=1, XTRIM=1}
for _, w in ipairs(writes) do
  if not allowed[w.c] then return redis.error_reply('commit: command not allowed ' .. tostring(w.c)) end
end
local at = 3
for _, w in ipairs(writes) do
  for j = 0, (w.r or 1) - 1 do
    redis.call(w.c, KEYS[w.k + j], unpack(ARGV, at, at + w.n - 1))
    at = at + w.n
  end
end
return 0
`,
);

type Check = { k: number; op: 'eq' | 'exists' | 'empty' | 'hget'; v?: string; f?: string; r?: number };
/** A write; with `r`, repeated over r consecutive keys, `a` holding their n arguments each, in order. */
type Write = { c: WriteCommand; k: number; n: number; r?: number; a: (string | number)[] };
type WriteCommand =
  | 'SET'
  | 'DEL'
  | 'ZADD'
  | 'ZREM'
  | 'SADD'
  | 'SREM'
  | 'HSET'
  | 'HDEL'
  | 'RPUSH'
  | 'HINCRBY'
  | 'PEXPIRE'
  | 'PERSIST'
  | 'XADD'
  | 'XTRIM';

/** Arguments of one call inside the script, well within Lua's unpack limit. */
const ARGS_PER_CALL = 2000;

/** Builds one atomic change: record checks and writes, then `commit()`. */
export class Change {
  private readonly keys: string[] = [];
  /** Key → its 1-based index: an execute's change names hundreds of keys (indexOf was quadratic). */
  private readonly index = new Map<string, number>();
  private readonly blocks = new Map<readonly string[], number>();
  private readonly checks: Check[] = [];
  private readonly writes: Write[] = [];

  constructor(private readonly redis: Redis) {}

  private idx(key: string): number {
    const known = this.index.get(key);
    if (known !== undefined) return known;
    this.keys.push(key);
    this.index.set(key, this.keys.length);
    return this.keys.length;
  }

  /** The key must hold exactly `value` (or not exist, for null). */
  expect(key: string, value: string | null): this {
    this.checks.push(value === null ? { k: this.idx(key), op: 'eq' } : { k: this.idx(key), op: 'eq', v: value });
    return this;
  }
  expectExists(key: string): this {
    this.checks.push({ k: this.idx(key), op: 'exists' });
    return this;
  }
  /** Every one of `keys` must exist: one check for all of them. */
  expectEachExists(keys: readonly string[]): this {
    if (keys.length > 0) this.checks.push({ k: this.block(keys), op: 'exists', r: keys.length });
    return this;
  }
  expectEmptySet(key: string): this {
    this.checks.push({ k: this.idx(key), op: 'empty' });
    return this;
  }
  expectHashField(key: string, field: string, value: string | null): this {
    this.checks.push(
      value === null
        ? { k: this.idx(key), op: 'hget', f: field }
        : { k: this.idx(key), op: 'hget', f: field, v: value },
    );
    return this;
  }

  write(command: WriteCommand, key: string, ...args: (string | number)[]): this {
    this.writes.push({ c: command, k: this.idx(key), n: args.length, a: args });
    return this;
  }

  /**
   * One command on `key` with many items (`perItem` arguments each: a ZADD's score and member, an
   * HSET's field and value), as few calls as Lua's unpack limit (8,000 values) comfortably allows.
   */
  writeItems(command: 'ZADD' | 'HSET', key: string, items: readonly (string | number)[], perItem: number): this {
    const step = Math.floor(ARGS_PER_CALL / perItem) * perItem;
    for (let i = 0; i < items.length; i += step) this.write(command, key, ...items.slice(i, i + step));
    return this;
  }

  /**
   * The same command on each of `keys`, the i-th with the arguments `argsOf(i)` (the same count
   * for every key): one entry for the script to decode where one write each would take thousands.
   */
  writeEach(command: WriteCommand, keys: readonly string[], argsOf: (i: number) => (string | number)[]): this {
    if (keys.length === 0) return this;
    const a: (string | number)[] = [];
    let n = -1;
    for (let i = 0; i < keys.length; i++) {
      const args = argsOf(i);
      if (n >= 0 && args.length !== n) throw new Error('writeEach: every key takes the same number of arguments');
      n = args.length;
      for (const x of args) a.push(x);
    }
    this.writes.push({ c: command, k: this.block(keys), n, r: keys.length, a });
    return this;
  }

  /**
   * Appends `keys` as one run of consecutive indexes (repeats kept: a run is addressed by
   * position). The same array passed again (a check and a write over the same keys) is the same run.
   */
  private block(keys: readonly string[]): number {
    const known = this.blocks.get(keys);
    if (known !== undefined) return known;
    const first = this.keys.length + 1;
    this.blocks.set(keys, first);
    // Not indexed one by one (tens of thousands of map entries for an execute): a key named alone
    // later is named again, which the script does not mind.
    for (const key of keys) this.keys.push(key);
    return first;
  }

  /**
   * Runs the change; true when every check held (and the writes happened), false otherwise.
   *
   * `effect` names what this change commits for the request. Inside an idempotent request whose
   * route answers that effect, the stored response is written in the same script, guarded by the
   * request's claim: either both the effect and its replayable response exist, or neither does.
   * A claim that is no longer ours (its lease lapsed and a retry took the key over) commits
   * nothing and answers 409 idempotency_key_in_use, so the request never runs twice.
   */
  async commit(effect?: CommittedEffect): Promise<boolean> {
    const scope = effect === undefined ? undefined : currentIdempotentScope();
    const response = scope && !scope.request.stored && effect ? scope.request.respond?.(effect) : null;
    let claimCheck = 0;
    if (scope && response) {
      const k = this.idx(scope.key);
      this.checks.unshift({ k, op: 'eq', v: scope.claimValue });
      this.writes.push({ c: 'SET', k, n: 3, a: [await scope.record(response), 'EX', scope.ttlSeconds] });
      claimCheck = 1;
    }
    if (this.keys.length === 0) return true;
    const args: (string | number)[] = [
      JSON.stringify(this.checks),
      JSON.stringify(
        this.writes.map((w) => (w.r === undefined ? { c: w.c, k: w.k, n: w.n } : { c: w.c, k: w.k, n: w.n, r: w.r })),
      ),
    ];
    for (const w of this.writes) for (const a of w.a) args.push(a);
    // A change a request acknowledges goes on the durable writer, whose WAIT follows it.
    const durable = effect !== undefined || currentDeadline() !== undefined;
    const result = await runScript(durable ? durableWriter(this.redis) : this.redis, COMMIT_LUA, this.keys, args);
    if (claimCheck !== 0 && result === claimCheck) {
      throw new DomainError(
        'idempotency_key_in_use',
        'This Idempotency-Key was taken over by a retry of this request; retry shortly for its result.',
      );
    }
    if (result === 0 && scope && response) scope.request.stored = true;
    // A write a request acknowledges (its effect, or any change made while serving a request)
    // must survive a failover before it is acknowledged (durability.ts; off unless configured).
    if (result === 0 && durable) await awaitReplicas(this.redis, this.keys[0]!);
    return result === 0;
  }
}
