import { describe, expect, it } from 'vitest';
import { SYSTEM_ACTOR } from '../../src/domain/common/actor.js';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import { newDelivery, type Delivery, type Execution } from '../../src/domain/execution/execution.js';
import { applyPatch, newIncident } from '../../src/domain/incident/incident.js';
import { createdEventId, newEvent } from '../../src/domain/incident/incident-event.js';
import { RedisExecutionRepo } from '../../src/store/executions.js';
import { RedisIncidentRepo } from '../../src/store/incidents.js';
import { useTestRedis } from '../support/redis.js';
import { decodeIncident } from '../../src/store/incident-record.js';

/**
 * The event outbox (store/timeline.ts): every change appends its integrator events to the stream
 * in the same atomic step as the change, and a change that is not committed appends none.
 */
const t = useTestRedis('evoutbox');
const ids = createIdGenerator();
const now = '2026-11-27T10:00:00.000Z';

type Entry = Record<string, string>;
async function entries(): Promise<Entry[]> {
  const raw = await t.redis.xrange(t.keys.eventStream(), '-', '+');
  return raw.map(([, fields]) => {
    const o: Entry = {};
    for (let i = 0; i < fields.length; i += 2) o[fields[i]!] = fields[i + 1]!;
    return o;
  });
}
const of = async (incidentId: string) => (await entries()).filter((e) => e.i === incidentId);

async function anIncident() {
  const repo = new RedisIncidentRepo(t.redis, t.keys);
  const actor = SYSTEM_ACTOR;
  const incident = newIncident(
    ids.next('incident'),
    { title: 'DB down', severity: 'major', description: '', impact: '', template_ids: [] },
    actor,
    now,
  );
  const created = newEvent(createdEventId(incident.id), 'incident.created', now, actor, {
    title: incident.title,
    severity: incident.severity,
  });
  expect(await repo.create(incident, [created])).toBe(true);
  return { repo, incident };
}

describe('the event outbox', () => {
  it('tells integrators of an implied incident.created, and of a resolve twice (status, resolved)', async () => {
    const { repo, incident } = await anIncident();
    // The created event is implied by the record, not stored on the timeline, but still sent.
    expect(await t.redis.llen(t.keys.incidentEvents(incident.id))).toBe(0);
    const [created] = await of(incident.id);
    expect(created).toMatchObject({ t: 'incident.created', id: createdEventId(incident.id) });
    // The snapshot is the incident's stored form (store/incident-record.ts).
    expect(decodeIncident(created!.r!, incident.id, false)).toMatchObject({ id: incident.id, title: 'DB down' });

    const { next, statusChange } = applyPatch(incident, { status: 'resolved' }, '2026-11-27T10:05:00.000Z');
    const ev = newEvent(ids.next('event'), 'incident.status_changed', now, SYSTEM_ACTOR, { ...statusChange });
    expect(await repo.update(incident, next, [ev])).toBe(true);
    const after = await of(incident.id);
    expect(after.map((e) => e.t)).toEqual(['incident.created', 'incident.status_changed', 'incident.resolved']);
    expect(after[2]!.id).toBe(`${ev.id}.resolved`);
    expect(decodeIncident(after[2]!.r!, incident.id, false)).toMatchObject({ status: 'resolved' });
  });

  it('appends nothing when the change is not committed', async () => {
    const { repo, incident } = await anIncident();
    const { next } = applyPatch(incident, { title: 'x' }, now);
    const ev = newEvent(ids.next('event'), 'incident.updated', now, SYSTEM_ACTOR, {});
    expect(await repo.update(incident, next, [ev])).toBe(true);
    // The same change again: its compare-and-set fails (the record moved on), nothing is appended.
    expect(await repo.update(incident, next, [ev])).toBe(false);
    expect((await of(incident.id)).map((e) => e.t)).toEqual(['incident.created', 'incident.updated']);
  });

  it('emits execution.created with the execute and execution.completed once, when the last delivery is final', async () => {
    const { incident } = await anIncident();
    const exes = new RedisExecutionRepo(t.redis, t.keys);
    const execution: Execution = {
      id: ids.next('execution'),
      incident_id: incident.id,
      variables: {},
      created_at: now,
      template_versions: {},
      delivery_ids: [],
    };
    const deliveries = [1, 2, 3].map(() =>
      newDelivery({
        id: ids.next('delivery'),
        executionId: execution.id,
        incidentId: incident.id,
        connectionId: ids.next('connection'),
        connectionType: 'webhook',
        templateId: null,
        templateVersion: null,
        content: { subject: 'S', body: 'B' },
      }),
    );
    execution.delivery_ids = deliveries.map((d) => d.id);
    const next = { ...incident, execution_count: 1, rev: incident.rev + 1 };
    const executed = newEvent(ids.next('event'), 'incident.executed', now, SYSTEM_ACTOR, {
      execution_id: execution.id,
    });
    expect(await exes.create(execution, deliveries, incident, next, [executed])).toBe(true);
    const finish = async (d: Delivery, status: Delivery['status'], events = [] as ReturnType<typeof newEvent>[]) => {
      const [read] = await exes.getDeliveries([d.id]);
      expect(await exes.updateDelivery(read!, { ...read!, status, rev: read!.rev + 1 }, { events })).toBe(true);
    };
    await finish(deliveries[0]!, 'delivered');
    const failed = newEvent(ids.next('event'), 'delivery.failed', now, SYSTEM_ACTOR, {
      delivery_id: deliveries[1]!.id,
    });
    await finish(deliveries[1]!, 'failed', [failed]);
    expect((await of(incident.id)).map((e) => e.t)).toEqual([
      'incident.created',
      'execution.created',
      'delivery.failed',
    ]);
    await finish(deliveries[2]!, 'sending');
    await finish(deliveries[2]!, 'delivered');
    const all = await of(incident.id);
    expect(all.map((e) => e.t)).toEqual([
      'incident.created',
      'execution.created',
      'delivery.failed',
      'execution.completed',
    ]);
    expect(JSON.parse(all[1]!.r!)).toMatchObject({ id: execution.id });
    expect(JSON.parse(all[3]!.e!)).toMatchObject({
      type: 'execution.completed',
      data: { execution_id: execution.id, delivered: 2, failed: 1, cancelled: 0 },
    });
    // A delivery made final again (its record rewritten) does not complete the execution twice.
    await finish(deliveries[2]!, 'delivered');
    expect((await of(incident.id)).length).toBe(4);
  });
});
