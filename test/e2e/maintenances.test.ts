import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHerald, type TestHerald } from '../support/herald.js';
import { waitFor } from '../support/wait.js';

/** Maintenances over HTTP: /v1/maintenances end to end, with the worker's timer of a real Herald. */
let h: TestHerald;
beforeAll(async () => {
  h = await startHerald();
});
afterAll(async () => {
  await h.close();
});

const inMinutes = (m: number) => new Date(Date.now() + m * 60_000).toISOString();
let n = 0;
async function aComponent(): Promise<string> {
  const r = await h.api('POST', '/v1/components', { body: { name: `Part ${++n}` } });
  expect(r.status).toBe(201);
  return r.body.id as string;
}
const componentOf = async (id: string) => (await h.api('GET', `/v1/components/${id}`)).body;
const window = (over: Record<string, unknown> = {}) => ({
  title: 'Database upgrade',
  body: 'The API may be slow.',
  scheduled_for: inMinutes(60),
  scheduled_until: inMinutes(120),
  ...over,
});

describe('/v1/maintenances', () => {
  it('creates (201, Location, ETag), gets, lists by status with a cursor, patches under If-Match, deletes', async () => {
    const cmp = await aComponent();
    const r = await h.api('POST', '/v1/maintenances', {
      body: window({
        components: [cmp],
        remind_before: 30,
        scheduled_for: '2030-01-01T10:00:00+02:00',
        scheduled_until: '2030-01-01T11:00:00+02:00',
      }),
    });
    expect(r.status).toBe(201);
    expect(r.body.id).toMatch(/^mnt_[0-9A-Z]{26}$/);
    expect(r.headers.get('location')).toBe(`/v1/maintenances/${r.body.id}`);
    expect(r.headers.get('etag')).toBe('"r1"');
    expect(r.body).toEqual({
      id: r.body.id,
      title: 'Database upgrade',
      body: 'The API may be slow.',
      status: 'scheduled',
      components: [cmp],
      scheduled_for: '2030-01-01T08:00:00.000Z',
      scheduled_until: '2030-01-01T09:00:00.000Z',
      remind_before: 30,
      auto_transition: true,
      updates: [],
      started_at: null,
      completed_at: null,
      reminded_at: null,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      updated_at: r.body.created_at,
      created_by: expect.objectContaining({ type: 'api_key' }),
    });
    const id = r.body.id as string;

    const got = await h.api('GET', `/v1/maintenances/${id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(r.body);
    expect(got.headers.get('etag')).toBe('"r1"');

    const other = await h.api('POST', '/v1/maintenances', { body: window({ title: 'Other' }) });
    await h.api('POST', `/v1/maintenances/${other.body.id}/updates`, {
      body: { status: 'in_progress', body: 'Early.' },
    });
    const page1 = await h.api('GET', '/v1/maintenances?limit=1');
    expect(page1.body.data.map((m: { id: string }) => m.id)).toEqual([other.body.id]);
    const page2 = await h.api(
      'GET',
      `/v1/maintenances?limit=1&cursor=${encodeURIComponent(page1.body.pagination.next_cursor)}`,
    );
    expect(page2.body.data.map((m: { id: string }) => m.id)).toEqual([id]);
    const scheduled = await h.api('GET', '/v1/maintenances?status=scheduled');
    expect(scheduled.body.data.map((m: { id: string }) => m.id)).toContain(id);
    expect(scheduled.body.data.map((m: { id: string }) => m.id)).not.toContain(other.body.id);
    expect((await h.api('GET', '/v1/maintenances?status=started')).status).toBe(422);

    const stale = await h.api('PATCH', `/v1/maintenances/${id}`, {
      body: { title: 'x' },
      headers: { 'If-Match': '"r7"' },
    });
    expect(stale.status).toBe(412);
    const p = await h.api('PATCH', `/v1/maintenances/${id}`, {
      body: { title: 'Database upgrade, part 1', scheduled_until: '2030-01-01T09:30:00Z' },
      headers: { 'If-Match': '"r1"' },
    });
    expect(p.status).toBe(200);
    expect(p.headers.get('etag')).toBe('"r2"');
    expect(p.body).toMatchObject({ title: 'Database upgrade, part 1', scheduled_until: '2030-01-01T09:30:00.000Z' });

    expect((await h.api('DELETE', `/v1/maintenances/${id}`, { headers: { 'If-Match': '"r1"' } })).status).toBe(412);
    expect((await h.api('DELETE', `/v1/maintenances/${id}`)).status).toBe(204);
    expect((await h.api('GET', `/v1/maintenances/${id}`)).status).toBe(404);
    expect((await h.api('GET', '/v1/maintenances/mnt_nope')).status).toBe(404);

    // One under way is history: it cannot be deleted.
    const gone = await h.api('DELETE', `/v1/maintenances/${other.body.id}`);
    expect(gone.status).toBe(409);
    expect(gone.body.code).toBe('conflict');
  });

  it.each([
    ['a time without an offset', { scheduled_for: '2030-01-01T10:00:00' }, 'validation_failed', 'scheduled_for'],
    ['the end before the start', { scheduled_until: inMinutes(30) }, 'validation_failed', 'scheduled_until'],
    ['remind_before 0', { remind_before: 0 }, 'validation_failed', 'remind_before'],
    ['remind_before over a week', { remind_before: 10_081 }, 'validation_failed', 'remind_before'],
    ['an unknown component', { components: ['cmp_01JH3ZK6X2B8V4N0Q7R5T9W1YC'] }, 'unknown_component', 'components.0'],
    ['no title', { title: '' }, 'validation_failed', 'title'],
  ])('refuses %s (422, field error)', async (_what, over, code, field) => {
    const r = await h.api('POST', '/v1/maintenances', { body: window(over) });
    expect(r.status).toBe(422);
    expect(r.body.code).toBe(code);
    expect(r.body.errors.map((e: { field: string }) => e.field)).toContain(field);
  });

  it('manual updates move it forward only; its components are under maintenance while it is under way', async () => {
    const [a, b] = [await aComponent(), await aComponent()];
    const m = (
      await h.api('POST', '/v1/maintenances', { body: window({ components: [a, b], auto_transition: false }) })
    ).body;
    const u = `/v1/maintenances/${m.id}/updates`;

    const note = await h.api('POST', u, { body: { body: 'Preparing.' } });
    expect(note.status).toBe(200);
    expect(note.headers.get('etag')).toBe('"r2"');
    expect(note.body.status).toBe('scheduled');
    expect((await componentOf(a)).status).toBe('operational');

    const started = await h.api('POST', u, { body: { status: 'in_progress', body: 'Started.' } });
    expect(started.body).toMatchObject({ status: 'in_progress', started_at: expect.any(String) });
    expect(started.body.updates.map((x: { kind: string; status: string }) => `${x.kind}:${x.status}`)).toEqual([
      'update:scheduled',
      'update:in_progress',
    ]);
    for (const c of [a, b])
      expect(await componentOf(c)).toMatchObject({
        status: 'under_maintenance',
        affected_by: [{ kind: 'maintenance', id: m.id, status: 'under_maintenance' }],
      });
    // A component under maintenance is in use.
    expect((await h.api('DELETE', `/v1/components/${a}`)).status).toBe(409);

    const back = await h.api('POST', u, { body: { status: 'scheduled', body: 'Oops.' } });
    expect(back.status).toBe(422);
    expect(back.body.code).toBe('invalid_transition');
    const movedStart = await h.api('PATCH', `/v1/maintenances/${m.id}`, { body: { scheduled_for: inMinutes(10) } });
    expect(movedStart.status).toBe(422);
    expect(movedStart.body.errors[0].field).toBe('scheduled_for');

    await h.api('POST', u, { body: { status: 'verifying', body: 'Checking.' } });
    expect((await componentOf(a)).status).toBe('under_maintenance');
    const done = await h.api('POST', u, { body: { status: 'completed', body: 'Done.' } });
    expect(done.body).toMatchObject({ status: 'completed', completed_at: expect.any(String) });
    for (const c of [a, b]) expect(await componentOf(c)).toMatchObject({ status: 'operational', affected_by: [] });

    expect((await h.api('POST', u, { body: { body: 'More.' } })).status).toBe(409);
    expect((await h.api('PATCH', `/v1/maintenances/${m.id}`, { body: { title: 'x' } })).status).toBe(409);
    expect((await h.api('POST', u, { body: { body: '' } })).status).toBe(422);
  });

  it('a manual update retried with the same Idempotency-Key is posted once', async () => {
    const m = (await h.api('POST', '/v1/maintenances', { body: window() })).body;
    const post = () =>
      h.api('POST', `/v1/maintenances/${m.id}/updates`, {
        body: { body: 'Preparing.' },
        headers: { 'Idempotency-Key': `note-${m.id}` },
      });
    const first = await post();
    const again = await post();
    expect(first.status).toBe(200);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    expect(again.headers.get('etag')).toBe(first.headers.get('etag'));
    expect((await h.api('GET', `/v1/maintenances/${m.id}`)).body.updates).toHaveLength(1);
  });

  it('the worker starts and completes it on time (auto_transition)', async () => {
    const cmp = await aComponent();
    const start = Date.now() + 1500;
    const m = (
      await h.api('POST', '/v1/maintenances', {
        body: window({
          components: [cmp],
          scheduled_for: new Date(start).toISOString(),
          scheduled_until: new Date(start + 2500).toISOString(),
        }),
      })
    ).body;
    const get = async () => (await h.api('GET', `/v1/maintenances/${m.id}`)).body;
    const running = await waitFor(async () => ((await get()).status !== 'scheduled' ? get() : false), {
      timeoutMs: 20_000,
      what: 'the start',
    });
    expect(Date.parse(running.started_at)).toBeGreaterThanOrEqual(start);
    if (running.status === 'in_progress') expect((await componentOf(cmp)).status).toBe('under_maintenance');
    const done = await waitFor(async () => ((await get()).status === 'completed' ? get() : false), {
      timeoutMs: 20_000,
      what: 'the end',
    });
    expect(Date.parse(done.completed_at)).toBeGreaterThanOrEqual(start + 2500);
    expect(done.updates.map((x: { kind: string; status: string }) => `${x.kind}:${x.status}`)).toEqual([
      'transition:in_progress',
      'transition:completed',
    ]);
    expect((await componentOf(cmp)).status).toBe('operational');
  });

  it('needs maintenances:read to read and maintenances:write to write', async () => {
    const reader = await h.tokenWith(['maintenances:read']);
    expect((await h.api('GET', '/v1/maintenances', { token: reader })).status).toBe(200);
    expect((await h.api('POST', '/v1/maintenances', { token: reader, body: window() })).status).toBe(403);
    const none = await h.tokenWith(['incidents:read']);
    expect((await h.api('GET', '/v1/maintenances', { token: none })).status).toBe(403);
  });
});
