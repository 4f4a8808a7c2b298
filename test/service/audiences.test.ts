import { describe, expect, it } from 'vitest';
import { LIMITS } from '../../src/domain/common/limits.js';
import { fieldsOf, idOf, refusal } from './fakes.js';
import { webhookBody, world, type World } from './world.js';

/** AudienceService's rules over in-memory fakes. */

async function setup(): Promise<{ w: World; cons: string[]; tpl: string }> {
  const w = world();
  const cons: string[] = [];
  for (const name of ['Ops', 'Status'])
    cons.push((await w.services.connections.create(webhookBody(name))).connection.id);
  const tpl = (await w.services.templates.create({ name: 'Public', body: 'We are looking into it.' })).id;
  return { w, cons, tpl };
}

describe('AudienceService.create', () => {
  it('stores an audience with its connections, templates and approval', async () => {
    const { w, cons, tpl } = await setup();
    const a = await w.services.audiences.create({
      key: 'customers',
      name: 'Customers',
      visibility: 'external',
      connection_ids: cons,
      template_ids: [tpl],
      approval: { required: true, approvers: { slack_user_ids: ['U024BE7LH'] } },
    });
    expect(a.id).toMatch(/^aud_/);
    expect(a).toMatchObject({ key: 'customers', rev: 1, connection_ids: cons });
    expect(await w.services.audiences.get(a.id)).toEqual(a);
    expect(await w.services.audiences.getByKeys(['customers', 'x'])).toEqual([a, null]);
  });

  it('names every unknown connection and template, and stores nothing', async () => {
    const { w, cons } = await setup();
    const ghost = idOf('connection', 99);
    let e = await refusal(
      w.services.audiences.create({ key: 'a', name: 'A', connection_ids: [cons[0], ghost, 'not-an-id'] }),
    );
    expect(e.code).toBe('unknown_connection');
    expect(fieldsOf(e)).toEqual(['connection_ids.1:unknown_connection', 'connection_ids.2:unknown_connection']);
    expect(e.message).not.toContain('undefined');
    e = await refusal(w.services.audiences.create({ key: 'a', name: 'A', template_ids: [idOf('template', 99)] }));
    expect(e.code).toBe('unknown_template');
    expect(fieldsOf(e)).toEqual(['template_ids.0:unknown_template']);
    e = await refusal(
      w.services.audiences.create({
        key: 'a',
        name: 'A',
        connection_ids: [ghost],
        template_ids: [idOf('template', 99)],
      }),
    );
    expect(e.code).toBe('validation_failed');
    expect(fieldsOf(e)).toEqual(['connection_ids.0:unknown_connection', 'template_ids.0:unknown_template']);
    expect(w.repos.audiences.writes).toBe(0);
  });

  it('refuses a key already used (409) and the codes of the approval rules', async () => {
    const { w } = await setup();
    await w.services.audiences.create({ key: 'customers', name: 'Customers' });
    const taken = await refusal(w.services.audiences.create({ key: 'customers', name: 'Again' }));
    expect(taken.code).toBe('audience_key_taken');
    expect(fieldsOf(taken)).toEqual(['key:audience_key_taken']);
    expect(
      (await refusal(w.services.audiences.create({ key: 'b', name: 'B', approval: { required: true } }))).code,
    ).toBe('no_approvers');
    const bad = await refusal(
      w.services.audiences.create({ key: 'b', name: 'B', approval: { approvers: { slack_user_ids: ['@alice'] } } }),
    );
    expect(bad.code).toBe('invalid_approver');
    expect(w.repos.audiences.writes).toBe(1);
  });

  it(`holds at most ${LIMITS.audiences} audiences`, async () => {
    const { w } = await setup();
    for (let i = 0; i < LIMITS.audiences; i++) await w.services.audiences.create({ key: `a${i}`, name: `A${i}` });
    const e = await refusal(w.services.audiences.create({ key: 'one-more', name: 'One more' }));
    expect(e.code).toBe('validation_failed');
    expect(fieldsOf(e)).toEqual([':too_many']);
  });
});

describe('AudienceService.update', () => {
  it('changes fields under If-Match, checks new references, and keeps the key', async () => {
    const { w, cons, tpl } = await setup();
    const a = await w.services.audiences.create({ key: 'execs', name: 'Executives' });
    const stale = await refusal(w.services.audiences.update(a.id, { name: 'X' }, a.rev + 1));
    expect(stale.code).toBe('precondition_failed');
    const b = await w.services.audiences.update(a.id, { connection_ids: [cons[1]], template_ids: [tpl] }, a.rev);
    expect(b).toMatchObject({ key: 'execs', connection_ids: [cons[1]], template_ids: [tpl], rev: 2 });
    const e = await refusal(w.services.audiences.update(a.id, { connection_ids: [idOf('connection', 77)] }));
    expect(fieldsOf(e)).toEqual(['connection_ids.0:unknown_connection']);
    expect(fieldsOf(await refusal(w.services.audiences.update(a.id, { key: 'boss' })))).toEqual(['key:immutable']);
    expect(await w.services.audiences.get(a.id)).toEqual(b);
  });

  it('retries a lost compare-and-set on a fresh read', async () => {
    const { w } = await setup();
    const a = await w.services.audiences.create({ key: 'execs', name: 'Executives' });
    let once = true;
    w.repos.audiences.interfere = (id) => {
      if (!once) return;
      once = false;
      const cur = w.repos.audiences.audiences.get(id)!;
      w.repos.audiences.audiences.set(id, { ...cur, description: 'changed meanwhile', rev: cur.rev + 1 });
    };
    const b = await w.services.audiences.update(a.id, { name: 'Board' });
    expect(b).toMatchObject({ name: 'Board', description: 'changed meanwhile', rev: 3 });
  });
});

describe('AudienceService.delete', () => {
  it('refuses while approvals are pending (409 naming them), then deletes', async () => {
    const { w } = await setup();
    const a = await w.services.audiences.create({ key: 'customers', name: 'Customers' });
    const exe = idOf('execution', 42);
    w.repos.audiences.pending.set(a.id, new Set([exe]));
    const e = await refusal(w.services.audiences.delete(a.id));
    expect(e.code).toBe('audience_in_use');
    expect(e.message).toContain(exe);
    expect(fieldsOf(e)).toEqual(['executions.0:audience_in_use']);
    w.repos.audiences.pending.delete(a.id);
    expect((await refusal(w.services.audiences.delete(a.id, a.rev + 1))).code).toBe('precondition_failed');
    await w.services.audiences.delete(a.id, a.rev);
    expect((await refusal(w.services.audiences.get(a.id))).code).toBe('not_found');
  });
});

describe('deleting a connection', () => {
  it('takes it out of every audience it belongs to', async () => {
    const { w, cons } = await setup();
    const a = await w.services.audiences.create({ key: 'a', name: 'A', connection_ids: cons });
    const b = await w.services.audiences.create({ key: 'b', name: 'B', connection_ids: [cons[0]] });
    await w.services.connections.delete(cons[0]!);
    expect((await w.services.audiences.get(a.id)).connection_ids).toEqual([cons[1]]);
    expect(await w.services.audiences.get(b.id)).toMatchObject({ connection_ids: [], rev: 2 });
  });
});
