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
