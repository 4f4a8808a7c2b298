import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_SCHEMAS } from '../../src/domain/event/catalog.js';
import { startHerald, type ApiResponse, type TestHerald } from '../support/herald.js';
import { startHttpSink, type HttpSink, type RecordedRequest } from '../support/peers/http-sink.js';
import { waitFor } from '../support/wait.js';

/**
 * Events of components and maintenances through the API (docs/events.md): a manual component
 * change, one made by an incident and one by a maintenance, and a maintenance's own events reach
 * the endpoints, each valid per its schema in the OpenAPI `webhooks` section Herald serves; a
 * `component_ids` filter lets through what touches its component and nothing else.
 */
let h: TestHerald;
let sink: HttpSink;
beforeAll(async () => {
  sink = await startHttpSink({ respond: () => ({ status: 200 }) });
  h = await startHerald({ HERALD_RATE_LIMIT: '100000' }, { worker: true });
}, 60_000);
afterAll(async () => {
  await h?.close();
  await sink?.close();
});

type Event = { id: string; type: string; sequence: number; incident_id: string | null; data: Record<string, any> };
const at = (path: string) => sink.requests.filter((r) => r.path === path);
const verified = (reqs: RecordedRequest[], secret: string) =>
  reqs.map((r) => new Webhook(secret).verify(r.rawBody, r.headers as Record<string, string>) as Event);

async function ok(r: Promise<ApiResponse>, status: number): Promise<any> {
  const res = await r;
  expect(res.status, res.text).toBe(status);
  return res.body;
}

const endpoint = (body: object): Promise<{ id: string; signing_secret: string }> =>
  ok(h.api('POST', '/v1/event-endpoints', { body }), 201);

describe('events of components and maintenances', () => {
  it('reach endpoints with their schema, filtered by component', { timeout: 90_000 }, async () => {
    const full = await endpoint({ url: `${sink.url}/full`, event_types: ['component.*', 'maintenance.*'] });
    const thin = await endpoint({ url: `${sink.url}/thin`, event_types: ['*'], payload: 'thin' });
    const api = await ok(h.api('POST', '/v1/components', { body: { name: 'API' } }), 201);
    const db = await ok(h.api('POST', '/v1/components', { body: { name: 'Database' } }), 201);
    const mine = await endpoint({ url: `${sink.url}/api-only`, filter: { component_ids: [api.id] } });

    // A person marks the API degraded; an incident takes the database down.
    await ok(h.api('PATCH', `/v1/components/${api.id}`, { body: { status: 'degraded_performance' } }), 200);
    const inc = await ok(
      h.api('POST', '/v1/incidents', {
        body: { title: 'DB down', severity: 'major', components: [{ id: db.id, status: 'major_outage' }] },
      }),
      201,
    );
    // A maintenance of the API starts by hand.
    const mnt = await ok(
      h.api('POST', '/v1/maintenances', {
        body: {
          title: 'API upgrade',
          components: [api.id],
          scheduled_for: new Date(Date.now() + 3_600_000).toISOString(),
          scheduled_until: new Date(Date.now() + 7_200_000).toISOString(),
          auto_transition: false,
        },
      }),
      201,
    );
    await ok(
      h.api('POST', `/v1/maintenances/${mnt.id}/updates`, { body: { status: 'in_progress', body: 'Started.' } }),
      200,
    );

    // full: 3 component changes, maintenance created + status changed (+ updated when the update is one).
    await waitFor(() => at('/full').length >= 5 && at('/api-only').length >= 4, {
      timeoutMs: 30_000,
      what: 'the events',
    });
    const doc = await ok(h.api('GET', '/v1/openapi.json'), 200);
    const events = verified(at('/full'), full.signing_secret);
    const changes = events.filter((e) => e.type === 'component.status_changed');
    expect(changes.map((e) => `${e.data.component_id} ${e.data.cause.kind} ${e.data.to}`).sort()).toEqual(
      [
        `${api.id} manual degraded_performance`,
        `${db.id} incident major_outage`,
        `${api.id} maintenance under_maintenance`,
      ].sort(),
    );
    const byIncident = changes.find((e) => e.data.cause.kind === 'incident')!;
    expect(byIncident.incident_id).toBe(inc.id);
    expect(byIncident.data.cause).toEqual({ kind: 'incident', id: inc.id });
    const manual = changes.find((e) => e.data.cause.kind === 'manual')!;
    expect(manual).toMatchObject({ incident_id: null, sequence: 1, data: { component: { id: api.id, name: 'API' } } });
    const ofMaintenance = events.filter((e) => e.type.startsWith('maintenance.'));
    expect(ofMaintenance.map((e) => e.type)).toEqual(
      expect.arrayContaining(['maintenance.created', 'maintenance.status_changed']),
    );
    for (const e of ofMaintenance) expect(e).toMatchObject({ incident_id: null, data: { maintenance_id: mnt.id } });
    expect(ofMaintenance.find((e) => e.type === 'maintenance.status_changed')!.data).toMatchObject({
      from: 'scheduled',
      to: 'in_progress',
      maintenance: { id: mnt.id, status: 'in_progress' },
    });
    // Each payload, full and thin, is valid per its type's schema, which the OpenAPI lists.
    const thinEvents = verified(at('/thin'), thin.signing_secret);
    for (const e of [...events, ...thinEvents]) {
      expect(doc.webhooks[`event.${e.type}`], e.type).toBeDefined();
      expect(EVENT_SCHEMAS[e.type]!.safeParse(e).success, JSON.stringify(e)).toBe(true);
    }
    for (const e of thinEvents.filter((x) => x.type.startsWith('maintenance.')))
      expect(e.data).toEqual({ incident_id: null, maintenance_id: mnt.id });

    // The API's filter: its own changes and its maintenance's events, not the database's incident.
    await h.api('POST', '/v1/incidents', { body: { title: 'Unrelated', severity: 'minor' } });
    await waitFor(() => at('/thin').length >= thinEvents.length + 1, { timeoutMs: 30_000, what: 'the last event' });
    const filtered = verified(at('/api-only'), mine.signing_secret);
    expect(filtered.every((e) => e.incident_id === null)).toBe(true);
    expect(filtered.filter((e) => e.type === 'component.status_changed').map((e) => e.data.component_id)).toEqual([
      api.id,
      api.id,
    ]);
    expect(filtered.some((e) => e.type === 'maintenance.created')).toBe(true);
  });
});
