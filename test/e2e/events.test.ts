import { readFileSync } from 'node:fs';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_SCHEMAS } from '../../src/domain/event/catalog.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { startHttpSink, type HttpSink, type RecordedRequest } from '../support/peers/http-sink.js';
import { waitFor } from '../support/wait.js';

/**
 * Events for integrators through the API (docs/events.md): endpoints registered with
 * /v1/event-endpoints, a scripted incident story, and what a local receiver gets, verified with
 * the standardwebhooks package and each payload checked against its schema in the OpenAPI
 * `webhooks` section of manifest/openapi.json.
 */
let h: TestHerald;
let sink: HttpSink;
beforeAll(async () => {
  sink = await startHttpSink({ respond: () => ({ status: 200 }) });
  h = await startHerald({}, { worker: true });
}, 60_000);
afterAll(async () => {
  await h?.close();
  await sink?.close();
});

const doc = JSON.parse(readFileSync(new URL('../../manifest/openapi.json', import.meta.url), 'utf8')) as {
  webhooks: Record<string, { post: { requestBody: { content: { 'application/json': { schema: unknown } } } } }>;
};

const at = (path: string) => sink.requests.filter((r) => r.path === path);
const verified = (reqs: RecordedRequest[], secret: string) =>
  reqs.map((r) => new Webhook(secret).verify(r.rawBody, r.headers as Record<string, string>) as Record<string, any>);

async function endpoint(body: object): Promise<{ id: string; signing_secret: string }> {
  const r = await h.api('POST', '/v1/event-endpoints', { body });
  expect(r.status, r.text).toBe(201);
  expect(r.body.signing_secret).toMatch(/^whsec_/);
  return r.body;
}

describe('events for integrators', () => {
  it(
    'sends exactly one verified event per change of a scripted story, full, thin and filtered',
    { timeout: 90_000 },
    async () => {
      const full = await endpoint({ url: `${sink.url}/full`, event_types: ['incident.*'] });
      const thin = await endpoint({ url: `${sink.url}/thin`, event_types: ['incident.*'], payload: 'thin' });
      const critical = await endpoint({ url: `${sink.url}/critical`, filter: { severities: ['critical'] } });
      // The secret is shown once: never again.
      expect((await h.api('GET', `/v1/event-endpoints/${full.id}`)).body).not.toHaveProperty('signing_secret');

      const created = await h.api('POST', '/v1/incidents', { body: { title: 'Checkout errors', severity: 'major' } });
      const id = created.body.id as string;
      await h.api('PATCH', `/v1/incidents/${id}`, { body: { title: 'Checkout errors in EU' } });
      await h.api('PATCH', `/v1/incidents/${id}`, { body: { status: 'resolved' } });
      await h.api('POST', `/v1/incidents/${id}/close`, { body: {} });

      await waitFor(() => at('/full').length >= 5 && at('/thin').length >= 5, {
        timeoutMs: 30_000,
        what: 'ten events',
      });
      const events = verified(at('/full'), full.signing_secret).sort((a, b) => a.sequence - b.sequence);
      expect(events.map((e) => e.type)).toEqual([
        'incident.created',
        'incident.updated',
        'incident.status_changed',
        'incident.resolved',
        'incident.closed',
      ]);
      expect(events.map((e) => e.sequence)).toEqual([1, 2, 3, 4, 5]);
      // One per change: the timeline's events, by id (the resolve's second event derives its id).
      const timeline = await h.api('GET', `/v1/incidents/${id}/events`);
      const ids = (timeline.body.data as { id: string; type: string }[]).flatMap((e) =>
        e.type === 'incident.status_changed' ? [e.id, `${e.id}.resolved`] : [e.id],
      );
      expect(new Set(at('/full').map((r) => r.headers['webhook-id']))).toEqual(new Set(ids));
      expect(events[1]!.data.changes).toEqual({ title: { from: 'Checkout errors', to: 'Checkout errors in EU' } });
      expect(events[4]!.data.incident).toMatchObject({ id, status: 'closed' });
      for (const e of verified(at('/thin'), thin.signing_secret)) expect(Object.keys(e.data)).toEqual(['incident_id']);
      // Each payload is valid per its type's schema (from which the OpenAPI webhooks are made).
      for (const e of [...events, ...verified(at('/thin'), thin.signing_secret)]) {
        expect(doc.webhooks[`event.${e.type}`], e.type).toBeDefined();
        expect(EVENT_SCHEMAS[e.type]!.safeParse(e).success, JSON.stringify(e)).toBe(true);
      }
      // The severity filter (critical) dropped every event of this major incident.
      expect(at('/critical')).toHaveLength(0);

      // The delivery log shows each with its attempt.
      const log = await h.api('GET', `/v1/event-endpoints/${full.id}/deliveries`);
      expect(log.status).toBe(200);
      expect(log.body.data).toHaveLength(5);
      for (const d of log.body.data) expect(d).toMatchObject({ status: 'delivered', attempts: [{ status: 200 }] });

      // Replay re-sends the range with the original webhook-ids.
      const replay = await h.api('POST', `/v1/event-endpoints/${full.id}/replay`, {
        body: { since: created.body.created_at },
      });
      expect(replay.status, replay.text).toBe(202);
      expect(replay.body).toEqual({ replayed: 5, truncated: false });
      await waitFor(() => at('/full').length >= 10, { timeoutMs: 30_000, what: 'the replay' });
      expect(
        new Set(
          at('/full')
            .slice(5)
            .map((r) => r.headers['webhook-id']),
        ),
      ).toEqual(new Set(ids));

      // The test ping answers what the receiver said; a rotation signs with both secrets.
      const ping = await h.api('POST', `/v1/event-endpoints/${full.id}/test`);
      expect(ping.body).toMatchObject({ ok: true, status: 200 });
      const rotated = await h.api('POST', `/v1/event-endpoints/${full.id}/rotate-secret`, { body: {} });
      expect(rotated.status, rotated.text).toBe(200);
      expect(rotated.body.previous_secret_expires_at).not.toBeNull();
      await h.api('POST', `/v1/event-endpoints/${full.id}/test`);
      const last = at('/full').at(-1)!;
      expect(String(last.headers['webhook-signature']).split(' ')).toHaveLength(2);
      verified([last], full.signing_secret);
      verified([last], rotated.body.signing_secret);

      for (const e of [full, thin, critical]) await h.api('DELETE', `/v1/event-endpoints/${e.id}`);
    },
  );

  it('tells of an execute and of its completion, with the counts', { timeout: 90_000 }, async () => {
    const ep = await endpoint({ url: `${sink.url}/exec`, event_types: ['execution.*'] });
    const con = await h.api('POST', '/v1/connections', {
      body: { name: 'sink', type: 'webhook', config: { url: `${sink.url}/connection` } },
    });
    expect(con.status, con.text).toBe(201);
    const inc = await h.api('POST', '/v1/incidents', { body: { title: 'Payments slow', severity: 'minor' } });
    const exe = await h.api('POST', `/v1/incidents/${inc.body.id}/execute`, { body: {} });
    expect(exe.status, exe.text).toBe(202);
    await waitFor(() => at('/exec').length >= 2, { timeoutMs: 30_000, what: 'execution events' });
    const events = verified(at('/exec'), ep.signing_secret).sort((a, b) => a.sequence - b.sequence);
    expect(events.map((e) => e.type)).toEqual(['execution.created', 'execution.completed']);
    expect(events[0]!.data).toMatchObject({ execution_id: exe.body.id, execution: { id: exe.body.id } });
    expect(events[1]!.data).toMatchObject({ execution_id: exe.body.id, delivered: 1, failed: 0, cancelled: 0 });
    for (const e of events) expect(EVENT_SCHEMAS[e.type]!.safeParse(e).success).toBe(true);
    await h.api('DELETE', `/v1/event-endpoints/${ep.id}`);
  });
});
