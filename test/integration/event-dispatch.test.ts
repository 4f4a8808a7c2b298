import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { SYSTEM_ACTOR } from '../../src/domain/common/actor.js';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import { EVENT_SCHEMAS } from '../../src/domain/event/catalog.js';
import { EventDispatcher } from '../../src/services/events.js';
import { RETRY_DELAYS_MS } from '../../src/domain/event/endpoint.js';
import { applyPatch, closeIncident, newIncident, type Incident } from '../../src/domain/incident/incident.js';
import { createdEventId, newEvent } from '../../src/domain/incident/incident-event.js';
import { useEventWorlds } from '../support/event-world.js';
import { waitFor } from '../support/wait.js';

/**
 * Events for integrators end to end below the API: changes committed through the incident store,
 * the dispatcher's steps run by hand with a clock the test moves, a local receiver.
 */
const ev = useEventWorlds('evdispatch');
const { t } = ev;
const until = (w: Pick<ReturnType<typeof ev.world>, 'dispatcher'>, n: number) => ev.until(w, n);
const ids = createIdGenerator();
const world = ev.world;

async function declare(w: ReturnType<typeof world>, severity: Incident['severity'] = 'major'): Promise<Incident> {
  const incident = newIncident(
    ids.next('incident'),
    { title: 'Checkout down', severity, description: '', impact: '', template_ids: [] },
    SYSTEM_ACTOR,
    new Date(w.now()).toISOString(),
  );
  const created = newEvent(createdEventId(incident.id), 'incident.created', incident.created_at, SYSTEM_ACTOR, {
    title: incident.title,
    severity,
  });
  expect(await w.incidents.create(incident, [created])).toBe(true);
  return incident;
}

async function patch(w: ReturnType<typeof world>, prev: Incident, p: Parameters<typeof applyPatch>[1]) {
  const at = new Date(w.now()).toISOString();
  const { next, changes, statusChange } = applyPatch(prev, p, at);
  const events = [];
  if (Object.keys(changes).length > 0)
    events.push(newEvent(ids.next('event'), 'incident.updated', at, SYSTEM_ACTOR, { changes }));
  if (statusChange)
    events.push(newEvent(ids.next('event'), 'incident.status_changed', at, SYSTEM_ACTOR, { ...statusChange }));
  expect(await w.incidents.update(prev, next, events)).toBe(true);
  return next;
}

const since = (n: number) => ev.sink.received.slice(n);

describe('event delivery', () => {
  it('sends one signed event per change, full or thin, filtered by severity, each valid per its schema', async () => {
    const w = world();
    const full = await w.service.create({ url: ev.sink.url, event_types: ['incident.*'] });
    const thin = await w.service.create({ url: `${ev.sink.url}?thin`, event_types: ['*'], payload: 'thin' });
    const critical = await w.service.create({ url: `${ev.sink.url}?critical`, filter: { severities: ['critical'] } });
    expect(full.signingSecret).toMatch(/^whsec_/);

    let inc = await declare(w);
    inc = await patch(w, inc, { title: 'Checkout slow' });
    inc = await patch(w, inc, { status: 'resolved' });
    const closed = closeIncident(inc, {}, new Date(w.now()).toISOString());
    expect(
      await w.incidents.update(inc, closed, [
        newEvent(ids.next('event'), 'incident.closed', closed.closed_at!, SYSTEM_ACTOR, {
          from: 'resolved',
          resolution_summary: null,
        }),
      ]),
    ).toBe(true);
    // full: created, updated, status_changed, resolved, closed; thin: the same five; critical: none.
    await until(w, 10);
    await w.dispatcher.step();
    const got = since(0);
    expect(got).toHaveLength(10);
    const verifyWith = (secret: string) =>
      got.filter((r) => {
        try {
          new Webhook(secret).verify(r.body, r.headers as Record<string, string>);
          return true;
        } catch {
          return false;
        }
      });
    // Arrival order is not promised (several are sent at once); `sequence` orders them.
    const fullGot = verifyWith(full.signingSecret).sort((a, b) => a.json.sequence! - b.json.sequence!);
    const thinGot = verifyWith(thin.signingSecret);
    expect(verifyWith(critical.signingSecret)).toHaveLength(0);
    expect(fullGot.map((r) => r.json.type)).toEqual([
      'incident.created',
      'incident.updated',
      'incident.status_changed',
      'incident.resolved',
      'incident.closed',
    ]);
    expect(fullGot.map((r) => r.json.sequence)).toEqual([1, 2, 3, 4, 5]);
    // webhook-id is the event id; one per change, never repeated.
    expect(new Set(fullGot.map((r) => r.headers['webhook-id'])).size).toBe(5);
    for (const r of fullGot) expect(r.headers['webhook-id']).toBe(r.json.id);
    expect(fullGot[1]!.json.data).toMatchObject({ changes: { title: { from: 'Checkout down', to: 'Checkout slow' } } });
    expect(fullGot[0]!.json.data.incident).toMatchObject({ id: inc.id, title: 'Checkout down' });
    expect(fullGot[0]!.json.data.incident).not.toHaveProperty('rev');
    // thin: ids and type only.
    expect(thinGot).toHaveLength(5);
    for (const r of thinGot) expect(r.json.data).toEqual({ incident_id: inc.id });
    // Every payload matches its type's schema (the OpenAPI `webhooks` section is made from them).
    for (const r of got) expect(EVENT_SCHEMAS[r.json.type]!.safeParse(r.json).success, r.body).toBe(true);
    await Promise.all([full, thin, critical].map((e) => w.service.delete(e.endpoint.id)));
  });

  it('retries 500, 429 and no answer on the schedule, honours Retry-After, then delivers once', async () => {
    const w = world();
    const { endpoint } = await w.service.create({ url: ev.sink.url, event_types: ['incident.created'] });
    ev.sink.answers.push({ status: 500 }, { status: 429, headers: { 'retry-after': '7200' } }, { status: 503 });
    await declare(w);
    await until(w, 1);
    const [first] = (await w.service.deliveries(endpoint.id, { limit: 10, cursor: null })).data;
    expect(first!.status).toBe('pending');
    // The next attempt waits the first step (5 s, jitter ±20 %; random 0.5 = none): not before.
    expect(Date.parse(first!.next_attempt_at!) - w.now()).toBe(RETRY_DELAYS_MS[0]);
    w.advance(RETRY_DELAYS_MS[0] - 1000);
    await w.dispatcher.step();
    expect(ev.sink.received).toHaveLength(1);
    w.advance(1000);
    await until(w, 2);
    // 429 with Retry-After 2 h, longer than the 5 min step: honoured.
    const [second] = (await w.service.deliveries(endpoint.id, { limit: 10, cursor: null })).data;
    expect(Date.parse(second!.next_attempt_at!) - w.now()).toBe(7_200_000);
    w.advance(7_200_000);
    await until(w, 3);
    w.advance(RETRY_DELAYS_MS[2]);
    await until(w, 4);
    const [done] = (await w.service.deliveries(endpoint.id, { limit: 10, cursor: null })).data;
    expect(done!.status).toBe('delivered');
    expect(done!.attempts.map((a) => a.status)).toEqual([500, 429, 503, 200]);
    expect(new Set(ev.sink.received.map((r) => r.headers['webhook-id'])).size).toBe(1);
    await w.service.delete(endpoint.id);
  });

  it('retries for more than 24 hours however the jitter falls', () => {
    expect(RETRY_DELAYS_MS.reduce((a, b) => a + b, 0) * 0.8).toBeGreaterThan(24 * 3_600_000);
  });

  it('disables an endpoint that answers 410 Gone', async () => {
    const w = world();
    const { endpoint } = await w.service.create({ url: ev.sink.url, event_types: ['incident.created'] });
    ev.sink.answers.push({ status: 410 });
    await declare(w);
    await until(w, 1);
    await w.dispatcher.step();
    const after = await w.service.get(endpoint.id);
    expect(after).toMatchObject({ enabled: false, disabled_reason: 'gone' });
    expect(w.disabled).toEqual([`${endpoint.id}:gone`]);
    await declare(w);
    for (let i = 0; i < 3; i++) await w.dispatcher.step();
    expect(ev.sink.received).toHaveLength(1);
    await w.service.delete(endpoint.id);
  });

  it('disables an endpoint failing for 3 days', async () => {
    const w = world();
    const { endpoint } = await w.service.create({ url: ev.sink.url, event_types: ['incident.created'] });
    for (let i = 0; i < 20; i++) ev.sink.answers.push({ status: 500 });
    await declare(w);
    await until(w, 1);
    w.advance(3 * 86_400_000);
    await declare(w);
    await until(w, 2);
    await w.dispatcher.step();
    expect(await w.service.get(endpoint.id)).toMatchObject({ enabled: false, disabled_reason: 'failing' });
    expect(w.disabled).toEqual([`${endpoint.id}:failing`]);
    await w.service.delete(endpoint.id);
  });

  it('signs with both secrets during a rotation overlap, and with the new one after', async () => {
    const w = world();
    const { endpoint, signingSecret: old } = await w.service.create({
      url: ev.sink.url,
      event_types: ['incident.created'],
    });
    const { signingSecret: fresh } = await w.service.rotateSecret(endpoint.id, { overlap_seconds: 3600 });
    expect((await w.service.get(endpoint.id)).secrets).toHaveLength(2);
    await declare(w);
    await until(w, 1);
    const [during] = ev.sink.received;
    expect(String(during!.headers['webhook-signature']).split(' ')).toHaveLength(2);
    for (const s of [old, fresh]) new Webhook(s).verify(during!.body, during!.headers as Record<string, string>);
    // After the overlap only the new one signs; the test's clock moves, so sign-time checks use it.
    w.advance(3601_000);
    const r = await w.service.test(endpoint.id);
    expect(r).toMatchObject({ ok: true, status: 200 });
    const after = ev.sink.received.at(-1)!;
    expect(after.json.type).toBe('ping');
    expect(String(after.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(EVENT_SCHEMAS.ping!.safeParse(after.json).success).toBe(true);
    await w.service.delete(endpoint.id);
  });

  it('keeps sending to the others while one receiver is slow: a held answer holds one lane, not the rest', async () => {
    const w = world();
    // A receiver that answers nothing until the test lets it.
    const held: (() => void)[] = [];
    const slow = createServer((req, res) => {
      req.resume();
      held.push(() => res.end('ok'));
    });
    await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
    const dispatcher = new EventDispatcher(w.deps, { concurrency: 2 });
    try {
      const port = (slow.address() as AddressInfo).port;
      await w.service.create({
        url: `http://127.0.0.1:${port}/slow`,
        event_types: ['incident.created'],
        filter: { severities: ['critical'] },
      });
      await w.service.create({ url: ev.sink.url, event_types: ['incident.created'] });
      // The slow receiver's event first: it is among the first claimed.
      await declare(w, 'critical');
      for (let i = 0; i < 12; i++) {
        w.advance(1);
        await declare(w, 'minor');
      }
      const before = ev.sink.received.length;
      const step = dispatcher.step();
      // All 13 reach the fast receiver while the slow one still holds its request.
      await waitFor(() => ev.sink.received.length - before >= 13, { what: 'the fast receiver’s 13 events' });
      expect(held).toHaveLength(1);
      for (const release of held.splice(0)) release();
      expect((await step).attempted).toBe(14);
    } finally {
      for (const release of held.splice(0)) release();
      slow.closeAllConnections();
      await new Promise((resolve) => slow.close(resolve));
    }
  });

  it('replays a time range with the original webhook-ids', async () => {
    const w = world();
    const { endpoint } = await w.service.create({ url: ev.sink.url, event_types: ['incident.*'] });
    const start = new Date(w.now() - 1000).toISOString();
    await patch(w, await declare(w), { title: 'x' });
    await until(w, 2);
    const original = ev.sink.received.map((r) => r.headers['webhook-id']);
    const result = await w.service.replay(endpoint.id, {
      since: start,
      until: new Date(Date.now() + 60_000).toISOString(),
      event_types: ['incident.*'],
    });
    expect(result).toEqual({ replayed: 2, truncated: false });
    await until(w, 2 + result.replayed);
    const replayed = ev.sink.received.slice(2).map((r) => r.headers['webhook-id']);
    for (const id of original) expect(replayed).toContain(id);
    // The retry of a finished delivery is a new delivery of the same event (same webhook-id).
    const [latest] = (await w.service.deliveries(endpoint.id, { limit: 1, cursor: null })).data;
    const again = await w.service.retryDelivery(endpoint.id, latest!.id);
    expect(again.event_id).toBe(latest!.event_id);
    await w.service.delete(endpoint.id);
  });
});

describe('retention', () => {
  it('drops events and delivery-log entries older than HERALD_EVENT_RETENTION', async () => {
    const w = world();
    const { endpoint } = await w.service.create({ url: ev.sink.url, event_types: ['incident.created'] });
    await declare(w);
    await until(w, 1);
    expect(await t.redis.hlen(w.keys.eventLog())).toBe(1);
    w.advance(8 * 86_400_000);
    await w.dispatcher.step();
    expect(await t.redis.hlen(w.keys.eventLog())).toBe(0);
    expect((await w.service.deliveries(endpoint.id, { limit: 10, cursor: null })).data).toEqual([]);
    expect(await t.redis.zcard(w.keys.eventEndpointDeliveries(endpoint.id))).toBe(0);
  });
});

describe('without event endpoints', () => {
  it('keeps no event log and no sequences: the outbox is taken and dropped', async () => {
    const w = world();
    await declare(w);
    const s = await w.dispatcher.step();
    expect(s.ingested).toBe(1);
    const { keys } = w;
    expect(await t.redis.exists(keys.eventLog(), keys.eventSequences(), keys.eventFanout())).toBe(0);
    expect(await t.redis.xlen(keys.eventStream())).toBeLessThanOrEqual(1);
  });
});
