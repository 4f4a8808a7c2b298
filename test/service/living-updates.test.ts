import { describe, expect, it } from 'vitest';
import type { Delivery } from '../../src/domain/execution/execution.js';
import { apiActor, refusal, slackActor } from './fakes.js';
import { webhookBody, world, type World } from './world.js';

/** ExecutionService's living updates over in-memory fakes: conversations, corrections, retractions, the update cadence. */

const slackBot = (name: string, over: Record<string, unknown> = {}) => ({
  name,
  type: 'slack',
  config: { bot_token: 'xoxb-1-abc', channel: 'C0INCIDENT' },
  ...over,
});
const teams = (name: string) => ({
  name,
  type: 'teams',
  config: {
    webhook_url: 'https://prod-00.westeurope.logic.azure.com/workflows/abc/triggers/manual/paths/invoke?sig=x',
  },
});

async function setup(bodies: Record<string, unknown>[]) {
  const w = world();
  const connections = [];
  for (const b of bodies) connections.push((await w.services.connections.create(b)).connection);
  const template = await w.services.templates.create({
    name: 'Status',
    subject: 'ETA {{eta}}',
    body: 'Fixed by {{eta}}.',
  });
  const incident = await w.services.incidents.create(
    { title: 'Checkout down', severity: 'major', template_ids: [template.id] },
    apiActor,
  );
  return { w, s: w.services, connections, incident };
}

async function execute(w: World, incidentId: string, body: Record<string, unknown>) {
  const r = await w.services.executions.execute(incidentId, body, slackActor, { dryRun: false });
  if (r.dryRun) throw new Error('expected a real execute');
  return r;
}

/** Marks deliveries delivered as a worker would, with the message the platform answered. */
function deliver(w: World, deliveries: Delivery[]) {
  for (const d of deliveries) {
    const stored = w.repos.executions.deliveries.get(d.id)!;
    w.repos.executions.deliveries.set(d.id, {
      ...stored,
      status: 'delivered',
      delivered_at: '2026-11-22T10:00:05.000Z',
      message: { id: `ts-${d.id}`, channel: 'C0INCIDENT', permalink: null },
    });
  }
}

describe('conversations', () => {
  it('numbers each connection’s messages of an incident and chains them to the one before', async () => {
    const { w, connections, incident } = await setup([webhookBody('A'), webhookBody('B')]);
    const rounds = [];
    for (let i = 0; i < 3; i++)
      rounds.push((await execute(w, incident.id, { variables: { eta: `${i}h` } })).deliveries);
    for (const c of connections) {
      const mine = rounds.map((ds) => ds.find((d) => d.connection_id === c.id)!);
      expect(mine.map((d) => d.sequence)).toEqual([1, 2, 3]);
      expect(mine.map((d) => d.previous_delivery_id)).toEqual([null, mine[0]!.id, mine[1]!.id]);
    }
  });
});

describe('corrections and retractions', () => {
  it('a correction edits where the platform can (Slack bot) and posts a "Correction:" elsewhere (Teams), rendered with the corrected variables', async () => {
    const { w, s, connections, incident } = await setup([slackBot('Bot'), teams('Teams')]);
    const first = await execute(w, incident.id, { variables: { eta: '1h' } });
    deliver(w, first.deliveries);
    const c = await s.executions.correct(
      incident.id,
      first.execution.id,
      { variables: { eta: '2h' }, note: 'wrong ETA' },
      slackActor,
    );
    expect(c.execution).toMatchObject({
      kind: 'correction',
      target_execution_id: first.execution.id,
      note: 'wrong ETA',
      variables: { eta: '2h' },
    });
    const bot = c.deliveries.find((d) => d.connection_id === connections[0]!.id)!;
    const other = c.deliveries.find((d) => d.connection_id === connections[1]!.id)!;
    expect(bot).toMatchObject({ planned_action: 'edit', target: { id: expect.stringMatching(/^ts-/) }, sequence: 2 });
    expect(bot.content.body).toBe('Fixed by 2h.\n\n(Corrected: wrong ETA)');
    expect(other).toMatchObject({ planned_action: 'post', target: null, sequence: 2 });
    expect(other.content).toMatchObject({
      subject: 'Correction: ETA 2h',
      body: 'Correction: wrong ETA\n\nFixed by 2h.',
    });
    const events = w.repos.incidents.events.get(incident.id)!;
    expect(events.at(-1)).toMatchObject({
      type: 'execution.corrected',
      actor: slackActor,
      data: { execution_id: c.execution.id, target_execution_id: first.execution.id, note: 'wrong ETA' },
    });
    // A correction is not itself corrected; nor is an empty correction accepted.
    expect((await refusal(s.executions.correct(incident.id, c.execution.id, { note: 'again' }, slackActor))).code).toBe(
      'not_correctable',
    );
    expect(
      (await refusal(s.executions.correct(incident.id, first.execution.id, {}, slackActor))).errors[0],
    ).toMatchObject({ field: 'variables' });
  });

  it('a retraction deletes where the platform can and posts "Retracted: <reason>" elsewhere', async () => {
    const { w, s, connections, incident } = await setup([slackBot('Bot'), teams('Teams')]);
    const first = await execute(w, incident.id, { variables: { eta: '1h' } });
    deliver(w, first.deliveries);
    const r = await s.executions.retract(
      incident.id,
      first.execution.id,
      { reason: 'sent to the wrong audience' },
      apiActor,
    );
    expect(r.execution).toMatchObject({ kind: 'retraction', note: 'sent to the wrong audience' });
    expect(r.deliveries.find((d) => d.connection_id === connections[0]!.id)).toMatchObject({
      planned_action: 'delete',
    });
    expect(r.deliveries.find((d) => d.connection_id === connections[1]!.id)!.content).toMatchObject({
      subject: 'Retracted: ETA 1h',
      body: 'Retracted: sent to the wrong audience',
    });
    expect(w.repos.incidents.events.get(incident.id)!.at(-1)).toMatchObject({
      type: 'execution.retracted',
      data: { reason: 'sent to the wrong audience' },
    });
    expect(
      (await refusal(s.executions.retract(incident.id, first.execution.id, { reason: ' ' }, apiActor))).errors[0],
    ).toMatchObject({ field: 'reason' });
  });

  it('nothing delivered yet: 409 nothing_delivered, nothing committed', async () => {
    const { w, s, incident } = await setup([slackBot('Bot')]);
    const first = await execute(w, incident.id, { variables: { eta: '1h' } });
    const before = w.repos.executions.executions.size;
    expect((await refusal(s.executions.correct(incident.id, first.execution.id, { note: 'x' }, apiActor))).code).toBe(
      'nothing_delivered',
    );
    expect(w.repos.executions.executions.size).toBe(before);
  });

  it('update_mode edit is refused for a connection that cannot edit', async () => {
    const { s, connections } = await setup([slackBot('Bot'), teams('Teams')]);
    expect((await s.connections.update(connections[0]!.id, { update_mode: 'edit' })).update_mode).toBe('edit');
    const e = await refusal(s.connections.update(connections[1]!.id, { update_mode: 'edit' }));
    expect(e.code).toBe('unsupported_update_mode');
    expect(e.errors[0]).toMatchObject({ field: 'update_mode' });
  });
});

describe('update cadence', () => {
  it('next_update_in sets the due time and {{incident.next_update_at}}; an execute without it clears it; resolve clears it', async () => {
    const { w, s, incident } = await setup([webhookBody('A')]);
    await s.templates.create({ name: 'Next', body: 'Next update at {{incident.next_update_at}}.' });
    const withNext = await s.incidents.create(
      {
        title: 'T',
        severity: 'minor',
        template_ids: [(await s.templates.list({ limit: 1, cursor: null })).data[0]!.id],
      },
      apiActor,
    );
    const r = await execute(w, withNext.id, { next_update_in: '30m' });
    expect(r.deliveries[0]!.content.body).toBe('Next update at 10:30 UTC.');
    expect(await s.incidents.get(withNext.id)).toMatchObject({
      next_update_due_at: '2026-11-22T10:30:00.000Z',
      next_reminder_at: '2026-11-22T10:30:00.000Z',
      last_executed_by: slackActor,
    });
    await execute(w, withNext.id, {});
    expect((await s.incidents.get(withNext.id)).next_update_due_at).toBeNull();
    await execute(w, incident.id, { next_update_in: '1h', variables: { eta: 'x' } });
    await s.incidents.update(incident.id, { status: 'resolved' }, apiActor);
    const resolved = await s.incidents.get(incident.id);
    expect(resolved.next_update_due_at).toBeNull();
    expect(resolved.next_reminder_at).toBeUndefined();
    for (const bad of ['30s', '0m', '25h', '1d', 'soon']) {
      expect((await refusal(execute(w, incident.id, { next_update_in: bad }))).errors[0], bad).toMatchObject({
        field: 'next_update_in',
      });
    }
  });
});
