import { afterAll, describe, expect, it } from 'vitest';
import type { Actor } from '../../src/domain/common/actor.js';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import type { PageRequest } from '../../src/domain/common/pagination.js';
import { newIncident, type Incident, type IncidentStatus, type Severity } from '../../src/domain/incident/incident.js';
import type { IncidentFilter } from '../../src/ports/index.js';
import { IncidentService } from '../../src/services/incidents.js';
import { encodeIncident } from '../../src/store/incident-record.js';
import { moveLegacyIndexes } from '../../src/store/incident-indexes.js';
import { RedisIncidentRepo } from '../../src/store/incidents.js';
import { createKeys, type Keys } from '../../src/store/keys.js';
import { dropPrefix, uniquePrefix, useTestRedis } from '../support/redis.js';

const actor: Actor = { type: 'api_key', id: 'key_01JABCDEFGHJKMNPQRSTVWXYZ0', name: 'test' };
const ids = createIdGenerator();
const t = useTestRedis('idx');
/** Each test's incidents under a prefix of its own (lists are checked whole), dropped at the end. */
const prefixes: string[] = [];
afterAll(async () => {
  for (const p of prefixes) await dropPrefix(t.redis, p);
});

function setup(label: string): { keys: Keys; repo: RedisIncidentRepo; svc: IncidentService } {
  const prefix = uniquePrefix(label);
  prefixes.push(prefix);
  const keys = createKeys(prefix);
  const repo = new RedisIncidentRepo(t.redis, keys);
  const svc = new IncidentService({
    incidents: repo,
    templatesExist: (t) => Promise.resolve(t.map(() => true)),
    templateVariables: (t) => Promise.resolve(t.map(() => [])),
    clock: { now: () => new Date() },
    ids,
  });
  return { keys, repo, svc };
}

/** Every page of a list, in order. */
async function listAll(repo: RedisIncidentRepo, filter: IncidentFilter, limit: number): Promise<string[]> {
  const out: string[] = [];
  let page: PageRequest = { limit, cursor: null };
  for (let n = 0; n < 1000; n++) {
    const got = await repo.list(filter, page);
    out.push(...got.data.map((i) => i.id));
    if (!got.nextCursor) return out;
    page = { limit, cursor: got.nextCursor };
  }
  throw new Error('the list did not end');
}

let legacyWritten = 0;

/**
 * An incident as a store from before wrote it: its record, and its id in the former per-status set.
 * Every other record is in the object form of that time, the rest in today's array form (an
 * execute rewrites the record without touching the index).
 */
async function writeLegacy(keys: Keys, severity: Severity, status: IncidentStatus): Promise<Incident> {
  const base = newIncident(
    ids.next('incident'),
    { title: 'Old', severity, description: 'd', impact: '', template_ids: [] },
    actor,
    new Date().toISOString(),
  );
  const incident = { ...base, status };
  await t.redis
    .multi()
    .set(keys.incident(incident.id), legacyWritten++ % 2 === 0 ? JSON.stringify(incident) : encodeIncident(incident))
    .zadd(keys.incidentsByStatus(status), '0', incident.id)
    .exec();
  return incident;
}

describe('incident indexes by status and severity', () => {
  it('files an incident under its status and severity, and moves it when either changes', async () => {
    const { keys, svc } = setup('idx-pair');
    const i = await svc.create({ title: 'Pair', severity: 'minor' }, actor);
    expect(await t.redis.zrange(keys.incidentsBy('investigating', 'minor'), '0', '-1')).toEqual([i.id]);
    expect(await t.redis.exists(keys.incidentsByStatus('investigating'))).toBe(0);
    await svc.update(i.id, { severity: 'critical' }, actor);
    expect(await t.redis.zcard(keys.incidentsBy('investigating', 'minor'))).toBe(0);
    expect(await t.redis.zrange(keys.incidentsBy('investigating', 'critical'), '0', '-1')).toEqual([i.id]);
    await svc.update(i.id, { status: 'monitoring' }, actor);
    expect(await t.redis.zcard(keys.incidentsBy('investigating', 'critical'))).toBe(0);
    expect(await t.redis.zrange(keys.incidentsBy('monitoring', 'critical'), '0', '-1')).toEqual([i.id]);
  });

  it('reads a severity page from its own index: no record of another severity is loaded', async () => {
    const { keys, repo, svc } = setup('idx-sev');
    const critical: string[] = [];
    for (let n = 0; n < 3; n++) critical.push((await svc.create({ title: `C${n}`, severity: 'critical' }, actor)).id);
    // Newer than the critical ones: a list without a severity index would read all of these first.
    for (let n = 0; n < 120; n++) await svc.create({ title: `L${n}`, severity: 'low' }, actor);
    const loaded: string[] = [];
    const counting = new RedisIncidentRepo(t.redis, keys);
    const getMany = counting.getMany.bind(counting);
    counting.getMany = async (want: string[]) => {
      loaded.push(...want);
      return getMany(want);
    };
    const page = await counting.list({ severity: ['critical'] }, { limit: 25, cursor: null });
    expect(page.data.map((i) => i.id)).toEqual([...critical].reverse());
    expect(page.nextCursor).toBeNull();
    expect(loaded.sort()).toEqual([...critical].sort());
    expect(await listAll(repo, { severity: ['low'], status: ['investigating'] }, 50)).toHaveLength(120);
  });

  it('lists incidents still in the former status sets, then moves them without a list changing', async () => {
    const { keys, repo, svc } = setup('idx-move');
    const statuses: IncidentStatus[] = ['investigating', 'identified', 'monitoring', 'resolved', 'closed'];
    const severities: Severity[] = ['critical', 'major', 'minor', 'low'];
    const legacy: Incident[] = [];
    for (let n = 0; n < 450; n++) legacy.push(await writeLegacy(keys, severities[n % 4]!, statuses[n % 5]!));
    // New incidents land in the pair sets meanwhile; one old incident is updated before the move.
    const fresh = [await svc.create({ title: 'New', severity: 'major' }, actor)];
    await svc.update(legacy[5]!.id, { severity: 'low' }, actor);
    expect(await t.redis.zscore(keys.incidentsByStatus('investigating'), legacy[5]!.id)).toBeNull();
    // An id whose record is gone, and one whose record names no known severity.
    await t.redis.zadd(keys.incidentsByStatus('closed'), '0', 'inc_01JZZZZZZZZZZZZZZZZZZZZZZZ');
    const odd = await writeLegacy(keys, 'minor', 'resolved');
    await t.redis.set(keys.incident(odd.id), encodeIncident({ ...odd, severity: 'unknown' as Severity }));

    const filters: IncidentFilter[] = [
      {},
      { severity: ['critical'] },
      { status: ['resolved', 'closed'] },
      { status: ['identified'], severity: ['major', 'low'] },
    ];
    const before = await Promise.all(filters.map((f) => listAll(repo, f, 7)));
    expect(before[0]).toHaveLength(legacy.length + fresh.length + 1);
    expect(new Set(before[0]).size).toBe(before[0]!.length);
    expect(before[1]).toHaveLength(legacy.filter((i, n) => n !== 5 && i.severity === 'critical').length);

    const report = await moveLegacyIndexes(t.redis, keys);
    expect(report).toEqual({ moved: legacy.length - 1, left: 1 });
    for (const s of statuses) {
      expect(await t.redis.zrange(keys.incidentsByStatus(s), '0', '-1')).toEqual(s === 'resolved' ? [odd.id] : []);
    }
    expect(await t.redis.zscore(keys.incidentsBy('investigating', 'low'), legacy[5]!.id)).toBe('0');
    expect(await t.redis.zscore(keys.incidentsBy(legacy[6]!.status, legacy[6]!.severity), legacy[6]!.id)).toBe('0');
    const after = await Promise.all(filters.map((f) => listAll(repo, f, 7)));
    expect(after).toEqual(before);
    expect(await moveLegacyIndexes(t.redis, keys)).toEqual({ moved: 0, left: 1 });
  });

  it('stops between batches when asked', async () => {
    const { keys } = setup('idx-stop');
    for (let n = 0; n < 450; n++) await writeLegacy(keys, 'minor', 'investigating');
    let batches = 0;
    const report = await moveLegacyIndexes(t.redis, keys, () => batches++ >= 1);
    expect(report.moved).toBe(200);
    expect(await t.redis.zcard(keys.incidentsByStatus('investigating'))).toBe(250);
  });
});
