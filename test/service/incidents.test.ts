import { describe, expect, it, vi } from 'vitest';
import { LIMITS } from '../../src/domain/common/limits.js';
import { apiActor, fieldsOf, idOf, refusal, slackActor } from './fakes.js';
import { world, type World } from './world.js';

/** IncidentService's rules over in-memory fakes. */

const body = (over: Record<string, unknown> = {}) => ({ title: 'Checkout down', severity: 'major', ...over });

async function template(w: World, name: string, variables: string[] = []) {
  return w.services.templates.create({ name, body: variables.map((v) => `{{${v}}}`).join(' ') || 'x' });
}

describe('IncidentService.create', () => {
  it('creates an investigating incident at rev 1, by the actor, with a created event, and tells onChange', async () => {
    const w = world();
    const i = await w.services.incidents.create(body({ description: 'd' }), slackActor);
    expect(i).toMatchObject({
      title: 'Checkout down',
      severity: 'major',
      status: 'investigating',
      rev: 1,
      description: 'd',
      impact: '',
      template_ids: [],
      execution_count: 0,
      created_by: slackActor,
    });
    expect(i.created_at).toBe('2026-11-22T10:00:00.000Z');
    const events = w.repos.incidents.events.get(i.id)!;
    expect(events.map((e) => e.type)).toEqual(['incident.created']);
    expect(events[0]!.actor).toEqual(slackActor);
    expect(w.seen.changes).toEqual([{ id: i.id, kind: 'created' }]);
  });

  it('refuses a missing title and a bad severity in one answer, storing nothing', async () => {
    const w = world();
    const e = await refusal(w.services.incidents.create({ title: '  ', severity: 'apocalyptic' }, apiActor));
    expect(e.code).toBe('validation_failed');
    expect(e.errors.map((x) => x.field).sort()).toEqual(['severity', 'title']);
    expect(w.repos.incidents.writes).toBe(0);
    expect(w.seen.changes).toEqual([]);
  });

  it('refuses unknown fields (strict body)', async () => {
    const w = world();
    const e = await refusal(w.services.incidents.create(body({ colour: 'red' }), apiActor));
    expect(e.code).toBe('validation_failed');
  });

  it('refuses repeated template ids', async () => {
    const w = world();
    const t = await template(w, 'A');
    const e = await refusal(w.services.incidents.create(body({ template_ids: [t.id, t.id] }), apiActor));
    expect(e.code).toBe('validation_failed');
    expect(e.errors[0]!.field).toMatch(/^template_ids/);
  });

  it('names each template id that does not exist by its index', async () => {
    const w = world();
    const t = await template(w, 'A');
    const e = await refusal(
      w.services.incidents.create(body({ template_ids: [t.id, idOf('template', 999), 'tpl_bad'] }), apiActor),
    );
    expect(e.code).toBe('unknown_template');
    expect(fieldsOf(e)).toEqual(['template_ids.1:unknown_template', 'template_ids.2:unknown_template']);
    expect(w.repos.incidents.writes).toBe(0);
  });

  it(`refuses templates declaring more than ${LIMITS.variables} variables together, counting a shared name once`, async () => {
    const w = world();
    const a = await template(
      w,
      'A',
      Array.from({ length: 30 }, (_, i) => `a${i}`),
    );
    const b = await template(
      w,
      'B',
      Array.from({ length: 21 }, (_, i) => `b${i}`),
    );
    const shared = await template(
      w,
      'C',
      Array.from({ length: 20 }, (_, i) => `a${i}`),
    );
    const e = await refusal(w.services.incidents.create(body({ template_ids: [a.id, b.id] }), apiActor));
    expect(fieldsOf(e)).toEqual(['template_ids:too_many_variables']);
    // 30 + 20 names, 20 of them shared: 30 distinct.
    await expect(
      w.services.incidents.create(body({ template_ids: [a.id, shared.id] }), apiActor),
    ).resolves.toMatchObject({ template_ids: [a.id, shared.id] });
  });
});

describe('IncidentService.get / getWritable', () => {
  it('answers not_found for an unknown id and for a malformed one', async () => {
    const w = world();
    expect((await refusal(w.services.incidents.get(idOf('incident', 42)))).code).toBe('not_found');
    expect((await refusal(w.services.incidents.get('../etc/passwd'))).code).toBe('not_found');
  });

  it('getWritable answers the incident while it is open, incident_closed once closed', async () => {
    const w = world();
    const i = await w.services.incidents.create(body(), apiActor);
    await expect(w.services.incidents.getWritable(i.id)).resolves.toMatchObject({ id: i.id });
    await w.services.incidents.close(i.id, {}, apiActor);
    expect((await refusal(w.services.incidents.getWritable(i.id))).code).toBe('incident_closed');
    expect((await refusal(w.services.incidents.getWritable(idOf('incident', 42)))).code).toBe('not_found');
  });
});

describe('IncidentService.list', () => {
  it('pages newest first with a cursor, and filters by status and severity', async () => {
    const w = world();
    const made = [];
    for (let n = 0; n < 5; n++)
      made.push(
        await w.services.incidents.create(body({ title: `I${n}`, severity: n % 2 ? 'minor' : 'major' }), apiActor),
      );
    await w.services.incidents.close(made[0]!.id, {}, apiActor);
    const first = await w.services.incidents.list({}, { limit: 2, cursor: null });
    expect(first.data.map((i) => i.title)).toEqual(['I4', 'I3']);
    const second = await w.services.incidents.list({}, { limit: 2, cursor: first.nextCursor });
    expect(second.data.map((i) => i.title)).toEqual(['I2', 'I1']);
    const last = await w.services.incidents.list({}, { limit: 2, cursor: second.nextCursor });
    expect(last.data.map((i) => i.title)).toEqual(['I0']);
    expect(last.nextCursor).toBeNull();
    const open = await w.services.incidents.list(
      { status: ['investigating'], severity: ['major'] },
      { limit: 10, cursor: null },
    );
    expect(open.data.map((i) => i.title)).toEqual(['I4', 'I2']);
  });

  it('refuses a cursor issued by a timeline (offset)', async () => {
    const w = world();
    expect((await refusal(() => w.services.incidents.list({}, { limit: 2, cursor: { offset: 3 } }))).code).toBe(
      'invalid_cursor',
    );
  });
});

describe('IncidentService.update', () => {
  it('changes fields, bumps rev and updated_at, records who changed what, and tells onChange', async () => {
    const w = world();
    const i = await w.services.incidents.create(body(), apiActor);
    w.clock.advance(60_000);
    const next = await w.services.incidents.update(i.id, { title: 'Checkout slow', status: 'identified' }, slackActor);
    expect(next).toMatchObject({
      title: 'Checkout slow',
      status: 'identified',
      rev: 2,
      updated_at: '2026-11-22T10:01:00.000Z',
    });
    const events = w.repos.incidents.events.get(i.id)!;
    expect(events.map((e) => e.type)).toEqual(['incident.created', 'incident.updated', 'incident.status_changed']);
    expect(events[1]!.data).toEqual({ changes: { title: { from: 'Checkout down', to: 'Checkout slow' } } });
    expect(events[2]!.data).toEqual({ from: 'investigating', to: 'identified' });
    expect(events[2]!.actor).toEqual(slackActor);
    expect(w.seen.changes.at(-1)).toEqual({ id: i.id, kind: 'updated' });
  });

  it('stamps resolved_at on resolve and clears it on reopening', async () => {
    const w = world();
    const i = await w.services.incidents.create(body(), apiActor);
    const resolved = await w.services.incidents.update(i.id, { status: 'resolved' }, apiActor);
    expect(resolved.resolved_at).toBe('2026-11-22T10:00:00.000Z');
    const reopened = await w.services.incidents.update(i.id, { status: 'monitoring' }, apiActor);
    expect(reopened.resolved_at).toBeNull();
  });

  it('refuses an empty patch with empty_patch', async () => {
    const w = world();
    const i = await w.services.incidents.create(body(), apiActor);
    const e = await refusal(w.services.incidents.update(i.id, {}, apiActor));
    expect(e.code).toBe('validation_failed');
    expect(fieldsOf(e)).toEqual([':empty_patch']);
  });

  it('answers a patch that changes nothing with the incident untouched: same rev, no event, no onChange', async () => {
    const w = world();
    const i = await w.services.incidents.create(body(), apiActor);
    const same = await w.services.incidents.update(
      i.id,
      { title: 'Checkout down', severity: 'major', status: 'investigating' },
      apiActor,
    );
    expect(same).toEqual(i);
    expect(w.repos.incidents.events.get(i.id)).toHaveLength(1);
    expect(w.seen.changes).toHaveLength(1);
    expect(w.repos.incidents.writes).toBe(1);
  });

  it('sends closing to the close endpoint (use_close_endpoint on status)', async () => {
    const w = world();
    const i = await w.services.incidents.create(body(), apiActor);
    const e = await refusal(w.services.incidents.update(i.id, { status: 'closed' }, apiActor));
    expect(e.code).toBe('use_close_endpoint');
    expect(e.errors[0]!.field).toBe('status');
  });

  it('answers 412 precondition_failed for a stale If-Match and accepts the current revision', async () => {
    const w = world();
    const i = await w.services.incidents.create(body(), apiActor);
    await w.services.incidents.update(i.id, { title: 'Two' }, apiActor);
    const e = await refusal(w.services.incidents.update(i.id, { title: 'Three' }, apiActor, 1));
    expect(e.code).toBe('precondition_failed');
    expect((await w.services.incidents.get(i.id)).title).toBe('Two');
    await expect(w.services.incidents.update(i.id, { title: 'Three' }, apiActor, 2)).resolves.toMatchObject({
      title: 'Three',
      rev: 3,
    });
  });

  it('answers incident_closed for a closed incident before judging the body', async () => {
    const w = world();
    const i = await w.services.incidents.create(body(), apiActor);
    await w.services.incidents.close(i.id, {}, apiActor);
    expect((await refusal(w.services.incidents.update(i.id, { title: '' }, apiActor))).code).toBe('incident_closed');
    expect((await refusal(w.services.incidents.update(i.id, { nonsense: 1 }, apiActor))).code).toBe('incident_closed');
  });

  it('refuses attaching a template that does not exist, and the variable limit only when the list changes', async () => {
    const w = world();
    const i = await w.services.incidents.create(body(), apiActor);
    const e = await refusal(w.services.incidents.update(i.id, { template_ids: [idOf('template', 77)] }, apiActor));
    expect(fieldsOf(e)).toEqual(['template_ids.0:unknown_template']);
    const t = await template(w, 'A', ['eta']);
    await expect(w.services.incidents.update(i.id, { template_ids: [t.id] }, apiActor)).resolves.toMatchObject({
      template_ids: [t.id],
    });
  });

  it('re-reads and retries when it loses a compare-and-set race, keeping the concurrent change', async () => {
    const w = world();
    const i = await w.services.incidents.create(body(), apiActor);
    let raced = false;
    w.repos.incidents.interfere = (id) => {
      if (raced) return;
      raced = true;
      const stored = w.repos.incidents.incidents.get(id)!;
      w.repos.incidents.incidents.set(id, { ...stored, impact: 'someone else', rev: stored.rev + 1 });
    };
    const next = await w.services.incidents.update(i.id, { title: 'Mine' }, apiActor);
    expect(next).toMatchObject({ title: 'Mine', impact: 'someone else', rev: 3 });
  });

  it('gives up with conflict when every attempt loses the race', async () => {
    const w = world();
    const i = await w.services.incidents.create(body(), apiActor);
    w.repos.incidents.interfere = (id) => {
      const stored = w.repos.incidents.incidents.get(id)!;
      w.repos.incidents.incidents.set(id, { ...stored, rev: stored.rev + 1 });
    };
    // The retries' jittered pauses run on fake time: the test stays fast.
    vi.useFakeTimers();
    try {
      const refused = refusal(w.services.incidents.update(i.id, { title: 'Mine' }, apiActor));
      await vi.runAllTimersAsync();
      expect((await refused).code).toBe('conflict');
    } finally {
      vi.useRealTimers();
    }
  });

  it('answers not_found for an unknown incident', async () => {
    const w = world();
    expect((await refusal(w.services.incidents.update(idOf('incident', 5), { title: 'x' }, apiActor))).code).toBe(
      'not_found',
    );
  });
});

describe('IncidentService.close', () => {
  it('closes (terminal), stamps resolved_at and closed_at, keeps or sets the summary, one closed event', async () => {
    const w = world();
    const i = await w.services.incidents.create(body(), apiActor);
    w.clock.advance(1000);
    const closed = await w.services.incidents.close(i.id, { resolution_summary: 'Rolled back' }, slackActor);
    expect(closed).toMatchObject({
      status: 'closed',
      resolution_summary: 'Rolled back',
      closed_at: '2026-11-22T10:00:01.000Z',
      resolved_at: '2026-11-22T10:00:01.000Z',
      rev: 2,
    });
    const events = w.repos.incidents.events.get(i.id)!;
    expect(events.at(-1)).toMatchObject({
      type: 'incident.closed',
      actor: slackActor,
      data: { from: 'investigating', resolution_summary: 'Rolled back' },
    });
    expect(w.seen.changes.at(-1)).toEqual({ id: i.id, kind: 'closed' });
  });

  it('keeps an earlier resolved_at and summary when closing a resolved incident without a body', async () => {
    const w = world();
    const i = await w.services.incidents.create(body(), apiActor);
    await w.services.incidents.update(i.id, { status: 'resolved', resolution_summary: 'Fixed' }, apiActor);
    w.clock.advance(5000);
    const closed = await w.services.incidents.close(i.id, undefined, apiActor);
    expect(closed.resolved_at).toBe('2026-11-22T10:00:00.000Z');
    expect(closed.resolution_summary).toBe('Fixed');
  });

  it('refuses closing twice (incident_closed), a stale If-Match (412) and a bad body (422)', async () => {
    const w = world();
    const i = await w.services.incidents.create(body(), apiActor);
    expect((await refusal(w.services.incidents.close(i.id, {}, apiActor, 9))).code).toBe('precondition_failed');
    expect((await refusal(w.services.incidents.close(i.id, { resolution_summary: 5 }, apiActor))).code).toBe(
      'validation_failed',
    );
    await w.services.incidents.close(i.id, {}, apiActor, 1);
    expect((await refusal(w.services.incidents.close(i.id, {}, apiActor))).code).toBe('incident_closed');
  });
});

describe('IncidentService.events', () => {
  it('pages the timeline oldest first by offset, and refuses an id cursor', async () => {
    const w = world();
    const i = await w.services.incidents.create(body(), apiActor);
    await w.services.incidents.update(i.id, { title: 'B' }, apiActor);
    await w.services.incidents.update(i.id, { title: 'C' }, apiActor);
    const first = await w.services.incidents.events(i.id, { limit: 2, cursor: null });
    expect(first.data.map((e) => e.type)).toEqual(['incident.created', 'incident.updated']);
    const rest = await w.services.incidents.events(i.id, { limit: 2, cursor: first.nextCursor });
    expect(rest.data).toHaveLength(1);
    expect(rest.nextCursor).toBeNull();
    expect((await refusal(w.services.incidents.events(i.id, { limit: 2, cursor: { after: i.id } }))).code).toBe(
      'invalid_cursor',
    );
    expect((await refusal(w.services.incidents.events(idOf('incident', 3), { limit: 2, cursor: null }))).code).toBe(
      'not_found',
    );
  });
});
