import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANNEL_TYPES } from '../../src/channels/index.js';
import type { ChannelSenders, DeliveryTarget, OutboundMessage, SendResult } from '../../src/ports/index.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { waitFor } from '../support/wait.js';

/**
 * The execute → queue → worker → record path with a scripted in-process sender, so the engine's
 * rules are tested apart from any platform (the channel tests cover the real wire formats).
 */
type Script = (target: DeliveryTarget, message: OutboundMessage, n: number) => SendResult;
const sent: { target: DeliveryTarget; message: OutboundMessage; at: number }[] = [];
let script: Script = () => ({ outcome: 'delivered', httpStatus: 200, providerCode: null, latencyMs: 1 });
/** Sends wait for this gate (a test holds deliveries back while it queues more). */
let gate: Promise<void> = Promise.resolve();
const senders = Object.fromEntries(
  CHANNEL_TYPES.map((t) => [
    t,
    {
      send: async (target: DeliveryTarget, message: OutboundMessage) => {
        await gate;
        sent.push({ target, message, at: Date.now() });
        return script(target, message, sent.filter((s) => s.message.deliveryId === message.deliveryId).length);
      },
    },
  ]),
) as unknown as ChannelSenders;

let h: TestHerald;
beforeAll(async () => {
  h = await startHerald({ HERALD_RATE_LIMIT: '10000', HERALD_EXECUTE_RATE_LIMIT: '10000' }, { senders });
});
afterAll(async () => {
  await h.close();
});

async function webhookConnection(name: string, extra: Record<string, unknown> = {}) {
  const r = await h.api('POST', '/v1/connections', {
    body: { name, type: 'webhook', config: { url: 'http://127.0.0.1:9/hook' }, ...extra },
  });
  expect(r.status).toBe(201);
  return r.body;
}

const finished = (exe: { status: string }) => !['queued', 'in_progress'].includes(exe.status);

describe('execute', () => {
  it('refuses without enabled connections, then fans out, records and reports', async () => {
    const { body: inc } = await h.api('POST', '/v1/incidents', {
      body: { title: 'Search is slow', severity: 'minor' },
    });
    const none = await h.api('POST', `/v1/incidents/${inc.id}/execute`, { body: {} });
    expect(none.status).toBe(422);
    expect(none.body.code).toBe('no_connections');

    const a = await webhookConnection('a');
    const b = await webhookConnection('b');
    const badFlag = await h.api('POST', `/v1/incidents/${inc.id}/execute?dry_run=yes`, { body: {} });
    expect(badFlag.status).toBe(422);
    expect(badFlag.body.errors[0].field).toBe('dry_run');
    // The resource's 404 comes before the query's 422 (the order of checks in docs/api.md).
    expect(
      (await h.api('POST', '/v1/incidents/inc_01ARZ3NDEKTSV4RRFFQ69G5FAV/execute?dry_run=yes', { body: {} })).status,
    ).toBe(404);
    const dry = await h.api('POST', `/v1/incidents/${inc.id}/execute?dry_run=true`, {
      body: { variables: { eta: '10 min' } },
    });
    expect(dry.status).toBe(200);
    expect(dry.body.dry_run).toBe(true);
    expect(dry.body.deliveries.map((d: { connection_id: string }) => d.connection_id).sort()).toEqual(
      [a.id, b.id].sort(),
    );
    expect(dry.body.deliveries[0].body).toContain('Search is slow');
    expect(dry.body.deliveries[0].body).toContain('eta: 10 min');

    const before = sent.length;
    const r = await h.api('POST', `/v1/incidents/${inc.id}/execute`, { body: { variables: { eta: '10 min' } } });
    expect(r.status).toBe(202);
    expect(r.headers.get('location')).toBe(`/v1/incidents/${inc.id}/executions/${r.body.id}`);
    expect(r.body.deliveries).toHaveLength(2);
    const done = await waitFor(async () => {
      const e = await h.api('GET', `/v1/incidents/${inc.id}/executions/${r.body.id}`);
      return finished(e.body) ? e.body : undefined;
    });
    expect(done.status).toBe('delivered');
    expect(done.completed_at).not.toBeNull();
    expect(
      done.deliveries.every(
        (d: { status: string; attempts: unknown[]; delivered_at: string | null }) =>
          d.status === 'delivered' && d.attempts.length === 1 && d.delivered_at,
      ),
    ).toBe(true);
    expect(sent.length - before).toBe(2);

    const incident = await h.api('GET', `/v1/incidents/${inc.id}`);
    expect(incident.body.execution_count).toBe(1);
    expect(incident.body.last_executed_at).not.toBeNull();
    const events = await h.api('GET', `/v1/incidents/${inc.id}/events`);
    const executed = events.body.data.find((e: { type: string }) => e.type === 'incident.executed');
    expect(executed.data.execution_id).toBe(r.body.id);
    const metrics = await h.api('GET', '/metrics', { token: null });
    expect(metrics.text).toMatch(/herald_deliveries_total\{type="webhook",status="delivered"\} [1-9]/);
    expect(metrics.text).toMatch(/herald_delivery_attempts_total\{type="webhook",outcome="delivered"\} [1-9]/);
    const eventsCursor = (await h.api('GET', `/v1/incidents/${inc.id}/events?limit=1`)).body.pagination.next_cursor;
    expect((await h.api('GET', `/v1/incidents/${inc.id}/executions?cursor=${eventsCursor}`)).body.code).toBe(
      'invalid_cursor',
    );
    const list = await h.api('GET', `/v1/incidents/${inc.id}/executions`);
    expect(list.body.data.map((e: { id: string }) => e.id)).toEqual([r.body.id]);

    // Cleanup for the next tests: these two stay but are disabled.
    for (const c of [a, b]) await h.api('PATCH', `/v1/connections/${c.id}`, { body: { enabled: false } });
  });

  it('checks required variables of attached templates and records the template version', async () => {
    const c = await webhookConnection('vars');
    const tpl = await h.api('POST', '/v1/templates', {
      body: {
        name: `status-${Date.now()}`,
        subject: 'Update: {{incident.title}}',
        body: 'ETA {{eta}}{{#note}} — {{note}}{{/note}}',
      },
    });
    expect(tpl.status).toBe(201);
    const { body: inc } = await h.api('POST', '/v1/incidents', {
      body: { title: 'Login broken', severity: 'critical', template_ids: [tpl.body.id] },
    });
    const missing = await h.api('POST', `/v1/incidents/${inc.id}/execute`, { body: { variables: {} } });
    expect(missing.status).toBe(422);
    expect(missing.body.code).toBe('missing_variables');
    expect(missing.body.errors).toEqual([expect.objectContaining({ field: 'variables.eta' })]);
    const r = await h.api('POST', `/v1/incidents/${inc.id}/execute`, {
      body: { variables: { eta: '5m' }, connection_ids: [c.id] },
    });
    expect(r.status).toBe(202);
    expect(r.body.deliveries[0]).toMatchObject({ template_id: tpl.body.id, template_version: 1, connection_id: c.id });
    await waitFor(async () => finished((await h.api('GET', `/v1/incidents/${inc.id}/executions/${r.body.id}`)).body));
    const msg = sent.find((s) => s.message.deliveryId === r.body.deliveries[0].id)!;
    expect(msg.message.content.body).toBe('ETA 5m');
    const unknown = await h.api('POST', `/v1/incidents/${inc.id}/execute`, {
      body: { variables: { eta: '1' }, connection_ids: ['con_01ARZ3NDEKTSV4RRFFQ69G5FAV'] },
    });
    expect(unknown.status).toBe(422);
    expect(unknown.body.errors[0].field).toBe('connection_ids.0');
    // A repeated id counts once, and errors point at the caller's own index.
    const repeated = await h.api('POST', `/v1/incidents/${inc.id}/execute`, {
      body: { variables: { eta: '1' }, connection_ids: [c.id, c.id, 'con_01ARZ3NDEKTSV4RRFFQ69G5FAV'] },
    });
    expect(repeated.status).toBe(422);
    expect(repeated.body.errors).toEqual([
      expect.objectContaining({ field: 'connection_ids.2', code: 'unknown_connection' }),
    ]);
    const twice = await h.api('POST', `/v1/incidents/${inc.id}/execute?dry_run=true`, {
      body: { variables: { eta: '1' }, connection_ids: [c.id, c.id] },
    });
    expect(twice.body.deliveries).toHaveLength(1);
    await h.api('POST', `/v1/incidents/${inc.id}/close`);
    const closed = await h.api('POST', `/v1/incidents/${inc.id}/execute`, { body: { variables: { eta: '1' } } });
    expect(closed.status).toBe(409);
    await h.api('PATCH', `/v1/connections/${c.id}`, { body: { enabled: false } });
  });

  it('retries retryable failures, honours Retry-After, fails permanent ones once, and redelivers', async () => {
    const c = await webhookConnection('flaky', { rate_limit_per_minute: 6000 });
    const { body: inc } = await h.api('POST', '/v1/incidents', { body: { title: 'Flaky', severity: 'low' } });
    script = (_t, _m, n) =>
      n === 1
        ? {
            outcome: 'retryable',
            httpStatus: 429,
            providerCode: null,
            latencyMs: 1,
            retryAfterMs: 1500,
            error: 'HTTP 429',
            ambiguous: false,
          }
        : n === 2
          ? {
              outcome: 'retryable',
              httpStatus: 503,
              providerCode: null,
              latencyMs: 1,
              retryAfterMs: 300,
              error: 'HTTP 503',
              ambiguous: true,
            }
          : { outcome: 'delivered', httpStatus: 200, providerCode: null, latencyMs: 1 };
    const r = await h.api('POST', `/v1/incidents/${inc.id}/execute`, { body: {} });
    const done = await waitFor(async () => {
      const e = (await h.api('GET', `/v1/incidents/${inc.id}/executions/${r.body.id}`)).body;
      return finished(e) ? e : undefined;
    });
    const d = done.deliveries[0];
    expect(d.status).toBe('delivered');
    expect(d.attempts.map((a: { outcome: string }) => a.outcome)).toEqual([
      'retryable_failure',
      'retryable_failure',
      'delivered',
    ]);
    expect(d.attempts[0]).toMatchObject({ http_status: 429, retry_after_ms: 1500 });
    expect(d.possible_duplicate).toBe(true);
    const times = sent.filter((s) => s.message.deliveryId === d.id).map((s) => s.at);
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(1500);

    script = () => ({
      outcome: 'permanent',
      httpStatus: 400,
      providerCode: null,
      latencyMs: 1,
      error: 'HTTP 400',
      disable: null,
    });
    const p = await h.api('POST', `/v1/incidents/${inc.id}/execute`, { body: {} });
    const failed = await waitFor(async () => {
      const e = (await h.api('GET', `/v1/incidents/${inc.id}/executions/${p.body.id}`)).body;
      return finished(e) ? e : undefined;
    });
    expect(failed.status).toBe('failed');
    expect(failed.deliveries[0].attempts).toHaveLength(1);
    const events = (await h.api('GET', `/v1/incidents/${inc.id}/events`)).body.data;
    expect(events.find((e: { type: string }) => e.type === 'delivery.failed').data).toMatchObject({
      execution_id: p.body.id,
      connection_id: c.id,
      error: 'HTTP 400',
    });

    script = () => ({ outcome: 'delivered', httpStatus: 200, providerCode: null, latencyMs: 1 });
    const re = await h.api('POST', `/v1/incidents/${inc.id}/executions/${p.body.id}/redeliver`);
    expect(re.status).toBe(202);
    const redone = await waitFor(async () => {
      const e = (await h.api('GET', `/v1/incidents/${inc.id}/executions/${p.body.id}`)).body;
      return e.status === 'delivered' ? e : undefined;
    });
    expect(redone.deliveries[0].attempts.map((a: { outcome: string }) => a.outcome)).toEqual([
      'permanent_failure',
      'delivered',
    ]);
    await h.api('PATCH', `/v1/connections/${c.id}`, { body: { enabled: false } });
  });

  it('drains a paced backlog at the connection rate: waiting is no attempt, nothing is dropped', async () => {
    script = () => ({ outcome: 'delivered', httpStatus: 200, providerCode: null, latencyMs: 1 });
    const c = await webhookConnection('backlog', { rate_limit_per_minute: 120 });
    const { body: inc } = await h.api('POST', '/v1/incidents', { body: { title: 'Backlog', severity: 'low' } });
    const ids: string[] = [];
    for (let i = 0; i < 6; i++)
      ids.push((await h.api('POST', `/v1/incidents/${inc.id}/execute`, { body: { connection_ids: [c.id] } })).body.id);
    const all = await waitFor(async () => {
      const es = await Promise.all(
        ids.map(async (id) => (await h.api('GET', `/v1/incidents/${inc.id}/executions/${id}`)).body),
      );
      return es.every(finished) ? es : undefined;
    });
    for (const e of all) {
      expect(e.status).toBe('delivered');
      expect(e.deliveries[0].attempts).toHaveLength(1);
    }
    const deliveryIds = new Set(all.map((e) => e.deliveries[0].id as string));
    const times = sent.filter((s) => deliveryIds.has(s.message.deliveryId)).map((s) => s.at);
    expect(times).toHaveLength(6);
    // Two a second, one at a time (a little slack for when the send is recorded here).
    for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(450);
    await h.api('PATCH', `/v1/connections/${c.id}`, { body: { enabled: false } });
  });

  it('disables a connection whose destination is gone and cancels what was queued for it', async () => {
    // One message a minute: the second and third deliveries surely wait on pacing, however slow
    // the machine is between the executes.
    const c = await webhookConnection('gone', { rate_limit_per_minute: 1 });
    const { body: inc } = await h.api('POST', '/v1/incidents', { body: { title: 'Gone', severity: 'low' } });
    script = () => ({
      outcome: 'permanent',
      httpStatus: 404,
      providerCode: null,
      latencyMs: 1,
      error: 'HTTP 404',
      disable: 'the webhook URL answered 404',
    });
    // Three executions queued while sends are held; the first delivery then meets the 404 and
    // the paced others are still waiting in the queue.
    let release!: () => void;
    gate = new Promise((r) => (release = r));
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push((await h.api('POST', `/v1/incidents/${inc.id}/execute`, { body: {} })).body.id);
    release();
    const conn = await waitFor(async () => {
      const r = (await h.api('GET', `/v1/connections/${c.id}`)).body;
      return r.health.state === 'disabled' ? r : undefined;
    });
    expect(conn.enabled).toBe(false);
    expect(conn.health.disabled_reason).toContain('404');
    const statuses = await waitFor(async () => {
      const all = await Promise.all(
        ids.map(async (id) => (await h.api('GET', `/v1/incidents/${inc.id}/executions/${id}`)).body.status),
      );
      return all.every((s) => s === 'failed' || s === 'cancelled') ? all : undefined;
    });
    expect(statuses.filter((s) => s === 'failed')).toHaveLength(1);
    expect(statuses.filter((s) => s === 'cancelled')).toHaveLength(2);
  });

  it('cancels the queued deliveries of a deleted connection', async () => {
    script = () => ({ outcome: 'delivered', httpStatus: 200, providerCode: null, latencyMs: 1 });
    // One message a minute: the second and third deliveries wait on pacing in the queue.
    const c = await webhookConnection('to-delete', { rate_limit_per_minute: 1 });
    const { body: inc } = await h.api('POST', '/v1/incidents', { body: { title: 'Deleted', severity: 'low' } });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push((await h.api('POST', `/v1/incidents/${inc.id}/execute`, { body: {} })).body.id);
    await waitFor(
      async () => (await h.api('GET', `/v1/incidents/${inc.id}/executions/${ids[0]}`)).body.status === 'delivered',
    );
    expect((await h.api('DELETE', `/v1/connections/${c.id}`)).status).toBe(204);
    const statuses = await waitFor(async () => {
      const all = await Promise.all(
        ids.map(async (id) => (await h.api('GET', `/v1/incidents/${inc.id}/executions/${id}`)).body),
      );
      return all.every((e) => e.status !== 'queued' && e.status !== 'in_progress') ? all : undefined;
    });
    expect(statuses.map((e) => e.status)).toEqual(['delivered', 'cancelled', 'cancelled']);
    const cancelled = statuses[1].deliveries[0];
    expect(cancelled.attempts.at(-1)).toMatchObject({ outcome: 'cancelled', error: 'connection deleted' });
  });
});
