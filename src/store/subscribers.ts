import { DomainError } from '../domain/common/errors.js';
import type {
  NoticeRepo,
  NoticeTally,
  NoticeWork,
  Recipient,
  RecipientState,
  SecretBox,
  Subscriber,
  SubscriberLocale,
  SubscriberNotice,
  SubscriberRepo,
  SubscriberState,
  SubscriptionMail,
  SubscriptionMailQueue,
} from '../ports/index.js';
import { SUBSCRIBER_STATES } from '../ports/subscribers.js';
import { awaitReplicas, durableWriter } from './durability.js';
import type { Keys } from './keys.js';
import type { RedisClient as Redis } from './redis-connect.js';
import { luaScript, runScript } from './scripts.js';
import { SUBSCRIBER_BUCKET_COUNT, type SubscriberIds } from './subscriber-key.js';

/**
 * Subscribers, their notices and the outbox that sends them (docs/subscribers.md).
 *
 * Subscribers: SUBSCRIBER_BUCKETS hashes (`subs:<n>`), field = id, value = a packed record (short
 * JSON keys, times as epoch ms, address and webhook secret sealed by the secret box): about 250
 * bytes of Redis memory a subscriber (a 34-character address; the store test measures it), with no other key per subscriber. Beside them: the counts per
 * state (`subs-count`) and the erase schedule (`subs-expire`: pending and unsubscribed records,
 * score = when the retention lets them go), both moved by the same script as the record.
 *
 * Notices: the JSON (`ntc:<id>`), a tally hash (`ntc:<id>:tally`, with `work` = its work items not
 * finished yet), the recipients hash (`ntc:<id>:rcpt`, subscriber id → packed state) and work items
 * in `ntc-work` (`<id>|<bucket>`, `<id>|r|<subscriber id>`; score = due, a claim moves it a lease
 * ahead). `ntcs` holds the notices not complete yet: once complete (no work left, nothing pending)
 * a notice leaves it and its three keys get a TTL of the retention (EXPIRE at completion, not a
 * sweep: notice ids are not time-ordered across kinds, so no id range says "old"). Work added to a
 * complete notice (a late retry) takes the TTL off again. An execution's notices are a set
 * (executionNoticesKey) that lives the retention plus 30 days past the last notice it opened.
 */

export const SUBSCRIBER_BUCKETS = SUBSCRIBER_BUCKET_COUNT;

/** Whether `b` names one of the buckets (a caller's number may not). */
const isBucket = (b: number): boolean => Number.isInteger(b) && b >= 0 && b < SUBSCRIBER_BUCKETS;

/** What a confirm link lasts when a pending record has no confirm block to say (docs: 48 h). */
const CONFIRM_TTL_MS = 48 * 3_600_000;

// ── the packed subscriber record ─────────────────────────────────────────────────────────────

type StateCode = 'p' | 'c' | 'u' | 'b';
const STATE_CODE: Record<SubscriberState, StateCode> = {
  pending: 'p',
  confirmed: 'c',
  unsubscribed: 'u',
  bounced: 'b',
};
const STATE_OF: Record<StateCode, SubscriberState> = { p: 'pending', c: 'confirmed', u: 'unsubscribed', b: 'bounced' };

/** Field names of one or two letters: this JSON is most of a subscriber's bytes. Defaults are left out. */
interface Packed {
  /** 1: webhook (absent: e-mail). */
  k?: 1;
  /** The address, sealed. */
  a: string;
  s: StateCode;
  /** Components (absent: all). */
  c?: string[];
  /** Locale (absent: en). */
  l?: SubscriberLocale;
  /** Source (absent: page). */
  o?: string;
  t: number;
  cf?: number;
  us?: number;
  bo?: number;
  br?: string;
  /** token_version (absent: 1, where every record starts). */
  v?: number;
  /** confirm: nonce, expiry (ms). */
  n?: string;
  x?: number;
  /** Webhook secret, sealed. */
  w?: string;
  r: number;
}

/** A stored time: an unparsable one is a caller's bug, refused before it could be read back as 1970. */
function ms(iso: string): number {
  const n = Date.parse(iso);
  if (!Number.isFinite(n)) throw new Error('subscriber store: a time that is not an ISO 8601 date');
  return n;
}
const iso = (n: number): string => new Date(n).toISOString();

/** Times are kept to the millisecond as epoch ms: a time read back is its toISOString() spelling. */
export function packSubscriber(s: Subscriber, box: SecretBox): string {
  const p: Packed = { a: box.seal(s.address), s: STATE_CODE[s.state], t: ms(s.created_at), r: s.rev };
  if (s.kind === 'webhook') p.k = 1;
  if (s.components.length > 0) p.c = s.components;
  if (s.locale !== 'en') p.l = s.locale;
  if (s.source !== 'page') p.o = s.source;
  if (s.confirmed_at !== null) p.cf = ms(s.confirmed_at);
  if (s.unsubscribed_at !== null) p.us = ms(s.unsubscribed_at);
  if (s.bounced_at !== null) p.bo = ms(s.bounced_at);
  if (s.bounce_reason !== null) p.br = s.bounce_reason;
  if (s.token_version !== 1) p.v = s.token_version;
  if (s.confirm !== null) {
    p.n = s.confirm.nonce;
    p.x = ms(s.confirm.expires_at);
  }
  if (s.webhook_secret !== null) p.w = box.seal(s.webhook_secret);
  return JSON.stringify(p);
}

export function unpackSubscriber(id: string, raw: string, box: SecretBox): Subscriber {
  const p = JSON.parse(raw) as Packed;
  return {
    id,
    kind: p.k === 1 ? 'webhook' : 'email',
    address: box.open(p.a),
    state: STATE_OF[p.s],
    components: p.c ?? [],
    locale: p.l ?? 'en',
    source: p.o ?? 'page',
    created_at: iso(p.t),
    confirmed_at: p.cf === undefined ? null : iso(p.cf),
    unsubscribed_at: p.us === undefined ? null : iso(p.us),
    bounced_at: p.bo === undefined ? null : iso(p.bo),
    bounce_reason: p.br ?? null,
    token_version: p.v ?? 1,
    confirm: p.n === undefined || p.x === undefined ? null : { nonce: p.n, expires_at: iso(p.x) },
    webhook_secret: p.w === undefined ? null : box.open(p.w),
    rev: p.r,
  };
}

/** When the retention lets the record go (ms), or null when it stays. */
export function eraseAtOf(s: Subscriber, retentionMs: number): number | null {
  if (s.state === 'pending') {
    const linkEnds = s.confirm !== null ? ms(s.confirm.expires_at) : ms(s.created_at) + CONFIRM_TTL_MS;
    return linkEnds + retentionMs;
  }
  if (s.state === 'unsubscribed') return ms(s.unsubscribed_at ?? s.created_at) + retentionMs;
  return null;
}

// ── subscriber scripts ───────────────────────────────────────────────────────────────────────

const STATE_NAMES_LUA = `local NAMES = {p = 'pending', c = 'confirmed', u = 'unsubscribed', b = 'bounced'}`;

/**
 * sub_put — KEYS[1] bucket, [2] counts, [3] erase schedule; ARGV[1] id, [2] the rev expected
 * ('' = none may exist), [3] packed record, [4] its state's name, [5] erase time ('' = none).
 * 1 = written; 0 = the stored rev is not the one expected.
 */
const PUT_LUA = luaScript(
  'sub_put',
  `
${STATE_NAMES_LUA}
local old = redis.call('HGET', KEYS[1], ARGV[1])
local oldState = nil
if old then
  local rec = cjson.decode(old)
  if ARGV[2] == '' or tonumber(ARGV[2]) ~= rec.r then return 0 end
  oldState = NAMES[rec.s]
elseif ARGV[2] ~= '' then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
if oldState ~= ARGV[4] then
  if oldState then redis.call('HINCRBY', KEYS[2], oldState, -1) end
  redis.call('HINCRBY', KEYS[2], ARGV[4], 1)
end
if ARGV[5] == '' then redis.call('ZREM', KEYS[3], ARGV[1]) else redis.call('ZADD', KEYS[3], ARGV[5], ARGV[1]) end
return 1
`,
);

/** sub_erase — KEYS as sub_put; ARGV[1] id. 1 = erased, 0 = there was nothing. */
const ERASE_LUA = luaScript(
  'sub_erase',
  `
${STATE_NAMES_LUA}
redis.call('ZREM', KEYS[3], ARGV[1])
local old = redis.call('HGET', KEYS[1], ARGV[1])
if not old then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HINCRBY', KEYS[2], NAMES[cjson.decode(old).s], -1)
return 1
`,
);

/**
 * sub_erase_due — KEYS[1] counts, [2] erase schedule, [3..] the bucket of each id; ARGV[1] now
 * (ms), [2..] ids. An entry still due whose record is still pending or unsubscribed is erased; one
 * whose record moved on (confirmed meanwhile) only leaves the schedule; one rescheduled meanwhile
 * (a new confirm link) is left alone. Returns how many records were erased.
 */
const ERASE_DUE_LUA = luaScript(
  'sub_erase_due',
  `
${STATE_NAMES_LUA}
local now = tonumber(ARGV[1])
local erased = 0
for i = 2, #ARGV do
  local id, bucket = ARGV[i], KEYS[i + 1]
  local due = redis.call('ZSCORE', KEYS[2], id)
  if due and tonumber(due) <= now then
    local raw = redis.call('HGET', bucket, id)
    if raw then
      local s = cjson.decode(raw).s
      if s == 'p' or s == 'u' then
        redis.call('HDEL', bucket, id)
        redis.call('HINCRBY', KEYS[1], NAMES[s], -1)
        erased = erased + 1
      end
    end
    redis.call('ZREM', KEYS[2], id)
  end
end
return erased
`,
);

export class RedisSubscriberRepo implements SubscriberRepo {
  readonly buckets = SUBSCRIBER_BUCKETS;

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly box: SecretBox,
    private readonly ids: SubscriberIds,
    private readonly retentionMs: number,
  ) {}

  idOf(kind: Subscriber['kind'], address: string): string {
    return this.ids.idOf(kind, address);
  }

  bucketOf(id: string): number {
    return this.ids.bucketOf(id);
  }

  async get(id: string): Promise<Subscriber | null> {
    const raw = await this.redis.hget(this.keys.subscriberBucket(this.bucketOf(id)), id);
    return raw === null ? null : unpackSubscriber(id, raw, this.box);
  }

  async put(next: Subscriber, expectRev: number | null): Promise<boolean> {
    // The contract's rev: 1 on create, +1 per write. A caller that forgot to bump it would make
    // every later compare-and-set of the record fail against what it holds.
    if (next.rev !== (expectRev ?? 0) + 1) {
      throw new Error(`subscriber put: rev ${next.rev} does not follow ${expectRev ?? 'none'}`);
    }
    const eraseAt = eraseAtOf(next, this.retentionMs);
    const keys = this.subscriberKeys(next.id);
    const written = await runScript(durableWriter(this.redis), PUT_LUA, keys, [
      next.id,
      expectRev === null ? '' : String(expectRev),
      packSubscriber(next, this.box),
      next.state,
      eraseAt === null ? '' : String(eraseAt),
    ]);
    if (written !== 1) return false;
    await awaitReplicas(this.redis, keys[0]!);
    return true;
  }

  async erase(id: string): Promise<boolean> {
    const keys = this.subscriberKeys(id);
    const erased = await runScript(durableWriter(this.redis), ERASE_LUA, keys, [id]);
    await awaitReplicas(this.redis, keys[0]!);
    return erased === 1;
  }

  async bucket(bucket: number): Promise<Subscriber[]> {
    if (!isBucket(bucket)) return [];
    const all = await this.redis.hgetall(this.keys.subscriberBucket(bucket));
    return Object.keys(all)
      .sort()
      .map((id) => unpackSubscriber(id, all[id]!, this.box));
  }

  async bucketIds(bucket: number): Promise<string[]> {
    if (!isBucket(bucket)) return [];
    return (await this.redis.hkeys(this.keys.subscriberBucket(bucket))).sort();
  }

  async many(ids: readonly string[]): Promise<(Subscriber | null)[]> {
    if (ids.length === 0) return [];
    // One HMGET per bucket the ids live in: a notice's page is one bucket's, so one round trip.
    const byBucket = new Map<number, number[]>();
    ids.forEach((id, i) => {
      const b = this.bucketOf(id);
      const at = byBucket.get(b);
      if (at) at.push(i);
      else byBucket.set(b, [i]);
    });
    const out: (Subscriber | null)[] = new Array<Subscriber | null>(ids.length).fill(null);
    await Promise.all(
      [...byBucket].map(async ([b, at]) => {
        const raw = await this.redis.hmget(this.keys.subscriberBucket(b), ...at.map((i) => ids[i]!));
        raw.forEach((r, j) => {
          if (r !== null) out[at[j]!] = unpackSubscriber(ids[at[j]!]!, r, this.box);
        });
      }),
    );
    return out;
  }

  async counts(): Promise<Record<SubscriberState, number>> {
    const raw = await this.redis.hgetall(this.keys.subscriberCounts());
    return Object.fromEntries(SUBSCRIBER_STATES.map((s) => [s, Math.max(0, Number(raw[s] ?? 0))])) as Record<
      SubscriberState,
      number
    >;
  }

  async eraseExpired(nowMs: number, limit: number): Promise<number> {
    const due = await this.redis.zrangebyscore(
      this.keys.subscribersExpiring(),
      '-inf',
      String(nowMs),
      'LIMIT',
      0,
      Math.max(1, limit),
    );
    if (due.length === 0) return 0;
    const keys = [
      this.keys.subscriberCounts(),
      this.keys.subscribersExpiring(),
      ...due.map((id) => this.keys.subscriberBucket(this.bucketOf(id))),
    ];
    return Number(await runScript(this.redis, ERASE_DUE_LUA, keys, [String(nowMs), ...due]));
  }

  private subscriberKeys(id: string): string[] {
    return [
      this.keys.subscriberBucket(this.bucketOf(id)),
      this.keys.subscriberCounts(),
      this.keys.subscribersExpiring(),
    ];
  }
}

// ── leased sorted sets (notice work, subscription mail) ──────────────────────────────────────

/**
 * lease_claim — KEYS[1] the sorted set; ARGV[1] now, [2] the lease's score, [3] limit. Takes the
 * due members, moving each to the lease's score (a crashed holder's comes back when it passes).
 */
const CLAIM_LUA = luaScript(
  'sub_lease_claim',
  `
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, m in ipairs(due) do redis.call('ZADD', KEYS[1], 'XX', ARGV[2], m) end
return due
`,
);

/** lease_finish — KEYS[1] the sorted set; ARGV[1] member, [2] lease. Removes it if still so leased. */
const FINISH_LUA = luaScript(
  'sub_lease_finish',
  `
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not s or tonumber(s) ~= tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
return 1
`,
);

/** lease_extend — KEYS[1] the sorted set; ARGV[1] member, [2] lease, [3] new lease. 1 if it was still so leased. */
const EXTEND_LUA = luaScript(
  'sub_lease_extend',
  `
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not s or tonumber(s) ~= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], 'XX', ARGV[3], ARGV[1])
return 1
`,
);

/**
 * Leases due members and parses them; a member that does not parse (never one this module wrote)
 * is dropped, or it would come back at every lease's end.
 */
async function claimLeased<T>(
  redis: Redis,
  key: string,
  o: { nowMs: number; leaseMs: number; limit: number },
  parse: (member: string, lease: number) => T | null,
): Promise<T[]> {
  const lease = o.nowMs + Math.max(1, o.leaseMs);
  const members = (await runScript(redis, CLAIM_LUA, [key], [o.nowMs, lease, Math.max(1, o.limit)])) as string[];
  const out: T[] = [];
  const junk: string[] = [];
  for (const m of members) {
    const item = parse(m, lease);
    if (item === null) junk.push(m);
    else out.push(item);
  }
  if (junk.length > 0) await redis.zrem(key, ...junk);
  return out;
}

// ── notices ──────────────────────────────────────────────────────────────────────────────────

/**
 * Shared by the notice scripts: KEYS[t] tally, [n] notice, [r] recipients, [i] the open-notices
 * index; a notice with no work item left and nothing pending is complete: its keys get the
 * retention's TTL and it leaves the index. Otherwise (still, or again, open) they have none.
 */
const SETTLE_LUA = `
local function settle(tally, notice, rcpt, index, id, retention)
  local t = redis.call('HMGET', tally, 'total', 'delivered', 'failed', 'bounced', 'work')
  local n = {}
  for i = 1, 5 do n[i] = tonumber(t[i]) or 0 end
  if n[5] <= 0 and n[1] - n[2] - n[3] - n[4] <= 0 then
    for _, k in ipairs({notice, tally, rcpt}) do redis.call('PEXPIRE', k, retention) end
    redis.call('ZREM', index, id)
  else
    for _, k in ipairs({notice, tally, rcpt}) do redis.call('PERSIST', k) end
    redis.call('ZADD', index, 0, id)
  end
end
`;

/**
 * ntc_open — KEYS[1] notice, [2] tally, [3] open-notices index, [4] work, [5] the execution's
 * notices; ARGV[1] JSON, [2] id, [3] now, [4] buckets, [5] '1' when it has an execution, [6] that
 * set's TTL. 1 = opened, 0 = it already was (nothing changed).
 */
const OPEN_LUA = luaScript(
  'ntc_open',
  `
if not redis.call('SET', KEYS[1], ARGV[1], 'NX') then return 0 end
local items = {}
for b = 0, tonumber(ARGV[4]) - 1 do
  items[#items + 1] = ARGV[3]
  items[#items + 1] = ARGV[2] .. '|' .. b
end
local added = redis.call('ZADD', KEYS[4], 'NX', unpack(items))
redis.call('HSET', KEYS[2], 'total', 0, 'delivered', 0, 'failed', 0, 'bounced', 0, 'possible_duplicates', 0, 'work', added)
redis.call('ZADD', KEYS[3], 0, ARGV[2])
if ARGV[5] == '1' then
  redis.call('SADD', KEYS[5], ARGV[2])
  redis.call('PEXPIRE', KEYS[5], ARGV[6])
end
return 1
`,
);

/**
 * ntc_finish — KEYS[1] work, [2] tally, [3] notice, [4] recipients, [5] index; ARGV[1] member,
 * [2] lease, [3] notice id, [4] retention. Removes the item only while it is still so leased.
 */
const NOTICE_FINISH_LUA = luaScript(
  'ntc_finish',
  `
${SETTLE_LUA}
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not s or tonumber(s) ~= tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('HINCRBY', KEYS[2], 'work', -1)
  settle(KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[3], ARGV[4])
end
return 1
`,
);

/** ntc_retry — KEYS as ntc_finish; ARGV[1] member, [2] due (ms), [3] notice id, [4] retention. */
const NOTICE_RETRY_LUA = luaScript(
  'ntc_retry',
  `
${SETTLE_LUA}
if redis.call('EXISTS', KEYS[3]) == 0 then return 0 end
if redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1]) == 1 then redis.call('HINCRBY', KEYS[2], 'work', 1) end
settle(KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[3], ARGV[4])
return 1
`,
);

/**
 * ntc_record — KEYS[1] recipients, [2] tally, [3] notice, [4] index; ARGV[1] notice id, [2]
 * retention, then per recipient six: subscriber id, state code, attempts, at (ms), possible
 * duplicate '1'/'0', error. The recipient's value: `<state>|<attempts>|<at>|<dup>|<error>`. The
 * duplicate mark sticks once set (the receiving server may hold two copies whatever happens
 * after). Tally: total +1 for a recipient new to the notice; the settled counters follow the
 * state. Several recipients in one call (a worker's sends settle many at a time) move the tally
 * and settle the notice once.
 */
const RECORD_LUA = luaScript(
  'ntc_record',
  `
${SETTLE_LUA}
if redis.call('EXISTS', KEYS[3]) == 0 then return 0 end
local SETTLED = {d = 'delivered', f = 'failed', b = 'bounced'}
local delta = {total = 0, delivered = 0, failed = 0, bounced = 0, possible_duplicates = 0}
for i = 3, #ARGV, 6 do
  local id, state = ARGV[i], ARGV[i + 1]
  local old = redis.call('HGET', KEYS[1], id)
  local oldState, oldDup = nil, '0'
  if old then
    oldState = string.sub(old, 1, 1)
    oldDup = string.match(old, '^[^|]*|[^|]*|[^|]*|([01])') or '0'
  end
  local dup = ARGV[i + 4]
  if oldDup == '1' then dup = '1' end
  redis.call('HSET', KEYS[1], id, state .. '|' .. ARGV[i + 2] .. '|' .. ARGV[i + 3] .. '|' .. dup .. '|' .. ARGV[i + 5])
  if not old then delta.total = delta.total + 1 end
  if oldState ~= state then
    if oldState and SETTLED[oldState] then delta[SETTLED[oldState]] = delta[SETTLED[oldState]] - 1 end
    if SETTLED[state] then delta[SETTLED[state]] = delta[SETTLED[state]] + 1 end
  end
  if dup == '1' and oldDup ~= '1' then delta.possible_duplicates = delta.possible_duplicates + 1 end
end
for field, d in pairs(delta) do
  if d ~= 0 then redis.call('HINCRBY', KEYS[2], field, d) end
end
settle(KEYS[2], KEYS[3], KEYS[1], KEYS[4], ARGV[1], ARGV[2])
return 1
`,
);

/**
 * ntc_page — KEYS[1] recipients; ARGV[1] HSCAN cursor, [2] resume after this id within that
 * cursor's group ('' = from its start), [3] state code ('' = any), [4] limit, [5] most buckets
 * visited. Walks the hash one bucket chain at a time (HSCAN COUNT 1), so a page never has to cut a
 * group it cannot resume: a group larger than the room left is taken in id order up to the limit,
 * and the next cursor says where in that group to go on. Returns {next cursor ('' = done), id, value, …}.
 */
const PAGE_LUA = luaScript(
  'ntc_page',
  `
local c, after, want, limit = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local out, count = {}, 0
for _ = 1, tonumber(ARGV[5]) do
  local res = redis.call('HSCAN', KEYS[1], c, 'COUNT', 1)
  local kv, group = res[2], {}
  for i = 1, #kv, 2 do
    if (after == '' or kv[i] > after) and (want == '' or string.sub(kv[i + 1], 1, 1) == want) then
      group[#group + 1] = {kv[i], kv[i + 1]}
    end
  end
  after = ''
  table.sort(group, function(a, b) return a[1] < b[1] end)
  local room = limit - count
  if #group > room then
    for i = 1, room do
      out[#out + 1] = group[i][1]
      out[#out + 1] = group[i][2]
    end
    return {c .. ':' .. group[room][1], out}
  end
  for _, e in ipairs(group) do
    out[#out + 1] = e[1]
    out[#out + 1] = e[2]
  end
  count = count + #group
  c = res[1]
  if c == '0' then return {'', out} end
  if count == limit then return {c, out} end
end
return {c, out}
`,
);

/** Buckets one listRecipients call visits at most: a rare state's page may come back short. */
const PAGE_STEPS = 1000;
const CURSOR = /^(\d+)(?::([A-Za-z0-9_]+))?$/;

type RecipientCode = 's' | 'r' | 'd' | 'f' | 'b';
const RECIPIENT_CODE: Record<RecipientState, RecipientCode> = {
  sending: 's',
  retrying: 'r',
  delivered: 'd',
  failed: 'f',
  bounced: 'b',
};
const RECIPIENT_OF: Record<RecipientCode, RecipientState> = {
  s: 'sending',
  r: 'retrying',
  d: 'delivered',
  f: 'failed',
  b: 'bounced',
};

/** `<state>|<attempts>|<at ms>|<possible duplicate 0/1>|<error>` (the error last: it may hold `|`). */
export function unpackRecipient(subscriberId: string, raw: string): Recipient | null {
  const m = /^([srdfb])\|(\d+)\|(\d+)\|([01])\|([\s\S]*)$/.exec(raw);
  if (m === null) return null;
  return {
    subscriber_id: subscriberId,
    state: RECIPIENT_OF[m[1] as RecipientCode],
    attempts: Number(m[2]),
    at: iso(Number(m[3])),
    error: m[5] === '' ? null : m[5]!,
    possible_duplicate: m[4] === '1',
  };
}

/** How long an execution's list of notices outlives the last notice it opened, beyond the retention. */
const EXECUTION_INDEX_SLACK_MS = 30 * 86_400_000;

export class RedisNoticeRepo implements NoticeRepo {
  /** `now`: when a notice's work items fall due at open() (the dispatcher's clock, in tests a fake one). */
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly retentionMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  async open(n: SubscriberNotice): Promise<boolean> {
    const k = this.keys;
    const keys = [
      k.subscriberNotice(n.id),
      k.subscriberNoticeTally(n.id),
      k.subscriberNotices(),
      k.subscriberWork(),
      n.execution_id === null ? k.subscriberNotices() : executionNoticesKey(k, n.execution_id),
    ];
    const opened = await runScript(durableWriter(this.redis), OPEN_LUA, keys, [
      JSON.stringify(n),
      n.id,
      this.now(),
      SUBSCRIBER_BUCKETS,
      n.execution_id === null ? '' : '1',
      this.retentionMs + EXECUTION_INDEX_SLACK_MS,
    ]);
    await awaitReplicas(this.redis, keys[0]!);
    return opened === 1;
  }

  async get(id: string): Promise<SubscriberNotice | null> {
    const raw = await this.redis.get(this.keys.subscriberNotice(id));
    return raw === null ? null : (JSON.parse(raw) as SubscriberNotice);
  }

  async claim(nowMs: number, leaseMs: number, limit: number): Promise<NoticeWork[]> {
    return claimLeased(this.redis, this.keys.subscriberWork(), { nowMs, leaseMs, limit }, parseWork);
  }

  async finish(w: NoticeWork): Promise<void> {
    await runScript(this.redis, NOTICE_FINISH_LUA, this.noticeKeys(w.noticeId), [
      workMember(w),
      w.lease,
      w.noticeId,
      this.retentionMs,
    ]);
  }

  async extend(w: NoticeWork, untilMs: number): Promise<NoticeWork | null> {
    const kept = await runScript(
      this.redis,
      EXTEND_LUA,
      [this.keys.subscriberWork()],
      [workMember(w), w.lease, untilMs],
    );
    return kept === 1 ? { ...w, lease: untilMs } : null;
  }

  async retryAt(noticeId: string, subscriberId: string, atMs: number): Promise<void> {
    await runScript(this.redis, NOTICE_RETRY_LUA, this.noticeKeys(noticeId), [
      `${noticeId}|r|${subscriberId}`,
      atMs,
      noticeId,
      this.retentionMs,
    ]);
  }

  async recipients(noticeId: string, subscriberIds: string[]): Promise<(Recipient | null)[]> {
    if (subscriberIds.length === 0) return [];
    const raw = await this.redis.hmget(this.keys.subscriberNoticeRecipients(noticeId), ...subscriberIds);
    return subscriberIds.map((id, i) => {
      const v = raw[i];
      return v === null || v === undefined ? null : unpackRecipient(id, v);
    });
  }

  async record(noticeId: string, r: Recipient | readonly Recipient[]): Promise<void> {
    const rs: readonly Recipient[] = Array.isArray(r) ? r : [r as Recipient];
    if (rs.length === 0) return;
    const k = this.keys;
    const args: (string | number)[] = [noticeId, this.retentionMs];
    for (const x of rs)
      args.push(
        x.subscriber_id,
        RECIPIENT_CODE[x.state],
        Math.max(0, Math.trunc(x.attempts)),
        ms(x.at),
        x.possible_duplicate ? '1' : '0',
        x.error ?? '',
      );
    await runScript(
      this.redis,
      RECORD_LUA,
      [
        k.subscriberNoticeRecipients(noticeId),
        k.subscriberNoticeTally(noticeId),
        k.subscriberNotice(noticeId),
        k.subscriberNotices(),
      ],
      args,
    );
  }

  async tally(noticeId: string): Promise<NoticeTally> {
    const fields = ['total', 'delivered', 'failed', 'bounced', 'possible_duplicates', 'work'];
    const raw = await this.redis.hmget(this.keys.subscriberNoticeTally(noticeId), ...fields);
    const [total, delivered, failed, bounced, possible_duplicates, work] = raw.map((v) => Math.max(0, Number(v ?? 0)));
    const pending = Math.max(0, total! - delivered! - failed! - bounced!);
    return {
      total: total!,
      delivered: delivered!,
      failed: failed!,
      pending,
      bounced: bounced!,
      possible_duplicates: possible_duplicates!,
      complete: work === 0 && pending === 0,
    };
  }

  /**
   * A page of recipients in the hash's own order (id order within each step of the walk, not
   * overall: an id-ordered index would double what a recipient costs). `cursor` is opaque: the
   * `next` of the page before (null: the first page). Every recipient present throughout the walk
   * is listed; one may appear twice when the hash grew in between.
   */
  async listRecipients(
    noticeId: string,
    o: { state?: RecipientState; cursor: string | null; limit: number },
  ): Promise<{ items: Recipient[]; next: string | null }> {
    const m = o.cursor === null ? ['0', '0', undefined] : CURSOR.exec(o.cursor);
    if (m === null) throw new DomainError('invalid_cursor', 'The cursor is not one this API issued.');
    const [next, flat] = (await runScript(
      this.redis,
      PAGE_LUA,
      [this.keys.subscriberNoticeRecipients(noticeId)],
      [
        m[1]!,
        m[2] ?? '',
        o.state === undefined ? '' : RECIPIENT_CODE[o.state],
        Math.max(1, Math.trunc(o.limit)),
        PAGE_STEPS,
      ],
    )) as [string, string[]];
    const items: Recipient[] = [];
    for (let i = 0; i < flat.length; i += 2) {
      const r = unpackRecipient(flat[i]!, flat[i + 1]!);
      if (r !== null) items.push(r);
    }
    return { items, next: next === '' ? null : next };
  }

  async ofExecution(executionId: string): Promise<string[]> {
    const ids = (await this.redis.smembers(executionNoticesKey(this.keys, executionId))).sort();
    if (ids.length === 0) return [];
    // The list outlives notices whose retention ended: only those still kept are named.
    const kept = await Promise.all(ids.map((id) => this.redis.exists(this.keys.subscriberNotice(id))));
    return ids.filter((_, i) => kept[i] === 1);
  }

  private noticeKeys(noticeId: string): string[] {
    const k = this.keys;
    return [
      k.subscriberWork(),
      k.subscriberNoticeTally(noticeId),
      k.subscriberNotice(noticeId),
      k.subscriberNoticeRecipients(noticeId),
      k.subscriberNotices(),
    ];
  }
}

/**
 * The notices an execution opened (a set). keys.ts has no spelling for it yet: it is derived from
 * the notice key with an `exe:` part no notice id (`ntc_…`) can take.
 */
export function executionNoticesKey(keys: Keys, executionId: string): string {
  return keys.subscriberExecutionNotices(executionId);
}

function workMember(w: NoticeWork): string {
  return 'bucket' in w ? `${w.noticeId}|${w.bucket}` : `${w.noticeId}|r|${w.subscriberId}`;
}

/** `<notice id>|<bucket>` or `<notice id>|r|<subscriber id>`; null for anything else. */
export function parseWork(member: string, lease: number): NoticeWork | null {
  const parts = member.split('|');
  if (parts.length === 2 && /^\d{1,3}$/.test(parts[1]!) && Number(parts[1]) < SUBSCRIBER_BUCKETS) {
    return { noticeId: parts[0]!, bucket: Number(parts[1]), lease };
  }
  if (parts.length === 3 && parts[1] === 'r' && parts[2] !== '') {
    return { noticeId: parts[0]!, subscriberId: parts[2]!, lease };
  }
  return null;
}

// ── subscription mail ────────────────────────────────────────────────────────────────────────

/** The member spelling of an item: fixed field order, so finish() finds what enqueue() wrote. */
function mailMember(m: SubscriptionMail): string {
  return JSON.stringify({ kind: m.kind, subscriberId: m.subscriberId, nonce: m.nonce });
}

const MAIL_KINDS = new Set<unknown>(['confirm', 'already_subscribed', 'webhook_challenge']);

function parseMail(member: string): SubscriptionMail | null {
  try {
    const v = JSON.parse(member) as Partial<Record<keyof SubscriptionMail, unknown>>;
    if (!MAIL_KINDS.has(v.kind) || typeof v.subscriberId !== 'string') return null;
    if (v.nonce !== null && typeof v.nonce !== 'string') return null;
    return { kind: v.kind as SubscriptionMail['kind'], subscriberId: v.subscriberId, nonce: v.nonce };
  } catch {
    return null;
  }
}

/**
 * The subscription's own mails as a sorted set (`subs-tx`), member = the item's JSON, score = due.
 * The same item enqueued twice is one entry (its due time the later call's): a second "send me the
 * link" while the first is still waiting sends one mail.
 */
export class RedisSubscriptionMailQueue implements SubscriptionMailQueue {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
  ) {}

  async enqueue(item: SubscriptionMail, atMs: number): Promise<void> {
    await this.redis.zadd(this.keys.subscriberTx(), atMs, mailMember(item));
  }

  async claim(nowMs: number, leaseMs: number, limit: number): Promise<(SubscriptionMail & { lease: number })[]> {
    return claimLeased(this.redis, this.keys.subscriberTx(), { nowMs, leaseMs, limit }, (m, lease) => {
      const item = parseMail(m);
      return item === null ? null : { ...item, lease };
    });
  }

  async finish(item: SubscriptionMail & { lease: number }): Promise<void> {
    await runScript(this.redis, FINISH_LUA, [this.keys.subscriberTx()], [mailMember(item), item.lease]);
  }
}

// ── key rotation ─────────────────────────────────────────────────────────────────────────────

/** sub_reseal — KEYS[1] bucket; ARGV[1] id, [2] the record read, [3] the resealed record. 1 = written. */
const RESEAL_LUA = luaScript(
  'sub_reseal',
  `
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
`,
);

/** A packed record with its sealed fields moved to the current key, or null when none needs it. */
export function resealSubscriberRecord(raw: string, box: SecretBox): string | null {
  const p = JSON.parse(raw) as Packed;
  const a = box.reseal(p.a);
  const w = p.w === undefined ? null : box.reseal(p.w);
  if (a === null && w === null) return null;
  if (a !== null) p.a = a;
  if (w !== null) p.w = w;
  return JSON.stringify(p);
}

/**
 * For `herald secrets reseal` (src/store/reseal.ts): the subscriber key and every subscriber's
 * sealed address and webhook secret, each record compare-and-set as read (a record written
 * meanwhile is read again; a writer seals with the current key anyway). Named in `unreadable`:
 * `<bucket key>#<id>` for a record, the key itself for the subscriber key.
 */
export async function resealSubscribers(
  redis: Redis,
  keys: Keys,
  box: SecretBox,
): Promise<{ checked: number; resealed: number; unreadable: string[] }> {
  const report = { checked: 0, resealed: 0, unreadable: [] as string[] };
  const one = async (bucket: string, id: string, raw: string | null): Promise<void> => {
    for (let attempt = 0; attempt < 20 && raw !== null; attempt++) {
      let next: string | null;
      try {
        next = resealSubscriberRecord(raw, box);
      } catch {
        report.unreadable.push(`${bucket}#${id}`);
        return;
      }
      if (next === null || (await runScript(redis, RESEAL_LUA, [bucket], [id, raw, next])) === 1) {
        if (next !== null) report.resealed++;
        return;
      }
      raw = await redis.hget(bucket, id);
    }
  };
  const keyResealed = await resealSubscriberKey(redis, keys, box);
  if (keyResealed !== 'absent') report.checked++;
  if (keyResealed === 'resealed') report.resealed++;
  if (keyResealed === 'unreadable') report.unreadable.push(keys.subscriberKey());
  for (let b = 0; b < SUBSCRIBER_BUCKETS; b++) {
    const bucket = keys.subscriberBucket(b);
    let cursor = '0';
    do {
      const [next, flat] = await redis.hscan(bucket, cursor, 'COUNT', 500);
      cursor = next;
      for (let i = 0; i < flat.length; i += 2) {
        report.checked++;
        await one(bucket, flat[i]!, flat[i + 1]!);
      }
    } while (cursor !== '0');
  }
  return report;
}

/** STRING compare-and-set: KEYS[1]; ARGV[1] read, [2] new. */
const RESEAL_KEY_LUA = luaScript(
  'sub_reseal_key',
  `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1
`,
);

async function resealSubscriberKey(
  redis: Redis,
  keys: Keys,
  box: SecretBox,
): Promise<'absent' | 'current' | 'resealed' | 'unreadable'> {
  const key = keys.subscriberKey();
  // Made once and never rewritten: a lost compare-and-set can only be another reseal's.
  const raw = await redis.get(key);
  if (raw === null) return 'absent';
  let next: string | null;
  try {
    next = box.reseal(raw);
  } catch {
    return 'unreadable';
  }
  if (next === null) return 'current';
  return (await runScript(redis, RESEAL_KEY_LUA, [key], [raw, next])) === 1 ? 'resealed' : 'current';
}
