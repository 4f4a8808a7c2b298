import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHerald, type TestHerald } from '../support/herald.js';

let h: TestHerald;
beforeAll(async () => {
  h = await startHerald();
});
afterAll(async () => {
  await h.close();
});

const create = (body: Record<string, unknown> = {}) =>
  h.api('POST', '/v1/incidents', { body: { title: 'DB down', severity: 'critical', ...body } });

describe('incidents over HTTP', () => {
  it('creates with 201, Location, ETag and the full shape', async () => {
    const r = await create({ description: 'primary is gone' });
    expect(r.status).toBe(201);
    expect(r.headers.get('location')).toBe(`/v1/incidents/${r.body.id}`);
    expect(r.headers.get('etag')).toMatch(/^"r\d+"$/);
    expect(r.headers.get('x-request-id')).toBeTruthy();
    expect(r.body).toMatchObject({
      title: 'DB down',
      severity: 'critical',
      status: 'investigating',
      description: 'primary is gone',
      impact: '',
      template_ids: [],
      resolution_summary: null,
      resolved_at: null,
      closed_at: null,
      last_executed_at: null,
      execution_count: 0,
      created_by: { type: 'api_key', name: 'admin' },
    });
    expect(r.body.id).toMatch(/^inc_[0-9A-Z]{26}$/);
    expect(r.body.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(r.body).not.toHaveProperty('rev');
  });

  it('rejects bad bodies with one error per field', async () => {
    const r = await h.api('POST', '/v1/incidents', {
      body: { title: 'x'.repeat(201), severity: 'huge', colour: 'red' },
    });
    expect(r.status).toBe(422);
    expect(r.headers.get('content-type')).toMatch(/application\/problem\+json/);
    expect(r.body.code).toBe('validation_failed');
    const fields = r.body.errors.map((e: { field: string }) => e.field).sort();
    expect(fields).toEqual(['colour', 'severity', 'title']);
  });

  it('enforces the field limits with one errors[] entry per field, and accepts values at the limit', async () => {
    const over = await h.api('POST', '/v1/incidents', {
      body: {
        title: 't'.repeat(201),
        severity: 'low',
        description: 'd'.repeat(10_001),
        impact: 'i'.repeat(10_001),
        template_ids: Array.from({ length: 21 }, (_, i) => `tpl_${i}`),
      },
    });
    expect(over.status).toBe(422);
    expect(over.body.errors.map((e: { field: string; code: string }) => `${e.field}:${e.code}`).sort()).toEqual([
      'description:too_long',
      'impact:too_long',
      'template_ids:too_many',
      'title:too_long',
    ]);
    const at = await create({ title: 't'.repeat(200), description: 'd'.repeat(10_000), impact: 'i'.repeat(10_000) });
    expect(at.status).toBe(201);
    const patch = await h.api('PATCH', `/v1/incidents/${at.body.id}`, {
      body: { resolution_summary: 'r'.repeat(10_001), title: '' },
    });
    expect(patch.status).toBe(422);
    expect(patch.body.errors.map((e: { field: string; code: string }) => `${e.field}:${e.code}`).sort()).toEqual([
      'resolution_summary:too_long',
      'title:required',
    ]);
    expect(
      (await h.api('PATCH', `/v1/incidents/${at.body.id}`, { body: { resolution_summary: 'r'.repeat(10_000) } }))
        .status,
    ).toBe(200);
    // A value of the wrong type is invalid_type; a missing one is required.
    const typed = await h.api('POST', '/v1/incidents', { body: { title: 42 } });
    expect(typed.body.errors.map((e: { field: string; code: string }) => `${e.field}:${e.code}`).sort()).toEqual([
      'severity:required',
      'title:invalid_type',
    ]);
  });

  it('checks in the documented order: 404 of the resource before 409 incident_closed before 422', async () => {
    const missing = await h.api('PATCH', '/v1/incidents/inc_01J00000000000000000000000', { body: { colour: 'red' } });
    expect(missing.status).toBe(404);
    const { body: inc } = await create();
    await h.api('POST', `/v1/incidents/${inc.id}/close`);
    const closedPatch = await h.api('PATCH', `/v1/incidents/${inc.id}`, { body: { colour: 'red' } });
    expect(closedPatch.status).toBe(409);
    expect(closedPatch.body.code).toBe('incident_closed');
    const closedClose = await h.api('POST', `/v1/incidents/${inc.id}/close`, { body: { colour: 'red' } });
    expect(closedClose.status).toBe(409);
  });

  it('walks the state machine and records the timeline', async () => {
    const { body: inc } = await create();
    const p1 = await h.api('PATCH', `/v1/incidents/${inc.id}`, { body: { status: 'identified', impact: 'EU users' } });
    expect(p1.status).toBe(200);
    expect(p1.body.status).toBe('identified');
    const noop = await h.api('PATCH', `/v1/incidents/${inc.id}`, { body: { status: 'identified' } });
    expect(noop.status).toBe(200);
    expect(noop.body.updated_at).toBe(p1.body.updated_at);
    const res = await h.api('PATCH', `/v1/incidents/${inc.id}`, {
      body: { status: 'resolved', resolution_summary: 'failover' },
    });
    expect(res.body.resolved_at).not.toBeNull();
    const reopen = await h.api('PATCH', `/v1/incidents/${inc.id}`, { body: { status: 'monitoring' } });
    expect(reopen.body.resolved_at).toBeNull();
    const closedViaPatch = await h.api('PATCH', `/v1/incidents/${inc.id}`, { body: { status: 'closed' } });
    expect(closedViaPatch.status).toBe(422);
    expect(closedViaPatch.body.code).toBe('use_close_endpoint');
    expect(closedViaPatch.body.errors[0].field).toBe('status');
    const close = await h.api('POST', `/v1/incidents/${inc.id}/close`);
    expect(close.status).toBe(200);
    expect(close.body.status).toBe('closed');
    const after = await h.api('PATCH', `/v1/incidents/${inc.id}`, { body: { title: 'again' } });
    expect(after.status).toBe(409);
    expect(after.body.code).toBe('incident_closed');
    const again = await h.api('POST', `/v1/incidents/${inc.id}/close`);
    expect(again.status).toBe(409);
    const events = await h.api('GET', `/v1/incidents/${inc.id}/events`);
    expect(events.body.data.map((e: { type: string }) => e.type)).toEqual([
      'incident.created',
      'incident.updated',
      'incident.status_changed',
      'incident.updated',
      'incident.status_changed',
      'incident.status_changed',
      'incident.closed',
    ]);
    expect(events.body.data[1].data.changes).toEqual({ impact: { from: '', to: 'EU users' } });
    expect(events.body.data.at(-1).data).toEqual({ from: 'monitoring', resolution_summary: 'failover' });
  });

  it('answers 404 for unknown paths before auth, 405 with Allow, 401 without a token', async () => {
    const unknown = await h.api('GET', '/v1/nope', { token: null });
    expect(unknown.status).toBe(404);
    const wrong = await h.api('DELETE', '/v1/incidents', { token: null });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toContain('POST');
    const anon = await h.api('GET', '/v1/incidents', { token: null });
    expect(anon.status).toBe(401);
    expect(anon.headers.get('www-authenticate')).toBe('Bearer realm="herald"');
  });
});
