import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/domain/common/clock.js';
import { startHerald, type ApiResponse, type TestHerald } from '../support/herald.js';
import { startHttpSink, type HttpSink } from '../support/peers/http-sink.js';
import { waitFor } from '../support/wait.js';

/**
 * Audiences and approval as a team meets them, through the public API of a real Herald with its
 * worker, webhook connections to a local sink standing for each audience's channels:
 * `responders` (internal) hear at once, `customers` (external, approval required, four eyes) are
 * held until an approver says yes; every claim is counted at the sink, by delivery id.
 */

/** Time moves only when a test says so (expiry is at least five minutes away). */
let offsetMs = 0;
const clock: Clock = { now: () => new Date(Date.now() + offsetMs) };

let h: TestHerald;
let sink: HttpSink;
/** Tokens: the one who executes, two approvers, and a key that may decide but is no approver here. */
const tok = { requester: '', approver: '', approver2: '', outsider: '' };
const con = { responders: '', customers1: '', customers2: '', press: '' };
const tpl = { responders: '', customers: '' };
const aud: Record<string, { id: string; etag: string }> = {};

const CUSTOMER_WORDS = 'We are looking into';
const RESPONDER_WORDS = 'Page the payments on-call';

async function ok(r: Promise<ApiResponse>, status: number): Promise<any> {
  const res = await r;
  expect(res.status, `${res.status} ${res.text}`).toBe(status);
  return res.body;
}

async function createAudience(body: Record<string, unknown>): Promise<void> {
  const r = await h.api('POST', '/v1/audiences', { body });
  expect(r.status, r.text).toBe(201);
  aud[body.key as string] = { id: r.body.id, etag: r.headers.get('etag')! };
}

beforeAll(async () => {
  sink = await startHttpSink({ respond: () => ({ status: 200 }) });
  h = await startHerald(
    { HERALD_RATE_LIMIT: '100000', HERALD_EXECUTE_RATE_LIMIT: '100000', HERALD_OUTBOX_SWEEP_MS: '1000' },
    { clock },
  );
  tok.requester = await h.tokenWith(
    ['incidents:read', 'incidents:write', 'incidents:execute', 'approvals:write', 'audiences:write'],
    'requester',
  );
  tok.approver = await h.tokenWith(['incidents:read', 'approvals:write', 'audiences:write'], 'approver');
  tok.approver2 = await h.tokenWith(['incidents:read', 'approvals:write', 'audiences:write'], 'approver 2');
  tok.outsider = await h.tokenWith(['incidents:read', 'approvals:write'], 'outsider');

  for (const name of Object.keys(con) as (keyof typeof con)[]) {
    const body = await ok(
      h.api('POST', '/v1/connections', {
        body: { name, type: 'webhook', config: { url: `${sink.url}/${name}` } },
      }),
      201,
    );
    con[name] = body.id;
  }
  tpl.responders = (
    await ok(
      h.api('POST', '/v1/templates', {
        body: { name: 'responders', body: `${RESPONDER_WORDS}: {{incident.title}}.` },
      }),
      201,
    )
  ).id;
  tpl.customers = (
    await ok(
      h.api('POST', '/v1/templates', {
        body: { name: 'customers', body: `${CUSTOMER_WORDS} {{incident.title}}.` },
      }),
      201,
    )
  ).id;

  // Approvers: a Slack user, and API keys holding approvals:write plus audiences:write.
  const approval = (expires_in: string) => ({
    required: true,
    approvers: { slack_user_ids: ['U0APPROVER1'], api_key_scopes: ['audiences:write'] },
    four_eyes: true,
    expires_in,
  });
  await createAudience({
    key: 'responders',
    name: 'Responders',
    visibility: 'internal',
    connection_ids: [con.responders],
    template_ids: [tpl.responders],
  });
  await createAudience({
    key: 'customers',
    name: 'Customers',
    description: 'Status page subscribers and the customer-facing channels.',
    visibility: 'external',
    connection_ids: [con.customers1, con.customers2],
    template_ids: [tpl.customers],
    approval: approval('2h'),
  });
  // The shortest wait an approval may have: the expiry test moves the clock past it.
  await createAudience({
    key: 'press',
    name: 'Press',
    visibility: 'external',
    connection_ids: [con.press],
    template_ids: [tpl.customers],
    approval: approval('5m'),
  });
}, 120_000);

afterAll(async () => {
  await h?.close();
  await sink?.close();
});

// ---------------------------------------------------------------------------------------------

interface DeliveryView {
  id: string;
  connection_id: string;
  status: string;
  audience: string | null;
  possible_duplicate: boolean;
}
interface ApprovalView {
  state: 'pending' | 'approved' | 'rejected' | 'expired';
  requested_by: { type: string; id: string; name: string };
  requested_at: string;
  expires_at: string;
  decided_by: { type: string; id: string; name: string } | null;
  decided_at: string | null;
  reason: string | null;
}
interface AudienceView {
  key: string;
  name: string;
  visibility: string;
  delivery_ids: string[];
  skipped: null | { reason: string; message: string };
  approval: ApprovalView | null;
}
interface ExecutionView {
  id: string;
  status: string;
  deliveries: DeliveryView[];
  audiences?: AudienceView[];
}

async function newIncident(templateIds = [tpl.responders, tpl.customers]): Promise<string> {
  const body = await ok(
    h.api('POST', '/v1/incidents', {
      body: { title: `Checkout errors ${randomUUID().slice(0, 8)}`, severity: 'major', template_ids: templateIds },
    }),
    201,
  );
  return body.id;
}

async function execute(incidentId: string, audiences: string[]): Promise<ExecutionView> {
  return ok(h.api('POST', `/v1/incidents/${incidentId}/execute`, { body: { audiences }, token: tok.requester }), 202);
}

const decide = (
  incidentId: string,
  executionId: string,
  verb: 'approve' | 'reject',
  token: string,
  body: Record<string, unknown> = {},
  headers: Record<string, string> = {},
) => h.api('POST', `/v1/incidents/${incidentId}/executions/${executionId}/${verb}`, { body, token, headers });

const getExecution = async (incidentId: string, executionId: string): Promise<ExecutionView> =>
  ok(h.api('GET', `/v1/incidents/${incidentId}/executions/${executionId}`), 200);

const part = (e: ExecutionView, key: string): AudienceView => {
  const a = e.audiences?.find((x) => x.key === key);
  if (!a) throw new Error(`execution ${e.id} has no audience ${key}: ${JSON.stringify(e.audiences)}`);
  return a;
};
const deliveriesOf = (e: ExecutionView, key: string) => e.deliveries.filter((d) => d.audience === key);

/** How many times the sink received each delivery (webhook-id is the delivery id). */
const sends = (deliveryId: string) => sink.requests.filter((r) => r.headers['webhook-id'] === deliveryId).length;

async function settled(
  incidentId: string,
  executionId: string,
  pred: (e: ExecutionView) => boolean,
  what: string,
): Promise<ExecutionView> {
  return waitFor(
    async () => {
      const e = await getExecution(incidentId, executionId);
      return pred(e) ? e : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 200, what },
  );
}

/**
 * Reads the execution again and checks every listed delivery is in `status`, a final one
 * (`delivered` or `cancelled`): no transition leaves it, so the worker never sends it again and
 * the sink's count can be checked now, without waiting to see whether more arrives.
 */
async function finalAs(incidentId: string, executionId: string, ids: string[], status: 'delivered' | 'cancelled') {
  const e = await getExecution(incidentId, executionId);
  for (const id of ids) expect(e.deliveries.find((d) => d.id === id)?.status, id).toBe(status);
  return e;
}

const eventTypes = async (incidentId: string): Promise<string[]> =>
  ((await ok(h.api('GET', `/v1/incidents/${incidentId}/events?limit=100`), 200)).data as { type: string }[]).map(
    (e) => e.type,
  );

/** Executes to responders + customers and waits until the responders have heard. */
async function heldExecute(incidentId: string): Promise<ExecutionView> {
  const exe = await execute(incidentId, ['responders', 'customers']);
  return settled(
    incidentId,
    exe.id,
    (e) => deliveriesOf(e, 'responders').every((d) => d.status === 'delivered'),
    'the responders delivered',
  );
}

// ---------------------------------------------------------------------------------------------

describe('an execute to responders and customers', () => {
  it('delivers to the responders at once and holds the customers until approved; approval sends exactly once', async () => {
    const inc = await newIncident();
    const exe = await execute(inc, ['responders', 'customers']);

    // The answer: per audience, the customers' part waiting with who asked.
    const resp = part(exe, 'responders');
    const cust = part(exe, 'customers');
    expect(resp.approval).toBeNull();
    expect(resp.visibility).toBe('internal');
    expect(cust.visibility).toBe('external');
    expect(cust.approval).toMatchObject({ state: 'pending', decided_by: null, decided_at: null, reason: null });
    expect(cust.approval!.requested_by).toMatchObject({ type: 'api_key', name: 'requester' });
    // expires_in 2h from the request.
    expect(Date.parse(cust.approval!.expires_at) - Date.parse(cust.approval!.requested_at)).toBe(2 * 3600_000);
    const held = deliveriesOf(exe, 'customers');
    expect(held.map((d) => d.connection_id).sort()).toEqual([con.customers1, con.customers2].sort());
    expect(held.every((d) => d.status === 'pending_approval')).toBe(true);
    expect(cust.delivery_ids.sort()).toEqual(held.map((d) => d.id).sort());
    expect(deliveriesOf(exe, 'responders').map((d) => d.connection_id)).toEqual([con.responders]);

    // The responders hear; the customers do not, and the execution says it waits.
    const waiting = await settled(
      inc,
      exe.id,
      (e) => deliveriesOf(e, 'responders').every((d) => d.status === 'delivered'),
      'the responders delivered',
    );
    expect(waiting.status).toBe('pending_approval');
    expect(deliveriesOf(waiting, 'customers').every((d) => d.status === 'pending_approval')).toBe(true);
    const respDelivery = deliveriesOf(waiting, 'responders')[0]!;
    expect(sends(respDelivery.id)).toBe(1);
    const respBody = JSON.stringify(sink.requests.find((r) => r.headers['webhook-id'] === respDelivery.id)!.body);
    expect(respBody).toContain(RESPONDER_WORDS);
    expect(respBody).not.toContain(CUSTOMER_WORDS);
    for (const d of held) expect(sends(d.id), d.id).toBe(0);

    // Approve, replay the approval (same Idempotency-Key): one decision, the same answer.
    const key = `approve-${randomUUID()}`;
    const first = await decide(
      inc,
      exe.id,
      'approve',
      tok.approver,
      { reason: 'wording checked' },
      {
        'Idempotency-Key': key,
      },
    );
    expect([200, 202], first.text).toContain(first.status);
    const approved = part(first.body as ExecutionView, 'customers').approval!;
    expect(approved).toMatchObject({ state: 'approved', reason: 'wording checked' });
    expect(approved.decided_by).toMatchObject({ type: 'api_key', name: 'approver' });
    expect(approved.decided_at).not.toBeNull();
    const replay = await decide(
      inc,
      exe.id,
      'approve',
      tok.approver,
      { reason: 'wording checked' },
      {
        'Idempotency-Key': key,
      },
    );
    expect(replay.status).toBe(first.status);
    expect(part(replay.body as ExecutionView, 'customers').approval).toEqual(approved);

    const done = await settled(inc, exe.id, (e) => e.status === 'delivered', 'every delivery delivered');
    expect(deliveriesOf(done, 'customers').every((d) => d.status === 'delivered')).toBe(true);
    for (const d of held) {
      expect(sends(d.id), d.id).toBe(1);
      const body = JSON.stringify(sink.requests.find((r) => r.headers['webhook-id'] === d.id)!.body);
      expect(body).toContain(CUSTOMER_WORDS);
      expect(body).not.toContain(RESPONDER_WORDS);
    }
    // A second decision is refused and changes nothing.
    const again = await decide(inc, exe.id, 'approve', tok.approver2);
    expect(again.status, again.text).toBe(409);
    expect(again.body.code).toBe('not_pending');
    expect(again.text).toMatch(/approved/);
    const late = await decide(inc, exe.id, 'reject', tok.approver2, { reason: 'too late' });
    expect(late.status, late.text).toBe(409);
    expect(late.body.code).toBe('not_pending');

    // Nothing more reaches the sink once the decision is done with: every delivery is final.
    const after = await finalAs(
      inc,
      exe.id,
      [...held, respDelivery].map((d) => d.id),
      'delivered',
    );
    for (const d of [...held, respDelivery]) expect(sends(d.id), d.id).toBe(1);
    expect(part(after, 'customers').approval).toEqual(approved);

    const types = await eventTypes(inc);
    expect(types.filter((t) => t === 'execution.approval_requested')).toHaveLength(1);
    expect(types.filter((t) => t === 'execution.approved')).toHaveLength(1);
  });

  it('a rejection delivers nothing to the customers and records who and why', async () => {
    const inc = await newIncident();
    const exe = await heldExecute(inc);
    const held = deliveriesOf(exe, 'customers');

    const r = await decide(inc, exe.id, 'reject', tok.approver, { reason: 'says "breach": not confirmed' });
    expect(r.status, r.text).toBe(200);
    const rejected = part(r.body as ExecutionView, 'customers').approval!;
    expect(rejected).toMatchObject({ state: 'rejected', reason: 'says "breach": not confirmed' });
    expect(rejected.decided_by).toMatchObject({ name: 'approver' });

    const after = await settled(
      inc,
      exe.id,
      (e) => deliveriesOf(e, 'customers').every((d) => d.status === 'cancelled'),
      'the held deliveries cancelled',
    );
    expect(deliveriesOf(after, 'responders').every((d) => d.status === 'delivered')).toBe(true);
    // An approval after the rejection is refused, naming the state.
    const approve = await decide(inc, exe.id, 'approve', tok.approver2);
    expect(approve.status, approve.text).toBe(409);
    expect(approve.body.code).toBe('not_pending');
    expect(approve.text).toMatch(/rejected/);

    // Still cancelled after the refused approval (final: never sent), and nothing was sent.
    await finalAs(
      inc,
      exe.id,
      held.map((d) => d.id),
      'cancelled',
    );
    for (const d of held) expect(sends(d.id), d.id).toBe(0);
    expect(await eventTypes(inc)).toContain('execution.rejected');
  });

  it('an approval that nobody gives expires: nothing is sent, and the timeline says so', async () => {
    const inc = await newIncident();
    const exe = await execute(inc, ['responders', 'press']);
    const pending = part(exe, 'press').approval!;
    expect(pending.state).toBe('pending');
    expect(Date.parse(pending.expires_at) - Date.parse(pending.requested_at)).toBe(5 * 60_000);
    const held = deliveriesOf(exe, 'press');
    expect(held).toHaveLength(1);

    // Six minutes later, by Herald's clock.
    offsetMs += 6 * 60_000;
    const after = await settled(
      inc,
      exe.id,
      (e) => part(e, 'press').approval?.state === 'expired',
      'the approval to expire',
    );
    const expired = part(after, 'press').approval!;
    expect(expired.decided_by?.type ?? 'system').toBe('system');
    expect(deliveriesOf(after, 'press').every((d) => d.status === 'cancelled')).toBe(true);
    const late = await decide(inc, exe.id, 'approve', tok.approver);
    expect(late.status, late.text).toBe(409);
    expect(late.body.code).toBe('not_pending');
    expect(late.text).toMatch(/expired/);

    await settled(inc, exe.id, (e) => deliveriesOf(e, 'responders').every((d) => d.status === 'delivered'), 'resp');
    await finalAs(inc, exe.id, [held[0]!.id], 'cancelled');
    expect(sends(held[0]!.id)).toBe(0);
    expect(await eventTypes(inc)).toContain('execution.approval_expired');
  });

  it('four eyes: the requester may not approve their own send, nor may a key that is no approver', async () => {
    const inc = await newIncident();
    const exe = await heldExecute(inc);

    const own = await decide(inc, exe.id, 'approve', tok.requester);
    expect(own.status, own.text).toBe(403);
    expect(own.body.code).toBe('four_eyes');
    const outsider = await decide(inc, exe.id, 'approve', tok.outsider);
    expect(outsider.status, outsider.text).toBe(403);
    expect(outsider.body.code).toBe('not_an_approver');
    // A key without approvals:write is stopped at the door.
    const reader = await h.tokenWith(['incidents:read', 'audiences:write'], 'no approvals');
    const noScope = await decide(inc, exe.id, 'approve', reader);
    expect(noScope.status, noScope.text).toBe(403);

    // Nothing changed: still pending, nothing sent.
    const still = await getExecution(inc, exe.id);
    expect(part(still, 'customers').approval!.state).toBe('pending');
    for (const d of deliveriesOf(still, 'customers')) {
      expect(d.status).toBe('pending_approval');
      expect(sends(d.id)).toBe(0);
    }
    // Another approver may: the same send then goes.
    const r = await decide(inc, exe.id, 'approve', tok.approver);
    expect([200, 202], r.text).toContain(r.status);
    await settled(inc, exe.id, (e) => e.status === 'delivered', 'delivered after a second pair of eyes');
  });

  it('two approvals at the same moment make one decision and one send', async () => {
    const inc = await newIncident();
    const exe = await heldExecute(inc);
    const held = deliveriesOf(exe, 'customers');

    const both = await Promise.all([
      decide(inc, exe.id, 'approve', tok.approver, { reason: 'first' }),
      decide(inc, exe.id, 'approve', tok.approver2, { reason: 'second' }),
    ]);
    const won = both.filter((r) => r.status === 200 || r.status === 202);
    const lost = both.filter((r) => r.status === 409);
    expect(won, both.map((r) => r.text).join('\n')).toHaveLength(1);
    expect(lost).toHaveLength(1);
    expect(lost[0]!.body.code).toBe('not_pending');

    const done = await settled(inc, exe.id, (e) => e.status === 'delivered', 'delivered once approved');
    expect(part(done, 'customers').approval!.reason).toBe(
      part(won[0]!.body as ExecutionView, 'customers').approval!.reason,
    );
    // Delivered is final: the losing approval can make no second send.
    await finalAs(
      inc,
      exe.id,
      held.map((d) => d.id),
      'delivered',
    );
    for (const d of held) expect(sends(d.id), d.id).toBe(1);
    expect((await eventTypes(inc)).filter((t) => t === 'execution.approved')).toHaveLength(1);
  });

  it('an approve racing a reject: one decision, and the sink agrees with it', async () => {
    const inc = await newIncident();
    const exe = await heldExecute(inc);
    const held = deliveriesOf(exe, 'customers');
    const [a, r] = await Promise.all([
      decide(inc, exe.id, 'approve', tok.approver),
      decide(inc, exe.id, 'reject', tok.approver2, { reason: 'no' }),
    ]);
    expect(
      [a.status, r.status].filter((s) => s === 409),
      `${a.text}\n${r.text}`,
    ).toHaveLength(1);
    const approvedWon = a.status !== 409;
    const done = await settled(
      inc,
      exe.id,
      (e) => deliveriesOf(e, 'customers').every((d) => d.status === (approvedWon ? 'delivered' : 'cancelled')),
      'the decision carried out',
    );
    expect(part(done, 'customers').approval!.state).toBe(approvedWon ? 'approved' : 'rejected');
    // Either outcome is final: nothing more can be sent for these.
    await finalAs(
      inc,
      exe.id,
      held.map((d) => d.id),
      approvedWon ? 'delivered' : 'cancelled',
    );
    for (const d of held) expect(sends(d.id), d.id).toBe(approvedWon ? 1 : 0);
  });
});

describe('corrections and retractions of an external send', () => {
  async function approvedAndDelivered(): Promise<{ inc: string; exe: ExecutionView }> {
    const inc = await newIncident();
    const exe = await heldExecute(inc);
    const r = await decide(inc, exe.id, 'approve', tok.approver);
    expect([200, 202], r.text).toContain(r.status);
    return { inc, exe: await settled(inc, exe.id, (e) => e.status === 'delivered', 'the approved send delivered') };
  }

  it('a correction of an approved external send waits for approval again', async () => {
    const { inc, exe } = await approvedAndDelivered();
    const corr = await ok(
      h.api('POST', `/v1/incidents/${inc}/executions/${exe.id}/correct`, {
        body: { note: 'The ETA is 15:00 UTC, not 14:00.' },
        token: tok.requester,
      }),
      202,
    );
    const c = corr as ExecutionView;
    expect(part(c, 'customers').approval).toMatchObject({ state: 'pending' });
    const held = deliveriesOf(c, 'customers');
    expect(held).toHaveLength(2);
    expect(held.every((d) => d.status === 'pending_approval')).toBe(true);

    // The responders' correction goes at once; the customers' waits.
    const waiting = await settled(
      inc,
      c.id,
      (e) => deliveriesOf(e, 'responders').every((d) => d.status === 'delivered'),
      "the responders' correction delivered",
    );
    expect(waiting.status).toBe('pending_approval');
    for (const d of held) expect(sends(d.id), d.id).toBe(0);

    // Four eyes hold for the correction too; then an approver lets it go, once.
    expect((await decide(inc, c.id, 'approve', tok.requester)).body.code).toBe('four_eyes');
    const r = await decide(inc, c.id, 'approve', tok.approver);
    expect([200, 202], r.text).toContain(r.status);
    await settled(inc, c.id, (e) => e.status === 'delivered', 'the correction delivered');
    for (const d of held) {
      expect(sends(d.id), d.id).toBe(1);
      expect(JSON.stringify(sink.requests.find((x) => x.headers['webhook-id'] === d.id)!.body)).toContain(
        'The ETA is 15:00 UTC',
      );
    }
    expect((await eventTypes(inc)).filter((t) => t === 'execution.approval_requested')).toHaveLength(2);
  });

  it('a retraction of an approved external send goes out at once, recorded with who did it', async () => {
    const { inc, exe } = await approvedAndDelivered();
    const ret = (await ok(
      h.api('POST', `/v1/incidents/${inc}/executions/${exe.id}/retract`, {
        body: { reason: 'Posted to the wrong audience' },
        token: tok.requester,
      }),
      202,
    )) as ExecutionView;
    expect(ret.deliveries.some((d) => d.status === 'pending_approval')).toBe(false);
    expect((ret.audiences ?? []).every((a) => a.approval === null || a.approval.state !== 'pending')).toBe(true);
    const done = await settled(inc, ret.id, (e) => e.status === 'delivered', 'the retraction delivered');
    expect(done.deliveries).toHaveLength(3);
    for (const d of done.deliveries) expect(sends(d.id), d.id).toBe(1);
    const events = (await ok(h.api('GET', `/v1/incidents/${inc}/events?limit=100`), 200)).data as {
      type: string;
      actor: { name: string };
    }[];
    expect(events.find((e) => e.type === 'execution.retracted')?.actor).toMatchObject({ name: 'requester' });
  });

  it('a retraction of a send still waiting for approval withdraws the waiting part', async () => {
    const inc = await newIncident();
    const exe = await heldExecute(inc);
    const held = deliveriesOf(exe, 'customers');
    const ret = (await ok(
      h.api('POST', `/v1/incidents/${inc}/executions/${exe.id}/retract`, {
        body: { reason: 'Wrong incident' },
        token: tok.requester,
      }),
      202,
    )) as ExecutionView;
    // Only what was delivered is retracted: the responders' message.
    expect(ret.deliveries.map((d) => d.connection_id)).toEqual([con.responders]);
    await settled(inc, ret.id, (e) => e.status === 'delivered', 'the retraction delivered');

    const withdrawn = await settled(
      inc,
      exe.id,
      (e) => deliveriesOf(e, 'customers').every((d) => d.status === 'cancelled'),
      'the held part withdrawn',
    );
    const approval = part(withdrawn, 'customers').approval!;
    expect(approval.state).toBe('rejected');
    expect(approval.reason).toMatch(/retract/i);
    expect(approval.decided_by).toMatchObject({ name: 'requester' });
    const late = await decide(inc, exe.id, 'approve', tok.approver);
    expect(late.status, late.text).toBe(409);
    await finalAs(
      inc,
      exe.id,
      held.map((d) => d.id),
      'cancelled',
    );
    for (const d of held) expect(sends(d.id), d.id).toBe(0);
  });
});

describe('what an execute to audiences answers', () => {
  it('a dry run shows per audience what each connection would get, and queues nothing', async () => {
    const inc = await newIncident();
    const r = await ok(
      h.api('POST', `/v1/incidents/${inc}/execute?dry_run=true`, {
        body: { audiences: ['responders', 'customers'] },
        token: tok.requester,
      }),
      200,
    );
    expect(r.dry_run).toBe(true);
    const per = r.audiences as { key: string; deliveries: { connection_id: string; body: string }[] }[];
    expect(per.map((a) => a.key)).toEqual(['responders', 'customers']);
    const resp = per[0]!;
    const cust = per[1]!;
    expect(resp.deliveries.map((d) => d.connection_id)).toEqual([con.responders]);
    expect(resp.deliveries[0]!.body).toContain(RESPONDER_WORDS);
    expect(cust.deliveries.map((d) => d.connection_id).sort()).toEqual([con.customers1, con.customers2].sort());
    for (const d of cust.deliveries) expect(d.body).toContain(CUSTOMER_WORDS);
    expect(JSON.stringify(cust)).toMatch(/approval/);
    expect((await ok(h.api('GET', `/v1/incidents/${inc}/executions`), 200)).data).toEqual([]);
  });

  it('an audience that gets nothing is reported, not silently dropped', async () => {
    // Only the responders' template is attached: the customers' intersection is empty.
    const inc = await newIncident([tpl.responders]);
    const exe = await execute(inc, ['responders', 'customers']);
    const cust = part(exe, 'customers');
    expect(cust.skipped).toMatchObject({ reason: 'no_templates' });
    expect(cust.delivery_ids).toEqual([]);
    expect(cust.approval).toBeNull();
    expect(deliveriesOf(exe, 'customers')).toEqual([]);
    await settled(inc, exe.id, (e) => e.status === 'delivered', 'the responders delivered');

    // Nobody at all: 422 no_connections, saying why.
    const none = await h.api('POST', `/v1/incidents/${inc}/execute`, {
      body: { audiences: ['customers'] },
      token: tok.requester,
    });
    expect(none.status, none.text).toBe(422);
    expect(none.body.code).toBe('no_connections');
    expect(none.text).toMatch(/customers|Customers/);
  });

  it('bad input: unknown keys, audiences with connection_ids', async () => {
    const inc = await newIncident();
    const unknown = await h.api('POST', `/v1/incidents/${inc}/execute`, {
      body: { audiences: ['responders', 'nope', 'also-nope'] },
      token: tok.requester,
    });
    expect(unknown.status, unknown.text).toBe(422);
    expect(unknown.body.code).toBe('unknown_audience');
    const fields = (unknown.body.errors as { field: string }[]).map((e) => e.field);
    expect(fields).toEqual(expect.arrayContaining(['audiences.1', 'audiences.2']));
    expect(fields).not.toContain('audiences.0');
    expect(unknown.text).toContain('also-nope');

    const both = await h.api('POST', `/v1/incidents/${inc}/execute`, {
      body: { audiences: ['responders'], connection_ids: [con.responders] },
      token: tok.requester,
    });
    expect(both.status, both.text).toBe(422);
    expect(both.body.code).toBe('audiences_and_connection_ids');
    // Nothing was executed by either.
    expect((await ok(h.api('GET', `/v1/incidents/${inc}/executions`), 200)).data).toEqual([]);
  });

  it('bad input: approvers that are not Slack user ids, approval with no approvers', async () => {
    const bad = await h.api('POST', '/v1/audiences', {
      body: {
        key: `bad-${randomUUID().slice(0, 8)}`,
        name: 'Bad',
        visibility: 'external',
        connection_ids: [con.customers1],
        approval: { required: true, approvers: { slack_user_ids: ['U0GOOD1', 'alice@example.com'] } },
      },
    });
    expect(bad.status, bad.text).toBe(422);
    expect(bad.body.code).toBe('invalid_approver');
    expect((bad.body.errors as { field: string }[]).map((e) => e.field)).toContain(
      'approval.approvers.slack_user_ids.1',
    );

    const nobody = await h.api('POST', '/v1/audiences', {
      body: {
        key: `nobody-${randomUUID().slice(0, 8)}`,
        name: 'Nobody',
        visibility: 'external',
        connection_ids: [con.customers1],
        approval: { required: true, approvers: { slack_user_ids: [] } },
      },
    });
    expect(nobody.status, nobody.text).toBe(422);
    expect(nobody.body.code).toBe('no_approvers');

    // The same rules on PATCH; the audience is unchanged.
    const patched = await h.api('PATCH', `/v1/audiences/${aud.customers!.id}`, {
      body: { approval: { required: true, approvers: { slack_user_ids: ['not-a-user'] } } },
      headers: { 'If-Match': aud.customers!.etag },
    });
    expect(patched.status, patched.text).toBe(422);
    expect(patched.body.code).toBe('invalid_approver');
    const still = await ok(h.api('GET', `/v1/audiences/${aud.customers!.id}`), 200);
    expect(still.approval.approvers.slack_user_ids).toEqual(['U0APPROVER1']);
  });

  it('deleting an audience that a pending approval uses is refused, naming the execution', async () => {
    const key = `legal-${randomUUID().slice(0, 8)}`;
    await createAudience({
      key,
      name: 'Legal',
      visibility: 'external',
      connection_ids: [con.press],
      template_ids: [tpl.customers],
      approval: { required: true, approvers: { slack_user_ids: ['U0APPROVER1'], api_key_scopes: ['audiences:write'] } },
    });
    const inc = await newIncident();
    const exe = await execute(inc, [key]);
    expect(part(exe, key).approval!.state).toBe('pending');

    const del = await h.api('DELETE', `/v1/audiences/${aud[key]!.id}`, { headers: { 'If-Match': aud[key]!.etag } });
    expect(del.status, del.text).toBe(409);
    expect(del.body.code).toBe('audience_in_use');
    expect(del.text).toContain(exe.id);
    await ok(h.api('GET', `/v1/audiences/${aud[key]!.id}`), 200);

    // Once decided, the audience may go.
    await ok(decide(inc, exe.id, 'reject', tok.approver, { reason: 'not needed' }), 200);
    const gone = await h.api('DELETE', `/v1/audiences/${aud[key]!.id}`, { headers: { 'If-Match': aud[key]!.etag } });
    expect(gone.status, gone.text).toBe(204);
  });

  it('the timeline has every approval event', async () => {
    const inc = await newIncident();
    const exe = await execute(inc, ['customers', 'press']);
    const r = await decide(inc, exe.id, 'approve', tok.approver, { audiences: ['customers'] });
    expect([200, 202], r.text).toContain(r.status);
    expect(part(r.body as ExecutionView, 'press').approval!.state).toBe('pending');
    offsetMs += 6 * 60_000;
    await settled(inc, exe.id, (e) => part(e, 'press').approval?.state === 'expired', 'press expired');
    const exe2 = await execute(inc, ['customers']);
    await ok(decide(inc, exe2.id, 'reject', tok.approver, { reason: 'no' }), 200);
    const types = await eventTypes(inc);
    for (const t of [
      'execution.approval_requested',
      'execution.approved',
      'execution.rejected',
      'execution.approval_expired',
    ])
      expect(types, t).toContain(t);
  });
});
