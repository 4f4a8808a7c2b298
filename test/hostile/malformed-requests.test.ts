import { createServer, type Server } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerClientErrors } from '../../src/http/server.js';
import { createLogger } from '../../src/log.js';
import { signSlackRequest } from '../../src/slack/verify-request.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { startSlack, type SlackPeer } from '../support/peers/slack.js';
import { logLines, rawClient } from './raw-http.js';

/**
 * Every malformed request is a 4xx (docs/api.md "Errors"): broken percent-encoding, bodies that do not
 * decode, invalid UTF-8, text no field may hold, signed-but-malformed Slack payloads. And the
 * render preview needs incidents:read to read an incident.
 */
const SECRET = 'slack-signing-secret-hostile';
let h: TestHerald;
let slack: SlackPeer;
let raw: ReturnType<typeof rawClient>;
const logs = logLines();

beforeAll(async () => {
  slack = await startSlack();
  h = await startHerald(
    { SLACK_SIGNING_SECRET: SECRET, SLACK_BOT_TOKEN: 'xoxb-test', SLACK_API_URL: slack.apiUrl, LOG_LEVEL: 'info' },
    { worker: false, log: createLogger('info', logs.sink) },
  );
  raw = rawClient(h.url);
});

afterAll(async () => {
  raw?.close();
  await h?.herald.slack?.stop();
  await h?.close();
  await slack?.close();
});

const auth = () => ({ authorization: `Bearer ${h.token}` });
const json = (extra: Record<string, string> = {}) => ({ ...auth(), 'content-type': 'application/json', ...extra });

function expectProblem(
  r: { status: number; headers: Record<string, unknown>; json: unknown },
  status: number,
  code: string,
) {
  expect(r.status).toBe(status);
  expect(String(r.headers['content-type'])).toMatch(/^application\/problem\+json/);
  expect(r.json).toMatchObject({ status, code });
}

const errorLines = () => logs.at('error');

describe('paths', () => {
  it.each([
    '/v1/incidents/inc_x%ZZ',
    '/v1/connections/abc%',
    '/v1/templates/%C0%80',
    '/v1/incidents/%E0%A4%A',
    '/v1/templates/tpl_1%ff/render',
    '/slack/events%',
  ])('%s → 400 invalid_path, before authentication, nothing at error level', async (path) => {
    const before = errorLines().length;
    for (const headers of [{}, auth()]) {
      const r = await raw.send({ method: 'GET', path, headers });
      expectProblem(r, 400, 'invalid_path');
    }
    const post = await raw.send({ method: 'POST', path, headers: json(), body: '{}' });
    expectProblem(post, 400, 'invalid_path');
    expect(errorLines().slice(before)).toEqual([]);
  });

  it('a well-formed escape still reaches the route (404 for an unknown id)', async () => {
    const r = await raw.send({ method: 'GET', path: '/v1/incidents/inc_%41', headers: auth() });
    expectProblem(r, 404, 'not_found');
  });
});

describe('requests Node refuses before Express', () => {
  /** Writes raw bytes on a fresh TCP connection and reads until the server closes it. */
  function rawTcp(port: number, bytes: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      const socket = net.connect(port, '127.0.0.1', () => socket.end(bytes));
      socket.setTimeout(10_000, () => socket.destroy(new Error('no answer within 10 s')));
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('error', reject);
      socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
    });
  }

  it('a request line that is not HTTP → 400 problem+json; headers over 16 KiB → 431 problem+json', async () => {
    const server: Server = createServer(h.herald.app);
    answerClientErrors(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const port = (server.address() as AddressInfo).port;
    try {
      const garbage = await rawTcp(port, 'GARBAGE / NOT-HTTP\r\n\r\n');
      expect(garbage).toMatch(/^HTTP\/1\.1 400 /);
      expect(garbage).toMatch(/content-type: application\/problem\+json/i);
      expect(JSON.parse(garbage.slice(garbage.indexOf('\r\n\r\n') + 4))).toMatchObject({
        status: 400,
        code: 'bad_request',
      });
      const huge = await rawTcp(port, `GET /v1/incidents HTTP/1.1\r\nHost: x\r\nX-Long: ${'a'.repeat(20_000)}\r\n\r\n`);
      expect(huge).toMatch(/^HTTP\/1\.1 431 /);
      expect(JSON.parse(huge.slice(huge.indexOf('\r\n\r\n') + 4))).toMatchObject({
        status: 431,
        code: 'request_headers_too_large',
      });
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

describe('bodies that do not decode', () => {
  const plain = Buffer.from(JSON.stringify({ title: 'Encoded?', severity: 'minor' }));

  it.each(['gzip', 'deflate', 'br', 'GZIP'])('Content-Encoding: %s on plain bytes → 400', async (coding) => {
    const before = errorLines().length;
    const r = await raw.send({
      method: 'POST',
      path: '/v1/incidents',
      headers: json({ 'content-encoding': coding }),
      body: plain,
    });
    expectProblem(r, 400, 'invalid_json');
    expect(errorLines().slice(before)).toEqual([]);
  });

  it('an encoding Herald does not know → 415', async () => {
    for (const coding of ['snappy', 'gzip, br', 'x-garbage']) {
      const r = await raw.send({
        method: 'POST',
        path: '/v1/incidents',
        headers: json({ 'content-encoding': coding }),
        body: plain,
      });
      expectProblem(r, 415, 'unsupported_media_type');
    }
  });

  it('a body that really is gzip is read', async () => {
    const r = await raw.send({
      method: 'POST',
      path: '/v1/incidents',
      headers: json({ 'content-encoding': 'gzip' }),
      body: gzipSync(plain),
    });
    expect(r.status).toBe(201);
    expect(r.json).toMatchObject({ title: 'Encoded?' });
  });

  it('invalid UTF-8 → 400 and nothing is stored (no U+FFFD)', async () => {
    const bad = Buffer.concat([
      Buffer.from('{"title":"caf'),
      Buffer.from([0xc3, 0x28, 0xff]),
      Buffer.from('","severity":"minor"}'),
    ]);
    const r = await raw.send({ method: 'POST', path: '/v1/incidents', headers: json(), body: bad });
    expectProblem(r, 400, 'invalid_json');
    expect((r.json as { detail: string }).detail).toMatch(/UTF-8/);
    const gz = await raw.send({
      method: 'POST',
      path: '/v1/incidents',
      headers: json({ 'content-encoding': 'gzip' }),
      body: gzipSync(bad),
    });
    expectProblem(gz, 400, 'invalid_json');
    const list = await h.api('GET', '/v1/incidents?limit=100');
    expect(JSON.stringify(list.body)).not.toContain('\ufffd');
  });

  it('a charset other than UTF-8 → 415', async () => {
    const r = await raw.send({
      method: 'POST',
      path: '/v1/incidents',
      headers: json({ 'content-type': 'application/json; charset=utf-16le' }),
      body: Buffer.from('{"title":"x","severity":"minor"}', 'utf16le'),
    });
    expectProblem(r, 415, 'unsupported_media_type');
  });
});

describe('text no field may hold → 422 with the field path', () => {
  const cases: [string, string, string][] = [
    ['a lone high surrogate in the title', '{"title":"abc\\ud800","severity":"minor"}', 'title'],
    [
      'a lone low surrogate in the description',
      '{"title":"ok","severity":"minor","description":"x\\udc00y"}',
      'description',
    ],
    ['NUL in the description', '{"title":"ok","severity":"minor","description":"a\\u0000b"}', 'description'],
    ['a bell in the title', '{"title":"ding\\u0007","severity":"minor"}', 'title'],
    ['a newline in the title (one line)', '{"title":"two\\nlines","severity":"minor"}', 'title'],
    ['a bare CR in the impact', '{"title":"ok","severity":"minor","impact":"a\\rb"}', 'impact'],
    ['ESC in a template id', '{"title":"ok","severity":"minor","template_ids":["tpl_\\u001b[31m"]}', 'template_ids.0'],
    ['NUL in a field name', '{"title":"ok","severity":"minor","x\\u0000":1}', 'x\u0000'],
  ];
  it.each(cases)('%s', async (_what, body, field) => {
    const r = await raw.send({ method: 'POST', path: '/v1/incidents', headers: json(), body });
    expectProblem(r, 422, 'validation_failed');
    expect((r.json as { errors: { field: string }[] }).errors.map((e) => e.field)).toContain(field);
  });

  it('tab, newline and CRLF are text in free-text fields; a valid surrogate pair is a character', async () => {
    const r = await h.api('POST', '/v1/incidents', {
      body: { title: 'Pager 📟 down', severity: 'minor', description: 'line 1\n\tline 2\r\nline 3', impact: 'a\tb' },
    });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ title: 'Pager 📟 down', description: 'line 1\n\tline 2\r\nline 3' });
  });

  it('every endpoint gets the rule: templates, connections, execute variables, PATCH', async () => {
    const t = await raw.send({
      method: 'POST',
      path: '/v1/templates',
      headers: json(),
      body: '{"name":"n\\u0000","subject":"s","body":"b"}',
    });
    expectProblem(t, 422, 'validation_failed');
    expect((t.json as { errors: { field: string }[] }).errors.map((e) => e.field)).toContain('name');
    const bulk = await raw.send({
      method: 'POST',
      path: '/v1/templates',
      headers: json(),
      body: '[{"name":"ok","subject":"s","body":"b"},{"name":"ok2","subject":"s\\ud83d","body":"b"}]',
    });
    expectProblem(bulk, 422, 'validation_failed');
    expect((bulk.json as { errors: { field: string }[] }).errors.map((e) => e.field)).toContain('1.subject');
    const c = await raw.send({
      method: 'POST',
      path: '/v1/connections',
      headers: json(),
      body: '{"name":"hook","type":"webhook","config":{"url":"https://example.com/\\u0000"}}',
    });
    expectProblem(c, 422, 'validation_failed');
    expect((c.json as { errors: { field: string }[] }).errors.map((e) => e.field)).toContain('config.url');
    const inc = await h.api('POST', '/v1/incidents', { body: { title: 'Patch me', severity: 'minor' } });
    const p = await raw.send({
      method: 'PATCH',
      path: `/v1/incidents/${inc.body.id}`,
      headers: json(),
      body: '{"description":"\\u0000"}',
    });
    expectProblem(p, 422, 'validation_failed');
    const x = await raw.send({
      method: 'POST',
      path: `/v1/incidents/${inc.body.id}/execute`,
      headers: json(),
      body: '{"variables":{"eta":"soon\\ud800"}}',
    });
    expectProblem(x, 422, 'validation_failed');
    expect((x.json as { errors: { field: string }[] }).errors.map((e) => e.field)).toContain('variables.eta');
    const after = await h.api('GET', `/v1/incidents/${inc.body.id}`);
    expect(after.body.description).toBe('');
  });
});

describe('render preview with incident_id needs incidents:read', () => {
  it('templates:read alone → 403 naming incidents:read; with both scopes → 200; without incident_id → 200', async () => {
    const inc = await h.api('POST', '/v1/incidents', {
      body: { title: 'Secret outage title', severity: 'major', description: 'secret description' },
    });
    const t = await h.api('POST', '/v1/templates', {
      body: { name: `render-scope-${Date.now()}`, subject: '{{incident.title}}', body: '{{incident.description}}' },
    });
    expect(t.status).toBe(201);
    const templatesOnly = await h.tokenWith(['templates:read']);
    const both = await h.tokenWith(['templates:read', 'incidents:read']);
    const refused = await h.api('POST', `/v1/templates/${t.body.id}/render`, {
      token: templatesOnly,
      body: { incident_id: inc.body.id },
    });
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ code: 'insufficient_scope' });
    expect(refused.body.detail).toContain('incidents:read');
    expect(refused.headers.get('www-authenticate')).toContain('scope="incidents:read"');
    expect(refused.text).not.toContain('Secret outage title');
    // Also for an incident that does not exist: the scope decides first, existence is not leaked.
    const unknown = await h.api('POST', `/v1/templates/${t.body.id}/render`, {
      token: templatesOnly,
      body: { incident_id: 'inc_01JZZZZZZZZZZZZZZZZZZZZZZZ' },
    });
    expect(unknown.status).toBe(403);
    const sample = await h.api('POST', `/v1/templates/${t.body.id}/render`, {
      token: templatesOnly,
      body: { incident_id: null },
    });
    expect(sample.status).toBe(200);
    expect(sample.text).not.toContain('Secret outage title');
    const ok = await h.api('POST', `/v1/templates/${t.body.id}/render`, {
      token: both,
      body: { incident_id: inc.body.id },
    });
    expect(ok.status).toBe(200);
    expect(ok.text).toContain('Secret outage title');
  });
});

describe('Slack: signed but malformed', () => {
  const ts = () => Math.floor(Date.now() / 1000);
  function signed(
    body: Buffer | string,
    contentType = 'application/x-www-form-urlencoded',
    sign: Buffer | string = body,
  ) {
    const t = ts();
    return raw.send({
      method: 'POST',
      path: '/slack/events',
      headers: {
        'content-type': contentType,
        'x-slack-request-timestamp': String(t),
        'x-slack-signature': signSlackRequest(SECRET, t, sign),
      },
      body,
    });
  }
  const form = (payload: string) => `payload=${encodeURIComponent(payload)}`;
  const user = { id: 'UALICE', name: 'alice' };

  const malformed: [string, string, string?][] = [
    ['payload=null', 'payload=null'],
    ['payload not JSON', form('{nope')],
    ['payload a JSON string', form('"block_actions"')],
    ['payload an array', form('[1,2]')],
    ['two payload fields', `${form('{}')}&${form('{}')}`],
    ['view_submission without a view', form(JSON.stringify({ type: 'view_submission', user }))],
    ['view_submission with view null', form(JSON.stringify({ type: 'view_submission', user, view: null }))],
    [
      'view.blocks not an array',
      form(
        JSON.stringify({
          type: 'view_submission',
          user,
          view: { id: 'V1', callback_id: 'incident_new', blocks: 'x', state: { values: {} } },
        }),
      ),
    ],
    [
      'view.state.values not an object',
      form(
        JSON.stringify({
          type: 'view_submission',
          user,
          view: { id: 'V1', callback_id: 'incident_new', blocks: [], state: { values: 7 } },
        }),
      ),
    ],
    ['"actions": null', form(JSON.stringify({ type: 'block_actions', user, actions: null }))],
    ['actions of numbers', form(JSON.stringify({ type: 'block_actions', user, actions: [1] }))],
    [
      'an action value that is an object',
      form(JSON.stringify({ type: 'block_actions', user, actions: [{ action_id: 'incident_show', value: { a: 1 } }] })),
    ],
    ['no user', form(JSON.stringify({ type: 'block_actions', actions: [{ action_id: 'x' }] }))],
    [
      'block_suggestion without value',
      form(JSON.stringify({ type: 'block_suggestion', user, action_id: 'a', block_id: 'b' })),
    ],
    ['a command form without user_id', 'command=%2Fincident&text=list&channel_id=C1&trigger_id=1.2.3'],
    ['a command with two texts', 'command=%2Fincident&text=a&text=b&user_id=U1&channel_id=C1&trigger_id=1.2.3'],
    ['JSON null event', 'null', 'application/json'],
    ['JSON array event', '[]', 'application/json'],
    ['event_callback without event', JSON.stringify({ type: 'event_callback' }), 'application/json'],
    [
      'app_home_opened without user',
      JSON.stringify({ type: 'event_callback', event: { type: 'app_home_opened', tab: 'home' } }),
      'application/json',
    ],
    ['url_verification without challenge', JSON.stringify({ type: 'url_verification' }), 'application/json'],
    ['not JSON at all', '{{{', 'application/json'],
  ];

  it.each(malformed)('%s → a 400 no-op with a warn line, never a 500', async (_what, body, type) => {
    const beforeWarn = logs.at('warn').length;
    const beforeError = errorLines().length;
    const r = await signed(body, type);
    expect(r.status).toBe(400);
    expect(
      logs
        .at('warn')
        .slice(beforeWarn)
        .some((l) => /malformed Slack payload/.test(String(l.msg))),
    ).toBe(true);
    expect(errorLines().slice(beforeError)).toEqual([]);
  });

  it('well-formed kinds Herald has no listener for → 200 no-op, answered at once', async () => {
    for (const [body, type] of [
      [form(JSON.stringify({ type: 'shortcut', user, callback_id: 'x' })), undefined],
      [JSON.stringify({ type: 'event_callback', event: { type: 'reaction_added', user: 'U1' } }), 'application/json'],
      [JSON.stringify({ type: 'app_rate_limited' }), 'application/json'],
    ] as const) {
      const r = await signed(body, type);
      expect(r.status).toBe(200);
      expect(r.ms).toBeLessThan(2_500); // not Bolt's 3 s "unacknowledged" wait
    }
  });

  it('the signature covers the raw bytes: invalid UTF-8 signed as sent → 400; signed over the lossy text → 401', async () => {
    const bytes = Buffer.concat([
      Buffer.from('command=%2Fincident&text='),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('&user_id=U1&channel_id=C1&trigger_id=1.2.3'),
    ]);
    const asSent = await signed(bytes);
    expect(asSent.status).toBe(400);
    const lossy = await signed(bytes, undefined, bytes.toString('utf8'));
    expect(lossy.status).toBe(401);
  });

  it.each([
    ['gzip', 400],
    ['br', 400],
    ['snappy', 415],
  ] as const)('Content-Encoding %s that does not decode → %i, never a 500', async (coding, status) => {
    const t = ts();
    const body = 'command=%2Fincident&text=help&user_id=U1&channel_id=C1&trigger_id=1.2';
    const beforeError = errorLines().length;
    const r = await raw.send({
      method: 'POST',
      path: '/slack/events',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        'content-encoding': coding,
        'x-slack-request-timestamp': String(t),
        'x-slack-signature': signSlackRequest(SECRET, t, body),
      },
      body,
    });
    expect(r.status).toBe(status);
    expect(errorLines().slice(beforeError)).toEqual([]);
  });

  it('a body over the limit → 413', async () => {
    const t = ts();
    const body = `command=%2Fincident&text=${'x'.repeat(1_100_000)}`;
    const r = await raw.send({
      method: 'POST',
      path: '/slack/events',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        'x-slack-request-timestamp': String(t),
        'x-slack-signature': signSlackRequest(SECRET, t, body),
      },
      body,
    });
    expect(r.status).toBe(413);
  });

  it('a valid command still works through the guard', async () => {
    const body = new URLSearchParams({
      command: '/incident',
      text: 'help',
      user_id: 'UALICE',
      user_name: 'alice',
      channel_id: 'CGENERAL',
      trigger_id: '1.2.3',
      team_id: 'T1',
    }).toString();
    const r = await signed(body);
    expect(r.status).toBe(200);
  });
});
