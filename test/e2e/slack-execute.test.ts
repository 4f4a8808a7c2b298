import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHerald, type TestHerald } from '../support/herald.js';
import { startDiscord, type DiscordPeer } from '../support/peers/discord.js';
import { startSlack, type SlackPeer } from '../support/peers/slack.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/peers/webhook-receiver.js';
import {
  announcementUpdate,
  slackClient,
  textOfBlocks,
  type SlackClient,
  newViewId,
  openedView as openedViewAt,
} from '../support/slack-client.js';
import { waitFor } from '../support/wait.js';

/**
 * The whole story in Slack terms — /incident new, submit, Execute with variables from the modal,
 * receipts on the announcement, resolve, close — and the same incident read back over /v1.
 * Deliveries go to real local sinks: a Standard Webhooks receiver and a Slack incoming webhook
 * (both accept), and a Discord webhook that refuses with 403 (a permanent failure).
 */
const SECRET = 'slack-signing-secret-for-execute';
const BOB = { id: 'UBOB', name: 'bob' };

let h: TestHerald;
let slack: SlackPeer;
let receiver: WebhookReceiver;
let discordPeer: DiscordPeer;
let client: SlackClient;
let hook: any;
let discord: any;

beforeAll(async () => {
  slack = await startSlack();
  receiver = await startWebhookReceiver();
  discordPeer = await startDiscord();
  h = await startHerald({
    SLACK_SIGNING_SECRET: SECRET,
    SLACK_BOT_TOKEN: 'xoxb-test',
    SLACK_API_URL: slack.apiUrl,
    HERALD_SLACK_ADMINS: 'UADMIN',
  });
  client = slackClient(h.url, SECRET, BOB);
  hook = (
    await h.api('POST', '/v1/connections', {
      body: { name: 'Status hook', type: 'webhook', config: { url: `${receiver.url}/hook` } },
    })
  ).body;
  receiver.setSecret(hook.signing_secret);
  discord = (
    await h.api('POST', '/v1/connections', {
      body: { name: 'Community Discord', type: 'discord', config: { webhook_url: discordPeer.webhookUrl() } },
    })
  ).body;
  const ops = (
    await h.api('POST', '/v1/connections', {
      body: { name: 'Ops Slack', type: 'slack', config: { webhook_url: slack.webhookUrl() } },
    })
  ).body;
  for (const c of [hook, discord, ops]) expect(c.id).toMatch(/^con_/);
});

afterAll(async () => {
  await h?.close();
  await slack?.close();
  await receiver?.close();
  await discordPeer?.close();
});

const viewId = newViewId;

const openedView = (before: number): Promise<any> => openedViewAt(slack, before);

const updatedTo = (incidentId: string, check: (text: string) => boolean): Promise<any> =>
  announcementUpdate(slack, incidentId, check);

describe('execute from Slack', () => {
  it('runs the full story in Slack terms and reads the same over /v1', async () => {
    const template = (
      await h.api('POST', '/v1/templates', {
        body: {
          name: 'Customer notice',
          subject: '{{incident.title}}',
          body: 'We are on it. ETA {{eta}}, owner {{owner}}.{{#note}} {{note}}{{/note}}',
          variables: [
            { name: 'eta', description: 'When we expect a fix', required: true },
            { name: 'owner', required: true, default: 'sre' },
            { name: 'note', required: false },
          ],
        },
      })
    ).body;
    expect(template.id).toMatch(/^tpl_/);

    // Declare, attaching the template from the modal's multi-select.
    let before = slack.callsTo('views.open').length;
    await client.command('new Payments degraded', { channel: 'CINC' });
    const create = await openedView(before);
    const templates = create.blocks.find((b: any) => b.block_id === 'template_ids');
    expect(templates.element.options.map((o: any) => o.value)).toContain(template.id);
    let r = await client.submit(create, { severity: 'major', template_ids: [template.id] }, { viewId: viewId() });
    expect(r.status).toBe(200);
    const incident = (await h.api('GET', '/v1/incidents')).body.data.find((i: any) => i.title === 'Payments degraded');
    expect(incident.template_ids).toEqual([template.id]);
    const post = await waitFor<any>(() =>
      slack.callsTo('chat.postMessage').find((c) => JSON.stringify(c.args.blocks).includes(incident.id)),
    );
    expect(post.args.channel).toBe('CINC');

    // Execute: one input per declared variable, required ones required, defaults pre-filled, a preview per connection.
    before = slack.callsTo('views.open').length;
    await client.click('incident_execute', incident.id, { channel: 'CINC' });
    const exec = await openedView(before);
    expect(exec.callback_id).toBe('incident_execute');
    const inputs = Object.fromEntries(
      exec.blocks.filter((b: any) => b.type === 'input').map((b: any) => [b.block_id, b]),
    );
    expect(Object.keys(inputs)).toEqual(['variables.eta', 'variables.owner', 'variables.note']);
    expect(inputs['variables.eta'].optional).toBe(false);
    expect(inputs['variables.eta'].element.initial_value).toBeUndefined();
    expect(inputs['variables.owner'].optional).toBe(false);
    expect(inputs['variables.owner'].element.initial_value).toBe('sre');
    expect(inputs['variables.note'].optional).toBe(true);
    const preview = textOfBlocks(exec.blocks);
    expect(preview).toContain('Status hook');
    expect(preview).toContain('Community Discord');
    expect(preview).toContain('Ops Slack');
    expect(preview).toContain('ETA ‹eta›, owner sre.');
    // A preview sends nothing.
    expect(receiver.requests).toHaveLength(0);
    expect(discordPeer.requests).toHaveLength(0);

    // A missing required variable comes back on its input.
    r = await client.submit(exec, { 'variables.eta': '' }, { viewId: viewId() });
    expect(r.json.response_action).toBe('errors');
    expect(Object.keys(r.json.errors)).toEqual(['variables.eta']);

    // Execute for real, with values from the modal; Discord refuses it for good.
    discordPeer.script({ status: 403, body: { message: 'Missing Permissions', code: 50013 } });
    const execViewId = viewId();
    r = await client.submit(
      exec,
      { 'variables.eta': '15 minutes', 'variables.note': 'Card payments only.' },
      { viewId: execViewId },
    );
    expect(r.status).toBe(200);
    // Acked at once with a "sending" view; the outcome replaces it once the execute is queued.
    expect(r.json?.response_action).toBe('update');
    const outcome = await waitFor(() => slack.callsTo('views.update').find((c) => c.args.view_id === execViewId), {
      what: 'the execute outcome',
    });
    expect(textOfBlocks((outcome.args.view as any).blocks)).toContain('Queued 3 deliveries');
    // A retry of the same submission does not execute twice.
    await client.submit(exec, { 'variables.eta': '15 minutes' }, { viewId: execViewId });

    const [hooked] = await receiver.waitForRequests(1);
    expect(hooked!.verified).toBe(true);
    expect(hooked!.rawBody).toContain('ETA 15 minutes, owner sre. Card payments only.');
    await waitFor(() => slack.webhookMessages.length >= 1, { what: 'the Slack webhook message' });
    expect(JSON.stringify(slack.webhookMessages[0]!.payload)).toContain('15 minutes');

    // Receipts on the announcement: one line per channel, as deliveries complete.
    const withReceipts = await updatedTo(
      incident.id,
      (t) =>
        /delivered — \*Status hook\*/.test(t) &&
        /delivered — \*Ops Slack\*/.test(t) &&
        /failed — \*Community Discord\*/.test(t),
    );
    expect(textOfBlocks(withReceipts.args.blocks)).toContain('403');
    expect(receiver.requests).toHaveLength(1);

    // Resolve and close, all from Slack.
    before = slack.callsTo('views.open').length;
    await client.command(`resolve ${incident.id}`);
    r = await client.submit(
      await openedView(before),
      { resolution_summary: 'Failed over to the standby PSP.' },
      { viewId: viewId() },
    );
    expect(r.status).toBe(200);
    before = slack.callsTo('views.open').length;
    await client.click('incident_close', incident.id);
    r = await client.submit(await openedView(before), {}, { viewId: viewId() });
    expect(r.status).toBe(200);
    const closed = await updatedTo(incident.id, (t) => t.includes('Closed'));
    // The receipts stay on the closed announcement.
    expect(textOfBlocks(closed.args.blocks)).toMatch(/delivered — \*Status hook\*/);

    // The same story over /v1.
    const v1 = (await h.api('GET', `/v1/incidents/${incident.id}`)).body;
    expect(v1).toMatchObject({
      status: 'closed',
      execution_count: 1,
      resolution_summary: 'Failed over to the standby PSP.',
      created_by: { type: 'slack_user', id: 'UBOB', name: 'bob' },
    });
    const executions = (await h.api('GET', `/v1/incidents/${incident.id}/executions`)).body.data;
    expect(executions).toHaveLength(1);
    expect(executions[0].variables).toMatchObject({ eta: '15 minutes', owner: 'sre', note: 'Card payments only.' });
    expect(executions[0].status).toBe('partially_failed');
    const events = (await h.api('GET', `/v1/incidents/${incident.id}/events`)).body.data;
    const byType = (t: string) => events.filter((e: any) => e.type === t);
    expect(byType('incident.executed')).toHaveLength(1);
    expect(byType('incident.executed')[0].actor).toEqual({ type: 'slack_user', id: 'UBOB', name: 'bob' });
    expect(byType('incident.closed')[0].actor).toEqual({ type: 'slack_user', id: 'UBOB', name: 'bob' });
    expect(byType('delivery.failed')).toHaveLength(1);
  });

  it('an incident without templates previews the built-in message and executes without inputs', async () => {
    const inc = (
      await h.api('POST', '/v1/incidents', { body: { title: 'No templates here', severity: 'low', impact: 'Nobody' } })
    ).body;
    const before = slack.callsTo('views.open').length;
    await client.command(`execute ${inc.id}`);
    const exec = await openedView(before);
    expect(exec.blocks.filter((b: any) => b.type === 'input')).toHaveLength(0);
    expect(textOfBlocks(exec.blocks)).toContain('No templates here');
    const count = receiver.requests.length;
    const r = await client.submit(exec, {}, { viewId: viewId() });
    expect(r.status).toBe(200);
    const [builtIn] = (await receiver.waitForRequests(count + 1)).slice(count);
    expect(builtIn!.rawBody).toContain('No templates here');
    const executions = (await h.api('GET', `/v1/incidents/${inc.id}/executions`)).body.data;
    expect(executions).toHaveLength(1);
  });

  it('lets admins test connections from the App Home, and only admins', async () => {
    const ADMIN = { id: 'UADMIN', name: 'root' };
    const publishedFor = (user: string) => slack.callsTo('views.publish').filter((c) => c.args.user_id === user);

    // A forged click from a non-admin changes nothing.
    await client.click('connection_test', hook.id, { user: BOB, inHome: true });
    await waitFor(() => publishedFor('UBOB').length >= 1, { what: "Bob's home re-published" });
    expect((await h.api('GET', `/v1/connections/${hook.id}`)).body.last_test).toBeNull();

    const seen = publishedFor('UADMIN').length;
    await client.click('connection_test', hook.id, { user: ADMIN, inHome: true });
    const home = await waitFor<any>(() => publishedFor('UADMIN')[seen]?.args.view, {
      what: 'admin home after the test',
    });
    const last = (await h.api('GET', `/v1/connections/${hook.id}`)).body.last_test;
    expect(last).toMatchObject({ ok: false, status: 'needs_send_message' });
    const text = textOfBlocks(home.blocks);
    expect(text).toContain('Status hook');
    expect(text).toContain('needs_send_message');
    const send = home.blocks.find((b: any) => b.block_id === `connection_send:${hook.id}`);
    expect(send.elements[0]).toMatchObject({ action_id: 'connection_test_send', value: hook.id });
  });

  it('explains instead of opening an execute form when nothing can be delivered', async () => {
    const lonely = await startHerald(
      { SLACK_SIGNING_SECRET: SECRET, SLACK_BOT_TOKEN: 'xoxb-test', SLACK_API_URL: slack.apiUrl },
      { worker: false },
    );
    try {
      const c = slackClient(lonely.url, SECRET, BOB);
      const inc = (await lonely.api('POST', '/v1/incidents', { body: { title: 'Nowhere to send', severity: 'low' } }))
        .body;
      const before = slack.callsTo('views.open').length;
      await c.click('incident_execute', inc.id);
      const view = await openedView(before);
      expect(view.submit).toBeUndefined();
      expect(textOfBlocks(view.blocks)).toMatch(/no enabled connection/i);
    } finally {
      await lonely.close();
    }
  });
});
