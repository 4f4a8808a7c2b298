import { describe, expect, it } from 'vitest';
import type { Delivery } from '../../src/domain/execution/execution.js';
import { apiActor, fieldsOf, idOf, refusal, slackActor } from './fakes.js';
import { webhookBody, world, type World } from './world.js';
import { CONNECTION_BODIES as BODIES } from '../support/connection-bodies.js';
import { formatOf } from '../../src/domain/connection/connection.js';
import { incidentView, renderMessage } from '../../src/domain/template/render.js';

/** ExecutionService's rules over in-memory fakes (execute, dry run, precheck, preview, prepare, get, list, redeliver). */

const marker = (name: string) => `‹${name}›`;

/** Connections `names` (webhooks), templates as given, and an incident attaching them all. */
async function setup(opts: { connections?: string[]; templates?: Record<string, unknown>[]; w?: World } = {}) {
  const w = opts.w ?? world();
  const connections = [];
  for (const name of opts.connections ?? ['Hook A', 'Hook B'])
    connections.push((await w.services.connections.create(webhookBody(name))).connection);
  const templates = [];
  for (const t of opts.templates ?? []) templates.push(await w.services.templates.create(t));
  const incident = await w.services.incidents.create(
    { title: 'Checkout down', severity: 'major', template_ids: templates.map((t) => t.id) },
    apiActor,
  );
  return { w, s: w.services, connections, templates, incident };
}

describe('ExecutionService.execute', () => {
  it('commits one delivery per (template × targeted connection), queues them, and records the execute on the incident', async () => {
    const { w, s, connections, templates, incident } = await setup({
      templates: [
        { name: 'Everyone', body: '{{incident.title}}: {{eta}}' },
        { name: 'Only A', body: 'A only' },
      ],
    });
    await s.templates.update(templates[1]!.id, { connection_ids: [connections[0]!.id] });
    w.clock.advance(1000);
    const r = await s.executions.execute(incident.id, { variables: { eta: '1h' } }, slackActor, { dryRun: false });
    if (r.dryRun) throw new Error('expected a real execute');
    const e = r.execution;
    expect(r.deliveries).toHaveLength(3);
    expect(
      r.deliveries.map(
        (d) =>
          `${d.template_id === templates[0]!.id ? 'Everyone' : 'Only A'}→${d.connection_id === connections[0]!.id ? 'A' : 'B'}`,
      ),
    ).toEqual(['Everyone→B', 'Everyone→A', 'Only A→A']);
    expect(r.deliveries.every((d) => d.status === 'queued')).toBe(true);
    expect(e.variables).toEqual({ eta: '1h' });
    // Queued as one dispatch job (the execution's claim) and confirmed: marked dispatched in the outbox…
    expect(w.queue.batches).toHaveLength(1);
    const batch = w.queue.batches[0]!;
    expect(batch).toMatchObject({ incidentId: incident.id, claim: Date.parse(e.created_at) });
    expect(batch.deliveries.map((x) => x.deliveryId)).toEqual(r.deliveries.map((d) => d.id));
    expect([...w.repos.executions.dispatched]).toEqual(r.deliveries.map((d) => d.id));
    expect(w.queue.jobs).toEqual([]);
    // …where the dispatch job takes them all: nothing left in the outbox.
    const claim = await s.deliveries.claimDispatch(batch);
    expect(claim.mine.map((j) => j.deliveryId)).toEqual(r.deliveries.map((d) => d.id));
    expect(claim.theirs).toEqual([]);
    expect(w.repos.executions.outbox.size).toBe(0);
    const after = await s.incidents.get(incident.id);
    expect(after).toMatchObject({
      execution_count: 1,
      last_executed_at: '2026-11-22T10:00:01.000Z',
      rev: incident.rev + 1,
    });
    const event = w.repos.incidents.events.get(incident.id)!.at(-1)!;
    expect(event).toMatchObject({
      type: 'incident.executed',
      actor: slackActor,
      data: { execution_id: e.id, deliveries: 3, template_versions: { [templates[0]!.id]: 1, [templates[1]!.id]: 2 } },
    });
    const stored = [...w.repos.executions.deliveries.values()].find((d) => d.template_id === templates[0]!.id)!;
    expect(stored.content.body).toBe('Checkout down: 1h');
  });

  it('renders each connection in its own format when one template goes to many (Telegram parse modes differ per connection)', async () => {
    const w = world();
    const made = [];
    for (const body of [
      webhookBody('Hook A'),
      webhookBody('Hook B'),
      { ...BODIES.telegram!, name: 'TG html' },
      {
        ...BODIES.telegram!,
        name: 'TG markdown',
        config: { ...(BODIES.telegram!.config as object), parse_mode: 'MarkdownV2' },
      },
      {
        ...BODIES.telegram!,
        name: 'TG plain',
        config: { ...(BODIES.telegram!.config as object), parse_mode: undefined },
      },
      BODIES.slack_bot!,
      BODIES.email!,
    ]) {
      made.push((await w.services.connections.create(body)).connection);
    }
    const { s, incident, templates } = await setup({
      w,
      connections: [],
      templates: [{ name: 'All', subject: 'Down: {{what}}', body: 'Cause: {{what}}' }],
    });
    const r = await s.executions.execute(incident.id, { variables: { what: '<db1> *primary_1* & co.' } }, apiActor, {
      dryRun: false,
    });
    if (r.dryRun) throw new Error('expected a real execute');
    const ctx = {
      incident: incidentView({ ...incident, description: '', impact: '', resolution_summary: null }),
      execution: { id: r.execution.id },
      variables: { what: '<db1> *primary_1* & co.' },
    };
    const source = { subject: templates[0]!.subject, body: templates[0]!.body };
    for (const c of made) {
      const d = r.deliveries.find((x) => x.connection_id === c.id)!;
      const target = (await s.connections.getForDelivery(c.id))!;
      const expected = renderMessage(source, ctx, formatOf(target));
      expect({ name: c.name, ...d.content }).toEqual({ name: c.name, ...expected });
    }
    // The three Telegram renderings are three different texts.
    const tg = made
      .filter((c) => c.type === 'telegram')
      .map((c) => r.deliveries.find((x) => x.connection_id === c.id)!.content.body);
    expect(new Set(tg).size).toBe(3);
  });

  it('sends the built-in message to every enabled connection when no template is attached', async () => {
    const { s, connections, incident } = await setup();
    await s.connections.update(connections[1]!.id, { enabled: false });
    const r = await s.executions.execute(incident.id, {}, apiActor, { dryRun: false });
    if (r.dryRun) throw new Error('expected a real execute');
    expect(r.deliveries.map((d) => [d.connection_id, d.template_id])).toEqual([[connections[0]!.id, null]]);
  });

  it('dry run plans the same deliveries, rendered, and stores, queues and changes nothing', async () => {
    const { w, s, incident } = await setup({ templates: [{ name: 'T', subject: 'S {{eta}}', body: 'B {{eta}}' }] });
    for (const flag of [true, 'true'] as const) {
      const r = await s.executions.execute(incident.id, { variables: { eta: 'soon' } }, apiActor, { dryRun: flag });
      expect(r.dryRun).toBe(true);
      if (!r.dryRun) return;
      expect(r.deliveries.map((d) => [d.subject, d.body])).toEqual([
        ['S soon', 'B soon'],
        ['S soon', 'B soon'],
      ]);
    }
    expect(w.repos.executions.executions.size).toBe(0);
    expect(w.queue.jobs).toEqual([]);
    expect(w.queue.batches).toEqual([]);
    expect((await s.incidents.get(incident.id)).rev).toBe(incident.rev);
  });

  it('judges dry_run after 404 and 409, and refuses a value that is not a boolean', async () => {
    const { s, incident } = await setup();
    expect((await refusal(s.executions.execute(idOf('incident', 999), {}, apiActor, { dryRun: 'maybe' }))).code).toBe(
      'not_found',
    );
    const bad = await refusal(s.executions.execute(incident.id, {}, apiActor, { dryRun: 'maybe' }));
    expect(bad.code).toBe('validation_failed');
    expect(bad.errors.map((e) => e.field)).toEqual(['dry_run']);
    await s.incidents.close(incident.id, {}, apiActor);
    expect((await refusal(s.executions.execute(incident.id, {}, apiActor, { dryRun: 'maybe' }))).code).toBe(
      'incident_closed',
    );
  });

  it('names each missing required variable, and takes defaults for blank values', async () => {
    const { w, s, incident } = await setup({
      templates: [
        {
          name: 'T',
          body: '{{a}} {{b}} {{c}}',
          variables: [{ name: 'a' }, { name: 'b' }, { name: 'c', default: 'C' }],
        },
      ],
    });
    const e = await refusal(s.executions.execute(incident.id, { variables: { b: '  ' } }, apiActor, { dryRun: false }));
    expect(e.code).toBe('missing_variables');
    expect(e.errors.map((x) => x.field)).toEqual(['variables.a', 'variables.b']);
    expect(w.repos.executions.executions.size).toBe(0);
    const r = await s.executions.execute(incident.id, { variables: { a: 'A', b: 'B', c: '' } }, apiActor, {
      dryRun: true,
    });
    if (!r.dryRun) throw new Error('expected a dry run');
    expect(r.deliveries[0]!.body).toBe('A B C');
  });

  it('refuses a bad body: unknown fields, bad variable names, an empty connection list', async () => {
    const { s, incident } = await setup();
    const e = await refusal(
      s.executions.execute(incident.id, { extra: 1, variables: { 'bad-name': 'x' } }, apiActor, { dryRun: false }),
    );
    expect(e.code).toBe('validation_failed');
    expect(e.errors.map((x) => x.field).sort()).toEqual(['extra', 'variables.bad-name']);
    expect(
      (await refusal(s.executions.execute(incident.id, { connection_ids: [] }, apiActor, { dryRun: false }))).code,
    ).toBe('validation_failed');
  });

  it('targets only the listed connections; unknown ones are unknown_connection, disabled ones no_connections, a repeat counts once', async () => {
    const { s, connections, incident } = await setup({ connections: ['A', 'B', 'C'] });
    const [a, b, c] = connections.map((x) => x.id) as [string, string, string];
    const r = await s.executions.execute(incident.id, { connection_ids: [b, b] }, apiActor, { dryRun: true });
    if (!r.dryRun) throw new Error('expected a dry run');
    expect(r.deliveries.map((d) => d.connection_id)).toEqual([b]);
    const unknown = await refusal(
      s.executions.execute(incident.id, { connection_ids: [a, idOf('connection', 999)] }, apiActor, { dryRun: false }),
    );
    expect(unknown.code).toBe('unknown_connection');
    expect(fieldsOf(unknown)).toEqual(['connection_ids.1:unknown_connection']);
    await s.connections.update(c, { enabled: false });
    const disabled = await refusal(
      s.executions.execute(incident.id, { connection_ids: [a, c] }, apiActor, { dryRun: false }),
    );
    expect(disabled.code).toBe('no_connections');
    expect(fieldsOf(disabled)).toEqual(['connection_ids.1:connection_disabled']);
  });

  it('answers no_connections when nothing is enabled, or no template targets an enabled connection', async () => {
    const none = await setup({ connections: [] });
    expect((await refusal(none.s.executions.execute(none.incident.id, {}, apiActor, { dryRun: false }))).code).toBe(
      'no_connections',
    );
    const { s, templates, incident } = await setup({ templates: [{ name: 'T', body: 'x' }] });
    const other = (await s.connections.create(webhookBody('Other'))).connection;
    await s.templates.update(templates[0]!.id, { connection_ids: [other.id] });
    await s.connections.update(other.id, { enabled: false });
    expect((await refusal(s.executions.execute(incident.id, {}, apiActor, { dryRun: false }))).code).toBe(
      'no_connections',
    );
  });

  it('answers 202 although the queue failed: the deliveries stay in the outbox and the failure is reported', async () => {
    const { w, s, incident } = await setup();
    w.queue.failWith = new Error('queue down');
    const r = await s.executions.execute(incident.id, {}, apiActor, { dryRun: false });
    if (r.dryRun) throw new Error('expected a real execute');
    expect(r.deliveries).toHaveLength(2);
    expect(w.repos.executions.outbox.size).toBe(2);
    expect(w.seen.errors.some((x) => x.includes('outbox'))).toBe(true);
  });

  it('re-plans on a fresh read when the incident changed during the commit', async () => {
    const { w, s, incident } = await setup();
    let raced = false;
    w.repos.incidents.interfere = (id) => {
      if (raced) return;
      raced = true;
      const cur = w.repos.incidents.incidents.get(id)!;
      w.repos.incidents.incidents.set(id, { ...cur, title: 'Renamed meanwhile', rev: cur.rev + 1 });
    };
    const r = await s.executions.execute(incident.id, {}, apiActor, { dryRun: false });
    if (r.dryRun) throw new Error('expected a real execute');
    expect(w.repos.executions.executions.size).toBe(1);
    const d = [...w.repos.executions.deliveries.values()][0]!;
    expect(d.content.body).toContain('Renamed meanwhile');
    expect((await s.incidents.get(incident.id)).rev).toBe(incident.rev + 2);
  });
});

describe('ExecutionService.precheck', () => {
  it('refuses what execute would (404, closed, body, connections, missing variables) and stores nothing', async () => {
    const { w, s, incident } = await setup({ templates: [{ name: 'T', body: '{{eta}}' }] });
    expect((await refusal(s.executions.precheck(idOf('incident', 999), {}))).code).toBe('not_found');
    expect((await refusal(s.executions.precheck(incident.id, { extra: 1 }))).code).toBe('validation_failed');
    expect(
      (await refusal(s.executions.precheck(incident.id, { connection_ids: [idOf('connection', 999)] }))).code,
    ).toBe('unknown_connection');
    expect(fieldsOf(await refusal(s.executions.precheck(incident.id, {})))).toEqual(['variables.eta:required']);
    await expect(s.executions.precheck(incident.id, { variables: { eta: '1h' } })).resolves.toBeUndefined();
    expect(w.repos.executions.executions.size).toBe(0);
    expect(w.queue.jobs).toEqual([]);
    expect(w.queue.batches).toEqual([]);
    await s.incidents.close(incident.id, {}, apiActor);
    expect((await refusal(s.executions.precheck(incident.id, { variables: { eta: '1h' } }))).code).toBe(
      'incident_closed',
    );
  });
});

describe('ExecutionService.prepare / preview', () => {
  it('merges the variables of the templates that will be sent, with prefill and previews with markers', async () => {
    const { s, connections, incident } = await setup({
      templates: [
        {
          name: 'First',
          body: '{{eta}} {{x}}',
          variables: [
            { name: 'eta', required: false },
            { name: 'x', required: false },
          ],
        },
        {
          name: 'Second',
          body: '{{eta}}',
          variables: [{ name: 'eta', description: 'ETA', required: true, default: '1h' }],
        },
      ],
    });
    const p = await s.executions.prepare(incident.id, { limit: 10, placeholder: marker });
    expect(p.incident.id).toBe(incident.id);
    expect(p.templates.map((t) => t.name)).toEqual(['First', 'Second']);
    expect(p.variables).toEqual([
      { name: 'eta', description: 'ETA', required: true, default: '1h', prefill: '1h', preview: '1h' },
      { name: 'x', description: '', required: false, default: null, prefill: null, preview: '‹x›' },
    ]);
    expect(p.total).toBe(4);
    // Template by template, over the connections as listed (newest first).
    expect(p.deliveries.map((d) => [d.connection_name, d.template_name, d.body])).toEqual([
      ['Hook B', 'First', '1h ‹x›'],
      ['Hook A', 'First', '1h ‹x›'],
      ['Hook B', 'Second', '1h'],
      ['Hook A', 'Second', '1h'],
    ]);
    expect(p.deliveries[0]!.connection_id).toBe(connections[1]!.id);
  });

  it('leaves out templates that target no enabled connection (their variables are not asked for)', async () => {
    const { s, templates, incident } = await setup({
      templates: [
        { name: 'Used', body: '{{eta}}' },
        { name: 'Unused', body: '{{secret}}' },
      ],
    });
    const gone = (await s.connections.create(webhookBody('Gone'))).connection;
    await s.templates.update(templates[1]!.id, { connection_ids: [gone.id] });
    await s.connections.update(gone.id, { enabled: false });
    const p = await s.executions.prepare(incident.id, { limit: 10, placeholder: marker });
    expect(p.templates.map((t) => t.name)).toEqual(['Used']);
    expect(p.variables.map((v) => v.name)).toEqual(['eta']);
    const preview = await s.executions.preview(incident.id, { limit: 10, placeholder: marker });
    expect(preview.variables).toEqual([{ name: 'eta', description: '', required: true, default: null }]);
    expect(preview.deliveries[0]).not.toHaveProperty('connection_name');
  });

  it('renders only `limit` deliveries and counts the rest; honours a connection subset', async () => {
    const { s, connections, incident } = await setup({
      connections: ['A', 'B', 'C', 'D'],
      templates: [{ name: 'T', body: 'x' }],
    });
    const p = await s.executions.prepare(incident.id, { limit: 1, placeholder: marker });
    expect(p.total).toBe(4);
    expect(p.deliveries).toHaveLength(1);
    const subset = await s.executions.prepare(incident.id, {
      connection_ids: [connections[2]!.id],
      limit: 10,
      placeholder: marker,
    });
    expect(subset.deliveries.map((d) => d.connection_name)).toEqual(['C']);
    expect(
      (await refusal(s.executions.prepare(incident.id, { connection_ids: [], limit: 10, placeholder: marker }))).code,
    ).toBe('validation_failed');
  });

  it('refuses what execute would before anything is typed: 404, closed, no connections', async () => {
    const none = await setup({ connections: [] });
    expect((await refusal(none.s.executions.prepare(none.incident.id, { limit: 10, placeholder: marker }))).code).toBe(
      'no_connections',
    );
    expect((await refusal(none.s.executions.preview(none.incident.id, { limit: 10, placeholder: marker }))).code).toBe(
      'no_connections',
    );
    const { s, incident } = await setup();
    expect((await refusal(s.executions.prepare(idOf('incident', 999), { limit: 10, placeholder: marker }))).code).toBe(
      'not_found',
    );
    await s.incidents.close(incident.id, {}, apiActor);
    expect((await refusal(s.executions.prepare(incident.id, { limit: 10, placeholder: marker }))).code).toBe(
      'incident_closed',
    );
  });
});

describe('ExecutionService.get / list', () => {
  it('gets an execution of its incident only; others and malformed ids are not_found', async () => {
    const { s, incident } = await setup();
    const other = await s.incidents.create({ title: 'Other', severity: 'low' }, apiActor);
    const r = await s.executions.execute(incident.id, {}, apiActor, { dryRun: false });
    if (r.dryRun) throw new Error('expected a real execute');
    const got = await s.executions.get(incident.id, r.execution.id);
    expect(got.execution).toMatchObject({ id: r.execution.id, incident_id: incident.id });
    expect(got.deliveries.every((d) => d.status === 'queued')).toBe(true);
    expect(got.deliveries).toHaveLength(2);
    expect((await refusal(s.executions.get(other.id, r.execution.id))).code).toBe('not_found');
    expect((await refusal(s.executions.get(incident.id, 'exe_nope'))).code).toBe('not_found');
    expect((await refusal(s.executions.get(idOf('incident', 999), r.execution.id))).code).toBe('not_found');
  });

  it('lists an incident’s executions newest first by cursor; an offset cursor is refused', async () => {
    const { s, incident } = await setup();
    const ids = [];
    for (let n = 0; n < 3; n++) {
      const r = await s.executions.execute(incident.id, {}, apiActor, { dryRun: false });
      if (!r.dryRun) ids.push(r.execution.id);
    }
    const p1 = await s.executions.list(incident.id, { limit: 2, cursor: null });
    expect(p1.data.map((e) => e.execution.id)).toEqual([ids[2], ids[1]]);
    const p2 = await s.executions.list(incident.id, { limit: 2, cursor: p1.nextCursor });
    expect(p2.data.map((e) => e.execution.id)).toEqual([ids[0]]);
    expect(p2.nextCursor).toBeNull();
    expect((await refusal(s.executions.list(incident.id, { limit: 2, cursor: { offset: 2 } }))).code).toBe(
      'invalid_cursor',
    );
    expect((await refusal(s.executions.list(idOf('incident', 999), { limit: 2, cursor: null }))).code).toBe(
      'not_found',
    );
  });
});

describe('ExecutionService.redeliver', () => {
  async function executedWithOneFailed() {
    const t = await setup();
    const r = await t.s.executions.execute(t.incident.id, {}, apiActor, { dryRun: false });
    if (r.dryRun) throw new Error('expected a real execute');
    const [failed, delivered] = r.deliveries.map((d) => t.w.repos.executions.deliveries.get(d.id)!) as [
      Delivery,
      Delivery,
    ];
    t.w.repos.executions.deliveries.set(failed.id, {
      ...failed,
      status: 'failed',
      finished_at: '2026-11-22T10:05:00.000Z',
      rev: failed.rev + 1,
    });
    t.w.repos.executions.deliveries.set(delivered.id, {
      ...delivered,
      status: 'delivered',
      finished_at: '2026-11-22T10:05:00.000Z',
      rev: delivered.rev + 1,
    });
    t.w.queue.jobs.length = 0;
    return { ...t, executionId: r.execution.id, failed, delivered };
  }

  it('re-queues only the failed deliveries, in a new round with a new job id', async () => {
    const { w, s, incident, executionId, failed, delivered } = await executedWithOneFailed();
    const found = await s.executions.redeliver(incident.id, executionId, {}, apiActor);
    expect(found.deliveries.find((d) => d.id === failed.id)!.status).toBe('queued');
    expect(found.deliveries.find((d) => d.id === delivered.id)!.status).toBe('delivered');
    expect(w.queue.jobs).toEqual([
      {
        deliveryId: failed.id,
        jobId: `${failed.id}-r1`,
        hint: { incidentId: incident.id, connectionId: failed.connection_id, follows: false },
      },
    ]);
    // Nothing failed any more: a second redeliver queues nothing.
    await s.executions.redeliver(incident.id, executionId, undefined, apiActor);
    expect(w.queue.jobs).toHaveLength(1);
  });

  it('refuses an unknown execution (404) before a closed incident (409), and a non-empty body', async () => {
    const { w, s, incident, executionId } = await executedWithOneFailed();
    expect((await refusal(s.executions.redeliver(incident.id, executionId, { force: true }, apiActor))).code).toBe(
      'validation_failed',
    );
    await s.incidents.close(incident.id, {}, apiActor);
    expect((await refusal(s.executions.redeliver(incident.id, idOf('execution', 999), {}, apiActor))).code).toBe(
      'not_found',
    );
    expect((await refusal(s.executions.redeliver(incident.id, executionId, {}, apiActor))).code).toBe(
      'incident_closed',
    );
    expect(w.queue.jobs).toEqual([]);
  });
});
