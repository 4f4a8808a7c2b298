import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHerald, type ApiResponse, type TestHerald } from '../support/herald.js';
import { startHttpSink, type HttpSink } from '../support/peers/http-sink.js';
import { waitFor } from '../support/wait.js';

/**
 * HERALD_DEFAULT_AUDIENCES and the execute rules around it, through the public API: an execute
 * that names neither audiences nor connection_ids goes to the default audiences (those that
 * exist); one that names connection_ids goes exactly there; a dry run shows each audience.
 */

let h: TestHerald;
let sink: HttpSink;
const con = { responders: '', press: '' };

interface Execution {
  id: string;
  status: string;
  audiences: { key: string; delivery_ids: string[]; approval: { state: string } | null }[];
  deliveries: { id: string; connection_id: string; audience: string | null; status: string }[];
}

async function ok(r: Promise<ApiResponse>, status: number): Promise<any> {
  const res = await r;
  expect(res.status, `${res.status} ${res.text}`).toBe(status);
  return res.body;
}

const newIncident = async (): Promise<string> =>
  (await ok(h.api('POST', '/v1/incidents', { body: { title: 'Checkout down', severity: 'major' } }), 201)).id;

beforeAll(async () => {
  sink = await startHttpSink({ respond: () => ({ status: 200 }) });
  // `gone` names no audience: it is passed over.
  h = await startHerald({ HERALD_DEFAULT_AUDIENCES: 'gone, responders' });
  for (const name of Object.keys(con) as (keyof typeof con)[])
    con[name] = (
      await ok(
        h.api('POST', '/v1/connections', { body: { name, type: 'webhook', config: { url: `${sink.url}/${name}` } } }),
        201,
      )
    ).id;
  await ok(
    h.api('POST', '/v1/audiences', {
      body: { key: 'responders', name: 'Responders', connection_ids: [con.responders] },
    }),
    201,
  );
});

afterAll(async () => {
  await h?.close();
  await sink?.close();
});

describe('HERALD_DEFAULT_AUDIENCES', () => {
  it('an execute naming neither audiences nor connections goes to the default audiences only', async () => {
    const inc = await newIncident();
    const e = (await ok(h.api('POST', `/v1/incidents/${inc}/execute`, { body: {} }), 202)) as Execution;
    expect(e.deliveries.map((d) => [d.connection_id, d.audience])).toEqual([[con.responders, 'responders']]);
    expect(e.audiences.map((a) => [a.key, a.delivery_ids.length, a.approval])).toEqual([['responders', 1, null]]);
    await waitFor(() => sink.requests.some((r) => r.path === '/responders' && JSON.stringify(r.body).includes(inc)), {
      timeoutMs: 30_000,
      what: 'the responders delivery',
    });
    expect(sink.requests.filter((r) => r.path === '/press' && JSON.stringify(r.body).includes(inc))).toHaveLength(0);
  });

  it('connection_ids still go exactly where they say, without audiences', async () => {
    const inc = await newIncident();
    const e = (await ok(
      h.api('POST', `/v1/incidents/${inc}/execute`, { body: { connection_ids: [con.press] } }),
      202,
    )) as Execution;
    expect(e.deliveries.map((d) => [d.connection_id, d.audience])).toEqual([[con.press, null]]);
    expect(e.audiences).toEqual([]);
  });

  it('a dry run to the defaults shows each audience, and an unknown key named is refused by index', async () => {
    const inc = await newIncident();
    const dry = await ok(h.api('POST', `/v1/incidents/${inc}/execute?dry_run=true`, { body: {} }), 200);
    expect(dry.audiences.map((a: { key: string; deliveries: unknown[] }) => [a.key, a.deliveries.length])).toEqual([
      ['responders', 1],
    ]);
    const bad = await h.api('POST', `/v1/incidents/${inc}/execute`, { body: { audiences: ['responders', 'gone'] } });
    expect(bad.status).toBe(422);
    expect(bad.body).toMatchObject({ code: 'unknown_audience', errors: [{ field: 'audiences.1' }] });
    const both = await h.api('POST', `/v1/incidents/${inc}/execute`, {
      body: { audiences: ['responders'], connection_ids: [con.press] },
    });
    expect(both.status).toBe(422);
    expect((both.body as { code: string }).code).toBe('audiences_and_connection_ids');
  });

  it('approve on an execution that holds nothing is 409 not_pending', async () => {
    const inc = await newIncident();
    const e = (await ok(h.api('POST', `/v1/incidents/${inc}/execute`, { body: {} }), 202)) as Execution;
    const r = await h.api('POST', `/v1/incidents/${inc}/executions/${e.id}/approve`, { body: {} });
    expect(r.status).toBe(409);
    expect((r.body as { code: string }).code).toBe('not_pending');
  });
});

describe('a held delivery whose connection goes', () => {
  it('is cancelled like a queued one, never sent, and approving afterwards sends nothing', async () => {
    const doomed = (
      await ok(
        h.api('POST', '/v1/connections', {
          body: { name: 'doomed', type: 'webhook', config: { url: `${sink.url}/doomed` } },
        }),
        201,
      )
    ).id as string;
    await ok(
      h.api('POST', '/v1/audiences', {
        body: {
          key: 'partners',
          name: 'Partners',
          visibility: 'external',
          connection_ids: [doomed],
          approval: {
            required: true,
            approvers: { slack_user_ids: ['U024BE7LH'], api_key_scopes: ['incidents:read'] },
          },
        },
      }),
      201,
    );
    const inc = await newIncident();
    const e = (await ok(
      h.api('POST', `/v1/incidents/${inc}/execute`, { body: { audiences: ['partners'] } }),
      202,
    )) as Execution;
    expect(e.status).toBe('pending_approval');
    expect(e.deliveries.map((d) => d.status)).toEqual(['pending_approval']);
    await ok(h.api('DELETE', `/v1/connections/${doomed}`), 204);
    const after = (await ok(h.api('GET', `/v1/incidents/${inc}/executions/${e.id}`), 200)) as Execution;
    expect(after.deliveries.map((d) => d.status)).toEqual(['cancelled']);
    // The approval itself still waits for a decision; deciding it sends nothing.
    const approver = await h.tokenWith(['incidents:read', 'approvals:write'], 'partner approver');
    const decided = (await ok(
      h.api('POST', `/v1/incidents/${inc}/executions/${e.id}/approve`, { body: {}, token: approver }),
      200,
    )) as Execution;
    expect(decided.audiences[0]!.approval!.state).toBe('approved');
    expect(decided.deliveries.map((d) => d.status)).toEqual(['cancelled']);
    expect(sink.requests.filter((r) => r.path === '/doomed')).toHaveLength(0);
  });
});
