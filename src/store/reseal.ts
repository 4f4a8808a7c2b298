import type { Cluster, Redis } from 'ioredis';
import type { SecretBox } from '../ports/index.js';
import type { Keys } from './keys.js';
import { secretCheckKey } from './secret-key.js';
import { luaScript, runScript } from './scripts.js';
import { resealSubscribers } from './subscribers.js';

/**
 * `herald secrets reseal`: every value sealed with HERALD_SECRET_KEY_PREVIOUS is sealed again with
 * HERALD_SECRET_KEY — connection secrets, event endpoints' signing secrets, stored idempotent
 * responses, the subscriber key with subscribers' addresses and webhook secrets, and the key
 * check value.
 * Safe while Herald runs: each record is replaced only if it is still exactly what was read
 * (compare-and-set in one script, keeping its TTL); a record changed meanwhile is read again.
 * Running it twice changes nothing the second time.
 */
export interface ResealReport {
  /** Records that hold a sealed value. */
  checked: number;
  /** Records rewritten under the current key. */
  resealed: number;
  /** Records no key could open (left as they are; named by key in `unreadable`). */
  unreadable: string[];
}

/** KEYS[1] the record; ARGV[1] the JSON read; ARGV[2] the resealed JSON. 1 = written, 0 = changed meanwhile. */
const CAS_LUA = luaScript(
  'reseal_cas',
  `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
return 1`,
);

/** A rewrite of one record's JSON: the new JSON, or null when nothing in it needs resealing. */
type Rewrite = (raw: string) => string | null;

export async function resealAll(redis: Redis | Cluster, keys: Keys, box: SecretBox): Promise<ResealReport> {
  const report: ResealReport = { checked: 0, resealed: 0, unreadable: [] };
  const one = async (key: string, rewrite: Rewrite): Promise<void> => {
    // A concurrent writer seals with the current key too, so a lost race re-reads and usually
    // finds nothing left to do; the bound only guards against a record rewritten without end.
    for (let attempt = 0; attempt < 20; attempt++) {
      const raw = await redis.get(key);
      if (raw === null) return;
      let next: string | null;
      try {
        next = rewrite(raw);
      } catch {
        report.unreadable.push(key);
        return;
      }
      if (next === null) return;
      if ((await runScript(redis, CAS_LUA, [key], [raw, next])) === 1) {
        report.resealed++;
        return;
      }
    }
    report.unreadable.push(key);
  };

  const check = secretCheckKey(keys);
  if ((await redis.exists(check)) === 1) {
    report.checked++;
    await one(check, (raw) => box.reseal(raw));
  }

  for (const id of await redis.zrange(keys.connections(), '0', '-1')) {
    report.checked++;
    await one(keys.connection(id), (raw) => resealConnection(raw, box));
  }

  for (const id of await redis.zrange(keys.eventEndpoints(), '0', '-1')) {
    report.checked++;
    await one(keys.eventEndpoint(id), (raw) => resealEndpoint(raw, box));
  }

  for (const key of await scanKeys(redis, `${keys.tag}:idem:*`)) {
    const raw = await redis.get(key);
    if (raw === null || !raw.includes('"s":"done"')) continue;
    report.checked++;
    await one(key, (r) => resealStoredResponse(r, box));
  }

  const subscribers = await resealSubscribers(redis, keys, box);
  report.checked += subscribers.checked;
  report.resealed += subscribers.resealed;
  report.unreadable.push(...subscribers.unreadable);
  return report;
}

function resealConnection(raw: string, box: SecretBox): string | null {
  const record = JSON.parse(raw) as { secrets?: Record<string, { sealed: string }> };
  let changed = false;
  for (const secret of Object.values(record.secrets ?? {})) {
    const next = box.reseal(secret.sealed);
    if (next !== null) {
      secret.sealed = next;
      changed = true;
    }
  }
  return changed ? JSON.stringify(record) : null;
}

/** An event endpoint (store/event-store.ts): its current and rotated-out signing secrets. */
function resealEndpoint(raw: string, box: SecretBox): string | null {
  const record = JSON.parse(raw) as { secrets?: { sealed: string }[] };
  let changed = false;
  for (const secret of record.secrets ?? []) {
    const next = box.reseal(secret.sealed);
    if (next !== null) {
      secret.sealed = next;
      changed = true;
    }
  }
  return changed ? JSON.stringify(record) : null;
}

function resealStoredResponse(raw: string, box: SecretBox): string | null {
  const record = JSON.parse(raw) as { s?: string; r?: string };
  if (record.s !== 'done' || typeof record.r !== 'string') return null;
  const next = box.reseal(record.r);
  if (next === null) return null;
  record.r = next;
  return JSON.stringify(record);
}

/** Every key matching a pattern; on a Cluster, from each master (all of Herald's keys share one slot). */
async function scanKeys(redis: Redis | Cluster, pattern: string): Promise<string[]> {
  const nodes: Redis[] = 'nodes' in redis ? redis.nodes('master') : [redis];
  const found: string[] = [];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, batch] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      found.push(...batch);
    } while (cursor !== '0');
  }
  return found;
}
