import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/domain/common/clock.js';
import { startHerald, type ApiResponse, type TestHerald } from '../support/herald.js';
import { startHttpSink, type HttpSink } from '../support/peers/http-sink.js';
import { startSlack, type SlackPeer } from '../support/peers/slack.js';
import {
  announcementUpdate,
  newTriggerId,
  newViewId,
  openedView,
  slackClient,
  stateOf,
  TEAM,
  textOfBlocks,
  type SlackClient,
  type SlackUser,
} from '../support/slack-client.js';
import { waitFor } from '../support/wait.js';

/**
 * Approval in Slack, end to end through a real Herald (API, worker, Slack app) and the Slack fake:
 * the execute modal picks audiences and previews each one's words; the approvers get a DM with the
 * exact text and Approve / Reject; a non-approver, the requester (four eyes) and a late second
 * approver are refused politely and nothing changes; Approve delivers exactly once and updates
 * every DM; Reject takes a reason; an approval nobody decides expires and says so. Deliveries go
 * to a local HTTP sink, one path per connection, where every send is counted.
 */
const SECRET = 'slack-signing-secret-for-approvals';
const ALICE: SlackUser = { id: 'UALICE', name: 'alice' };
const BOB: SlackUser = { id: 'UBOB', name: 'bob' };
const CAROL: SlackUser = { id: 'UCAROL', name: 'carol' };
const MALLORY: SlackUser = { id: 'UMALLORY', name: 'mallory' };
const CHANNEL = 'CINCIDENTS';

const RESPONDER_WORDS = 'Page the payments on-call';
const CUSTOMER_WORDS = 'We are looking into';

/**
 * Time moves only when a test says so (the shortest approval lasts five minutes). Herald checks
 * Slack's signatures against this clock too, so the expiry test, which moves it, runs last.
 */
let offsetMs = 0;
const clock: Clock = { now: () => new Date(Date.now() + offsetMs) };

let h: TestHerald;
let slack: SlackPeer;
let sink: HttpSink;
let client: SlackClient;
const con = { responders: '', customers1: '', customers2: '', press: '' };
let templateIds: string[] = [];

async function ok(r: Promise<ApiResponse>, status: number): Promise<any> {
  const res = await r;
  expect(res.status, `${res.status} ${res.text}`).toBe(status);
  return res.body;
}

/** Sends counted at the sink for a connection. */
const sent = (name: keyof typeof con): number => sink.requests.filter((r) => r.path === `/${name}`).length;

beforeAll(async () => {
  slack = await startSlack();
  sink = await startHttpSink({ respond: () => ({ status: 200 }) });
  h = await startHerald(
    {
      SLACK_SIGNING_SECRET: SECRET,
      SLACK_BOT_TOKEN: 'xoxb-test',
      SLACK_API_URL: slack.apiUrl,
      HERALD_SLACK_CHANNEL: CHANNEL,
      HERALD_RATE_LIMIT: '100000',
      HERALD_EXECUTE_RATE_LIMIT: '100000',
    },
    { clock },
  );
  client = slackClient(h.url, SECRET, ALICE);
  for (const name of Object.keys(con) as (keyof typeof con)[]) {
    con[name] = (
      await ok(
        h.api('POST', '/v1/connections', { body: { name, type: 'webhook', config: { url: `${sink.url}/${name}` } } }),
        201,
      )
    ).id;
  }
  const responders = await ok(
    h.api('POST', '/v1/templates', { body: { name: 'Responders', body: `${RESPONDER_WORDS}: {{incident.title}}.` } }),
    201,
  );
  const customers = await ok(
    h.api('POST', '/v1/templates', {
      body: { name: 'Customers', subject: 'Payments', body: `${CUSTOMER_WORDS} {{incident.title}}.` },
    }),
    201,
  );
  templateIds = [responders.id, customers.id];
  const approval = (expires_in: string) => ({
    required: true,
    approvers: { slack_user_ids: [BOB.id, CAROL.id] },
    four_eyes: true,
    expires_in,
  });
  const audiences = [
    {
      key: 'responders',
      name: 'Responders',
      visibility: 'internal',
      connection_ids: [con.responders],
      template_ids: [responders.id],
    },
    {
      key: 'customers',
      name: 'Customers',
      visibility: 'external',
      connection_ids: [con.customers1, con.customers2],
      template_ids: [customers.id],
      approval: approval('2h'),
    },
    {
      key: 'press',
      name: 'Press',
      visibility: 'external',
      connection_ids: [con.press],
      template_ids: [customers.id],
      approval: approval('5m'),
    },
  ];
  for (const body of audiences) await ok(h.api('POST', '/v1/audiences', { body }), 201);
}, 120_000);

afterAll(async () => {
  await h?.herald.slack?.stop();
  await h?.close();
  await slack?.close();
  await sink?.close();
});

/** An incident with both templates, announced in CHANNEL; its announcement's ts. */
async function announcedIncident(title: string): Promise<{ id: string; ts: string }> {
  const incident = await ok(
    h.api('POST', '/v1/incidents', { body: { title, severity: 'major', template_ids: templateIds } }),
    201,
  );
  const post = await waitFor(
    () =>
      slack
        .callsTo('chat.postMessage')
        .find((c) => c.args.channel === CHANNEL && JSON.stringify(c.args.blocks ?? []).includes(incident.id)),
    { what: 'the announcement', timeoutMs: 20_000 },
  );
  const ts = slack
    .messagesIn(CHANNEL)
    .find((m) => m.thread_ts === null && JSON.stringify(m.blocks).includes(incident.id))!.ts;
  expect(post).toBeTruthy();
  return { id: incident.id, ts };
}

/** An execute over the API (an API key is the requester), answered 202. */
async function executeOverApi(incidentId: string, audiences: string[]): Promise<any> {
  return ok(h.api('POST', `/v1/incidents/${incidentId}/execute`, { body: { audiences } }), 202);
}

/** The DM Herald posted to `user` about `executionId`, once it is there. */
async function dmOf(
  user: SlackUser,
  executionId: string,
): Promise<{ ts: string; text: () => string; blocks: () => any[] }> {
  const channel = `D${user.id}`;
  const m = await waitFor(() => slack.messagesIn(channel).find((x) => JSON.stringify(x.blocks).includes(executionId)), {
    what: `the approval DM to ${user.id} about ${executionId}`,
    timeoutMs: 20_000,
  });
  return { ts: m.ts, text: () => textOfBlocks(m.blocks as any[]), blocks: () => m.blocks as any[] };
}

const buttonsOf = (blocks: any[]) => blocks.filter((b) => b.type === 'actions').flatMap((b) => b.elements);

/** The replies in the announcement's thread. */
const threadText = (ts: string) => slack.threadOf(CHANNEL, ts).map((m) => m.text);

async function approvalOf(incidentId: string, executionId: string, key: string): Promise<any> {
  const e = await ok(h.api('GET', `/v1/incidents/${incidentId}/executions/${executionId}`), 200);
  return e.audiences.find((a: any) => a.key === key).approval;
}

/**
 * Proof that nothing more is sent for an incident's approvals, without waiting to see: every
 * delivery of its executions is final (`delivered`/`cancelled`: the worker never sends one again)
 * or still held (`pending_approval`), and an ordinary execute to the responders made after them
 * (a fence through the same worker) has reached the sink, so a held one that was going to be sent
 * would have been by now (and would no longer be `pending_approval`). Answers the executions.
 */
async function quiet(incidentId: string): Promise<any[]> {
  const fence = await executeOverApi(incidentId, ['responders']);
  await waitFor(
    async () => {
      const e = await ok(h.api('GET', `/v1/incidents/${incidentId}/executions/${fence.id}`), 200);
      return e.status === 'delivered';
    },
    { what: 'the fence delivered', timeoutMs: 20_000 },
  );
  const executions = (await ok(h.api('GET', `/v1/incidents/${incidentId}/executions`), 200)).data.filter(
    (e: any) => e.id !== fence.id,
  );
  const full = await Promise.all(
    executions.map((e: any) => ok(h.api('GET', `/v1/incidents/${incidentId}/executions/${e.id}`), 200)),
  );
  for (const e of full)
    for (const d of e.deliveries)
      expect(['delivered', 'cancelled', 'pending_approval'], `${e.id} ${d.id}`).toContain(d.status);
  return full;
}

/** The ephemeral answers Herald gave `user`. */
const ephemeralsTo = (user: SlackUser) =>
  slack
    .callsTo('chat.postEphemeral')
    .filter((c) => c.args.user === user.id)
    .map((c) => String(c.args.text));

/** Checks (or unchecks) audiences in an open execute modal, as Slack sends a checkbox change. */
function pickAudiences(view: any, keys: string[], user: SlackUser = ALICE) {
  const block = view.blocks.find((b: any) => b.block_id === 'audiences');
  const selected = block.element.options.filter((o: any) => keys.includes(o.value));
  const payload = {
    type: 'block_actions',
    team: TEAM,
    user: { id: user.id, username: user.name, name: user.name, team_id: TEAM.id },
    api_app_id: 'A0HERALD',
    token: 'legacy-verification-token',
    trigger_id: newTriggerId(),
    container: { type: 'view', view_id: view.id },
    view: { ...view, team_id: TEAM.id, hash: 'h1', state: { values: stateOf(view, { audiences: keys }) } },
    actions: [
      {
        type: block.element.type,
        action_id: block.element.action_id,
        block_id: 'audiences',
        selected_options: selected,
        action_ts: `${Date.now() / 1000}`,
      },
    ],
  };
  return client.post(new URLSearchParams({ payload: JSON.stringify(payload) }).toString());
}

describe('the execute modal with audiences', () => {
  it('picks the internal audiences by default, previews each picked audience, and holds the one needing approval', async () => {
    const incident = await announcedIncident('Checkout errors');
    const before = slack.callsTo('views.open').length;
    await client.click('incident_execute', incident.id, { channel: CHANNEL });
    const modal = await openedView(slack, before);
    const picker = modal.blocks.find((b: any) => b.block_id === 'audiences');
    expect(picker.element.options.map((o: any) => [o.value, o.description.text])).toEqual([
      ['customers', 'external · needs approval first'],
      ['press', 'external · needs approval first'],
      ['responders', 'internal · sent at once'],
    ]);
    expect(picker.element.initial_options.map((o: any) => o.value)).toEqual(['responders']);
    let text = textOfBlocks(modal.blocks);
    expect(text).toContain(`${RESPONDER_WORDS}: Checkout errors.`);
    expect(text).not.toContain(CUSTOMER_WORDS);

    // Adding customers redraws the preview with their own words and says they wait.
    const updates = slack.callsTo('views.update').length;
    expect((await pickAudiences(modal, ['responders', 'customers'])).status).toBe(200);
    const redrawn = await waitFor(
      () =>
        slack
          .callsTo('views.update')
          .slice(updates)
          .find((c) => c.args.view_id === modal.id),
      { what: 'the redrawn execute modal' },
    );
    const view = { ...(redrawn.args.view as any), id: modal.id };
    text = textOfBlocks(view.blocks);
    expect(text).toContain('*Customers* (external) · :raised_hand: waits for approval · 2 deliveries');
    expect(text).toContain(`Payments\n\n${CUSTOMER_WORDS} Checkout errors.`);
    expect(text).toContain(`${RESPONDER_WORDS}: Checkout errors.`);

    // Send: responders hear at once; customers wait, and the confirmation says so.
    const outcomes = slack.callsTo('views.update').length;
    const r = await client.submit(view, { audiences: ['responders', 'customers'] }, { viewId: newViewId() });
    expect(r.status).toBe(200);
    const outcome = await waitFor(
      () =>
        slack
          .callsTo('views.update')
          .slice(outcomes)
          .find((c) => JSON.stringify(c.args.view).includes('Waiting for approval')),
      { what: 'the execute outcome', timeoutMs: 20_000 },
    );
    expect(textOfBlocks((outcome.args.view as any).blocks)).toContain('Waiting for approval: *Customers* (2 messages)');
    await waitFor(() => sent('responders') === 1, { what: 'the responders delivery', timeoutMs: 20_000 });
    const executions = (await ok(h.api('GET', `/v1/incidents/${incident.id}/executions`), 200)).data;
    const execution = executions[0];
    expect((await approvalOf(incident.id, execution.id, 'customers')).state).toBe('pending');
    expect((await approvalOf(incident.id, execution.id, 'customers')).requested_by).toMatchObject({
      type: 'slack_user',
      id: ALICE.id,
    });
    expect(sent('customers1') + sent('customers2')).toBe(0);
  });
});

describe('approving in Slack', () => {
  it('DMs every approver the exact words; refuses a non-approver; delivers once on Approve and updates every DM', async () => {
    const incident = await announcedIncident('Payments slow');
    const execution = await executeOverApi(incident.id, ['customers']);
    const bobDm = await dmOf(BOB, execution.id);
    const carolDm = await dmOf(CAROL, execution.id);
    expect(bobDm.text()).toContain('Approval needed');
    expect(bobDm.text()).toContain('*Customers* (external)');
    expect(bobDm.text()).toContain(`Payments\n\n${CUSTOMER_WORDS} Payments slow.`);
    expect(bobDm.text()).toContain('customers1');
    expect(bobDm.text()).toContain('customers2');
    await announcementUpdate(slack, incident.id, (t) =>
      t.includes(':raised_hand: waiting for approval — *customers1* (webhook)'),
    );
    const [approve] = buttonsOf(bobDm.blocks());
    expect(approve.action_id).toBe('approval_approve');
    expect(buttonsOf(carolDm.blocks()).map((b: any) => b.action_id)).toEqual(['approval_approve', 'approval_reject']);
    await waitFor(
      () => threadText(incident.ts).some((t) => t.includes('Waiting for approval to send to *Customers* (2 messages)')),
      {
        what: 'the pending line in the thread',
      },
    );

    // Someone who is no approver: refused, politely and alone; nothing changes.
    const dmUpdates = slack.callsTo('chat.update').filter((c) => String(c.args.channel).startsWith('D')).length;
    await client.click('approval_approve', approve.value, { user: MALLORY, channel: `D${MALLORY.id}` });
    await waitFor(() => ephemeralsTo(MALLORY).some((t) => t.includes("Only this audience's approvers")), {
      what: 'the refusal to a non-approver',
    });
    expect((await approvalOf(incident.id, execution.id, 'customers')).state).toBe('pending');
    expect(slack.callsTo('chat.update').filter((c) => String(c.args.channel).startsWith('D')).length).toBe(dmUpdates);

    // Bob approves: both customer connections get it, once.
    await client.click('approval_approve', approve.value, { user: BOB, channel: `D${BOB.id}` });
    await waitFor(() => sent('customers1') === 1 && sent('customers2') === 1, {
      what: 'the approved deliveries',
      timeoutMs: 20_000,
    });
    const approval = await approvalOf(incident.id, execution.id, 'customers');
    expect(approval).toMatchObject({ state: 'approved', decided_by: { type: 'slack_user', id: BOB.id } });
    for (const user of [BOB, CAROL]) {
      await waitFor(
        () => {
          const m = slack.messageAt(`D${user.id}`, user === BOB ? bobDm.ts : carolDm.ts)!;
          const text = textOfBlocks(m.blocks as any[]);
          return m.edited && text.includes('*Approved* by <@UBOB>') && buttonsOf(m.blocks as any[]).length === 0;
        },
        { what: `${user.id}'s DM to say Bob approved` },
      );
    }
    await waitFor(
      () => threadText(incident.ts).some((t) => t.startsWith(':white_check_mark: Approved by <@UBOB> — sending')),
      {
        what: 'the approved line in the thread',
      },
    );

    // Carol presses too, late: told who decided; still one send each.
    await client.click('approval_approve', approve.value, { user: CAROL, channel: `D${CAROL.id}` });
    await waitFor(() => ephemeralsTo(CAROL).some((t) => t.includes('Nothing changed')), {
      what: 'the late approver told',
    });
    expect(ephemeralsTo(CAROL).join('\n')).toMatch(/bob/i);
    const [only] = await quiet(incident.id);
    expect(only.id).toBe(execution.id);
    expect(only.deliveries.map((d: any) => d.status)).toEqual(['delivered', 'delivered']);
    expect([sent('customers1'), sent('customers2')]).toEqual([1, 1]);
    // No DM was posted twice.
    expect(slack.messagesIn(`D${BOB.id}`).filter((m) => JSON.stringify(m.blocks).includes(execution.id))).toHaveLength(
      1,
    );
  });

  it('two approvers pressing at once: one decision, one send each, the other told who decided', async () => {
    const incident = await announcedIncident('Both at once');
    const before = { c1: sent('customers1'), c2: sent('customers2') };
    const execution = await executeOverApi(incident.id, ['customers']);
    const [approve] = buttonsOf((await dmOf(BOB, execution.id)).blocks());
    await dmOf(CAROL, execution.id);
    const told = { [BOB.id]: ephemeralsTo(BOB).length, [CAROL.id]: ephemeralsTo(CAROL).length };
    await Promise.all([
      client.click('approval_approve', approve.value, { user: BOB, channel: `D${BOB.id}` }),
      client.click('approval_approve', approve.value, { user: CAROL, channel: `D${CAROL.id}` }),
    ]);
    const approval = await waitFor(
      async () => {
        const a = await approvalOf(incident.id, execution.id, 'customers');
        return a.state === 'approved' && a;
      },
      { what: 'the approval', timeoutMs: 20_000 },
    );
    const loser = approval.decided_by.id === BOB.id ? CAROL : BOB;
    await waitFor(() => ephemeralsTo(loser).length > told[loser.id]!, { what: 'the other approver told' });
    expect(ephemeralsTo(loser).at(-1)).toContain('Nothing changed');
    await waitFor(() => sent('customers1') === before.c1 + 1 && sent('customers2') === before.c2 + 1, {
      what: 'one send per connection',
      timeoutMs: 20_000,
    });
    const [only] = await quiet(incident.id);
    expect(only.id).toBe(execution.id);
    expect(only.deliveries.map((d: any) => d.status)).toEqual(['delivered', 'delivered']);
    expect([sent('customers1'), sent('customers2')]).toEqual([before.c1 + 1, before.c2 + 1]);
    const events = (await ok(h.api('GET', `/v1/incidents/${incident.id}/events`), 200)).data;
    expect(events.filter((e: any) => e.type === 'execution.approved')).toHaveLength(1);
  });

  it('refuses the requester’s own approval when four eyes are on', async () => {
    const incident = await announcedIncident('Four eyes');
    // Bob executes from Slack and then tries to approve his own send.
    const bob = slackClient(h.url, SECRET, BOB);
    const before = slack.callsTo('views.open').length;
    await bob.click('incident_execute', incident.id, { channel: CHANNEL, user: BOB });
    const modal = await openedView(slack, before);
    const r = await bob.submit(modal, { audiences: ['customers'] }, { viewId: newViewId(), user: BOB });
    expect(r.status).toBe(200);
    const execution = await waitFor(
      async () => (await ok(h.api('GET', `/v1/incidents/${incident.id}/executions`), 200)).data[0],
      { what: 'the execution', timeoutMs: 20_000 },
    );
    const dm = await dmOf(BOB, execution.id);
    const [approve] = buttonsOf(dm.blocks());
    await bob.click('approval_approve', approve.value, { user: BOB, channel: `D${BOB.id}` });
    await waitFor(() => ephemeralsTo(BOB).some((t) => t.includes('needs a second person')), {
      what: 'the four-eyes refusal',
    });
    expect((await approvalOf(incident.id, execution.id, 'customers')).state).toBe('pending');
  });
});

describe('corrections and retractions', () => {
  /** Opens the Correct or Retract modal of an execution from the announcement's button. */
  async function openCorrection(step: 'correct' | 'retract', incidentId: string, executionId: string): Promise<any> {
    const before = slack.callsTo('views.open').length;
    const value = JSON.stringify({ incident_id: incidentId, execution_id: executionId });
    await client.click(`execution_${step}`, value, { channel: CHANNEL });
    return openedView(slack, before);
  }

  it('a correction of an approved external send waits for approval again, with a new DM', async () => {
    const incident = await announcedIncident('Correct me');
    const execution = await executeOverApi(incident.id, ['customers']);
    const [approve] = buttonsOf((await dmOf(BOB, execution.id)).blocks());
    await client.click('approval_approve', approve.value, { user: BOB, channel: `D${BOB.id}` });
    await waitFor(
      async () => {
        const e = await ok(h.api('GET', `/v1/incidents/${incident.id}/executions/${execution.id}`), 200);
        return e.deliveries.every((d: any) => d.status === 'delivered');
      },
      { what: 'the approved send delivered', timeoutMs: 20_000 },
    );
    const sentBefore = sent('customers1') + sent('customers2');
    const modal = await openCorrection('correct', incident.id, execution.id);
    const updates = slack.callsTo('views.update').length;
    const r = await client.submit(modal, { note: 'The ETA was wrong' }, { viewId: newViewId() });
    expect(r.status).toBe(200);
    const outcome = r.json?.view ?? (await waitFor(() => slack.callsTo('views.update').slice(updates)[0]))?.args.view;
    expect(textOfBlocks(outcome.blocks)).toContain('Waiting for approval: *Customers* (2 messages)');
    const executions = (await ok(h.api('GET', `/v1/incidents/${incident.id}/executions`), 200)).data;
    const correction = executions.find((e: any) => e.kind === 'correction');
    expect((await approvalOf(incident.id, correction.id, 'customers')).state).toBe('pending');
    const dm = await dmOf(CAROL, correction.id);
    expect(dm.text()).toContain('Send a correction to *Customers* (external)');
    // Held: once a later execute has gone through, the correction's part is still waiting, unsent.
    const now = await quiet(incident.id);
    const held = now.find((e) => e.id === correction.id).deliveries.filter((d: any) => d.audience === 'customers');
    expect(held.map((d: any) => d.status)).toEqual(['pending_approval', 'pending_approval']);
    expect(sent('customers1') + sent('customers2')).toBe(sentBefore);
  });

  it('a retraction goes out at once and withdraws the part still waiting; the DMs say so', async () => {
    const incident = await announcedIncident('Take it back');
    const respondersBefore = sent('responders');
    const execution = await executeOverApi(incident.id, ['responders', 'customers']);
    const dm = await dmOf(BOB, execution.id);
    await waitFor(
      async () => {
        const e = await ok(h.api('GET', `/v1/incidents/${incident.id}/executions/${execution.id}`), 200);
        return e.deliveries.some((d: any) => d.audience === 'responders' && d.status === 'delivered');
      },
      { what: 'the responders delivery', timeoutMs: 20_000 },
    );
    const modal = await openCorrection('retract', incident.id, execution.id);
    const r = await client.submit(modal, { reason: 'Posted to the wrong incident' }, { viewId: newViewId() });
    expect(r.status).toBe(200);
    await waitFor(() => sent('responders') === respondersBefore + 2, {
      what: 'the retraction sent at once',
      timeoutMs: 20_000,
    });
    const approval = await approvalOf(incident.id, execution.id, 'customers');
    expect(approval).toMatchObject({ state: 'rejected', decided_by: { type: 'slack_user', id: ALICE.id } });
    expect(approval.reason).toMatch(/retract/i);
    await waitFor(
      () => {
        const m = slack.messageAt(`D${BOB.id}`, dm.ts)!;
        const text = textOfBlocks(m.blocks as any[]);
        return text.includes('*Rejected* by <@UALICE>') && buttonsOf(m.blocks as any[]).length === 0;
      },
      { what: "Bob's DM to say the retraction withdrew it" },
    );
  });
});

describe('an audience that would get nothing', () => {
  it('is explained in the preview, and a pick where nobody gets anything says why per audience', async () => {
    const execsOnly = await ok(
      h.api('POST', '/v1/templates', { body: { name: 'Execs only', body: 'Board summary.' } }),
      201,
    );
    await ok(
      h.api('POST', '/v1/audiences', {
        body: {
          key: 'execs',
          name: 'Executives',
          visibility: 'internal',
          connection_ids: [con.responders],
          template_ids: [execsOnly.id],
        },
      }),
      201,
    );
    const incident = await announcedIncident('Nothing for execs');
    const before = slack.callsTo('views.open').length;
    await client.click('incident_execute', incident.id, { channel: CHANNEL });
    const modal = await openedView(slack, before);
    const picker = modal.blocks.find((b: any) => b.block_id === 'audiences');
    // Both internal audiences are picked by default; the executives' part is reported, not dropped.
    expect(picker.element.initial_options.map((o: any) => o.value)).toEqual(['execs', 'responders']);
    const text = textOfBlocks(modal.blocks);
    expect(text).toMatch(/\*Executives\* \(internal\) · sent at once · nothing to send: .+/);
    expect(text).toContain(`${RESPONDER_WORDS}: Nothing for execs.`);

    const updates = slack.callsTo('views.update').length;
    await pickAudiences(modal, ['execs']);
    const redrawn = await waitFor(
      () =>
        slack
          .callsTo('views.update')
          .slice(updates)
          .find((c) => c.args.view_id === modal.id),
      { what: 'the redrawn execute modal' },
    );
    const view = redrawn.args.view as any;
    expect(textOfBlocks(view.blocks)).toContain(':electric_plug: No audience gets anything from this execute');
    // The picker stays, with the pick, so another can be made.
    const kept = view.blocks.find((b: any) => b.block_id === 'audiences');
    expect(kept.element.initial_options.map((o: any) => o.value)).toEqual(['execs']);
    // Sending it anyway is refused on the picker.
    const r = await client.submit({ ...view, id: modal.id }, { audiences: ['execs'] }, { viewId: newViewId() });
    expect(r.json.response_action).toBe('errors');
    expect(Object.keys(r.json.errors)).toEqual(['audiences']);
  });
});

describe('rejecting and expiring', () => {
  it('Reject asks for a reason, sends nothing and says who and why', async () => {
    const incident = await announcedIncident('Wrong words');
    const sentBefore = sent('customers1') + sent('customers2');
    const execution = await executeOverApi(incident.id, ['customers']);
    const dm = await dmOf(CAROL, execution.id);
    const reject = buttonsOf(dm.blocks()).find((b: any) => b.action_id === 'approval_reject');
    const before = slack.callsTo('views.open').length;
    await client.click('approval_reject', reject.value, { user: CAROL, channel: `D${CAROL.id}` });
    const modal = await openedView(slack, before);
    expect(modal.callback_id).toBe('approval_reject');
    const r = await client.submit(modal, { reason: 'The ETA is wrong' }, { user: CAROL, viewId: newViewId() });
    expect(r.status).toBe(200);
    expect(r.json).toBeNull(); // the modal closes
    const approval = await approvalOf(incident.id, execution.id, 'customers');
    expect(approval).toMatchObject({ state: 'rejected', reason: 'The ETA is wrong', decided_by: { id: CAROL.id } });
    for (const user of [BOB, CAROL]) {
      await waitFor(
        () => {
          const m = slack.messagesIn(`D${user.id}`).find((x) => JSON.stringify(x.blocks).includes(execution.id))!;
          const text = textOfBlocks(m.blocks as any[]);
          return (
            text.includes('*Rejected* by <@UCAROL>') &&
            text.includes('The ETA is wrong') &&
            buttonsOf(m.blocks as any[]).length === 0
          );
        },
        { what: `${user.id}'s DM to say Carol rejected` },
      );
    }
    // The receipts say those deliveries were cancelled, and why.
    await announcementUpdate(slack, incident.id, (t) =>
      t.includes(':no_entry_sign: cancelled — *customers1* (webhook) · rejected: The ETA is wrong'),
    );
    await waitFor(
      () =>
        threadText(incident.ts).some(
          (t) =>
            t.includes('Rejected by <@UCAROL> — nothing was sent to *Customers*') && t.includes('The ETA is wrong'),
        ),
      { what: 'the rejected line in the thread' },
    );
    const [only] = await quiet(incident.id);
    expect(only.id).toBe(execution.id);
    expect(only.deliveries.map((d: any) => d.status)).toEqual(['cancelled', 'cancelled']);
    expect(sent('customers1') + sent('customers2')).toBe(sentBefore);
  });

  it('an approval nobody decides expires: nothing is sent, the DMs and the thread say so', async () => {
    const incident = await announcedIncident('Nobody home');
    const pressBefore = sent('press');
    const execution = await executeOverApi(incident.id, ['press']);
    await dmOf(BOB, execution.id);
    offsetMs += 6 * 60_000;
    await waitFor(async () => (await approvalOf(incident.id, execution.id, 'press')).state === 'expired', {
      what: 'the approval to expire',
      timeoutMs: 60_000,
      intervalMs: 250,
    });
    await waitFor(
      () => {
        const m = slack.messagesIn(`D${BOB.id}`).find((x) => JSON.stringify(x.blocks).includes(execution.id))!;
        return textOfBlocks(m.blocks as any[]).includes('*Expired*') && buttonsOf(m.blocks as any[]).length === 0;
      },
      { what: "Bob's DM to say it expired", timeoutMs: 20_000 },
    );
    await waitFor(
      () => threadText(incident.ts).some((t) => t.startsWith(':hourglass: Expired — nothing was sent to *Press*')),
      {
        what: 'the expired line in the thread',
        timeoutMs: 20_000,
      },
    );
    expect(sent('press')).toBe(pressBefore);
  });
});
