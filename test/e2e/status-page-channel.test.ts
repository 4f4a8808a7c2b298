import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PublicIncident } from '../../src/domain/status/public.js';
import { createKeys, type Keys } from '../../src/store/keys.js';
import { getPublicIncident } from '../../src/store/public-incidents.js';
import { startHerald, type ApiResponse, type TestHerald } from '../support/herald.js';
import { startHttpSink, type HttpSink } from '../support/peers/http-sink.js';
import { connectTestRedis } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/**
 * The status_page connection through the public API of a real Herald with its worker: an
 * execute that names it publishes the incident's next public update (with the public state),
 * a correction edits it in place, a retraction removes it, an audience with approval holds it,
 * and a Herald has one page, which a test message never reaches.
 */
let h: TestHerald;
let sink: HttpSink;
let redis: Redis;
let keys: Keys;
let page = '';
let hook = '';
let tpl = '';
let approver = '';

interface DeliveryView {
  id: string;
  connection_id: string;
  connection_type: string;
  status: string;
  action: string;
  message: { id: string; channel: string | null; permalink: string | null } | null;
}
interface ExecutionView {
  id: string;
  status: string;
  public_status: string | null;
  deliveries: DeliveryView[];
}

async function ok(r: Promise<ApiResponse>, status: number): Promise<any> {
  const res = await r;
  expect(res.status, `${res.status} ${res.text}`).toBe(status);
  return res.body;
}

const PAGE = {
  name: 'Public status',
  type: 'status_page',
  config: { title: 'Example status', public_url: 'https://status.example.com/', locale: 'en' },
};

beforeAll(async () => {
  sink = await startHttpSink({ respond: () => ({ status: 200 }) });
  h = await startHerald({ HERALD_RATE_LIMIT: '100000', HERALD_EXECUTE_RATE_LIMIT: '100000' });
  redis = connectTestRedis();
  keys = createKeys(h.prefix);
  approver = await h.tokenWith(['incidents:read', 'approvals:write', 'audiences:write'], 'approver');
  page = (await ok(h.api('POST', '/v1/connections', { body: PAGE }), 201)).id;
  hook = (
    await ok(
      h.api('POST', '/v1/connections', {
        body: { name: 'hook', type: 'webhook', config: { url: `${sink.url}/hook` } },
      }),
      201,
    )
  ).id;
  tpl = (
    await ok(
      h.api('POST', '/v1/templates', {
        body: { name: 'public', subject: '{{incident.title}}', body: 'We are on it. ETA {{eta}}.' },
      }),
      201,
    )
  ).id;
}, 60_000);

afterAll(async () => {
  await h?.close();
  await sink?.close();
  await redis?.quit();
});

async function newIncident(title: string, severity = 'major'): Promise<string> {
  return (await ok(h.api('POST', '/v1/incidents', { body: { title, severity, template_ids: [tpl] } }), 201)).id;
}

const execute = (incidentId: string, body: Record<string, unknown>): Promise<ExecutionView> =>
  ok(h.api('POST', `/v1/incidents/${incidentId}/execute`, { body }), 202);

async function settled(incidentId: string, executionId: string): Promise<ExecutionView> {
  return waitFor(
    async () => {
      const e = (await h.api('GET', `/v1/incidents/${incidentId}/executions/${executionId}`)).body as ExecutionView;
      return ['queued', 'in_progress', 'pending_approval'].includes(e.status) ? undefined : e;
    },
    { timeoutMs: 15_000, what: `execution ${executionId} to settle` },
  );
}

const published = (incidentId: string): Promise<PublicIncident | null> => getPublicIncident(redis, keys, incidentId);

describe('the status_page connection', () => {
  it('is one per Herald: a second answers 409; its config comes back normalized, nothing secret', async () => {
    const again = await h.api('POST', '/v1/connections', { body: { ...PAGE, name: 'Another page' } });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('status_page_exists');
    const c = await ok(h.api('GET', `/v1/connections/${page}`), 200);
    expect(c.config).toEqual({
      title: 'Example status',
      public_url: 'https://status.example.com',
      logo_url: null,
      time_zone: 'UTC',
      locale: 'en',
      support_url: null,
      frame_ancestors: [],
      subscriber_templates: null,
    });
    expect(c.secrets).toEqual({});
    expect(await redis.get(keys.statusPage())).toBe(page);
  });

  it('refuses a test message (it would be public); the read-only test answers ok', async () => {
    const sent = await h.api('POST', `/v1/connections/${page}/test`, { body: { send_message: true } });
    expect(sent.status).toBe(422);
    expect(sent.body.code).toBe('status_page_test_refused');
    const check = await ok(h.api('POST', `/v1/connections/${page}/test`, { body: {} }), 200);
    expect(check).toMatchObject({ ok: true, status: 'ok', method: null, sent_message: false });
    expect(check.detail).toMatch(/Nothing to check/);
  });

  it('is not part of "every enabled connection": an execute that does not name it publishes nothing', async () => {
    const inc = await newIncident('Internal only');
    const exe = await execute(inc, { variables: { eta: '1h' } });
    expect(exe.deliveries.map((d) => d.connection_id)).toEqual([hook]);
    await settled(inc, exe.id);
    expect(await published(inc)).toBeNull();
  });
});

describe('publishing through executes', () => {
  let inc = '';
  const exes: string[] = [];

  it('publishes the rendered update with the public state mapped from the incident', async () => {
    inc = await newIncident('Checkout errors', 'critical');
    const exe = await execute(inc, { connection_ids: [page], variables: { eta: '30 minutes' } });
    expect(exe.public_status).toBe('investigating');
    const done = await settled(inc, exe.id);
    expect(done.status).toBe('delivered');
    const d = done.deliveries[0]!;
    expect(d.message).toEqual({
      id: d.id,
      channel: inc,
      permalink: `https://status.example.com/incidents/${inc}`,
    });
    exes.push(exe.id);
    const p = (await published(inc))!;
    expect(p).toMatchObject({ id: inc, name: 'Checkout errors', impact: 'critical', status: 'investigating' });
    expect(p.updates).toHaveLength(1);
    expect(p.updates[0]).toMatchObject({ id: d.id, body: 'We are on it. ETA 30 minutes.', updated_at: null });
  });

  it('follows the incident status, or the execute’s public_status', async () => {
    await ok(h.api('PATCH', `/v1/incidents/${inc}`, { body: { status: 'identified' } }), 200);
    const second = await execute(inc, { connection_ids: [page], variables: { eta: '20 minutes' } });
    expect(second.public_status).toBe('identified');
    await settled(inc, second.id);
    exes.push(second.id);
    const third = await execute(inc, {
      connection_ids: [page],
      variables: { eta: '10 minutes' },
      public_status: 'monitoring',
    });
    expect(third.public_status).toBe('monitoring');
    await settled(inc, third.id);
    exes.push(third.id);
    const p = (await published(inc))!;
    expect(p.updates.map((u) => u.status)).toEqual(['monitoring', 'identified', 'investigating']);
    expect(p.status).toBe('monitoring');

    const bad = await h.api('POST', `/v1/incidents/${inc}/execute`, {
      body: { connection_ids: [page], variables: { eta: 'x' }, public_status: 'closed' },
    });
    expect(bad.status).toBe(422);
  });

  it('a correction edits the update in place, marked updated', async () => {
    const corr = await ok(
      h.api('POST', `/v1/incidents/${inc}/executions/${exes[0]}/correct`, {
        body: { variables: { eta: '45 minutes' } },
      }),
      202,
    );
    const done = await settled(inc, corr.id);
    expect(done.deliveries.map((d) => [d.action, d.status])).toEqual([['edit', 'delivered']]);
    expect(done.public_status).toBeNull();
    const p = (await published(inc))!;
    expect(p.updates).toHaveLength(3);
    const first = p.updates[2]!;
    expect(first.body).toBe('We are on it. ETA 45 minutes.');
    expect(first.updated_at).not.toBeNull();
    expect(first.status).toBe('investigating');
  });

  it('a retraction removes the update; the last one takes the incident off the page', async () => {
    let r = await ok(
      h.api('POST', `/v1/incidents/${inc}/executions/${exes[1]}/retract`, { body: { reason: 'wrong' } }),
      202,
    );
    let done = await settled(inc, r.id);
    expect(done.deliveries.map((d) => [d.action, d.status])).toEqual([['delete', 'delivered']]);
    expect((await published(inc))!.updates.map((u) => u.status)).toEqual(['monitoring', 'investigating']);

    for (const id of [exes[0]!, exes[2]!]) {
      r = await ok(h.api('POST', `/v1/incidents/${inc}/executions/${id}/retract`, { body: { reason: 'wrong' } }), 202);
      done = await settled(inc, r.id);
      expect(done.status).toBe('delivered');
    }
    expect(await published(inc)).toBeNull();
    const index = await redis.zrange(keys.publicIncidents(), '0', '-1');
    expect(index.some((m) => m.endsWith(`|${inc}`))).toBe(false);
  });

  it('names the incident’s components, as they are at each publish', async () => {
    const api = (await ok(h.api('POST', '/v1/components', { body: { name: 'API' } }), 201)).id as string;
    const web = (await ok(h.api('POST', '/v1/components', { body: { name: 'Website' } }), 201)).id as string;
    const withParts = (
      await ok(
        h.api('POST', '/v1/incidents', {
          body: {
            title: 'Two parts down',
            severity: 'major',
            template_ids: [tpl],
            components: [
              { id: api, status: 'major_outage' },
              { id: web, status: 'degraded_performance' },
            ],
          },
        }),
        201,
      )
    ).id as string;
    const exe = await execute(withParts, { connection_ids: [page], variables: { eta: '1h' } });
    await settled(withParts, exe.id);
    const p = (await published(withParts))!;
    expect([...p.component_ids].sort()).toEqual([api, web].sort());
    expect(p.updates[0]!.affected_components).toEqual(
      expect.arrayContaining([
        { id: api, status: 'major_outage' },
        { id: web, status: 'degraded_performance' },
      ]),
    );

    // Resolved inside Herald: the page shows it resolved, at the incident's time, with no new update.
    const resolved = await ok(h.api('PATCH', `/v1/incidents/${withParts}`, { body: { status: 'resolved' } }), 200);
    expect(await published(withParts)).toMatchObject({ status: 'resolved', resolved_at: resolved.resolved_at });
    expect((await published(withParts))!.updates).toHaveLength(1);
  });

  it('without a template it publishes the title and impact, nothing internal', async () => {
    const bare = (
      await ok(
        h.api('POST', '/v1/incidents', {
          body: {
            title: 'Login failures',
            severity: 'critical',
            description: 'INTERNAL: db-7 ran out of disk',
            impact: 'Some customers cannot log in.',
          },
        }),
        201,
      )
    ).id as string;
    const exe = await execute(bare, { connection_ids: [page], variables: { ticket: 'OPS-1234' } });
    await settled(bare, exe.id);
    const p = (await published(bare))!;
    expect(p.name).toBe('Login failures');
    expect(p.updates[0]!.body).toBe('Some customers cannot log in.');
    const all = JSON.stringify(p);
    for (const secret of ['INTERNAL', 'OPS-1234', 'critical]', '/v1/']) expect(all).not.toContain(secret);
  });

  it('closed shows resolved: mapped at execute time', async () => {
    const closing = await newIncident('Short blip', 'low');
    await ok(h.api('PATCH', `/v1/incidents/${closing}`, { body: { status: 'resolved' } }), 200);
    const exe = await execute(closing, { connection_ids: [page], variables: { eta: 'none' } });
    expect(exe.public_status).toBe('resolved');
    await settled(closing, exe.id);
    expect(await published(closing)).toMatchObject({ status: 'resolved', impact: 'none' });
  });
});

describe('through an audience with approval', () => {
  it('holds the public update until approved, then publishes it once', async () => {
    await ok(
      h.api('POST', '/v1/audiences', {
        body: {
          key: 'customers',
          name: 'Customers',
          visibility: 'external',
          connection_ids: [page],
          approval: {
            required: true,
            approvers: { slack_user_ids: [], api_key_scopes: ['audiences:write'] },
            four_eyes: false,
            expires_in: '2h',
          },
        },
      }),
      201,
    );
    const inc = await newIncident('Held for approval');
    const exe = await execute(inc, { audiences: ['customers'], variables: { eta: '1h' } });
    expect(exe.status).toBe('pending_approval');
    expect(exe.deliveries.map((d) => [d.connection_id, d.status])).toEqual([[page, 'pending_approval']]);
    // Held: nothing public, even after the worker had every chance to pick it up.
    const meanwhile = await newIncident('Meanwhile');
    const other = await execute(meanwhile, { connection_ids: [hook], variables: { eta: '1' } });
    await settled(meanwhile, other.id);
    expect(await published(inc)).toBeNull();

    const r = await h.api('POST', `/v1/incidents/${inc}/executions/${exe.id}/approve`, {
      body: { reason: 'wording checked' },
      token: approver,
    });
    expect([200, 202], r.text).toContain(r.status);
    const done = await settled(inc, exe.id);
    expect(done.status).toBe('delivered');
    const p = (await published(inc))!;
    expect(p.updates.map((u) => u.id)).toEqual([done.deliveries[0]!.id]);
    expect(p.name).toBe('Held for approval');
  });
});

describe('deleting the page', () => {
  it('a change of its config moves the status version (the page shows its config)', async () => {
    const version = async () => Number((await redis.hget(keys.statusVersion(), 'v')) ?? '0');
    const before = await version();
    const patched = await ok(
      h.api('PATCH', `/v1/connections/${page}`, { body: { config: { title: 'Acme status' } } }),
      200,
    );
    expect(patched.config.title).toBe('Acme status');
    expect(await version()).toBeGreaterThan(before);
  });

  it('frees the one place; two creates at once: one page, one 409', async () => {
    expect((await h.api('DELETE', `/v1/connections/${page}`)).status).toBe(204);
    expect(await redis.exists(keys.statusPage())).toBe(0);
    const both = await Promise.all(
      [1, 2].map((n) => h.api('POST', '/v1/connections', { body: { ...PAGE, name: `Page ${n}` } })),
    );
    expect(both.map((r) => r.status).sort()).toEqual([201, 409]);
    const made = both.find((r) => r.status === 201)!;
    expect(await redis.get(keys.statusPage())).toBe(made.body.id);
    const list = await ok(h.api('GET', '/v1/connections?type=status_page'), 200);
    expect(list.data.map((c: { id: string }) => c.id)).toEqual([made.body.id]);
  });
});
