import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeys } from '../../src/store/keys.js';
import { getPublicIncident, loadPublicIncidents, RedisPublicIncidentStore } from '../../src/store/public-incidents.js';
import { connectTestRedis, dropPrefix, uniquePrefix } from '../support/redis.js';

/**
 * The status page's published incidents in Redis: a publish is idempotent by delivery id, a
 * correction edits in place, a retraction removes an update and the last one the incident, and
 * every change (only a change) bumps the status version the page's cache watches.
 */
let redis: Redis;
const prefix = uniquePrefix('pubs');
const keys = createKeys(prefix);
let clock = Date.parse('2026-11-27T10:00:00.000Z');
const store = () => new RedisPublicIncidentStore(redis, keys, () => clock);

const version = async () => Number((await redis.hget(keys.statusVersion(), 'v')) ?? '0');

/** An internal incident record as the incidents store keeps it (defaults omitted). */
async function incident(id: string, over: Record<string, unknown> = {}) {
  await redis.set(
    keys.incident(id),
    JSON.stringify({
      id,
      title: `Title of ${id}`,
      severity: 'major',
      description: '',
      created_at: '2026-11-27T09:00:00.000Z',
      created_by: { kind: 'system', id: 'test' },
      ...over,
    }),
  );
}

const publish = (
  incidentId: string,
  deliveryId: string,
  over: Partial<Parameters<RedisPublicIncidentStore['publish']>[0]> = {},
) =>
  store().publish({
    incident: { id: incidentId, title: `Title of ${incidentId}`, severity: 'major' },
    deliveryId,
    status: 'investigating',
    subject: 'Checkout is slow',
    body: 'We are looking into it.',
    ...over,
  });

beforeAll(async () => {
  redis = connectTestRedis();
});
afterAll(async () => {
  await dropPrefix(redis, prefix);
  await redis.quit();
});

describe('publishing', () => {
  it('creates the public incident on the first publish and is idempotent under retry', async () => {
    await incident('inc_A', { components: [{ id: 'cmp_1', status: 'partial_outage' }] });
    const v0 = await version();
    const ref = await publish('inc_A', 'dlv_1');
    expect(ref).toEqual({ id: 'dlv_1', channel: 'inc_A', permalink: null });
    expect(await version()).toBe(v0 + 1);

    // The retry of the same delivery (a time-out after the write) rewrites nothing, bumps nothing.
    clock += 5000;
    expect(await publish('inc_A', 'dlv_1')).toEqual(ref);
    expect(await version()).toBe(v0 + 1);

    const p = await getPublicIncident(redis, keys, 'inc_A');
    expect(p).toEqual({
      id: 'inc_A',
      name: 'Checkout is slow',
      impact: 'major',
      status: 'investigating',
      created_at: '2026-11-27T10:00:00.000Z',
      updated_at: '2026-11-27T10:00:00.000Z',
      resolved_at: null,
      component_ids: ['cmp_1'],
      updates: [
        {
          id: 'dlv_1',
          status: 'investigating',
          body: 'We are looking into it.',
          created_at: '2026-11-27T10:00:00.000Z',
          updated_at: null,
          affected_components: [{ id: 'cmp_1', status: 'partial_outage' }],
        },
      ],
    });
    expect(await redis.zcard(keys.publicIncidents())).toBe(1);
  });

  it('appends later updates newest first; the latest state is the incident’s; resolved_at from the resolving update', async () => {
    await incident('inc_B', { severity: 'low' });
    await publish('inc_B', 'dlv_b1', {
      subject: '',
      incident: { id: 'inc_B', title: 'Title of inc_B', severity: 'low' },
    });
    clock += 60_000;
    await publish('inc_B', 'dlv_b2', { status: 'identified', body: 'Found it.' });
    clock += 60_000;
    await publish('inc_B', 'dlv_b3', { status: 'resolved', body: 'Fixed.' });
    const p = (await getPublicIncident(redis, keys, 'inc_B'))!;
    // An empty subject names it after the incident; low severity is impact none.
    expect(p.name).toBe('Title of inc_B');
    expect(p.updates.map((u) => [u.id, u.status])).toEqual([
      ['dlv_b3', 'resolved'],
      ['dlv_b2', 'identified'],
      ['dlv_b1', 'investigating'],
    ]);
    expect(p.status).toBe('resolved');
    expect(p.resolved_at).toBe(p.updates[0]!.created_at);
    expect(p.component_ids).toEqual([]);
  });

  it('reads the incident’s components defensively: a record without them publishes none', async () => {
    await incident('inc_C', { components: 'not a list' });
    await publish('inc_C', 'dlv_c1');
    expect((await getPublicIncident(redis, keys, 'inc_C'))!.updates[0]!.affected_components).toEqual([]);
  });
});

describe('corrections and retractions', () => {
  it('edits an update in place with updated_at; the first update’s subject renames the incident', async () => {
    await incident('inc_D');
    await publish('inc_D', 'dlv_d1', { subject: 'Payments delayed' });
    clock += 1000;
    await publish('inc_D', 'dlv_d2', { subject: 'Update', status: 'monitoring', body: 'Watching.' });
    clock += 1000;
    const v = await version();
    const ref = await store().edit({
      incident: { id: 'inc_D', title: 'Title of inc_D', severity: 'major' },
      updateId: 'dlv_d1',
      subject: 'Payments delayed in the EU',
      body: 'Corrected text.',
    });
    expect(ref).toEqual({ id: 'dlv_d1', channel: 'inc_D', permalink: null });
    expect(await version()).toBe(v + 1);
    const p = (await getPublicIncident(redis, keys, 'inc_D'))!;
    expect(p.name).toBe('Payments delayed in the EU');
    const first = p.updates.find((u) => u.id === 'dlv_d1')!;
    expect(first).toMatchObject({
      body: 'Corrected text.',
      status: 'investigating',
      updated_at: new Date(clock).toISOString(),
    });
    expect(p.updates.map((u) => u.id)).toEqual(['dlv_d2', 'dlv_d1']);

    // The same correction retried: nothing changes.
    const again = await store().edit({
      incident: { id: 'inc_D', title: 'Title of inc_D', severity: 'major' },
      updateId: 'dlv_d1',
      subject: 'Payments delayed in the EU',
      body: 'Corrected text.',
    });
    expect(again).not.toBeNull();
    expect(await version()).toBe(v + 1);

    // A correction of a later update keeps the name.
    await store().edit({
      incident: { id: 'inc_D', title: 'Title of inc_D', severity: 'major' },
      updateId: 'dlv_d2',
      subject: 'Something else',
      body: 'Watching closely.',
    });
    expect((await getPublicIncident(redis, keys, 'inc_D'))!.name).toBe('Payments delayed in the EU');
  });

  it('an edit with a state (update mode edit) moves the update’s state too', async () => {
    await incident('inc_K');
    await publish('inc_K', 'dlv_k1');
    await store().edit({
      incident: { id: 'inc_K', title: 'Title of inc_K', severity: 'major' },
      updateId: 'dlv_k1',
      subject: 'Checkout is slow',
      body: 'Now monitoring.',
      status: 'monitoring',
    });
    expect(await getPublicIncident(redis, keys, 'inc_K')).toMatchObject({
      status: 'monitoring',
      updates: [{ id: 'dlv_k1', status: 'monitoring', body: 'Now monitoring.' }],
    });
  });

  it('an edit of an update that is gone answers null and writes nothing', async () => {
    const v = await version();
    expect(
      await store().edit({
        incident: { id: 'inc_none', title: 'x', severity: 'minor' },
        updateId: 'dlv_x',
        subject: 's',
        body: 'b',
      }),
    ).toBeNull();
    expect(await redis.exists(keys.publicIncident('inc_none'))).toBe(0);
    expect(await version()).toBe(v);
  });

  it('removes one update; the last removal removes the incident and its index entry', async () => {
    await incident('inc_E');
    await publish('inc_E', 'dlv_e1');
    clock += 1000;
    await publish('inc_E', 'dlv_e2', { status: 'identified' });
    const v = await version();
    await store().remove({ incidentId: 'inc_E', updateId: 'dlv_e2' });
    expect(await version()).toBe(v + 1);
    const p = (await getPublicIncident(redis, keys, 'inc_E'))!;
    expect(p.updates.map((u) => u.id)).toEqual(['dlv_e1']);
    expect(p.status).toBe('investigating');

    // Removing it again (a retried retraction) changes nothing.
    await store().remove({ incidentId: 'inc_E', updateId: 'dlv_e2' });
    expect(await version()).toBe(v + 1);

    const before = await redis.zcard(keys.publicIncidents());
    await store().remove({ incidentId: 'inc_E', updateId: 'dlv_e1' });
    expect(await getPublicIncident(redis, keys, 'inc_E')).toBeNull();
    expect(await redis.zcard(keys.publicIncidents())).toBe(before - 1);
    expect((await redis.zrange(keys.publicIncidents(), '0', '-1')).some((m) => m.endsWith('|inc_E'))).toBe(false);
    expect(await version()).toBe(v + 2);
  });
});

describe('loading for the page', () => {
  it('lists newest first by first publish, limited; the internal resolved or closed state overrides', async () => {
    await incident('inc_F');
    await incident('inc_G', { status: 'closed', resolved_at: '2026-11-27T11:00:00.000Z' });
    clock += 10_000;
    await publish('inc_F', 'dlv_f1');
    clock += 10_000;
    await publish('inc_G', 'dlv_g1', { status: 'monitoring' });
    clock += 10_000;
    // A later update of an older incident does not move it up the list.
    await publish('inc_F', 'dlv_f2', { status: 'identified' });

    const all = await loadPublicIncidents(redis, keys, 100);
    const ids = all.map((p) => p.id);
    expect(ids.indexOf('inc_G')).toBeLessThan(ids.indexOf('inc_F'));
    expect(ids[0]).toBe('inc_G');
    expect(await loadPublicIncidents(redis, keys, 2)).toHaveLength(2);
    expect(await loadPublicIncidents(redis, keys, 0)).toEqual([]);

    const g = all.find((p) => p.id === 'inc_G')!;
    expect(g).toMatchObject({ status: 'resolved', resolved_at: '2026-11-27T11:00:00.000Z' });
    expect(g.updates[0]!.status).toBe('monitoring');
    const raw = await getPublicIncident(redis, keys, 'inc_G', { internal: false });
    expect(raw).toMatchObject({ status: 'monitoring', resolved_at: null });
    expect(all.find((p) => p.id === 'inc_F')!.status).toBe('identified');
  });

  it('concurrent publishes of one incident all land (compare-and-set, re-read)', async () => {
    await incident('inc_H');
    await Promise.all(Array.from({ length: 8 }, (_, i) => publish('inc_H', `dlv_h${i}`)));
    const p = (await getPublicIncident(redis, keys, 'inc_H'))!;
    expect(new Set(p.updates.map((u) => u.id)).size).toBe(8);
  });
});
