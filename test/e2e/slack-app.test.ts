import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestHerald } from '../support/herald.js';
import type { SlackPeer } from '../support/peers/slack.js';
import {
  announcementUpdate,
  newTriggerId,
  shownView,
  stateOf,
  textOfBlocks,
  type SlackClient,
  newViewId,
  openedView as openedViewAt,
} from '../support/slack-client.js';
import { waitFor } from '../support/wait.js';
import { startSlackHerald, type SlackHerald } from '../support/slack-herald.js';

/**
 * The Slack app over real HTTP: signed requests to /slack/events, Slack's Web API faked on
 * loopback (every call recorded), the same incidents read back over /v1.
 */
const SECRET = 'slack-signing-secret-for-tests';
const ALICE = { id: 'UALICE', name: 'alice' };
const ADMIN = { id: 'UADMIN', name: 'root' };

let h: TestHerald;
let slack: SlackPeer;
let client: SlackClient;

let world: SlackHerald | undefined;

beforeAll(async () => {
  world = await startSlackHerald({
    secret: SECRET,
    channel: 'CANNOUNCE',
    user: ALICE,
    env: { HERALD_SLACK_ADMINS: 'UADMIN' },
  });
  ({ h, slack, client } = world);
});

afterAll(async () => {
  await world?.close();
});

const viewId = newViewId;

const openedView = (before: number): Promise<any> => openedViewAt(slack, before);

/** Opens `/incident new`, fills and submits it; returns the created incident (over /v1). */
async function declare(
  title: string,
  severity = 'major',
  opts: { channel?: string; extra?: Record<string, string | string[]> } = {},
): Promise<any> {
  const before = slack.callsTo('views.open').length;
  const r = await client.command(`new ${title}`, { channel: opts.channel ?? 'CWAR' });
  expect(r.status).toBe(200);
  const view = await openedView(before);
  const submitted = await client.submit(view, { severity, impact: 'EU checkout', ...opts.extra }, { viewId: viewId() });
  expect(submitted.status).toBe(200);
  expect(submitted.json?.response_action).not.toBe('errors');
  const list = await h.api('GET', '/v1/incidents?limit=100');
  const found = list.body.data.find((i: any) => i.title === title);
  expect(found).toBeTruthy();
  return found;
}

/**
 * Announcements are paced (one post a second per channel, one update every 2 s per announcement),
 * so several tests' announcements may queue: a generous deadline.
 */
const ANNOUNCE_WAIT_MS = 25_000;

async function announcementOf(incidentId: string): Promise<any> {
  return waitFor<any>(
    () => slack.callsTo('chat.postMessage').find((c) => JSON.stringify(c.args.blocks ?? []).includes(incidentId)),
    { what: `announcement of ${incidentId}`, timeoutMs: ANNOUNCE_WAIT_MS },
  );
}

/** The newest chat.update of an incident's announcement that satisfies `check`. */
const updatedTo = (incidentId: string, check: (text: string, call: any) => boolean): Promise<any> =>
  announcementUpdate(slack, incidentId, check, ANNOUNCE_WAIT_MS);

describe('request verification', () => {
  const form = () =>
    new URLSearchParams({
      command: '/incident',
      text: 'help',
      user_id: 'UALICE',
      user_name: 'alice',
      team_id: 'T0HERALD',
      channel_id: 'C1',
      trigger_id: '1.2.3',
    }).toString();

  it('answers a correctly signed request', async () => {
    const r = await client.post(form());
    expect(r.status).toBe(200);
    expect(r.json.response_type).toBe('ephemeral');
  });

  it('refuses a forged signature', async () => {
    expect((await client.post(form(), { secret: 'not-the-secret' })).status).toBe(401);
    expect((await client.post(form(), { signature: 'v0=deadbeef' })).status).toBe(401);
  });

  it('refuses a timestamp more than 5 minutes old or ahead', async () => {
    expect((await client.post(form(), { skewSeconds: -6 * 60 })).status).toBe(401);
    expect((await client.post(form(), { skewSeconds: 6 * 60 })).status).toBe(401);
    expect((await client.post(form(), { skewSeconds: -4 * 60 })).status).toBe(200);
  });

  it('refuses a request with no signature headers, and keeps /v1 and 404s as they were', async () => {
    const r = await fetch(`${h.url}/slack/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form(),
    });
    expect(r.status).toBe(401);
    expect((await h.api('GET', '/v1/incidents')).status).toBe(200);
    expect((await h.api('GET', '/slack/nothing')).status).toBe(404);
  });

  it('does the work once when Slack redelivers a request (X-Slack-Retry-Num), byte for byte', async () => {
    const retry = { headers: { 'x-slack-retry-num': '1', 'x-slack-retry-reason': 'http_timeout' } };
    const trigger = newTriggerId();
    const command = new URLSearchParams({
      team_id: 'T0HERALD',
      channel_id: 'CWAR',
      user_id: 'UALICE',
      user_name: 'alice',
      command: '/incident',
      text: 'new Redelivered',
      trigger_id: trigger,
      api_app_id: 'A0HERALD',
      response_url: 'https://hooks.slack.com/commands/1',
    }).toString();
    expect((await client.post(command)).status).toBe(200);
    expect((await client.post(command, retry)).status).toBe(200);
    // A later command's modal: by then both deliveries of the first have been handled.
    await client.command('new Sentinel');
    await waitFor(
      () =>
        slack
          .callsTo('views.update')
          .some((c) => (c.args.view as any)?.blocks?.some((b: any) => b.element?.initial_value === 'Sentinel')),
      { what: 'the sentinel modal' },
    );
    const opened = slack.callsTo('views.open').filter((c) => c.args.trigger_id === trigger);
    expect(opened).toHaveLength(1);

    const view = await shownView(slack, opened[0]!);
    const payload = {
      type: 'view_submission',
      team: { id: 'T0HERALD', domain: 'd' },
      user: { id: 'UALICE', username: 'alice', name: 'alice', team_id: 'T0HERALD' },
      api_app_id: 'A0HERALD',
      trigger_id: newTriggerId(),
      view: { ...view, id: viewId(), hash: 'h', state: { values: stateOf(view, { severity: 'minor' }) } },
    };
    const submission = new URLSearchParams({ payload: JSON.stringify(payload) }).toString();
    expect((await client.post(submission)).status).toBe(200);
    expect((await client.post(submission, retry)).status).toBe(200);
    const list = await h.api('GET', '/v1/incidents?limit=100');
    expect(list.body.data.filter((i: any) => i.title === 'Redelivered')).toHaveLength(1);
  });

  it('answers the URL verification challenge Slack sends when the events URL is saved', async () => {
    const r = await client.post(JSON.stringify({ token: 'legacy', challenge: 'c-3po', type: 'url_verification' }), {
      contentType: 'application/json',
    });
    expect(r.status).toBe(200);
    expect(r.text).toContain('c-3po');
  });

  it('accepts a form whose content type carries a charset', async () => {
    const r = await client.post(form(), { contentType: 'application/x-www-form-urlencoded; charset=utf-8' });
    expect(r.status).toBe(200);
    expect(r.json.response_type).toBe('ephemeral');
  });
});

describe('/incident', () => {
  it('help (and no sub-command) answer ephemerally with every sub-command', async () => {
    for (const text of ['help', '']) {
      const r = await client.command(text);
      expect(r.status).toBe(200);
      expect(r.json.response_type).toBe('ephemeral');
      const all = textOfBlocks(r.json.blocks);
      for (const sub of ['new', 'list', 'show', 'execute', 'update', 'resolve', 'close'])
        expect(all).toContain(`/incident ${sub}`);
    }
  });

  it('answers unknown sub-commands, missing and bad ids with a friendly ephemeral line', async () => {
    const unknown = await client.command('frobnicate now');
    expect(unknown.json).toMatchObject({ response_type: 'ephemeral' });
    expect(unknown.json.text).toMatch(/frobnicate.*help/);
    const missing = await client.command('show');
    expect(missing.json.text).toMatch(/Which incident\?/);
    for (const text of ['show inc_nope', 'update nope', 'execute inc_01JZZZZZZZZZZZZZZZZZZZZZZZ', 'close <script>']) {
      const r = await client.command(text);
      expect(r.status).toBe(200);
      expect(r.json.response_type).toBe('ephemeral');
      expect(r.json.text).toMatch(/not found/i);
    }
  });

  it('new → create modal → incident announced in the channel, created by the Slack user', async () => {
    const before = slack.callsTo('views.open').length;
    await client.command('new Checkout is down', { channel: 'CWAR' });
    const view = await openedView(before);
    expect(view.callback_id).toBe('incident_create');
    const inputs = view.blocks.filter((b: any) => b.type === 'input').map((b: any) => b.block_id);
    expect(inputs).toEqual(expect.arrayContaining(['title', 'severity', 'description', 'impact']));
    expect(view.blocks.find((b: any) => b.block_id === 'title').element.initial_value).toBe('Checkout is down');
    expect(JSON.parse(view.private_metadata)).toEqual({ channel_id: 'CWAR' });

    const vid = viewId();
    const r = await client.submit(
      view,
      { severity: 'critical', description: 'Payments time out', impact: 'All EU customers' },
      { viewId: vid },
    );
    expect(r.status).toBe(200);
    expect(r.text === '' || r.json?.response_action !== 'errors').toBe(true);

    const list = await h.api('GET', '/v1/incidents');
    const incident = list.body.data.find((i: any) => i.title === 'Checkout is down');
    expect(incident).toMatchObject({
      severity: 'critical',
      status: 'investigating',
      description: 'Payments time out',
      impact: 'All EU customers',
    });
    expect(incident.created_by).toEqual({ type: 'slack_user', id: 'UALICE', name: 'alice' });

    const post = await announcementOf(incident.id);
    expect(post.args.channel).toBe('CWAR');
    const actions = post.args.blocks.find((b: any) => b.type === 'actions');
    expect(actions.elements.map((e: any) => e.action_id)).toEqual([
      'incident_execute',
      'incident_update',
      'incident_resolve',
      'incident_close',
    ]);
    expect(actions.elements.every((e: any) => e.value === incident.id)).toBe(true);

    const events = await h.api('GET', `/v1/incidents/${incident.id}/events`);
    expect(events.body.data[0]).toMatchObject({
      type: 'incident.created',
      actor: { type: 'slack_user', id: 'UALICE', name: 'alice' },
    });
  });

  it('a double-submitted create modal creates one incident', async () => {
    const before = slack.callsTo('views.open').length;
    await client.command('new Double trouble');
    const view = await openedView(before);
    const vid = viewId();
    const [a, b] = await Promise.all([
      client.submit(view, { severity: 'minor' }, { viewId: vid }),
      client.submit(view, { severity: 'minor' }, { viewId: vid }),
    ]);
    expect([a.status, b.status]).toEqual([200, 200]);
    const again = await client.submit(view, { severity: 'minor' }, { viewId: vid });
    expect(again.status).toBe(200);
    const list = await h.api('GET', '/v1/incidents?limit=100');
    expect(list.body.data.filter((i: any) => i.title === 'Double trouble')).toHaveLength(1);
  });

  it('returns validation errors on the right input', async () => {
    const before = slack.callsTo('views.open').length;
    await client.command('new');
    const view = await openedView(before);
    const r = await client.submit(view, { title: '   ', severity: 'major' }, { viewId: viewId() });
    expect(r.json.response_action).toBe('errors');
    expect(Object.keys(r.json.errors)).toEqual(['title']);
    expect(r.json.errors.title).toMatch(/required/);
    // A forged severity lands on the severity input.
    const bad = await client.submit(view, { title: 'Fine title', severity: 'apocalyptic' }, { viewId: viewId() });
    expect(bad.json.response_action).toBe('errors');
    expect(Object.keys(bad.json.errors)).toEqual(['severity']);
    // A template that does not exist lands on the templates input (template_ids.0 → template_ids).
    const view2 = {
      ...view,
      blocks: [
        ...view.blocks.filter((b: any) => b.block_id !== 'template_ids'),
        {
          type: 'input',
          block_id: 'template_ids',
          label: { type: 'plain_text', text: 'T' },
          element: { type: 'multi_static_select', action_id: 'value', options: [] },
        },
      ],
    };
    const unknown = await client.submit(
      view2,
      { title: 'Fine', severity: 'low', template_ids: ['tpl_01JZZZZZZZZZZZZZZZZZZZZZZZ'] },
      { viewId: viewId() },
    );
    expect(unknown.json.response_action).toBe('errors');
    expect(Object.keys(unknown.json.errors)).toEqual(['template_ids']);
  });

  it('list answers ephemerally with up to 20 open incidents, newest first', async () => {
    const made: string[] = [];
    // Made as a Slack user through the service: the API would announce each of them in
    // HERALD_SLACK_CHANNEL, paced at one post a second, and the later tests would wait behind them.
    const bulk = { type: 'slack_user' as const, id: 'UBULK', name: 'bulk' };
    for (let n = 0; n < 22; n++) {
      const r = await h.herald.services.incidents.create(
        { title: `Bulk ${String(n).padStart(2, '0')}`, severity: 'low' },
        bulk,
      );
      made.push(r.id);
    }
    const resolved = await h.herald.services.incidents.create({ title: 'Resolved one', severity: 'low' }, bulk);
    await h.api('PATCH', `/v1/incidents/${resolved.id}`, { body: { status: 'resolved' } });

    const r = await client.command('list');
    expect(r.json.response_type).toBe('ephemeral');
    const text = textOfBlocks(r.json.blocks);
    const ids = [...text.matchAll(/inc_[0-9A-Z]{26}/g)].map((m) => m[0]);
    expect(ids).toHaveLength(20);
    expect(ids).toEqual(made.slice(-20).reverse());
    expect(text).not.toContain(resolved.id);
  });

  it('show answers ephemerally with the incident and its buttons', async () => {
    const inc = (
      await h.api('POST', '/v1/incidents', {
        body: { title: 'Show me <!channel> *bold*', severity: 'major', impact: 'Some' },
      })
    ).body;
    const r = await client.command(`show ${inc.id}`);
    expect(r.json.response_type).toBe('ephemeral');
    const text = textOfBlocks(r.json.blocks);
    expect(text).toContain(inc.id);
    // Escaped: no live mention, no markup injection.
    expect(text).not.toContain('<!channel>');
    expect(text).toContain('&lt;!channel&gt;');
    expect(r.json.blocks.some((b: any) => b.type === 'actions')).toBe(true);
  });
});

describe('announcements', () => {
  it('announces API-created incidents in HERALD_SLACK_CHANNEL', async () => {
    const inc = (await h.api('POST', '/v1/incidents', { body: { title: 'Made over the API', severity: 'minor' } }))
      .body;
    const post = await announcementOf(inc.id);
    expect(post.args.channel).toBe('CANNOUNCE');
    expect(post.token).toBe('xoxb-test');
  });

  it('falls back to HERALD_SLACK_CHANNEL when the command channel refuses the bot', async () => {
    slack.failNext('chat.postMessage', 'channel_not_found');
    const inc = await declare('Private channel incident', 'minor', { channel: 'GPRIVATE' });
    const posts = await waitFor(() => {
      const p = slack.callsTo('chat.postMessage').filter((c) => JSON.stringify(c.args.blocks ?? []).includes(inc.id));
      return p.length >= 2 && p;
    });
    expect(posts.map((p) => p.args.channel)).toEqual(['GPRIVATE', 'CANNOUNCE']);
  });

  it('keeps the announcement current through update, resolve and close, each by the Slack user', async () => {
    const inc = await declare('Lifecycle', 'major');
    await announcementOf(inc.id);

    // Update via the announcement's button.
    let before = slack.callsTo('views.open').length;
    await client.click('incident_update', inc.id, { channel: 'CWAR' });
    const update = await openedView(before);
    expect(update.callback_id).toBe('incident_update');
    expect(update.blocks.find((b: any) => b.block_id === 'status').element.initial_option.value).toBe('investigating');
    let r = await client.submit(update, { status: 'identified', severity: 'critical' }, { viewId: viewId() });
    expect(r.status).toBe(200);
    await updatedTo(inc.id, (t) => t.includes('Identified') && t.includes('Critical'));

    // Resolve asks for the summary.
    before = slack.callsTo('views.open').length;
    await client.click('incident_resolve', inc.id);
    const resolve = await openedView(before);
    expect(resolve.callback_id).toBe('incident_resolve');
    r = await client.submit(resolve, { resolution_summary: 'Rolled back the deploy' }, { viewId: viewId() });
    expect(r.status).toBe(200);
    const resolvedUpdate = await updatedTo(
      inc.id,
      (t) => t.includes('Resolved') && t.includes('Rolled back the deploy'),
    );
    const buttons = resolvedUpdate.args.blocks
      .find((b: any) => b.type === 'actions')
      .elements.map((e: any) => e.action_id);
    expect(buttons).not.toContain('incident_resolve');

    // Close asks for confirmation.
    before = slack.callsTo('views.open').length;
    await client.command(`close ${inc.id}`);
    const close = await openedView(before);
    expect(close.callback_id).toBe('incident_close');
    expect(textOfBlocks(close.blocks)).toMatch(/Close/);
    r = await client.submit(close, {}, { viewId: viewId() });
    expect(r.status).toBe(200);
    const closedUpdate = await updatedTo(inc.id, (t) => t.includes('Closed'));
    expect(closedUpdate.args.blocks.some((b: any) => b.type === 'actions')).toBe(false);

    const got = (await h.api('GET', `/v1/incidents/${inc.id}`)).body;
    expect(got).toMatchObject({ status: 'closed', severity: 'critical', resolution_summary: 'Rolled back the deploy' });
    const events = (await h.api('GET', `/v1/incidents/${inc.id}/events`)).body.data;
    expect(events.map((e: any) => e.type)).toEqual([
      'incident.created',
      'incident.updated',
      'incident.status_changed',
      'incident.updated',
      'incident.status_changed',
      'incident.closed',
    ]);
    for (const e of events) expect(e.actor).toEqual({ type: 'slack_user', id: 'UALICE', name: 'alice' });

    // A closed incident: friendly refusals, no modal.
    const opened = slack.callsTo('views.open').length;
    const refused = await client.command(`update ${inc.id}`);
    expect(refused.json.text).toMatch(/closed/);
    await client.click('incident_execute', inc.id);
    const explained = await openedView(opened);
    expect(explained.submit).toBeUndefined();
    expect(textOfBlocks(explained.blocks)).toMatch(/closed/);
  });

  it('a refused update comes back on the right input', async () => {
    const inc = (await h.api('POST', '/v1/incidents', { body: { title: 'Refuse me', severity: 'low' } })).body;
    const before = slack.callsTo('views.open').length;
    await client.command(`update ${inc.id}`);
    const view = await openedView(before);
    const r = await client.submit(view, { title: 'x'.repeat(201) }, { viewId: viewId() });
    expect(r.json.response_action).toBe('errors');
    expect(Object.keys(r.json.errors)).toEqual(['title']);
    // Closed meanwhile: the error lands on the first input, in words.
    await h.api('POST', `/v1/incidents/${inc.id}/close`);
    const late = await client.submit(view, { status: 'monitoring' }, { viewId: viewId() });
    expect(late.json.response_action).toBe('errors');
    expect(Object.values(late.json.errors).join(' ')).toMatch(/closed/);
  });
});

describe('App Home', () => {
  async function home(user: { id: string; name: string }): Promise<any> {
    const before = slack.callsTo('views.publish').filter((c) => c.args.user_id === user.id).length;
    const r = await client.event({ type: 'app_home_opened', user: user.id, channel: 'D0HOME', tab: 'home' });
    expect(r.status).toBe(200);
    return waitFor(() => slack.callsTo('views.publish').filter((c) => c.args.user_id === user.id)[before]?.args.view, {
      what: 'views.publish',
    });
  }

  it('shows open incidents to everyone and the admin parts only to admins', async () => {
    const inc = (await h.api('POST', '/v1/incidents', { body: { title: 'Visible at home', severity: 'critical' } }))
      .body;
    const mine = await home(ALICE);
    expect(mine.type).toBe('home');
    const text = textOfBlocks(mine.blocks);
    expect(text).toContain(inc.id);
    expect(text).not.toMatch(/API keys|Connections/);
    expect(JSON.stringify(mine)).not.toMatch(/api_key_|connection_test/);

    const admin = await home(ADMIN);
    const adminText = textOfBlocks(admin.blocks);
    expect(adminText).toContain('Connections');
    expect(adminText).toContain('API keys');
    expect(admin.blocks.length).toBeLessThanOrEqual(100);
  });

  it('lets an admin generate (token shown once), list and revoke an API key', async () => {
    const before = slack.callsTo('views.open').length;
    await client.click('api_key_generate', 'generate', { user: ADMIN, inHome: true });
    const form = await openedView(before);
    expect(form.callback_id).toBe('api_key_generate');

    const empty = await client.submit(form, { name: 'ci', scopes: [] }, { user: ADMIN, viewId: viewId() });
    expect(empty.json.response_action).toBe('errors');
    expect(Object.keys(empty.json.errors)).toEqual(['scopes']);

    const r = await client.submit(
      form,
      { name: 'deploy-bot', scopes: ['incidents:read', 'incidents:write'], expires_in: '90d' },
      { user: ADMIN, viewId: viewId() },
    );
    expect(r.json.response_action).toBe('update');
    const token = /hld_[0-9A-Za-z]{49}/.exec(JSON.stringify(r.json.view))?.[0];
    expect(token).toBeTruthy();
    expect((await h.api('GET', '/v1/incidents', { token })).status).toBe(200);
    expect((await h.api('POST', '/v1/templates', { token, body: { name: 'x', body: 'y' } })).status).toBe(403);

    const keys = (await h.herald.services.apiKeys.list({ limit: 100, cursor: null })).data;
    const key = keys.find((k) => k.name === 'deploy-bot')!;
    expect(key.created_by).toEqual({ type: 'slack_user', id: 'UADMIN', name: 'root' });
    expect(key.expires_at).not.toBeNull();

    const homeView = await home(ADMIN);
    expect(textOfBlocks(homeView.blocks)).toContain(key.id);
    // The token itself is never shown again.
    expect(JSON.stringify(slack.callsTo('views.publish'))).not.toContain(token);

    await client.click('api_key_revoke', key.id, { user: ADMIN, inHome: true });
    await waitFor(async () => (await h.api('GET', '/v1/incidents', { token })).status === 401, { what: 'revocation' });
  });

  it("refuses a non-admin's forged admin actions", async () => {
    const victim = await h.herald.services.apiKeys.create(
      { name: 'victim', scopes: ['*'] },
      { type: 'system', id: 't', name: 't' },
    );
    const opened = slack.callsTo('views.open').length;

    const conn = (
      await h.api('POST', '/v1/connections', {
        body: { name: 'Forged target', type: 'webhook', config: { url: 'http://127.0.0.1:9/never' } },
      })
    ).body;
    const published = slack.callsTo('views.publish').filter((c) => c.args.user_id === 'UALICE').length;

    await client.click('api_key_generate', 'generate', { user: ALICE, inHome: true });
    await client.click('api_key_revoke', victim.key.id, { user: ALICE, inHome: true });
    await client.click('connection_test', conn.id, { user: ALICE, inHome: true });
    await client.click('connection_test_send', conn.id, { user: ALICE, inHome: true });
    // Forged submission of the admin-only modal.
    const forged = {
      type: 'modal',
      callback_id: 'api_key_generate',
      blocks: [
        {
          type: 'input',
          block_id: 'name',
          element: { type: 'plain_text_input', action_id: 'value' },
          label: { type: 'plain_text', text: 'n' },
        },
        {
          type: 'input',
          block_id: 'scopes',
          element: {
            type: 'checkboxes',
            action_id: 'value',
            options: [{ text: { type: 'plain_text', text: '*' }, value: '*' }],
          },
          label: { type: 'plain_text', text: 's' },
        },
      ],
    };
    const r = await client.submit(forged, { name: 'evil', scopes: ['*'] }, { user: ALICE, viewId: viewId() });
    expect(r.json.response_action).toBe('errors');
    expect(JSON.stringify(r.json)).not.toMatch(/hld_/);

    // Each refused click re-publishes Alice's (non-admin) home; nothing else happened.
    await waitFor(
      () => slack.callsTo('views.publish').filter((c) => c.args.user_id === 'UALICE').length >= published + 4,
      { what: "Alice's home re-published 4 times" },
    );
    expect((await h.api('GET', `/v1/connections/${conn.id}`)).body.last_test).toBeNull();
    expect(slack.callsTo('views.open').length).toBe(opened);
    expect((await h.api('GET', '/v1/incidents', { token: victim.token })).status).toBe(200);
    const keys = (await h.herald.services.apiKeys.list({ limit: 100, cursor: null })).data;
    expect(keys.some((k) => k.name === 'evil')).toBe(false);
    for (const c of slack.callsTo('views.publish').filter((x) => x.args.user_id === 'UALICE')) {
      expect(JSON.stringify(c.args.view)).not.toMatch(/api_key_|connection_test/);
    }
  });
});
