import { describe, expect, it } from 'vitest';
import { CHANNEL_TYPES } from '../../src/channels/index.js';
import { SEARCH_MAX_PAGES } from '../../src/services/templates.js';
import { apiActor, fieldsOf, idOf, refusal } from './fakes.js';
import { webhookBody, world } from './world.js';

/** TemplateService's rules over in-memory fakes. */

describe('TemplateService.create', () => {
  it('stores version 1 with variables derived from the placeholders (sections optional)', async () => {
    const w = world();
    const t = await w.services.templates.create({
      name: 'Outage',
      subject: '{{area}}',
      body: '{{incident.title}} {{#eta}}ETA {{eta}}{{/eta}}',
    });
    expect(t).toMatchObject({
      name: 'Outage',
      version: 1,
      created_at: '2026-11-22T10:00:00.000Z',
      updated_at: '2026-11-22T10:00:00.000Z',
    });
    expect(t.variables).toEqual([
      { name: 'area', description: '', required: true, default: null },
      { name: 'eta', description: '', required: false, default: null },
    ]);
    expect(w.repos.templates.templates.get(t.id)).toBeDefined();
  });

  it('refuses unknown fields and a missing name (validation_failed), and undeclared variables', async () => {
    const w = world();
    const strict = await refusal(w.services.templates.create({ name: '', body: 'x', colour: 'red' }));
    expect(strict.code).toBe('validation_failed');
    expect(strict.errors.map((e) => e.field).sort()).toEqual(['colour', 'name']);
    const undeclared = await refusal(
      w.services.templates.create({ name: 'U', body: '{{eta}}', variables: [{ name: 'area' }] }),
    );
    expect(undeclared.code).toBe('undeclared_variable');
    expect(fieldsOf(undeclared)).toEqual(['body:undeclared_variable']);
    expect(w.repos.templates.writes).toBe(0);
  });

  it('refuses a name already taken, case-insensitively (template_name_taken on name)', async () => {
    const w = world();
    await w.services.templates.create({ name: 'Outage', body: 'x' });
    const e = await refusal(w.services.templates.create({ name: 'OUTAGE', body: 'y' }));
    expect(e.code).toBe('template_name_taken');
    expect(fieldsOf(e)).toEqual(['name:template_name_taken']);
  });

  it('refuses connection_ids that do not exist, naming each', async () => {
    const w = world();
    const { connection } = await w.services.connections.create(webhookBody());
    const e = await refusal(
      w.services.templates.create({ name: 'T', body: 'x', connection_ids: [connection.id, idOf('connection', 999)] }),
    );
    expect(e.code).toBe('unknown_connection');
    expect(fieldsOf(e)).toEqual(['connection_ids.1:unknown_connection']);
    await expect(
      w.services.templates.create({ name: 'T', body: 'x', connection_ids: [connection.id] }),
    ).resolves.toMatchObject({ connection_ids: [connection.id] });
  });
});

describe('TemplateService.createMany', () => {
  const items = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `Batch ${i}`, body: 'x' }));

  it('creates all of them in one write', async () => {
    const w = world();
    const made = await w.services.templates.createMany(items(3));
    expect(made.map((t) => t.name)).toEqual(['Batch 0', 'Batch 1', 'Batch 2']);
    expect(w.repos.templates.writes).toBe(1);
    expect(w.repos.templates.templates.size).toBe(3);
  });

  it('names every bad field of every item, prefixed by its index, and creates none', async () => {
    const w = world();
    const e = await refusal(
      w.services.templates.createMany([
        { name: 'Fine', body: 'fine' },
        { name: '', body: 'x', colour: 'red' },
        { name: 'Raw', body: '{{{raw}}}' },
        { name: 'FINE', body: 'x' },
        { name: 'Undeclared', body: '{{x}}', variables: [] },
      ]),
    );
    expect(e.code).toBe('validation_failed');
    expect(fieldsOf(e).sort()).toEqual([
      '1.colour:unknown_field',
      '1.name:required',
      '2.body:unescaped_placeholder',
      '3.name:duplicate_name',
      '4.body:undeclared_variable',
    ]);
    expect(w.repos.templates.templates.size).toBe(0);
  });

  it('keeps the one code when every failure shares it', async () => {
    const w = world();
    const e = await refusal(w.services.templates.createMany([{ name: 'A', body: '{{x}}', variables: [] }]));
    expect(e.code).toBe('undeclared_variable');
    expect(fieldsOf(e)).toEqual(['0.body:undeclared_variable']);
  });

  it('answers template_name_taken on the item whose name exists, and creates none', async () => {
    const w = world();
    await w.services.templates.create({ name: 'Batch 1', body: 'x' });
    const e = await refusal(w.services.templates.createMany(items(3)));
    expect(e.code).toBe('template_name_taken');
    expect(fieldsOf(e)).toEqual(['1.name:template_name_taken']);
    expect(w.repos.templates.templates.size).toBe(1);
  });

  it('refuses an empty batch, more than 100, and bulk unknown connections by item', async () => {
    const w = world();
    expect((await refusal(w.services.templates.createMany([]))).code).toBe('validation_failed');
    expect((await refusal(w.services.templates.createMany(items(101)))).code).toBe('validation_failed');
    const e = await refusal(
      w.services.templates.createMany([
        { name: 'A', body: 'x' },
        { name: 'B', body: 'x', connection_ids: [idOf('connection', 5)] },
      ]),
    );
    expect(fieldsOf(e)).toEqual(['1.connection_ids.0:unknown_connection']);
  });
});

describe('TemplateService.get / getMany / list', () => {
  it('answers not_found for unknown and malformed ids; getMany answers null in their place', async () => {
    const w = world();
    const t = await w.services.templates.create({ name: 'A', body: 'x' });
    expect((await refusal(w.services.templates.get(idOf('template', 999)))).code).toBe('not_found');
    expect((await refusal(w.services.templates.get('nope'))).code).toBe('not_found');
    const many = await w.services.templates.getMany([t.id, 'nope', idOf('template', 999)]);
    expect(many.map((x) => x?.id ?? null)).toEqual([t.id, null, null]);
  });

  it('lists newest first by cursor and refuses an offset cursor', async () => {
    const w = world();
    for (const n of ['A', 'B', 'C']) await w.services.templates.create({ name: n, body: 'x' });
    const p1 = await w.services.templates.list({ limit: 2, cursor: null });
    expect(p1.data.map((t) => t.name)).toEqual(['C', 'B']);
    const p2 = await w.services.templates.list({ limit: 2, cursor: p1.nextCursor });
    expect(p2.data.map((t) => t.name)).toEqual(['A']);
    expect(p2.nextCursor).toBeNull();
    expect((await refusal(() => w.services.templates.list({ limit: 2, cursor: { offset: 1 } }))).code).toBe(
      'invalid_cursor',
    );
  });
});

describe('TemplateService.search', () => {
  it('matches names containing the query, case-insensitively and trimmed, newest first, up to the limit', async () => {
    const w = world();
    for (const n of ['Checkout outage', 'Payments', 'checkout degraded', 'API CHECKOUT'])
      await w.services.templates.create({ name: n, body: 'x' });
    expect((await w.services.templates.search('  Checkout ', 10)).map((t) => t.name)).toEqual([
      'API CHECKOUT',
      'checkout degraded',
      'Checkout outage',
    ]);
    expect((await w.services.templates.search('checkout', 2)).map((t) => t.name)).toEqual([
      'API CHECKOUT',
      'checkout degraded',
    ]);
    expect(await w.services.templates.search('nothing like it', 10)).toEqual([]);
  });

  it('lists the newest `limit` for an empty query', async () => {
    const w = world();
    for (const n of ['A', 'B', 'C']) await w.services.templates.create({ name: n, body: 'x' });
    expect((await w.services.templates.search('', 2)).map((t) => t.name)).toEqual(['C', 'B']);
  });

  it(`reads at most ${SEARCH_MAX_PAGES} pages of the catalogue`, async () => {
    const w = world();
    const t = await w.services.templates.create({ name: 'hay', body: 'x' });
    // An endless catalogue: page n holds 100 templates named `hay n.i`, the needle only on page 25.
    let pages = 0;
    w.repos.templates.list = () => {
      const n = pages++;
      const data = Array.from({ length: 100 }, (_, i) => ({
        ...t,
        id: idOf('template', 100_000 - n * 100 - i),
        name: n === 25 && i === 0 ? 'needle' : `hay ${n}.${i}`,
      }));
      return Promise.resolve({ data, nextCursor: { after: data.at(-1)!.id } });
    };
    expect(await w.services.templates.search('needle', 10)).toEqual([]);
    expect(pages).toBe(SEARCH_MAX_PAGES);
    pages = 0;
    expect((await w.services.templates.search('hay 19.99', 10)).map((x) => x.name)).toEqual(['hay 19.99']);
    expect((await w.services.templates.search('hay', 150)).length).toBe(150);
    expect(pages).toBe(SEARCH_MAX_PAGES + 2);
  });
});

describe('TemplateService.update', () => {
  it('makes a new version, keeps the old one readable, and derives variables again', async () => {
    const w = world();
    const t = await w.services.templates.create({ name: 'A', body: '{{eta}}' });
    w.clock.advance(1000);
    const next = await w.services.templates.update(t.id, { body: '{{owner}}' });
    expect(next).toMatchObject({
      version: 2,
      body: '{{owner}}',
      updated_at: '2026-11-22T10:00:01.000Z',
      created_at: t.created_at,
    });
    expect(next.variables.map((v) => v.name)).toEqual(['owner']);
    expect((await w.services.templates.version(t.id, '1')).body).toBe('{{eta}}');
  });

  it('answers a patch that changes nothing with the template itself (no new version)', async () => {
    const w = world();
    const t = await w.services.templates.create({ name: 'A', body: 'x' });
    expect(await w.services.templates.update(t.id, { body: 'x', name: 'A' })).toEqual(t);
    expect(w.repos.templates.writes).toBe(1);
  });

  it('refuses an empty patch (empty_patch), a stale If-Match (412), and a taken name (409)', async () => {
    const w = world();
    const t = await w.services.templates.create({ name: 'A', body: 'x' });
    await w.services.templates.create({ name: 'B', body: 'x' });
    expect(fieldsOf(await refusal(w.services.templates.update(t.id, {})))).toEqual([':empty_patch']);
    expect((await refusal(w.services.templates.update(t.id, { body: 'y' }, 2))).code).toBe('precondition_failed');
    const taken = await refusal(w.services.templates.update(t.id, { name: 'b' }));
    expect(taken.code).toBe('template_name_taken');
    expect(fieldsOf(taken)).toEqual(['name:template_name_taken']);
    await expect(w.services.templates.update(t.id, { body: 'y' }, 1)).resolves.toMatchObject({ version: 2 });
  });

  it('checks connection_ids only when the patch sets them', async () => {
    const w = world();
    const t = await w.services.templates.create({ name: 'A', body: 'x' });
    const e = await refusal(w.services.templates.update(t.id, { connection_ids: [idOf('connection', 8)] }));
    expect(fieldsOf(e)).toEqual(['connection_ids.0:unknown_connection']);
  });

  it('retries a lost race on a fresh read', async () => {
    const w = world();
    const t = await w.services.templates.create({ name: 'A', body: 'x', description: 'd' });
    let raced = false;
    w.repos.templates.interfere = (id) => {
      if (raced) return;
      raced = true;
      const s = w.repos.templates.templates.get(id)!;
      w.repos.templates.templates.set(id, { ...s, description: 'theirs', version: 2 });
    };
    const next = await w.services.templates.update(t.id, { body: 'mine' });
    expect(next).toMatchObject({ body: 'mine', description: 'theirs', version: 3 });
  });
});

describe('TemplateService.delete', () => {
  it('deletes, after which it is not found', async () => {
    const w = world();
    const t = await w.services.templates.create({ name: 'A', body: 'x' });
    await w.services.templates.delete(t.id, 1);
    expect((await refusal(w.services.templates.get(t.id))).code).toBe('not_found');
  });

  it('refuses while an open incident attaches it (template_in_use), and a stale If-Match (412)', async () => {
    const w = world();
    const t = await w.services.templates.create({ name: 'A', body: 'x' });
    w.repos.templates.inUse.add(t.id);
    expect((await refusal(w.services.templates.delete(t.id))).code).toBe('template_in_use');
    expect((await refusal(w.services.templates.delete(t.id, 3))).code).toBe('precondition_failed');
    expect(w.repos.templates.templates.has(t.id)).toBe(true);
  });
});

describe('TemplateService.versions / version', () => {
  it('pages versions newest first by offset; a version that is not a number or does not exist is not_found', async () => {
    const w = world();
    const t = await w.services.templates.create({ name: 'A', body: 'v1' });
    await w.services.templates.update(t.id, { body: 'v2' });
    await w.services.templates.update(t.id, { body: 'v3' });
    const p1 = await w.services.templates.versions(t.id, { limit: 2, cursor: null });
    expect(p1.data.map((v) => v.version)).toEqual([3, 2]);
    const p2 = await w.services.templates.versions(t.id, { limit: 2, cursor: p1.nextCursor });
    expect(p2.data.map((v) => v.version)).toEqual([1]);
    for (const raw of ['4', '0', '01', '1.0', 'latest', '-1'])
      expect((await refusal(w.services.templates.version(t.id, raw))).code).toBe('not_found');
    expect((await w.services.templates.version(t.id, '2')).body).toBe('v2');
    expect((await refusal(w.services.templates.versions(idOf('template', 99), { limit: 2, cursor: null }))).code).toBe(
      'not_found',
    );
  });
});

describe('TemplateService.render', () => {
  it('renders every channel type with defaults applied and unused variables ignored', async () => {
    const w = world();
    const t = await w.services.templates.create({
      name: 'A',
      body: '{{area}} ETA {{eta}}',
      variables: [{ name: 'area' }, { name: 'eta', required: false, default: 'unknown' }],
    });
    const previews = await w.services.templates.render(t.id, { variables: { area: 'EU', unused: 'x' } });
    expect(Object.keys(previews).sort()).toEqual([...CHANNEL_TYPES].sort());
    expect(previews.webhook.body).toBe('EU ETA unknown');
  });

  it('uses the incident named by incident_id; an unknown one is a 422 on incident_id', async () => {
    const w = world();
    const t = await w.services.templates.create({ name: 'A', body: '{{incident.title}} {{incident.id}}' });
    const i = await w.services.incidents.create({ title: 'Payments down', severity: 'minor' }, apiActor);
    expect((await w.services.templates.render(t.id, { incident_id: i.id })).webhook.body).toBe(`Payments down ${i.id}`);
    for (const id of [idOf('incident', 999), 'garbage']) {
      const e = await refusal(w.services.templates.render(t.id, { incident_id: id }));
      expect(e.code).toBe('validation_failed');
      expect(e.errors.map((x) => x.field)).toEqual(['incident_id']);
    }
  });

  it('names each missing required variable (a blank value counts as missing)', async () => {
    const w = world();
    const t = await w.services.templates.create({ name: 'A', body: '{{a}} {{b}} {{#c}}{{c}}{{/c}}' });
    const e = await refusal(w.services.templates.render(t.id, { variables: { b: ' ' } }));
    expect(e.code).toBe('missing_variables');
    expect(e.errors.map((x) => x.field)).toEqual(['variables.a', 'variables.b']);
  });

  it('validates the request body and answers not_found for an unknown template', async () => {
    const w = world();
    const t = await w.services.templates.create({ name: 'A', body: 'static' });
    await expect(w.services.templates.render(t.id, undefined)).resolves.toBeDefined();
    const bad = await refusal(w.services.templates.render(t.id, { variables: { 'bad-name': 'x' }, extra: 1 }));
    expect(bad.errors.map((x) => x.field).sort()).toEqual(['extra', 'variables.bad-name']);
    expect((await refusal(w.services.templates.render(idOf('template', 9), {}))).code).toBe('not_found');
  });
});
