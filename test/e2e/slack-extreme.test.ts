import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DomainError } from '../../src/domain/common/errors.js';
import { startPrivateRedis } from '../support/child.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { startSlack, type SlackPeer } from '../support/peers/slack.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/peers/webhook-receiver.js';
import {
  ackTimes,
  newViewId,
  openedView,
  slackClient,
  textOfBlocks,
  type SlackClient,
} from '../support/slack-client.js';
import { blockTextLength, triggerAgeMs } from '../support/slack-limits.js';
import { waitFor } from '../support/wait.js';

/**
 * Slack with the extreme data a real workspace produces: 200-character emoji and markup titles,
 * 10,000-character texts, 4,000-character variable defaults, 200 connections, hundreds of open
 * incidents and a fan-out of a thousand deliveries running in the same process. The fake Web API
 * refuses (and records) anything over Slack's documented limits and any views.open after its
 * trigger expired; the test client fails any answer over a limit or later than 3 s; both fail the
 * test. The ack times seen here are printed as figures.
 */
const SECRET = 'slack-signing-secret-for-extreme';
const CAROL = { id: 'UCAROL', name: 'carol' };

/** 200 characters of what people paste into titles: emoji sequences, flags, mentions, markup. */
const EMOJI_TITLE = '👩‍💻🇺🇦 <!channel> *down* & <@U0BOSS> e\u0301 '.repeat(12).slice(0, 199);
/** 199 characters whose escaped form (`&lt;`) is twice as long, so every view must cut it. */
const MARKUP_TITLE = `${'<🔥'.repeat(66)}<`;
const TEN_K = `${'Lorem ipsum 👩‍👩‍👧‍👦 <b>&amp; '.repeat(400)}`.slice(0, 10_000);

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
}

/**
 * Execute from Slack: the button, the modal (loading, then filled in), the submit, the outcome
 * view. `meanwhile` runs right after the ack, while the execute is being planned and queued.
 */
async function executeViaSlack(
  slack: SlackPeer,
  client: SlackClient,
  incidentId: string,
  values: Record<string, string> = {},
  meanwhile?: () => Promise<void>,
) {
  const before = slack.callsTo('views.open').length;
  await client.click('incident_execute', incidentId);
  const view = await openedView(slack, before);
  expect(view.callback_id).toBe('incident_execute');
  const id = newViewId();
  const r = await client.submit(view, values, { viewId: id });
  expect(r.json?.response_action).toBe('update');
  await meanwhile?.();
  const outcome = await waitFor(() => slack.callsTo('views.update').find((c) => c.args.view_id === id), {
    what: 'the execute outcome view',
    timeoutMs: 60_000,
  });
  return { view, ack: r, outcome: outcome.args.view as any };
}

describe('a fan-out of 1,000 long deliveries, 200 connections, 300 open incidents', () => {
  let slack: SlackPeer;
  let receiver: WebhookReceiver;
  let h: TestHerald;
  let client: SlackClient;
  let incident: any;
  let redis: Awaited<ReturnType<typeof startPrivateRedis>>;

  beforeAll(async () => {
    // Tens of megabytes of deliveries in one atomic write: on a private Redis, so the shared one
    // (every other test file's) is not held up by it.
    redis = await startPrivateRedis([]);
    slack = await startSlack();
    // Each answer takes 250 ms, so the 1,000 deliveries take at least 5 s (50 at a time) however
    // fast the machine: long enough for the announcement's receipts (paced at one update per 2 s)
    // to be refreshed at least twice while they run.
    receiver = await startWebhookReceiver({ acceptUnverified: true, delayMs: 250 });
    // The fan-out's incident is announced here, so its receipts are kept current while it runs.
    h = await startHerald(
      {
        SLACK_SIGNING_SECRET: SECRET,
        SLACK_BOT_TOKEN: 'xoxb-test',
        SLACK_API_URL: slack.apiUrl,
        HERALD_SLACK_CHANNEL: 'CEXTREME',
      },
      { redisUrl: redis.url },
    );
    client = slackClient(h.url, SECRET, CAROL);
    for (let batch = 0; batch < 10; batch++) {
      await Promise.all(
        Array.from({ length: 20 }, async (_, i) => {
          const n = batch * 20 + i;
          const r = await h.api('POST', '/v1/connections', {
            body: {
              name: `${'📣'.repeat(20)} hook ${n} <!here>`,
              type: 'webhook',
              config: { url: `${receiver.url}/h/${n}` },
            },
          });
          expect(r.status).toBe(201);
        }),
      );
    }
    const templates = await h.api('POST', '/v1/templates', {
      body: Array.from({ length: 5 }, (_, i) => ({
        name: `${'🧯'.repeat(30)} notice ${i}`,
        subject: '{{incident.title}}',
        body: `{{incident.description}}\n\n{{note_${i}}} {{shared}}`,
        variables: [
          { name: `note_${i}`, required: false, default: 'n'.repeat(4000) },
          { name: 'shared', required: true },
        ],
      })),
    });
    expect(templates.status).toBe(201);
    incident = (
      await h.api('POST', '/v1/incidents', {
        body: {
          title: EMOJI_TITLE,
          severity: 'critical',
          description: TEN_K,
          impact: TEN_K,
          template_ids: templates.body.data.map((t: any) => t.id),
        },
      })
    ).body;
    expect(incident.id).toMatch(/^inc_/);
    // 300 open incidents with the same title (made through the service: quicker than 300 requests).
    const actor = { type: 'slack_user' as const, id: 'UBULK', name: '🤖'.repeat(50) };
    for (let batch = 0; batch < 10; batch++) {
      await Promise.all(
        Array.from({ length: 30 }, () =>
          h.herald.services.incidents.create({ title: MARKUP_TITLE, severity: 'major', description: TEN_K }, actor),
        ),
      );
    }
  }, 120_000);

  afterAll(async () => {
    await h?.close();
    await slack?.close();
    await receiver?.close();
    redis?.kill();
  });

  it('opens the execute modal in time, acks the submission in time, and keeps every other ack under 3 s while the deliveries run', async () => {
    const started = ackTimes.length;
    // While the 1,000 deliveries are rendered and queued (after the ack), other users' commands
    // are answered: rendering yields to the event loop.
    const planning: number[] = [];
    const { view, ack, outcome } = await executeViaSlack(
      slack,
      client,
      incident.id,
      { 'variables.shared': 'all hands' },
      async () => {
        for (let n = 0; n < 5; n++) planning.push((await client.command(`show ${incident.id}`)).ms);
      },
    );
    // Defaults of 4,000 characters are not prefilled (a Slack input holds 3,000) and stay whole.
    const note = view.blocks.find((b: any) => b.block_id === 'variables.note_0');
    expect(note.element.initial_value).toBeUndefined();
    expect(note.hint.text).toContain('4,000 characters');
    // Only the shown previews are rendered; the rest are counted.
    expect(textOfBlocks(view.blocks)).toContain('…and 990 more deliveries.');
    expect(ack.ms).toBeLessThan(3000);
    expect(textOfBlocks(outcome.blocks)).toContain('Queued 1000 deliveries');

    // Meanwhile, in the same process, the worker sends 1,000 deliveries of ~10 kB. Other users
    // keep using Slack: every ack is checked (< 3 s) by the client, every modal's trigger by the fake.
    const during: number[] = [];
    const executionId = (await h.api('GET', `/v1/incidents/${incident.id}/executions`)).body.data[0].id;
    const receiptsShown = () =>
      slack
        .callsTo('chat.update')
        .filter((c) => c.args.channel === 'CEXTREME' && JSON.stringify(c.args.blocks).includes(executionId));
    const deadline = Date.now() + 60_000;
    // At least six rounds, and on until the announcement has shown receipts twice (each refresh
    // reads the execution's deliveries while the worker sends them).
    for (let round = 0; round < 6 || (receiptsShown().length < 2 && Date.now() < deadline); round++) {
      during.push((await client.command('list')).ms);
      during.push((await client.command(`show ${incident.id}`)).ms);
      const before = slack.callsTo('views.open').length;
      during.push((await client.click('incident_update', incident.id)).ms);
      const update = await openedView(slack, before);
      expect(update.callback_id).toBe('incident_update');
      during.push((await client.click('incident_resolve', incident.id)).ms);
      during.push(
        (await client.event({ type: 'app_home_opened', user: `UHOME${round}`, channel: 'D1', tab: 'home' })).ms,
      );
    }
    expect(receiptsShown().length).toBeGreaterThanOrEqual(2);
    // Deliveries did run while those acks were measured.
    expect(receiver.requests.length).toBeGreaterThan(0);
    const all = ackTimes.slice(started);
    const triggerAges = slack.callsTo('views.open').map((c) => triggerAgeMs(c.args.trigger_id, c.at) ?? 0);
    console.log(
      `[slack-extreme] acks under a 1,000-delivery fan-out: n=${all.length} max=${Math.round(Math.max(...all))} ms p99=${Math.round(percentile(all, 99))} ms p50=${Math.round(percentile(all, 50))} ms; ` +
        `execute submission ack ${Math.round(ack.ms)} ms; acks while it was planned max ${Math.round(Math.max(...planning))} ms; ` +
        `views.open at most ${Math.max(...triggerAges)} ms after its trigger; delivered so far ${receiver.requests.length}`,
    );
    expect(Math.max(...planning)).toBeLessThan(3000);
    expect(Math.max(...during)).toBeLessThan(3000);
    expect(slack.violations).toEqual([]);
  }, 120_000);

  it('lists, shows and publishes the Home for 300 open incidents with emoji and markup titles, within every limit', async () => {
    const list = await client.command('list');
    expect(list.json.response_type).toBe('ephemeral');
    expect(textOfBlocks(list.json.blocks)).not.toContain('<!channel>');
    const show = await client.command(`show ${incident.id}`);
    expect(blockTextLength(show.json.blocks)).toBeLessThanOrEqual(12_000);
    const before = slack.callsTo('views.publish').length;
    await client.event({ type: 'app_home_opened', user: 'UHOMEX', channel: 'D1', tab: 'home' });
    const [published] = (await slack.waitForCalls('views.publish', before + 1)).slice(before);
    expect(published!.args.user_id).toBe('UHOMEX');
    expect(slack.violations).toEqual([]);
  });

  it('answers an unknown sub-command quoting 200 characters of emoji without splitting one', async () => {
    // The 40th code unit falls inside an emoji.
    const r = await client.command(`x${'🔥'.repeat(60)}`);
    expect(r.json.text).toContain("I don't know");
    expect(JSON.stringify(r.json)).not.toMatch(/\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])/i);
  });
});

describe('no stored text is shortened by a Slack round trip; empty renders; the 50-variable union', () => {
  let slack: SlackPeer;
  let h: TestHerald;
  let client: SlackClient;
  let slackConnection: any;

  beforeAll(async () => {
    slack = await startSlack();
    h = await startHerald({ SLACK_SIGNING_SECRET: SECRET, SLACK_BOT_TOKEN: 'xoxb-test', SLACK_API_URL: slack.apiUrl });
    client = slackClient(h.url, SECRET, CAROL);
    slackConnection = (
      await h.api('POST', '/v1/connections', {
        body: { name: 'Ops Slack', type: 'slack', config: { webhook_url: slack.webhookUrl() } },
      })
    ).body;
    expect(slackConnection.id).toMatch(/^con_/);
  });

  afterAll(async () => {
    await h?.close();
    await slack?.close();
  });

  it('a 10,000-character resolution summary survives resolve and close from Slack unchanged', async () => {
    const summary = `${'Root cause: 🧯 <cache> & *stampede*. '.repeat(300)}`.slice(0, 10_000);
    const inc = (
      await h.api('POST', '/v1/incidents', { body: { title: EMOJI_TITLE, severity: 'major', description: TEN_K } })
    ).body;
    expect(
      (await h.api('PATCH', `/v1/incidents/${inc.id}`, { body: { status: 'resolved', resolution_summary: summary } }))
        .status,
    ).toBe(200);
    expect((await h.api('PATCH', `/v1/incidents/${inc.id}`, { body: { status: 'monitoring' } })).status).toBe(200);

    let before = slack.callsTo('views.open').length;
    await client.command(`resolve ${inc.id}`);
    const resolve = await openedView(slack, before);
    const input = resolve.blocks.find((b: any) => b.block_id === 'resolution_summary');
    expect(input.element.initial_value).toBeUndefined();
    expect(input.optional).toBe(true);
    expect(input.hint.text).toContain('10,000 characters');
    expect((await client.submit(resolve, {}, { viewId: newViewId() })).json?.response_action).not.toBe('errors');
    let got = (await h.api('GET', `/v1/incidents/${inc.id}`)).body;
    expect(got.status).toBe('resolved');
    expect(got.resolution_summary).toBe(summary);

    // The update modal leaves the 10,000-character description alone too.
    before = slack.callsTo('views.open').length;
    await client.command(`update ${inc.id}`);
    const update = await openedView(slack, before);
    expect(update.blocks.some((b: any) => b.block_id === 'description')).toBe(false);
    expect(
      (await client.submit(update, { severity: 'minor' }, { viewId: newViewId() })).json?.response_action,
    ).not.toBe('errors');

    before = slack.callsTo('views.open').length;
    await client.click('incident_close', inc.id);
    const close = await openedView(slack, before);
    expect((await client.submit(close, {}, { viewId: newViewId() })).json?.response_action).not.toBe('errors');
    got = (await h.api('GET', `/v1/incidents/${inc.id}`)).body;
    expect(got).toMatchObject({ status: 'closed', severity: 'minor' });
    expect(got.resolution_summary).toBe(summary);
    expect(got.description).toBe(TEN_K);
  });

  it('a 4,000-character variable default is sent whole when the modal is submitted as shown', async () => {
    const long = `${'ETA 🕐 <soon> '.repeat(400)}`.slice(0, 4000);
    const tpl = (
      await h.api('POST', '/v1/templates', {
        body: {
          name: 'Long default',
          body: 'Update: {{eta}}',
          variables: [{ name: 'eta', required: true, default: long }],
        },
      })
    ).body;
    const inc = (
      await h.api('POST', '/v1/incidents', {
        body: { title: 'Default round trip', severity: 'minor', template_ids: [tpl.id] },
      })
    ).body;
    const { view, outcome } = await executeViaSlack(slack, client, inc.id);
    const eta = view.blocks.find((b: any) => b.block_id === 'variables.eta');
    expect(eta.element.initial_value).toBeUndefined();
    expect(textOfBlocks(outcome.blocks)).toContain('Queued 1 delivery');
    const [execution] = (await h.api('GET', `/v1/incidents/${inc.id}/executions`)).body.data;
    expect(execution.variables.eta).toBe(long);
  });

  it('a template that renders empty previews as such (the modal opens) and fails for good before sending', async () => {
    const tpl = (
      await h.api('POST', '/v1/templates', {
        body: { name: 'Empty', body: '{{#w}}{{w}}{{/w}}', variables: [{ name: 'w', required: false, default: '' }] },
      })
    ).body;
    const inc = (
      await h.api('POST', '/v1/incidents', {
        body: { title: 'Renders empty', severity: 'minor', template_ids: [tpl.id] },
      })
    ).body;
    const hooksBefore = slack.webhookMessages.length;
    const { view, outcome } = await executeViaSlack(slack, client, inc.id);
    expect(textOfBlocks(view.blocks)).toContain('renders empty');
    expect(textOfBlocks(outcome.blocks)).toContain('Queued 1 delivery');
    const failed = await waitFor(
      async () => {
        const [e] = (await h.api('GET', `/v1/incidents/${inc.id}/executions`)).body.data;
        return e?.deliveries[0]?.status === 'failed' && e.deliveries[0];
      },
      { what: 'the empty delivery to fail', timeoutMs: 30_000 },
    );
    expect(failed.attempts).toHaveLength(1);
    expect(failed.attempts[0].error).toMatch(/renders empty/);
    expect(slack.webhookMessages.length).toBe(hooksBefore);
  });

  it('an execute that fails after the ack is reported by updating the modal', async () => {
    const inc = (await h.api('POST', '/v1/incidents', { body: { title: 'Fails late', severity: 'minor' } })).body;
    // What a connection disabled between the check in the ack and the execute after it looks like.
    const late = vi
      .spyOn(h.herald.services.executions, 'execute')
      .mockRejectedValueOnce(new DomainError('no_connections', 'There is no enabled connection to deliver to.'));
    try {
      const { ack, outcome } = await executeViaSlack(slack, client, inc.id);
      expect(textOfBlocks(ack.json.view.blocks)).toContain('Sending');
      expect(outcome.title.text).toBe('Not sent');
      expect(textOfBlocks(outcome.blocks)).toContain('no enabled connection');
      expect(late).toHaveBeenCalledTimes(1);
    } finally {
      late.mockRestore();
    }
  });

  it('refuses templates whose variables together exceed 50, on the API and on the modal input', async () => {
    const made = await h.api('POST', '/v1/templates', {
      body: Array.from({ length: 3 }, (_, t) => ({
        name: `Twenty ${t}`,
        body: 'x',
        variables: Array.from({ length: 20 }, (_, v) => ({ name: `t${t}_v${v}`, required: false })),
      })),
    });
    expect(made.status).toBe(201);
    const ids: string[] = made.body.data.map((t: any) => t.id);
    const created = await h.api('POST', '/v1/incidents', {
      body: { title: 'Too many variables', severity: 'minor', template_ids: ids },
    });
    expect(created.status).toBe(422);
    expect(created.body.errors).toEqual([
      expect.objectContaining({ field: 'template_ids', code: 'too_many_variables' }),
    ]);

    const inc = (
      await h.api('POST', '/v1/incidents', {
        body: { title: 'Two templates', severity: 'minor', template_ids: ids.slice(0, 2) },
      })
    ).body;
    expect(inc.template_ids).toHaveLength(2);
    const patched = await h.api('PATCH', `/v1/incidents/${inc.id}`, { body: { template_ids: ids } });
    expect(patched.status).toBe(422);
    expect(patched.body.errors[0]).toMatchObject({ field: 'template_ids', code: 'too_many_variables' });
    // Re-sending the attached templates is not refused.
    expect(
      (
        await h.api('PATCH', `/v1/incidents/${inc.id}`, {
          body: { template_ids: ids.slice(0, 2), title: 'Two templates still' },
        })
      ).status,
    ).toBe(200);

    const before = slack.callsTo('views.open').length;
    await client.command('new Too many from Slack');
    const form = await openedView(slack, before);
    const r = await client.submit(form, { severity: 'minor', template_ids: ids }, { viewId: newViewId() });
    expect(r.json.response_action).toBe('errors');
    expect(Object.keys(r.json.errors)).toEqual(['template_ids']);
    expect(r.json.errors.template_ids).toMatch(/50/);
  });
});

describe('paced posts', () => {
  let slack: SlackPeer;
  let h: TestHerald;

  beforeAll(async () => {
    slack = await startSlack();
    h = await startHerald({
      SLACK_SIGNING_SECRET: SECRET,
      SLACK_BOT_TOKEN: 'xoxb-test',
      SLACK_API_URL: slack.apiUrl,
      HERALD_SLACK_CHANNEL: 'CBURST',
    });
  });

  afterAll(async () => {
    await h?.close();
    await slack?.close();
  });

  it('a burst of incidents over /v1 is announced one post a second, every one of them', async () => {
    const made = await Promise.all(
      Array.from({ length: 4 }, (_, i) =>
        h.api('POST', '/v1/incidents', { body: { title: `Burst ${i}`, severity: 'low' } }),
      ),
    );
    expect(made.map((r) => r.status)).toEqual([201, 201, 201, 201]);
    const posts = await waitFor(
      () => {
        const p = slack.callsTo('chat.postMessage').filter((c) => c.args.channel === 'CBURST');
        return p.length >= 4 && p;
      },
      { what: 'four announcements', timeoutMs: 30_000 },
    );
    for (let i = 1; i < posts.length; i++) expect(posts[i]!.at - posts[i - 1]!.at).toBeGreaterThanOrEqual(1000);

    // Ten quick changes to one incident: its announcement is updated at most once every 2 s and ends on the last.
    const id = made[0]!.body.id;
    const updatesBefore = slack.callsTo('chat.update').length;
    const changesStarted = Date.now();
    for (let n = 0; n < 10; n++) await h.api('PATCH', `/v1/incidents/${id}`, { body: { impact: `change ${n}` } });
    const changesTook = Date.now() - changesStarted;
    const last = await waitFor(
      () =>
        slack
          .callsTo('chat.update')
          .slice(updatesBefore)
          .find((c) => textOfBlocks(c.args.blocks as any[]).includes('change 9')),
      { what: 'the announcement showing the last change', timeoutMs: 30_000 },
    );
    const updates = slack
      .callsTo('chat.update')
      .slice(updatesBefore)
      .filter((c) => JSON.stringify(c.args.blocks).includes(id));
    // One at once, then one per 2 s while the changes lasted, and one for the last state.
    expect(updates.length).toBeLessThanOrEqual(2 + Math.ceil(changesTook / 2000));
    for (let i = 1; i < updates.length; i++) expect(updates[i]!.at - updates[i - 1]!.at).toBeGreaterThanOrEqual(1900);
    expect(last).toBeDefined();
  }, 60_000);
});
