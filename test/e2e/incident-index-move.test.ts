import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import { newIncident, type Severity } from '../../src/domain/incident/incident.js';
import { encodeIncident } from '../../src/store/incident-record.js';
import { startHerald } from '../support/herald.js';
import { useTestRedis } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

const t = useTestRedis('idx-move-e2e');
const keys = t.keys;
/** Both Heralds on one prefix: the second must open what the first sealed. */
const env = { HERALD_KEY_PREFIX: t.prefix, HERALD_SECRET_KEY: randomBytes(32).toString('base64') };
const ids = createIdGenerator();

describe('incidents from before the status-and-severity indexes', () => {
  it('are listed by an API process, and moved by the first worker that starts', async () => {
    const actor = { type: 'api_key' as const, id: 'key_01JABCDEFGHJKMNPQRSTVWXYZ0', name: 'old' };
    const severities: Severity[] = ['critical', 'low', 'low', 'major'];
    const old: string[] = [];
    for (let n = 0; n < 260; n++) {
      const input = { title: `Old ${n}`, severity: severities[n % 4]!, description: '', impact: '', template_ids: [] };
      const i = newIncident(ids.next('incident'), input, actor, new Date().toISOString());
      await t.redis
        .multi()
        .set(keys.incident(i.id), encodeIncident(i))
        .zadd(keys.incidentsByStatus('investigating'), '0', i.id)
        .exec();
      old.push(i.id);
    }
    const critical = old.filter((_, n) => n % 4 === 0).reverse();
    const criticalPage = async (h: Awaited<ReturnType<typeof startHerald>>) => {
      const r = await h.api('GET', '/v1/incidents?severity=critical&limit=100');
      expect(r.status).toBe(200);
      return (r.body as { data: Array<{ id: string }> }).data.map((i) => i.id);
    };

    const api = await startHerald(env, { worker: false });
    try {
      expect(await criticalPage(api)).toEqual(critical);
      expect(await t.redis.zcard(keys.incidentsByStatus('investigating'))).toBe(260);
    } finally {
      await api.close({ keepData: true });
    }

    const worker = await startHerald(env);
    try {
      await waitFor(async () => (await t.redis.zcard(keys.incidentsByStatus('investigating'))) === 0, {
        timeoutMs: 30_000,
        what: 'the worker to move the former status set',
      });
      expect(await t.redis.zcard(keys.incidentsBy('investigating', 'critical'))).toBe(65);
      expect(await t.redis.zcard(keys.incidentsBy('investigating', 'low'))).toBe(130);
      expect(await criticalPage(worker)).toEqual(critical);
    } finally {
      await worker.close({ keepData: true });
    }
  });
});
