import { describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { SYSTEM_ACTOR } from '../../src/domain/common/actor.js';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import { EVENT_SCHEMAS } from '../../src/domain/event/catalog.js';
import { newDelivery, type Delivery, type Execution } from '../../src/domain/execution/execution.js';
import { newIncident, type Incident } from '../../src/domain/incident/incident.js';
import { createdEventId, newEvent, type IncidentEvent } from '../../src/domain/incident/incident-event.js';
import { Change } from '../../src/store/commit.js';
import { RedisExecutionRepo } from '../../src/store/executions.js';
import type { Keys } from '../../src/store/keys.js';
import { appendSubjectEvents, appendTimeline } from '../../src/store/timeline.js';
import { useEventWorlds } from '../support/event-world.js';

/**
 * Events about components and maintenances (store/timeline.ts, appendSubjectEvents): the same
 * outbox as incidents' events, `sequence` per subject, `incident_id` only when the data names one.
 */
const ev = useEventWorlds('evsubjects');
const { t } = ev;
const until = (w: Pick<ReturnType<typeof ev.world>, 'dispatcher'>, n: number) => ev.until(w, n);
const ids = createIdGenerator();

function world() {
  const w = ev.world();
  return { ...w, executions: new RedisExecutionRepo(t.redis, w.keys) };
}

async function stage(
  keys: Keys,
  subjectId: string,
  events: IncidentEvent[],
  opts?: { list?: string; resource?: unknown },
) {
  const change = new Change(t.redis);
  appendSubjectEvents(change, keys, subjectId, events, opts);
  expect(await change.commit()).toBe(true);
}

const at = () => new Date().toISOString();

const event = (type: IncidentEvent['type'], data: Record<string, unknown>) =>
  newEvent(ids.next('event'), type, at(), SYSTEM_ACTOR, data);

/** A component's change from `from` to `to`; `cause` absent: as an incident's timeline holds it. */
const componentChange = (id: string, from: string, to: string, cause?: { kind: string; id: string | null }) =>
  event('component.status_changed', { component_id: id, from, to, ...(cause ? { cause } : {}) });

/** Events committed on an incident's timeline, as the incident and execution stores write them. */
async function onTimeline(keys: Keys, incidentId: string, events: IncidentEvent[]) {
  const change = new Change(t.redis);
  appendTimeline(change, keys, incidentId, events);
  expect(await change.commit()).toBe(true);
}

/** The requests signed with `secret` (each endpoint has its own): one endpoint's share of the ev.sink. */
const signedWith = (secret: string) =>
  ev.sink.received.filter((r) => {
    try {
      new Webhook(secret).verify(r.body, r.headers as Record<string, string>);
      return true;
    } catch {
      return false;
    }
  });

/** Arrival order is not promised: sort by type, incident, sequence. */
const order = (e: { type: string; incident_id: string | null; sequence: number | null }) =>
  `${e.type} ${e.incident_id ?? ''} ${e.sequence}`;

/** Runs the dispatcher until it has nothing left to do (every event fanned out and sent). */
async function drain(w: ReturnType<typeof world>): Promise<void> {
  for (let idle = 0; idle < 3;) {
    const s = await w.dispatcher.step();
    idle = s.ingested + s.fannedOut + s.attempted === 0 ? idle + 1 : 0;
  }
}

/** An incident committed through the incident store; `components` as helper A's incidents carry them. */
async function declare(w: ReturnType<typeof world>, components: { id: string; status: string }[] = []) {
  const base = newIncident(
    ids.next('incident'),
    { title: 'Checkout down', severity: 'major', description: '', impact: '', template_ids: [] },
    SYSTEM_ACTOR,
    at(),
  );
  const incident = { ...base, components } as Incident;
  const created = newEvent(createdEventId(incident.id), 'incident.created', incident.created_at, SYSTEM_ACTOR, {
    title: incident.title,
    severity: incident.severity,
  });
  expect(await w.incidents.create(incident, [created])).toBe(true);
  return incident;
}

const componentWire = (id: string, status: string) => ({
  id,
  name: 'API',
  description: '',
  group: null,
  position: 0,
  status,
  manual_status: status,
  show_on_status_page: true,
  affected_by: [],
  created_at: at(),
  updated_at: at(),
});

const maintenanceWire = (id: string, status: string, components: string[]) => ({
  id,
  title: 'Database upgrade',
  body: '',
  status,
  components,
  scheduled_for: '2026-12-01T02:00:00.000Z',
  scheduled_until: '2026-12-01T04:00:00.000Z',
  remind_before: null,
  auto_transition: true,
  updates: [],
  started_at: null,
  completed_at: null,
  reminded_at: null,
  created_at: at(),
  updated_at: at(),
  created_by: SYSTEM_ACTOR,
});

describe('events of components and maintenances', () => {
  it('go through the outbox with their own sequence and no incident unless their data names one', async () => {
    const w = world();
    await w.service.create({ url: ev.sink.url, event_types: ['*'] });
    const cmp = ids.next('component');
    const mnt = ids.next('maintenance');
    const inc = ids.next('incident');
    const manual = componentChange(cmp, 'operational', 'degraded_performance', { kind: 'manual', id: null });
    await stage(w.keys, cmp, [manual], { list: w.keys.componentEvents(cmp) });
    await stage(w.keys, mnt, [
      event('maintenance.created', { maintenance_id: mnt }),
      event('maintenance.status_changed', { maintenance_id: mnt, from: 'scheduled', to: 'in_progress' }),
    ]);
    await stage(w.keys, cmp, [
      componentChange(cmp, 'degraded_performance', 'major_outage', { kind: 'incident', id: inc }),
    ]);
    // The component's own timeline holds what was listed there.
    expect((await t.redis.lrange(w.keys.componentEvents(cmp), 0, -1)).map((j) => JSON.parse(j) as unknown)).toEqual([
      manual,
    ]);
    await until(w, 4);
    // Sends run side by side (order is not promised): compare by type and sequence.
    const got = ev.sink.received.map((r) => [r.json.type, r.json.sequence, r.json.incident_id]);
    expect(got).toHaveLength(4);
    expect(new Set(got.map((g) => JSON.stringify(g)))).toEqual(
      new Set(
        [
          ['component.status_changed', 1, null],
          ['maintenance.created', 1, null],
          ['maintenance.status_changed', 2, null],
          ['component.status_changed', 2, inc],
        ].map((g) => JSON.stringify(g)),
      ),
    );
  });

  it('are sent full or thin, each valid per its OpenAPI schema', async () => {
    const w = world();
    const full = await w.service.create({ url: ev.sink.url, event_types: ['component.*', 'maintenance.*'] });
    const thin = await w.service.create({ url: ev.sink.url, event_types: ['*'], payload: 'thin' });
    const cmp = ids.next('component');
    const mnt = ids.next('maintenance');
    const inc = await declare(w, [{ id: cmp, status: 'major_outage' }]);
    // A manual change (the component's own timeline), one by an incident (on the incident's
    // timeline, as the incident store writes it), one by a maintenance.
    await stage(
      w.keys,
      cmp,
      [componentChange(cmp, 'operational', 'degraded_performance', { kind: 'manual', id: null })],
      { list: w.keys.componentEvents(cmp), resource: componentWire(cmp, 'degraded_performance') },
    );
    await onTimeline(w.keys, inc.id, [componentChange(cmp, 'degraded_performance', 'major_outage')]);
    await stage(w.keys, cmp, [
      componentChange(cmp, 'major_outage', 'under_maintenance', { kind: 'maintenance', id: mnt }),
    ]);
    const scheduled = maintenanceWire(mnt, 'scheduled', [cmp]);
    await stage(
      w.keys,
      mnt,
      [
        event('maintenance.created', {
          maintenance_id: mnt,
          title: scheduled.title,
          scheduled_for: scheduled.scheduled_for,
          scheduled_until: scheduled.scheduled_until,
        }),
      ],
      { resource: scheduled },
    );
    await stage(
      w.keys,
      mnt,
      [
        event('maintenance.updated', {
          maintenance_id: mnt,
          changes: { title: { from: 'Database upgrade', to: 'DB upgrade' } },
        }),
      ],
      { resource: { ...scheduled, title: 'DB upgrade' } },
    );
    await stage(
      w.keys,
      mnt,
      [event('maintenance.status_changed', { maintenance_id: mnt, from: 'scheduled', to: 'in_progress' })],
      { resource: { ...scheduled, status: 'in_progress' } },
    );
    await stage(w.keys, mnt, [event('maintenance.deleted', { maintenance_id: mnt })], { resource: scheduled });
    await drain(w);

    const fullGot = signedWith(full.signingSecret)
      .map((r) => r.json)
      .sort((a, b) => order(a).localeCompare(order(b)));
    expect(fullGot.map((e) => [e.type, e.sequence, e.incident_id])).toEqual([
      ['component.status_changed', 1, null],
      ['component.status_changed', 2, null],
      ['component.status_changed', 2, inc.id],
      ['maintenance.created', 1, null],
      ['maintenance.deleted', 4, null],
      ['maintenance.status_changed', 3, null],
      ['maintenance.updated', 2, null],
    ]);
    const [manual, byMaintenance, fromIncident] = fullGot;
    expect(manual!.data).toMatchObject({
      cause: { kind: 'manual', id: null },
      component: { id: cmp, status: 'degraded_performance' },
    });
    expect(byMaintenance!.data).toMatchObject({ to: 'under_maintenance', cause: { kind: 'maintenance', id: mnt } });
    // On the incident's timeline: the incident is its cause, and its sequence is the incident's.
    expect(fromIncident!.data).toMatchObject({ component_id: cmp, cause: { kind: 'incident', id: inc.id } });
    expect(fullGot[6]!.data).toMatchObject({ maintenance: { id: mnt, title: 'DB upgrade' } });
    const thinGot = signedWith(thin.signingSecret).map((r) => r.json);
    expect(thinGot).toHaveLength(8); // the seven and the incident's incident.created
    for (const e of thinGot.filter((x) => x.type.startsWith('maintenance.')))
      expect(e.data).toEqual({ incident_id: null, maintenance_id: mnt });
    for (const e of thinGot.filter((x) => x.type.startsWith('component.')))
      expect(e.data).toEqual({ incident_id: e.incident_id, component_id: cmp });
    // The OpenAPI `webhooks` section is made from these schemas.
    for (const e of [...fullGot, ...thinGot])
      expect(EVENT_SCHEMAS[e.type]!.safeParse(e).success, JSON.stringify(e)).toBe(true);
  });

  it('filter on component_ids: an incident naming one, the component itself, a maintenance covering one', async () => {
    const w = world();
    const cmp = ids.next('component');
    const other = ids.next('component');
    const mine = await w.service.create({ url: ev.sink.url, filter: { component_ids: [cmp] } });
    const named = await declare(w, [{ id: cmp, status: 'partial_outage' }]);
    const unnamed = await declare(w, [{ id: other, status: 'partial_outage' }]);
    // An event of the incident that carries no incident snapshot: its incident is read.
    for (const inc of [named, unnamed]) await onTimeline(w.keys, inc.id, [event('incident.update_overdue', {})]);
    for (const id of [cmp, other])
      await stage(w.keys, id, [componentChange(id, 'operational', 'major_outage', { kind: 'manual', id: null })]);
    const covering = ids.next('maintenance');
    const elsewhere = ids.next('maintenance');
    await stage(w.keys, covering, [event('maintenance.created', { maintenance_id: covering })], {
      resource: maintenanceWire(covering, 'scheduled', [other, cmp]),
    });
    await stage(w.keys, elsewhere, [event('maintenance.created', { maintenance_id: elsewhere })], {
      resource: maintenanceWire(elsewhere, 'scheduled', [other]),
    });
    await drain(w);
    const got = signedWith(mine.signingSecret).map(
      (r) => `${r.json.type} ${String(r.json.data.component_id ?? r.json.data.maintenance_id ?? r.json.incident_id)}`,
    );
    expect(got.sort()).toEqual(
      [
        `incident.created ${named.id}`,
        `incident.update_overdue ${named.id}`,
        `component.status_changed ${cmp}`,
        `maintenance.created ${covering}`,
      ].sort(),
    );
  });

  it('filter on audience_keys: executions, their approvals, completions and failed deliveries of those audiences', async () => {
    const w = world();
    const mine = await w.service.create({
      url: ev.sink.url,
      event_types: ['execution.*', 'delivery.*'],
      filter: { audience_keys: ['customers'] },
    });
    const inc = await declare(w);
    const execute = async (audience: string) => {
      const execution: Execution = {
        id: ids.next('execution'),
        incident_id: inc.id,
        variables: {},
        created_at: at(),
        template_versions: {},
        delivery_ids: [],
        audiences: [],
      };
      const deliveries = [1, 2].map(() =>
        newDelivery({
          id: ids.next('delivery'),
          executionId: execution.id,
          incidentId: inc.id,
          connectionId: ids.next('connection'),
          connectionType: 'webhook',
          templateId: null,
          templateVersion: null,
          content: { subject: 'S', body: 'B' },
          audience,
        }),
      );
      execution.delivery_ids = deliveries.map((d) => d.id);
      execution.audiences = [
        {
          key: audience,
          name: audience,
          visibility: 'external',
          delivery_ids: execution.delivery_ids,
          skipped: null,
          approval_required: false,
        },
      ];
      const [current] = await w.incidents.getMany([inc.id]);
      const next = { ...current!, execution_count: current!.execution_count + 1, rev: current!.rev + 1 };
      const executed = newEvent(ids.next('event'), 'incident.executed', at(), SYSTEM_ACTOR, {
        execution_id: execution.id,
      });
      expect(await w.executions.create(execution, deliveries, current!, next, [executed])).toBe(true);
      const finish = async (d: Delivery, status: Delivery['status'], events: IncidentEvent[] = []) => {
        const [read] = await w.executions.getDeliveries([d.id]);
        expect(await w.executions.updateDelivery(read!, { ...read!, status, rev: read!.rev + 1 }, { events })).toBe(
          true,
        );
      };
      await finish(deliveries[0]!, 'delivered');
      await finish(deliveries[1]!, 'failed', [
        newEvent(ids.next('event'), 'delivery.failed', at(), SYSTEM_ACTOR, {
          execution_id: execution.id,
          delivery_id: deliveries[1]!.id,
          connection_id: deliveries[1]!.connection_id,
          error: 'the endpoint answered 500',
        }),
      ]);
      await onTimeline(w.keys, inc.id, [
        event('execution.approved', { execution_id: execution.id, audience, deliveries: 2 }),
      ]);
      return execution.id;
    };
    const customers = await execute('customers');
    await execute('staff');
    await drain(w);
    const got = signedWith(mine.signingSecret).map((r) => r.json);
    expect(got.map((e) => e.type).sort()).toEqual([
      'delivery.failed',
      'execution.approved',
      'execution.completed',
      'execution.created',
    ]);
    for (const e of got)
      expect(e.data.execution_id ?? (e.data.execution as { id?: string } | undefined)?.id).toBe(customers);
  });
});
