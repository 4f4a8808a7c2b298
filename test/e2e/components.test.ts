import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeys } from '../../src/store/keys.js';
import { startHerald, type TestHerald } from '../support/herald.js';

/** Components over HTTP: the /v1/components resource and its rules, end to end. */
let h: TestHerald;
beforeAll(async () => {
  h = await startHerald();
});
afterAll(async () => {
  await h.close();
});

let n = 0;
/** A name of its own per test, so the tests share one Herald without clashing. */
const fresh = (stem: string) => `${stem} ${++n}`;
const statusVersion = async () => Number((await h.herald.redis.hget(createKeys(h.prefix).statusVersion(), 'v')) ?? 0);

describe('/v1/components', () => {
  it('creates (201, Location, ETag), gets, lists and patches under If-Match', async () => {
    const name = fresh('API');
    const v0 = await statusVersion();
    const r = await h.api('POST', '/v1/components', {
      body: { name, description: 'The REST API.', group: 'Platform' },
    });
    expect(r.status).toBe(201);
    expect(r.body.id).toMatch(/^cmp_[0-9A-Z]{26}$/);
    expect(r.headers.get('location')).toBe(`/v1/components/${r.body.id}`);
    expect(r.headers.get('etag')).toBe('"r1"');
    expect(r.body).toEqual({
      id: r.body.id,
      name,
      description: 'The REST API.',
      group: 'Platform',
      position: 0,
      status: 'operational',
      manual_status: 'operational',
      show_on_status_page: true,
      affected_by: [],
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      updated_at: r.body.created_at,
    });
    expect(await statusVersion()).toBeGreaterThan(v0);
    const id = r.body.id as string;

    // Default position: after the last one of its group.
    const second = await h.api('POST', '/v1/components', { body: { name: fresh('Web'), group: 'Platform' } });
    expect(second.body.position).toBe(1);

    const got = await h.api('GET', `/v1/components/${id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(r.body);
    expect(got.headers.get('etag')).toBe('"r1"');

    const listed = await h.api('GET', '/v1/components?limit=1');
    expect(listed.status).toBe(200);
    expect(listed.body.data).toHaveLength(1);
    const next = await h.api(
      'GET',
      `/v1/components?limit=100&cursor=${encodeURIComponent(listed.body.pagination.next_cursor)}`,
    );
    expect([...listed.body.data, ...next.body.data].map((c: { id: string }) => c.id)).toContain(id);

    const stale = await h.api('PATCH', `/v1/components/${id}`, {
      body: { status: 'major_outage' },
      headers: { 'If-Match': '"r9"' },
    });
    expect(stale.status).toBe(412);
    expect(stale.body.code).toBe('precondition_failed');

    const p = await h.api('PATCH', `/v1/components/${id}`, {
      body: { status: 'major_outage', group: null },
      headers: { 'If-Match': '"r1"' },
    });
    expect(p.status).toBe(200);
    expect(p.headers.get('etag')).toBe('"r2"');
    expect(p.body).toMatchObject({ status: 'major_outage', manual_status: 'major_outage', group: null });

    // The manual change is on the component's own timeline.
    const events = await h.api('GET', `/v1/components/${id}/events`);
    expect(events.status).toBe(200);
    expect(events.body.data).toEqual([
      expect.objectContaining({
        type: 'component.status_changed',
        data: { component_id: id, from: 'operational', to: 'major_outage', cause: { kind: 'manual', id: null } },
        actor: expect.objectContaining({ type: 'api_key' }),
      }),
    ]);

    const del = await h.api('DELETE', `/v1/components/${id}`, { headers: { 'If-Match': '"r2"' } });
    expect(del.status).toBe(204);
    expect((await h.api('GET', `/v1/components/${id}`)).status).toBe(404);
    expect((await h.api('GET', `/v1/components/${id}/events`)).status).toBe(404);
    expect((await h.api('DELETE', `/v1/components/${id}`)).status).toBe(404);
  });

  it('refuses invalid fields as problem+json 422, naming each', async () => {
    const r = await h.api('POST', '/v1/components', {
      body: { name: '', status: 'sideways', position: -1, group: '', extra: 1 },
    });
    expect(r.status).toBe(422);
    expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(r.body.code).toBe('validation_failed');
    const fields = (r.body.errors as { field: string }[]).map((e) => e.field).sort();
    expect(fields).toEqual(expect.arrayContaining(['name', 'status', 'position', 'group']));

    const c = await h.api('POST', '/v1/components', { body: { name: fresh('Patchy') } });
    const empty = await h.api('PATCH', `/v1/components/${c.body.id}`, { body: {} });
    expect(empty.status).toBe(422);
    expect(empty.body.errors).toEqual([expect.objectContaining({ code: 'empty_patch' })]);
    const bad = await h.api('PATCH', `/v1/components/${c.body.id}`, { body: { show_on_status_page: 'yes' } });
    expect(bad.status).toBe(422);
    expect(bad.body.errors).toEqual([expect.objectContaining({ field: 'show_on_status_page' })]);
  });

  it('a create with an Idempotency-Key is replayed, not made twice', async () => {
    const body = { name: fresh('Replayed') };
    const headers = { 'Idempotency-Key': `cmp-${n}-${Date.now()}` };
    const first = await h.api('POST', '/v1/components', { body, headers });
    const again = await h.api('POST', '/v1/components', { body, headers });
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect(again.headers.get('etag')).toBe(first.headers.get('etag'));
  });

  it('names are unique ignoring case: 409 component_name_taken', async () => {
    const name = fresh('Search');
    expect((await h.api('POST', '/v1/components', { body: { name } })).status).toBe(201);
    const again = await h.api('POST', '/v1/components', { body: { name: name.toUpperCase() } });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('component_name_taken');
    const other = await h.api('POST', '/v1/components', { body: { name: fresh('Other') } });
    const rename = await h.api('PATCH', `/v1/components/${other.body.id}`, { body: { name: name.toLowerCase() } });
    expect(rename.status).toBe(409);
    expect(rename.body.errors).toEqual([expect.objectContaining({ field: 'name', code: 'component_name_taken' })]);
  });

  it('unknown and malformed ids are 404', async () => {
    expect((await h.api('GET', '/v1/components/cmp_01JH3ZK6X2B8V4N0Q7R5T9W1YC')).status).toBe(404);
    expect((await h.api('GET', '/v1/components/nope')).status).toBe(404);
    expect(
      (await h.api('PATCH', '/v1/components/cmp_01JH3ZK6X2B8V4N0Q7R5T9W1YC', { body: { name: 'x' } })).status,
    ).toBe(404);
  });

  it('scopes: components:read reads, components:write writes', async () => {
    const reader = await h.tokenWith(['components:read']);
    const c = await h.api('POST', '/v1/components', { body: { name: fresh('Scoped') } });
    expect((await h.api('GET', `/v1/components/${c.body.id}`, { token: reader })).status).toBe(200);
    const refused = await h.api('PATCH', `/v1/components/${c.body.id}`, { body: { name: 'x' }, token: reader });
    expect(refused.status).toBe(403);
  });
});

describe('incidents naming components', () => {
  const mk = async (stem: string, body: Record<string, unknown> = {}) => {
    const r = await h.api('POST', '/v1/components', { body: { name: fresh(stem), ...body } });
    expect(r.status).toBe(201);
    return r.body.id as string;
  };
  const statusOf = async (id: string) => {
    const r = await h.api('GET', `/v1/components/${id}`);
    return {
      status: r.body.status as string,
      affected_by: r.body.affected_by as unknown[],
      etag: r.headers.get('etag'),
    };
  };
  const timeline = async (incidentId: string) =>
    (await h.api('GET', `/v1/incidents/${incidentId}/events?limit=100`)).body.data as {
      type: string;
      data: Record<string, unknown>;
    }[];

  it('an incident with two components changes their statuses; resolve restores, reopen re-applies', async () => {
    const api = await mk('Checkout API');
    const web = await mk('Storefront', { status: 'degraded_performance' });
    const v0 = await statusVersion();
    const inc = await h.api('POST', '/v1/incidents', {
      body: {
        title: 'Checkout errors',
        severity: 'major',
        components: [
          { id: api, status: 'major_outage' },
          { id: web, status: 'partial_outage' },
        ],
      },
    });
    expect(inc.status).toBe(201);
    expect(inc.body.components).toEqual([
      { id: api, status: 'major_outage' },
      { id: web, status: 'partial_outage' },
    ]);
    const id = inc.body.id as string;
    expect(await statusVersion()).toBeGreaterThan(v0);
    expect(await statusOf(api)).toMatchObject({
      status: 'major_outage',
      affected_by: [{ kind: 'incident', id, status: 'major_outage' }],
    });
    expect((await statusOf(web)).status).toBe('partial_outage');
    expect((await h.api('GET', `/v1/components/${web}`)).body.manual_status).toBe('degraded_performance');

    // In use while the incident is open.
    const del = await h.api('DELETE', `/v1/components/${api}`);
    expect(del.status).toBe(409);
    expect(del.body.code).toBe('component_in_use');
    expect(del.body.errors).toEqual([expect.objectContaining({ field: 'affected_by.0', code: 'component_in_use' })]);

    // Changing the list: web is taken out, api goes down a step.
    const p = await h.api('PATCH', `/v1/incidents/${id}`, {
      body: { components: [{ id: api, status: 'partial_outage' }] },
    });
    expect(p.status).toBe(200);
    expect(p.body.components).toEqual([{ id: api, status: 'partial_outage' }]);
    expect((await statusOf(api)).status).toBe('partial_outage');
    expect(await statusOf(web)).toMatchObject({ status: 'degraded_performance', affected_by: [] });

    const v1 = await statusVersion();
    const resolved = await h.api('PATCH', `/v1/incidents/${id}`, { body: { status: 'resolved' } });
    expect(resolved.status).toBe(200);
    expect(await statusVersion()).toBeGreaterThan(v1);
    expect(await statusOf(api)).toMatchObject({ status: 'operational', affected_by: [] });

    const reopened = await h.api('PATCH', `/v1/incidents/${id}`, { body: { status: 'investigating' } });
    expect(reopened.status).toBe(200);
    expect((await statusOf(api)).status).toBe('partial_outage');

    const closed = await h.api('POST', `/v1/incidents/${id}/close`, { body: {} });
    expect(closed.status).toBe(200);
    expect((await statusOf(api)).status).toBe('operational');
    expect((await h.api('DELETE', `/v1/components/${api}`)).status).toBe(204);

    const events = await timeline(id);
    const changes = events.filter((e) => e.type === 'component.status_changed').map((e) => e.data);
    expect(changes).toEqual([
      { component_id: api, from: 'operational', to: 'major_outage' },
      { component_id: web, from: 'degraded_performance', to: 'partial_outage' },
      { component_id: api, from: 'major_outage', to: 'partial_outage' },
      { component_id: web, from: 'partial_outage', to: 'degraded_performance' },
      { component_id: api, from: 'partial_outage', to: 'operational' },
      { component_id: api, from: 'operational', to: 'partial_outage' },
      { component_id: api, from: 'partial_outage', to: 'operational' },
    ]);
    const updated = events.find((e) => e.type === 'incident.updated' && 'components' in (e.data.changes as object));
    expect(updated?.data.changes).toEqual({
      components: {
        from: [
          { id: api, status: 'major_outage' },
          { id: web, status: 'partial_outage' },
        ],
        to: [{ id: api, status: 'partial_outage' }],
      },
    });
  });

  it('the worst of two open incidents decides; one resolving leaves the other', async () => {
    const c = await mk('Payments');
    const a = await h.api('POST', '/v1/incidents', {
      body: { title: 'A', severity: 'minor', components: [{ id: c, status: 'degraded_performance' }] },
    });
    const b = await h.api('POST', '/v1/incidents', {
      body: { title: 'B', severity: 'critical', components: [{ id: c, status: 'major_outage' }] },
    });
    expect((await statusOf(c)).status).toBe('major_outage');
    await h.api('PATCH', `/v1/incidents/${b.body.id}`, { body: { status: 'resolved' } });
    expect(await statusOf(c)).toMatchObject({
      status: 'degraded_performance',
      affected_by: [{ kind: 'incident', id: a.body.id, status: 'degraded_performance' }],
    });
    // An impact moves the component's ETag: an operator's If-Match from before is stale.
    const before = await statusOf(c);
    await h.api('PATCH', `/v1/incidents/${a.body.id}`, { body: { status: 'resolved' } });
    const stale = await h.api('PATCH', `/v1/components/${c}`, {
      body: { description: 'x' },
      headers: { 'If-Match': before.etag! },
    });
    expect(stale.status).toBe(412);
  });

  it('concurrent incidents on one component: every impact lands, and every removal', async () => {
    const c = await mk('Shared');
    const statuses = ['degraded_performance', 'partial_outage', 'major_outage'] as const;
    const made = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        h.api('POST', '/v1/incidents', {
          body: { title: `Race ${i}`, severity: 'minor', components: [{ id: c, status: statuses[i % 3] }] },
        }),
      ),
    );
    expect(made.map((r) => r.status)).toEqual(Array(8).fill(201));
    expect(await statusOf(c)).toMatchObject({ status: 'major_outage' });
    expect((await statusOf(c)).affected_by).toHaveLength(8);
    const resolved = await Promise.all(
      made.map((r) => h.api('PATCH', `/v1/incidents/${r.body.id}`, { body: { status: 'resolved' } })),
    );
    expect(resolved.map((r) => r.status)).toEqual(Array(8).fill(200));
    expect(await statusOf(c)).toMatchObject({ status: 'operational', affected_by: [] });
  });

  it('in use while a maintenance not completed names it, even before it starts', async () => {
    const c = await mk('Database');
    const start = Date.now() + 86_400_000;
    const m = await h.api('POST', '/v1/maintenances', {
      body: {
        title: 'Upgrade',
        body: 'Minor version.',
        components: [c],
        scheduled_for: new Date(start).toISOString(),
        scheduled_until: new Date(start + 3_600_000).toISOString(),
      },
    });
    expect(m.status).toBe(201);
    const del = await h.api('DELETE', `/v1/components/${c}`);
    expect(del.status).toBe(409);
    expect(del.body.code).toBe('component_in_use');
    expect(del.body.detail).toContain(m.body.id);
    expect((await h.api('DELETE', `/v1/maintenances/${m.body.id}`)).status).toBe(204);
    expect((await h.api('DELETE', `/v1/components/${c}`)).status).toBe(204);
  });

  it('refuses unknown, repeated and maintenance-only components (422, field errors)', async () => {
    const c = await mk('Edge');
    const unknown = await h.api('POST', '/v1/incidents', {
      body: {
        title: 'x',
        severity: 'low',
        components: [
          { id: c, status: 'partial_outage' },
          { id: 'cmp_01JH3ZK6X2B8V4N0Q7R5T9W1YC', status: 'major_outage' },
          { id: 'nope', status: 'major_outage' },
        ],
      },
    });
    expect(unknown.status).toBe(422);
    expect(unknown.body.code).toBe('unknown_component');
    expect((unknown.body.errors as { field: string }[]).map((e) => e.field)).toEqual([
      'components.1.id',
      'components.2.id',
    ]);
    expect((await statusOf(c)).status).toBe('operational');

    const twice = await h.api('POST', '/v1/incidents', {
      body: {
        title: 'x',
        severity: 'low',
        components: [
          { id: c, status: 'partial_outage' },
          { id: c, status: 'major_outage' },
        ],
      },
    });
    expect(twice.status).toBe(422);
    expect(twice.body.errors).toEqual([expect.objectContaining({ field: 'components.1.id', code: 'duplicate' })]);

    const maintenance = await h.api('POST', '/v1/incidents', {
      body: { title: 'x', severity: 'low', components: [{ id: c, status: 'under_maintenance' }] },
    });
    expect(maintenance.status).toBe(422);
    expect(maintenance.body.errors).toEqual([expect.objectContaining({ field: 'components.0.status' })]);
  });
});
