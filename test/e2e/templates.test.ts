import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHANNEL_TYPES } from '../../src/channels/index.js';
import { startHerald, type TestHerald } from '../support/herald.js';

let h: TestHerald;
beforeAll(async () => {
  h = await startHerald();
});
afterAll(async () => {
  await h.close();
});

const uniq = (label: string) => `${label} ${randomBytes(4).toString('hex')}`;
const create = (body: Record<string, unknown> = {}) =>
  h.api('POST', '/v1/templates', {
    body: {
      name: uniq('Outage'),
      body: 'We are investigating {{incident.title}}. {{#eta}}ETA: {{eta}}{{/eta}}',
      ...body,
    },
  });
const fields = (r: { body: { errors: { field: string }[] } }) => r.body.errors.map((e) => e.field);

describe('templates over HTTP', () => {
  it('creates with 201, Location, ETag and the full shape; variables are derived', async () => {
    const r = await create({
      subject: '[{{incident.severity}}] {{area}}',
      description: 'For outages',
      variants: { slack: { body: ':red_circle: {{incident.title}}' } },
    });
    expect(r.status).toBe(201);
    expect(r.headers.get('location')).toBe(`/v1/templates/${r.body.id}`);
    expect(r.headers.get('etag')).toBe('"r1"');
    expect(r.body.id).toMatch(/^tpl_[0-9A-Z]{26}$/);
    expect(r.body).toEqual({
      id: r.body.id,
      name: expect.stringMatching(/^Outage /),
      description: 'For outages',
      subject: '[{{incident.severity}}] {{area}}',
      body: expect.any(String),
      variants: { slack: { subject: null, body: ':red_circle: {{incident.title}}' } },
      variables: [
        { name: 'area', description: '', required: true, default: null },
        { name: 'eta', description: '', required: false, default: null },
      ],
      connection_ids: [],
      version: 1,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      updated_at: r.body.created_at,
    });
  });

  it('rejects bad bodies: strict fields, undeclared variables, unescaped placeholders, syntax', async () => {
    const strict = await create({ colour: 'red', variants: { sms: { body: 'x' } } });
    expect(strict.status).toBe(422);
    expect(fields(strict).sort()).toEqual(['colour', 'variants.sms']);

    const undeclared = await create({
      body: '{{eta}}',
      variables: [{ name: 'area' }],
      variants: { slack: { body: '{{owner}}' } },
    });
    expect(undeclared.status).toBe(422);
    expect(undeclared.body.code).toBe('undeclared_variable');
    expect(fields(undeclared)).toEqual(['body', 'variants.slack.body']);

    const triple = await create({ body: 'Hi {{{name}}}' });
    expect(triple.status).toBe(422);
    expect(triple.body.errors).toEqual([expect.objectContaining({ field: 'body', code: 'unescaped_placeholder' })]);

    const syntax = await create({ variants: { email: { subject: '{{#open}}', body: 'x' } } });
    expect(syntax.status).toBe(422);
    expect(syntax.body.errors).toEqual([
      expect.objectContaining({ field: 'variants.email.subject', code: 'invalid_syntax' }),
    ]);

    const long = await create({ body: 'x'.repeat(20_001), name: 'n'.repeat(101) });
    expect(fields(long).sort()).toEqual(['body', 'name']);
  });

  it('names are unique (case-insensitively): 409 template_name_taken', async () => {
    const name = uniq('Unique');
    expect((await create({ name })).status).toBe(201);
    const again = await create({ name: name.toLowerCase() });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('template_name_taken');
    expect(again.body.errors).toEqual([expect.objectContaining({ field: 'name', code: 'template_name_taken' })]);
  });

  it('connection_ids must exist', async () => {
    const r = await create({ connection_ids: ['con_01JZZZZZZZZZZZZZZZZZZZZZZZ'] });
    expect(r.status).toBe(422);
    expect(r.body.code).toBe('unknown_connection');
    expect(fields(r)).toEqual(['connection_ids.0']);
  });

  it('gets one (ETag) and answers 404 for unknown or malformed ids', async () => {
    const { body: t } = await create();
    const r = await h.api('GET', `/v1/templates/${t.id}`);
    expect(r.status).toBe(200);
    expect(r.headers.get('etag')).toBe('"r1"');
    expect(r.body).toEqual(t);
    expect((await h.api('GET', '/v1/templates/tpl_01JZZZZZZZZZZZZZZZZZZZZZZZ')).status).toBe(404);
    expect((await h.api('GET', '/v1/templates/nope')).body.code).toBe('not_found');
  });

  it('lists newest first with cursor pagination', async () => {
    const made = [];
    for (let i = 0; i < 3; i++) made.push((await create()).body.id);
    const p1 = await h.api('GET', '/v1/templates?limit=2');
    expect(p1.status).toBe(200);
    expect(p1.body.data.map((t: { id: string }) => t.id)).toEqual([made[2], made[1]]);
    expect(p1.body.pagination).toEqual({ next_cursor: expect.any(String), limit: 2 });
    const p2 = await h.api('GET', `/v1/templates?limit=1&cursor=${p1.body.pagination.next_cursor}`);
    expect(p2.body.data[0].id).toBe(made[0]);
    expect((await h.api('GET', '/v1/templates?limit=101')).status).toBe(422);
    expect((await h.api('GET', '/v1/templates?cursor=garbage')).body.code).toBe('invalid_cursor');
  });

  it('searches by name with q: the first `limit` matches, newest first, in one page; a blank q or a cursor beside it is 422', async () => {
    const tag = randomBytes(4).toString('hex');
    const made = [];
    for (const name of [`Pager ${tag} one`, `Unrelated ${tag}`, `PAGER ${tag} two`])
      made.push((await create({ name })).body.id);
    // Case-insensitive and trimmed, as the Slack template picker matches (TemplateService.search).
    const r = await h.api('GET', `/v1/templates?q=${encodeURIComponent(`  pager ${tag} `)}`);
    expect(r.status).toBe(200);
    expect(r.body.data.map((t: { id: string }) => t.id)).toEqual([made[2], made[0]]);
    expect(r.body.data[0]).not.toHaveProperty('variables_declared');
    expect(r.body.pagination).toEqual({ next_cursor: null, limit: 25 });
    const first = await h.api('GET', `/v1/templates?q=pager%20${tag}&limit=1`);
    expect(first.body.data.map((t: { id: string }) => t.id)).toEqual([made[2]]);
    expect(first.body.pagination).toEqual({ next_cursor: null, limit: 1 });
    expect((await h.api('GET', `/v1/templates?q=nothing-like-${tag}`)).body.data).toEqual([]);

    for (const bad of ['q=', 'q=%20%20', `q=${'x'.repeat(101)}`, 'q=a&q=b']) {
      const refused = await h.api('GET', `/v1/templates?${bad}`);
      expect(refused.status, bad).toBe(422);
      expect(refused.headers.get('content-type'), bad).toContain('application/problem+json');
      expect(refused.body.code, bad).toBe('validation_failed');
      expect(fields(refused), bad).toEqual(['q']);
    }
    const withCursor = await h.api('GET', `/v1/templates?q=pager&cursor=${first.body.pagination.next_cursor ?? 'x'}`);
    expect(withCursor.status).toBe(422);
    expect(fields(withCursor)).toEqual(['cursor']);
    expect((await h.api('GET', '/v1/templates?q=pager&limit=0')).status).toBe(422);
  });

  it('PATCH makes a new version; old versions stay readable', async () => {
    const { body: t } = await create({ body: 'v1 {{incident.title}}' });
    const p = await h.api('PATCH', `/v1/templates/${t.id}`, { body: { body: 'v2 {{owner}}', name: uniq('Renamed') } });
    expect(p.status).toBe(200);
    expect(p.headers.get('etag')).toBe('"r2"');
    expect(p.body).toMatchObject({ version: 2, body: 'v2 {{owner}}', variables: [{ name: 'owner', required: true }] });
    const noop = await h.api('PATCH', `/v1/templates/${t.id}`, { body: { body: 'v2 {{owner}}' } });
    expect(noop.body.version).toBe(2);

    const versions = await h.api('GET', `/v1/templates/${t.id}/versions`);
    expect(versions.status).toBe(200);
    expect(versions.body.data.map((v: { version: number }) => v.version)).toEqual([2, 1]);
    expect(versions.body.pagination.next_cursor).toBeNull();
    const paged = await h.api('GET', `/v1/templates/${t.id}/versions?limit=1`);
    const rest = await h.api(
      'GET',
      `/v1/templates/${t.id}/versions?limit=1&cursor=${paged.body.pagination.next_cursor}`,
    );
    expect(rest.body.data.map((v: { version: number }) => v.version)).toEqual([1]);

    const v1 = await h.api('GET', `/v1/templates/${t.id}/versions/1`);
    expect(v1.status).toBe(200);
    expect(v1.body).toEqual(t);
    expect((await h.api('GET', `/v1/templates/${t.id}/versions/3`)).status).toBe(404);
    expect((await h.api('GET', `/v1/templates/${t.id}/versions/abc`)).status).toBe(404);
    expect((await h.api('GET', '/v1/templates/tpl_01JZZZZZZZZZZZZZZZZZZZZZZZ/versions')).status).toBe(404);

    const empty = await h.api('PATCH', `/v1/templates/${t.id}`, { body: {} });
    expect(empty.status).toBe(422);
    const taken = await create();
    const clash = await h.api('PATCH', `/v1/templates/${t.id}`, { body: { name: taken.body.name } });
    expect(clash.status).toBe(409);
    expect(clash.body.code).toBe('template_name_taken');
  });

  it('a stale If-Match is 412 on PATCH and DELETE; the current one works', async () => {
    const { body: t } = await create();
    await h.api('PATCH', `/v1/templates/${t.id}`, { body: { description: 'changed' } });
    const stale = await h.api('PATCH', `/v1/templates/${t.id}`, {
      body: { description: 'mine' },
      headers: { 'If-Match': '"r1"' },
    });
    expect(stale.status).toBe(412);
    expect(stale.body.code).toBe('precondition_failed');
    expect((await h.api('DELETE', `/v1/templates/${t.id}`, { headers: { 'If-Match': '"r1"' } })).status).toBe(412);
    const ok = await h.api('PATCH', `/v1/templates/${t.id}`, {
      body: { description: 'mine' },
      headers: { 'If-Match': '"r2"' },
    });
    expect(ok.status).toBe(200);
    expect((await h.api('DELETE', `/v1/templates/${t.id}`, { headers: { 'If-Match': '"r3"' } })).status).toBe(204);
  });

  it('DELETE: 409 while a non-closed incident attaches it, 204 once the incident is closed', async () => {
    const { body: t } = await create();
    const inc = await h.api('POST', '/v1/incidents', {
      body: { title: 'DB down', severity: 'critical', template_ids: [t.id] },
    });
    expect(inc.status).toBe(201);
    const inUse = await h.api('DELETE', `/v1/templates/${t.id}`);
    expect(inUse.status).toBe(409);
    expect(inUse.body.code).toBe('template_in_use');
    await h.api('PATCH', `/v1/incidents/${inc.body.id}`, { body: { status: 'resolved' } });
    expect((await h.api('DELETE', `/v1/templates/${t.id}`)).status).toBe(409);
    expect((await h.api('POST', `/v1/incidents/${inc.body.id}/close`)).status).toBe(200);
    const gone = await h.api('DELETE', `/v1/templates/${t.id}`);
    expect(gone.status).toBe(204);
    expect(gone.text).toBe('');
    expect((await h.api('GET', `/v1/templates/${t.id}`)).status).toBe(404);
    expect((await h.api('GET', `/v1/templates/${t.id}/versions/1`)).status).toBe(404);
    expect((await h.api('DELETE', `/v1/templates/${t.id}`)).status).toBe(404);
    // The name is free again.
    expect((await create({ name: t.name })).status).toBe(201);
  });

  it('scopes: templates:read reads and previews, templates:write writes; 405 for other methods', async () => {
    const { body: t } = await create();
    const reader = await h.tokenWith(['templates:read']);
    expect((await h.api('GET', `/v1/templates/${t.id}`, { token: reader })).status).toBe(200);
    expect((await h.api('POST', `/v1/templates/${t.id}/render`, { token: reader, body: {} })).status).toBe(200);
    const denied = await h.api('POST', '/v1/templates', { token: reader, body: { name: uniq('x'), body: 'x' } });
    expect(denied.status).toBe(403);
    expect(denied.headers.get('www-authenticate')).toContain('scope="templates:write"');
    expect((await h.api('DELETE', `/v1/templates/${t.id}`, { token: reader })).status).toBe(403);
    const writer = await h.tokenWith(['templates:write']);
    expect((await h.api('GET', '/v1/templates', { token: writer })).status).toBe(403);
    const put = await h.api('PUT', `/v1/templates/${t.id}`, { body: {} });
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('GET, HEAD, PATCH, DELETE');
  });
});

describe('bulk create', () => {
  it('an array creates all: 201 {"data": [...]}', async () => {
    const names = [uniq('Bulk'), uniq('Bulk'), uniq('Bulk')];
    const r = await h.api('POST', '/v1/templates', {
      body: names.map((name) => ({ name, body: `Body of ${name} {{eta}}` })),
    });
    expect(r.status).toBe(201);
    expect(r.body.data.map((t: { name: string }) => t.name)).toEqual(names);
    expect(
      r.body.data.every((t: { version: number; variables: unknown[] }) => t.version === 1 && t.variables.length === 1),
    ).toBe(true);
    for (const t of r.body.data) expect((await h.api('GET', `/v1/templates/${t.id}`)).status).toBe(200);
  });

  it('is all or nothing; errors point at the item', async () => {
    const items = Array.from({ length: 5 }, () => ({ name: uniq('Batch'), body: 'x' }));
    const invalid = await h.api('POST', '/v1/templates', {
      body: items.map((t, i) => (i === 3 ? { ...t, name: '' } : t)),
    });
    expect(invalid.status).toBe(422);
    expect(fields(invalid)).toEqual(['3.name']);

    const undeclared = await h.api('POST', '/v1/templates', {
      body: items.map((t, i) => (i === 2 ? { ...t, body: '{{x}}', variables: [] } : t)),
    });
    expect(undeclared.status).toBe(422);
    expect(undeclared.body.code).toBe('undeclared_variable');
    expect(fields(undeclared)).toEqual(['2.body']);

    const dup = await h.api('POST', '/v1/templates', {
      body: [...items, { ...items[0], name: items[0]!.name.toUpperCase() }],
    });
    expect(dup.status).toBe(422);
    expect(dup.body.errors).toEqual([expect.objectContaining({ field: '5.name', code: 'duplicate_name' })]);

    const { body: existing } = await create();
    const taken = await h.api('POST', '/v1/templates', {
      body: items.map((t, i) => (i === 3 ? { ...t, name: existing.name } : t)),
    });
    expect(taken.status).toBe(409);
    expect(taken.body.code).toBe('template_name_taken');
    expect(fields(taken)).toEqual(['3.name']);

    // Nothing of the failed batches exists: the same names are all still free.
    const ok = await h.api('POST', '/v1/templates', { body: items });
    expect(ok.status).toBe(201);
    expect(ok.body.data).toHaveLength(5);
  });

  it('names every bad field of every item in one answer', async () => {
    const name = uniq('Every');
    const r = await h.api('POST', '/v1/templates', {
      body: [
        { name, body: 'fine' },
        { name: '', body: 'x', colour: 'red' },
        { name: uniq('Every'), body: '{{{raw}}}' },
        { name: name.toUpperCase(), body: 'x' },
        { name: uniq('Every'), body: '{{x}}', variables: [] },
      ],
    });
    expect(r.status).toBe(422);
    expect(r.body.code).toBe('validation_failed');
    expect(r.body.errors.map((e: { field: string; code: string }) => `${e.field}:${e.code}`).sort()).toEqual([
      '1.colour:unknown_field',
      '1.name:required',
      '2.body:unescaped_placeholder',
      '3.name:duplicate_name',
      '4.body:undeclared_variable',
    ]);
    expect(
      (await h.api('GET', '/v1/templates?limit=100')).body.data.map((t: { name: string }) => t.name),
    ).not.toContain(name);
  });

  it('refuses an empty batch and more than 100', async () => {
    expect((await h.api('POST', '/v1/templates', { body: [] })).status).toBe(422);
    const many = Array.from({ length: 101 }, (_, i) => ({ name: `${uniq('Many')} ${i}`, body: 'x' }));
    const r = await h.api('POST', '/v1/templates', { body: many });
    expect(r.status).toBe(422);
    expect(fields(r)).toEqual(['']);
  });
});

describe('render preview', () => {
  it('renders all nine channel types with the sample incident; values are escaped per channel', async () => {
    const { body: t } = await create({
      subject: '{{incident.title}}',
      body: '*{{incident.severity}}* {{area}}{{#eta}} ETA {{eta}}{{/eta}}',
      variables: [
        { name: 'area', required: true },
        { name: 'eta', required: false, default: 'unknown' },
      ],
      variants: { email: { subject: 'Mail: {{area}}', body: 'Hello\n{{area}}' } },
    });
    const r = await h.api('POST', `/v1/templates/${t.id}/render`, {
      body: { variables: { area: '<!channel> @everyone *bold* <script>', unused: 'x' } },
    });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body.previews).sort()).toEqual([...CHANNEL_TYPES].sort());
    for (const type of CHANNEL_TYPES) {
      expect(r.body.previews[type]).toEqual(
        expect.objectContaining({ subject: expect.any(String), body: expect.any(String) }),
      );
      // Plain for structured consumers and for the status page (it escapes when it renders HTML).
      if (type !== 'webhook' && type !== 'email' && type !== 'status_page')
        expect(r.body.previews[type].body).not.toMatch(/@everyone/);
    }
    const slack = r.body.previews.slack;
    expect(slack.subject).toBe('Checkout errors for some EU customers');
    expect(slack.body).toMatch(/^\*major\* &lt;!channel&gt; @\u200Beveryone .* ETA unknown$/);
    expect(r.body.previews.discord.body).toContain('\\<script\\>');
    expect(r.body.previews.email).toEqual({
      subject: 'Mail: <!channel> @everyone *bold* <script>',
      body: 'Hello\n<!channel> @everyone *bold* <script>',
      html: 'Hello<br>\n&lt;!channel&gt; @everyone *bold* &lt;script&gt;',
    });
    expect(r.body.previews.webhook.body).toBe('*major* <!channel> @everyone *bold* <script> ETA unknown');
  });

  it('uses the incident when incident_id is given; unknown ones are 422 on incident_id', async () => {
    const { body: t } = await create({ body: '{{incident.title}} / {{incident.status}} / {{incident.id}}' });
    const inc = await h.api('POST', '/v1/incidents', { body: { title: 'Payments <down>', severity: 'major' } });
    const r = await h.api('POST', `/v1/templates/${t.id}/render`, { body: { incident_id: inc.body.id } });
    expect(r.status).toBe(200);
    expect(r.body.previews.webhook.body).toBe(`Payments <down> / investigating / ${inc.body.id}`);
    expect(r.body.previews.slack.body).toBe(`Payments &lt;down&gt; / investigating / ${inc.body.id}`);
    for (const id of ['inc_01JZZZZZZZZZZZZZZZZZZZZZZZ', 'garbage']) {
      const bad = await h.api('POST', `/v1/templates/${t.id}/render`, { body: { incident_id: id } });
      expect(bad.status).toBe(422);
      expect(fields(bad)).toEqual(['incident_id']);
    }
  });

  it('missing required variables: 422 missing_variables, one error per name', async () => {
    const { body: t } = await create({ body: '{{a}} {{b}} {{#c}}{{c}}{{/c}}' });
    const r = await h.api('POST', `/v1/templates/${t.id}/render`, { body: { variables: { b: '' } } });
    expect(r.status).toBe(422);
    expect(r.body.code).toBe('missing_variables');
    expect(r.body.errors).toEqual([
      { field: 'variables.a', code: 'required', message: expect.any(String) },
      { field: 'variables.b', code: 'required', message: expect.any(String) },
    ]);
  });

  it('validates the request, and works without a body when nothing is required', async () => {
    const { body: t } = await create({ body: 'static {{incident.title}}' });
    const none = await h.api('POST', `/v1/templates/${t.id}/render`);
    expect(none.status).toBe(200);
    const bad = await h.api('POST', `/v1/templates/${t.id}/render`, {
      body: { variables: { 'bad-name': 'x', ok: 'x'.repeat(4001) }, extra: 1 },
    });
    expect(bad.status).toBe(422);
    expect(fields(bad).sort()).toEqual(['extra', 'variables.bad-name', 'variables.ok']);
    expect((await h.api('POST', '/v1/templates/tpl_01JZZZZZZZZZZZZZZZZZZZZZZZ/render', { body: {} })).status).toBe(404);
  });
});
