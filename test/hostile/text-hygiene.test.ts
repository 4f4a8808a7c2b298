import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { textHygieneErrors } from '../../src/domain/common/validation.js';
import { checkSlackPayload } from '../../src/slack/payload-guard.js';
import type { TestHerald } from '../support/herald.js';
import type { SlackPeer } from '../support/peers/slack.js';
import { newViewId, openedView, type SlackClient } from '../support/slack-client.js';
import { startSlackHerald, type SlackHerald } from '../support/slack-herald.js';

describe('textHygieneErrors', () => {
  it('names the path of every bad string, keys included; free text keeps tab, LF and CRLF', () => {
    const errors = textHygieneErrors({
      title: 'a\nb',
      description: 'ok\tok\r\nok',
      impact: 'bare\rcr',
      variables: { eta: 'line\nline', bad: 'x\u0000' },
      list: ['fine', 'lone \udc00'],
      'k\u0007': 1,
    });
    expect(errors.map((e) => [e.field, e.code]).sort()).toEqual([
      ['impact', 'control_character'],
      ['k\u0007', 'control_character'],
      ['list.1', 'invalid_unicode'],
      ['title', 'control_character'],
      ['variables.bad', 'control_character'],
    ]);
    expect(textHygieneErrors({ title: 'Pager 📟 down', body: '' })).toEqual([]);
  });

  it('walks a body nested 50,000 levels deep in linear time (no stack overflow, no quadratic path copies)', () => {
    const deep = JSON.parse('['.repeat(50_000) + '"x\\u0000"' + ']'.repeat(50_000)) as unknown;
    const started = performance.now();
    const errors = textHygieneErrors(deep);
    const ms = performance.now() - started;
    expect(errors).toHaveLength(1);
    expect(errors[0]!.field.split('.')).toHaveLength(50_000);
    expect(ms).toBeLessThan(1_500);
  });

  it('reports at most 20 problems', () => {
    expect(textHygieneErrors(Array.from({ length: 500 }, () => '\u0000'))).toHaveLength(20);
  });
});

describe('checkSlackPayload', () => {
  const form = (p: unknown) => Buffer.from(`payload=${encodeURIComponent(JSON.stringify(p))}`);
  const FORM = 'application/x-www-form-urlencoded';
  const user = { id: 'U1' };

  it('passes what Herald listens to', () => {
    expect(
      checkSlackPayload(
        form({ type: 'block_actions', user, actions: [{ action_id: 'incident_close', value: 'inc_1' }] }),
        FORM,
      ).verdict,
    ).toBe('pass');
    expect(
      checkSlackPayload(
        form({
          type: 'view_submission',
          user,
          view: {
            id: 'V1',
            callback_id: 'incident_create',
            blocks: [],
            state: { values: { b: { a: { type: 'plain_text_input', value: 'x' } } } },
          },
        }),
        FORM,
      ).verdict,
    ).toBe('pass');
    expect(
      checkSlackPayload(
        Buffer.from('command=%2Fincident&text=help&user_id=U1&channel_id=C1&trigger_id=1.2'),
        `${FORM}; charset=utf-8`,
      ).verdict,
    ).toBe('pass');
    expect(
      checkSlackPayload(Buffer.from(JSON.stringify({ type: 'url_verification', challenge: 'c' })), 'application/json')
        .verdict,
    ).toBe('pass');
  });

  it('ignores well-formed kinds with no listener, refuses malformed ones', () => {
    expect(
      checkSlackPayload(form({ type: 'block_actions', user, actions: [{ action_id: 'someone_elses' }] }), FORM).verdict,
    ).toBe('ignore');
    expect(checkSlackPayload(Buffer.from('command=%2Fother&user_id=U1&channel_id=C1&trigger_id=1'), FORM).verdict).toBe(
      'ignore',
    );
    expect(
      checkSlackPayload(
        form({
          type: 'view_submission',
          user,
          view: { id: 'V1', callback_id: 'incident_create', blocks: {}, state: { values: {} } },
        }),
        FORM,
      ),
    ).toEqual({ verdict: 'malformed', reason: 'view_submission: view.blocks is not an array' });
    expect(checkSlackPayload(Buffer.from('payload=null'), FORM).verdict).toBe('malformed');
    expect(checkSlackPayload(Buffer.from([0x7b, 0xff, 0x7d]), 'application/json')).toEqual({
      verdict: 'malformed',
      reason: 'the body is not valid UTF-8',
    });
  });
});

/**
 * The text policy end to end: what an independent fuzz found stored (DEL and C1 controls in a
 * title, a URL whose trailing U+2028 / U+FEFF / U+00A0 was trimmed away) is refused with the
 * field and the code point named, over /v1 and from a Slack modal, and nothing is stored.
 */
describe('the text policy over /v1 and Slack', () => {
  const SECRET = 'slack-signing-secret-for-text-hygiene';
  let h: TestHerald;
  let slack: SlackPeer;
  let client: SlackClient;

  let world: SlackHerald | undefined;

  beforeAll(async () => {
    world = await startSlackHerald({ secret: SECRET, channel: 'CHYGIENE', user: { id: 'UHYG', name: 'hyg' } });
    ({ h, slack, client } = world);
  });

  afterAll(async () => {
    await world?.close();
  });

  const label = (c: string) => `U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`;

  it('one-line fields refuse DEL, C1, U+2028 and U+FEFF (422, field and code point named); free text keeps U+2028', async () => {
    for (const bad of ['\u007F', '\u009B', '\u0085', '\u2028', '\uFEFF', '\u202E']) {
      const title = `Checkout ${bad}down ${label(bad)}`;
      const r = await h.api('POST', '/v1/incidents', { body: { title, severity: 'major' } });
      expect(r.status, label(bad)).toBe(422);
      expect(r.headers.get('content-type')).toMatch(/application\/problem\+json/);
      const e = r.body.errors.find((x: { field: string }) => x.field === 'title');
      expect(e.message).toContain(label(bad));
    }
    for (const bad of ['\u007F', '\u009B', '\uFEFF']) {
      const r = await h.api('POST', '/v1/incidents', {
        body: { title: 'T', severity: 'major', description: `d${bad}` },
      });
      expect(r.status, label(bad)).toBe(422);
      expect(r.body.errors[0]).toMatchObject({ field: 'description' });
    }
    const list = await h.api('GET', '/v1/incidents?limit=100');
    expect(list.body.data.filter((i: { title: string }) => i.title.startsWith('Checkout '))).toEqual([]);
    const ok = await h.api('POST', '/v1/incidents', {
      body: { title: 'Pager 📟 down — café 👩‍💻', severity: 'minor', description: 'line\u2028line\r\nand\ttab' },
    });
    expect(ok.status).toBe(201);
    expect(ok.body.description).toBe('line\u2028line\r\nand\ttab');
  });

  it('a connection URL with a trailing U+2028, U+FEFF or U+00A0 is refused, never trimmed', async () => {
    const before = (await h.api('GET', '/v1/connections?limit=100')).body.data.length;
    for (const bad of ['\u2028', '\uFEFF', '\u00A0', ' ', '\u3000']) {
      for (const url of [`https://hooks.example.com/in${bad}`, `${bad}https://hooks.example.com/in`]) {
        const r = await h.api('POST', '/v1/connections', { body: { name: 'w', type: 'webhook', config: { url } } });
        expect(r.status, JSON.stringify(url)).toBe(422);
        const e = r.body.errors.find((x: { field: string }) => x.field === 'config.url');
        expect(e.message, JSON.stringify(url)).toContain(label(bad));
      }
      const token = await h.api('POST', '/v1/connections', {
        body: { name: 's', type: 'slack', config: { bot_token: `xoxb-1-2${bad}`, channel: 'C1' } },
      });
      expect(token.status).toBe(422);
      expect(token.body.errors.map((x: { field: string }) => x.field)).toContain('config.bot_token');
    }
    expect((await h.api('GET', '/v1/connections?limit=100')).body.data.length).toBe(before);
  });

  it('a Slack modal submission follows the same rule: field errors on the input, nothing stored', async () => {
    const opened = slack.callsTo('views.open').length;
    await client.command('new', { channel: 'CWAR' });
    const view = await openedView(slack, opened);
    expect(view.callback_id).toBe('incident_create');
    const r = await client.submit(
      view,
      { title: 'Slack \u009B31m title', severity: 'major', description: 'bell\u0007' },
      { viewId: newViewId() },
    );
    expect(r.status).toBe(200);
    expect(r.json.response_action).toBe('errors');
    expect(r.json.errors.title).toContain('U+009B');
    expect(r.json.errors.description).toContain('U+0007');
    const line = await client.submit(view, { title: 'two\u2028lines', severity: 'major' }, { viewId: newViewId() });
    expect(line.json).toMatchObject({
      response_action: 'errors',
      errors: { title: expect.stringContaining('U+2028') },
    });
    const list = await h.api('GET', '/v1/incidents?limit=100');
    expect(
      list.body.data.filter((i: { title: string }) => i.title.startsWith('Slack ') || i.title.startsWith('two')),
    ).toEqual([]);
  });
});
