import { WebClient } from '@slack/web-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestHerald } from '../support/herald.js';
import { startSlack, type SlackPeer } from '../support/peers/slack.js';
import {
  newTriggerId,
  slackClient,
  textOfBlocks,
  type SlackClient,
  newViewId,
  openedView as openedViewAt,
} from '../support/slack-client.js';
import { waitFor } from '../support/wait.js';
import { startSlackHerald, type SlackHerald } from '../support/slack-herald.js';

/**
 * Slack's own limits against real data: more templates than a menu's 100 options, titles that try
 * to ping a channel, text that escaping makes longer than a section holds.
 */
const SECRET = 'slack-signing-secret-for-limits';

let h: TestHerald;
let slack: SlackPeer;
let client: SlackClient;

let world: SlackHerald | undefined;

beforeAll(async () => {
  world = await startSlackHerald({ secret: SECRET, channel: 'CANNOUNCE', user: { id: 'UCAROL', name: 'carol' } });
  ({ h, slack, client } = world);
});

afterAll(async () => {
  await world?.close();
});

const viewId = newViewId;

const openedView = (before: number): Promise<any> => openedViewAt(slack, before);

describe('150 templates (a static menu holds 100 options)', () => {
  let templates: any[];

  beforeAll(async () => {
    const batch = (from: number, n: number) =>
      Array.from({ length: n }, (_, i) => ({
        name: `Notice ${String(from + i).padStart(3, '0')}`,
        body: 'Hello {{incident.title}}',
      }));
    const first = await h.api('POST', '/v1/templates', { body: batch(0, 100) });
    const second = await h.api('POST', '/v1/templates', { body: batch(100, 50) });
    expect([first.status, second.status]).toEqual([201, 201]);
    templates = [...first.body.data, ...second.body.data];
  });

  it('an update keeps an attached template older than the newest 100', async () => {
    const oldest = templates[0];
    const inc = (
      await h.api('POST', '/v1/incidents', {
        body: { title: 'Old template attached', severity: 'minor', template_ids: [oldest.id] },
      })
    ).body;
    const before = slack.callsTo('views.open').length;
    await client.command(`update ${inc.id}`);
    const view = await openedView(before);
    const el = view.blocks.find((b: any) => b.block_id === 'template_ids').element;
    expect(el.initial_options.map((o: any) => o.value)).toEqual([oldest.id]);
    // The user only changes the status; the templates input is submitted as shown.
    const r = await client.submit(view, { status: 'identified' }, { viewId: viewId() });
    expect(r.json?.response_action).not.toBe('errors');
    const got = (await h.api('GET', `/v1/incidents/${inc.id}`)).body;
    expect(got).toMatchObject({ status: 'identified', template_ids: [oldest.id] });
  });

  it('searches every template by name as the user types, and attaches what was found', async () => {
    const before = slack.callsTo('views.open').length;
    await client.command('new Searching templates');
    const view = await openedView(before);
    const el = view.blocks.find((b: any) => b.block_id === 'template_ids').element;
    expect(el.type).toBe('multi_external_select');

    const all = await client.suggest(view, 'template_ids', '');
    expect(all.status).toBe(200);
    expect(all.json.options).toHaveLength(100);
    expect(all.json.options[0].value).toBe(templates[149].id);

    const found = await client.suggest(view, 'template_ids', 'notice 00');
    expect(found.json.options.map((o: any) => o.text.text)).toEqual([
      'Notice 009',
      'Notice 008',
      'Notice 007',
      'Notice 006',
      'Notice 005',
      'Notice 004',
      'Notice 003',
      'Notice 002',
      'Notice 001',
      'Notice 000',
    ]);

    const r = await client.submit(view, { severity: 'low', template_ids: [templates[3].id] }, { viewId: viewId() });
    expect(r.json?.response_action).not.toBe('errors');
    const inc = (await h.api('GET', '/v1/incidents?limit=100')).body.data.find(
      (i: any) => i.title === 'Searching templates',
    );
    expect(inc.template_ids).toEqual([templates[3].id]);
  });
});

describe('escaping', () => {
  it('a title cannot ping the channel through the announcement or the show answer', async () => {
    const inc = (
      await h.api('POST', '/v1/incidents', {
        body: { title: '<!channel> wake up', severity: 'critical', impact: '<'.repeat(3000) },
      })
    ).body;
    const post = await waitFor<any>(
      () => slack.callsTo('chat.postMessage').find((c) => JSON.stringify(c.args.blocks ?? []).includes(inc.id)),
      { what: 'announcement', timeoutMs: 25_000 },
    );
    expect(post.args.channel).toBe('CANNOUNCE');
    expect(String(post.args.text)).not.toContain('<!channel>');
    expect(JSON.stringify(post.args.blocks)).not.toContain('<!channel>');
    // Escaping turned 3,000 `<` into 12,000 characters: still within Slack's 3,000 per section.
    for (const b of post.args.blocks as any[])
      if (b.type === 'section' && b.text) expect(b.text.text.length).toBeLessThanOrEqual(3000);

    const show = await client.command(`show ${inc.id}`);
    expect(show.json.response_type).toBe('ephemeral');
    expect(show.json.text).not.toContain('<!channel>');
    expect(textOfBlocks(show.json.blocks)).not.toContain('<!channel>');
  });

  it('an unknown sub-command is quoted back escaped', async () => {
    const r = await client.command('<!here> please');
    expect(r.json.response_type).toBe('ephemeral');
    expect(r.json.text).not.toContain('<!here>');
    expect(r.json.text).toContain('&lt;!here&gt;');
  });
});

describe('the fake Web API refuses what Slack refuses, and fails the test that sent it', () => {
  it('answers invalid_blocks, expired_trigger_id and no_text as Slack does, and close() lists every violation', async () => {
    const fake = await startSlack();
    const web = new WebClient('xoxb-test', { slackApiUrl: fake.apiUrl, retryConfig: { retries: 0 } });
    const title = { type: 'plain_text' as const, text: 'Title' };
    // Half an emoji (the old cut at 75 code units) in an option text.
    const half = `${'a'.repeat(74)}👩‍💻`.slice(0, 75);
    const select = {
      type: 'input' as const,
      block_id: 'b',
      label: title,
      element: {
        type: 'static_select' as const,
        action_id: 'a',
        options: [{ text: { type: 'plain_text' as const, text: half }, value: 'v' }],
      },
    };
    await expect(
      web.views.open({ trigger_id: newTriggerId(), view: { type: 'modal', title, submit: title, blocks: [select] } }),
    ).rejects.toMatchObject({ data: { error: 'invalid_arguments' } });
    await expect(
      web.views.open({
        trigger_id: newTriggerId(),
        view: { type: 'modal', title, blocks: [{ type: 'section', text: { type: 'mrkdwn', text: '' } }] },
      }),
    ).rejects.toMatchObject({ data: { error: 'invalid_blocks' } });
    await expect(
      web.views.open({ trigger_id: `${Date.now() - 3500}.1.abc`, view: { type: 'modal', title, blocks: [] } }),
    ).rejects.toMatchObject({ data: { error: 'expired_trigger_id' } });
    await expect(web.chat.postMessage({ channel: 'C1', text: '' })).rejects.toMatchObject({
      data: { error: 'no_text' },
    });
    await expect(
      web.chat.postMessage({
        channel: 'C1',
        text: 'x',
        blocks: Array.from({ length: 5 }, () => ({
          type: 'section',
          text: { type: 'mrkdwn', text: 'y'.repeat(3000) },
        })),
      }),
    ).rejects.toMatchObject({ data: { error: 'msg_too_long' } });
    expect(fake.violations.map((v) => v.rule)).toEqual([
      'holds an unpaired UTF-16 surrogate',
      'is an empty text object',
      expect.stringMatching(/^used \d+ ms after the interaction/),
      'a message needs text or blocks',
      expect.stringMatching(/^hold 15000 characters of text/),
    ]);
    await expect(fake.close()).rejects.toThrow(/5 payload\(s\) that break Slack's limits/);
  });

  it('the Slack test client fails on an answer Slack would refuse', async () => {
    // An answer from something that is not Herald: a hand-made server answering with half an emoji.
    const { createServer } = await import('node:http');
    const server = createServer((_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ response_type: 'ephemeral', text: '👩‍💻'.slice(0, 1) }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    try {
      const bad = slackClient(`http://127.0.0.1:${port}`, 'secret');
      await expect(bad.command('help')).rejects.toThrow(/unpaired UTF-16 surrogate/);
    } finally {
      server.close();
    }
  });
});
