import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeys } from '../../src/store/keys.js';
import { startHerald, type TestHerald } from '../support/herald.js';

/** Audiences over HTTP: the /v1/audiences resource and its rules, end to end. */
let h: TestHerald;
let cons: string[];
let tpl: string;
beforeAll(async () => {
  h = await startHerald();
  cons = [];
  for (const name of ['Ops room', 'Status page', 'Customer list']) {
    const r = await h.api('POST', '/v1/connections', {
      body: { name, type: 'webhook', config: { url: 'https://hooks.example.com/herald' } },
    });
    expect(r.status).toBe(201);
    cons.push(r.body.id as string);
  }
  const t = await h.api('POST', '/v1/templates', { body: { name: 'Customer words', body: 'We are on it.' } });
  expect(t.status).toBe(201);
  tpl = t.body.id as string;
});
afterAll(async () => {
  await h.close();
});

let n = 0;
/** A key of its own per test, so the tests share one Herald without clashing. */
const fresh = (stem: string) => `${stem}-${++n}`;

describe('/v1/audiences', () => {
  it('creates (201, Location, ETag), gets, lists and patches under If-Match', async () => {
    const key = fresh('customers');
    const body = {
      key,
      name: 'Customers',
      description: 'Status page and mailing list.',
      visibility: 'external',
      connection_ids: [cons[1], cons[2]],
      template_ids: [tpl],
      approval: { required: true, approvers: { slack_user_ids: ['U024BE7LH'], api_key_scopes: ['incidents:execute'] } },
    };
    const r = await h.api('POST', '/v1/audiences', { body });
    expect(r.status).toBe(201);
    expect(r.body.id).toMatch(/^aud_[0-9A-Z]{26}$/);
    expect(r.headers.get('location')).toBe(`/v1/audiences/${r.body.id}`);
    expect(r.headers.get('etag')).toBe('"r1"');
    expect(r.body).toEqual({
      ...body,
      id: r.body.id,
      approval: { ...body.approval, four_eyes: true, expires_in: '2h' },
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      updated_at: r.body.created_at,
    });
    const id = r.body.id as string;

    const got = await h.api('GET', `/v1/audiences/${id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(r.body);
    expect(got.headers.get('etag')).toBe('"r1"');

    const listed = await h.api('GET', '/v1/audiences?limit=100');
    expect(listed.status).toBe(200);
    expect(listed.body.data.map((a: { id: string }) => a.id)).toContain(id);

    const stale = await h.api('PATCH', `/v1/audiences/${id}`, { body: { name: 'X' }, headers: { 'If-Match': '"r9"' } });
    expect(stale.status).toBe(412);
    expect(stale.body.code).toBe('precondition_failed');

    const p = await h.api('PATCH', `/v1/audiences/${id}`, {
      body: { name: 'Our customers', approval: { expires_in: '30m' } },
      headers: { 'If-Match': '"r1"' },
    });
    expect(p.status).toBe(200);
    expect(p.headers.get('etag')).toBe('"r2"');
    expect(p.body).toMatchObject({ key, name: 'Our customers', approval: { required: true, expires_in: '30m' } });

    const keyChange = await h.api('PATCH', `/v1/audiences/${id}`, { body: { key: 'other' } });
    expect(keyChange.status).toBe(422);
    expect(keyChange.body.errors).toEqual([expect.objectContaining({ field: 'key', code: 'immutable' })]);

    const del = await h.api('DELETE', `/v1/audiences/${id}`, { headers: { 'If-Match': '"r2"' } });
    expect(del.status).toBe(204);
    expect((await h.api('GET', `/v1/audiences/${id}`)).status).toBe(404);
  });

  it('replays a create with the same Idempotency-Key, and refuses a key used twice (409)', async () => {
    const key = fresh('responders');
    const headers = { 'Idempotency-Key': `aud-${key}` };
    const first = await h.api('POST', '/v1/audiences', { body: { key, name: 'Responders' }, headers });
    expect(first.status).toBe(201);
    const again = await h.api('POST', '/v1/audiences', { body: { key, name: 'Responders' }, headers });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    const clash = await h.api('POST', '/v1/audiences', { body: { key, name: 'Other' } });
    expect(clash.status).toBe(409);
    expect(clash.body.code).toBe('audience_key_taken');
  });

  it('answers 422 naming each bad field: unknown ids, approvers, no approvers', async () => {
    const ghost = 'con_01JH3ZK6X2B8V4N0Q7R5T9W1YC';
    const unknown = await h.api('POST', '/v1/audiences', {
      body: { key: fresh('a'), name: 'A', connection_ids: [cons[0], ghost] },
    });
    expect(unknown.status).toBe(422);
    expect(unknown.body.code).toBe('unknown_connection');
    expect(unknown.body.errors).toEqual([
      expect.objectContaining({ field: 'connection_ids.1', code: 'unknown_connection' }),
    ]);

    const approver = await h.api('POST', '/v1/audiences', {
      body: {
        key: fresh('a'),
        name: 'A',
        approval: { required: true, approvers: { slack_user_ids: ['alice@example.com'] } },
      },
    });
    expect(approver.status).toBe(422);
    expect(approver.body.code).toBe('invalid_approver');
    expect(approver.body.errors[0].field).toBe('approval.approvers.slack_user_ids.0');

    const nobody = await h.api('POST', '/v1/audiences', {
      body: { key: fresh('a'), name: 'A', approval: { required: true } },
    });
    expect(nobody.status).toBe(422);
    expect(nobody.body.code).toBe('no_approvers');

    const key = await h.api('POST', '/v1/audiences', { body: { key: 'Not A Slug', name: 'A' } });
    expect(key.status).toBe(422);
    expect(key.body.errors).toEqual([expect.objectContaining({ field: 'key', code: 'invalid_format' })]);
  });

  it('refuses a delete while an approval for the audience is pending (409 naming the execution)', async () => {
    const r = await h.api('POST', '/v1/audiences', { body: { key: fresh('held'), name: 'Held' } });
    const id = r.body.id as string;
    const keys = createKeys(h.prefix);
    const exe = 'exe_01JH3ZK6X2B8V4N0Q7R5T9W1YC';
    await h.herald.redis.sadd(keys.audiencePendingApprovals(id), exe);
    const refused = await h.api('DELETE', `/v1/audiences/${id}`);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('audience_in_use');
    expect(refused.body.detail).toContain(exe);
    expect((await h.api('GET', `/v1/audiences/${id}`)).status).toBe(200);
    await h.herald.redis.srem(keys.audiencePendingApprovals(id), exe);
    expect((await h.api('DELETE', `/v1/audiences/${id}`)).status).toBe(204);
  });

  it('deleting a connection takes it out of every audience (their ETags move on)', async () => {
    const c = await h.api('POST', '/v1/connections', {
      body: { name: 'Short-lived', type: 'webhook', config: { url: 'https://hooks.example.com/herald' } },
    });
    const cid = c.body.id as string;
    const a = await h.api('POST', '/v1/audiences', {
      body: { key: fresh('a'), name: 'A', connection_ids: [cons[0], cid] },
    });
    const b = await h.api('POST', '/v1/audiences', { body: { key: fresh('b'), name: 'B', connection_ids: [cid] } });
    expect((await h.api('DELETE', `/v1/connections/${cid}`)).status).toBe(204);
    const a2 = await h.api('GET', `/v1/audiences/${a.body.id}`);
    expect(a2.body.connection_ids).toEqual([cons[0]]);
    expect(a2.headers.get('etag')).toBe('"r2"');
    expect((await h.api('GET', `/v1/audiences/${b.body.id}`)).body.connection_ids).toEqual([]);
  });

  it('needs audiences:read to read and audiences:write to write', async () => {
    const reader = await h.tokenWith(['audiences:read'], 'aud reader');
    const other = await h.tokenWith(['connections:read'], 'not audiences');
    expect((await h.api('GET', '/v1/audiences', { token: reader })).status).toBe(200);
    const write = await h.api('POST', '/v1/audiences', { token: reader, body: { key: fresh('x'), name: 'X' } });
    expect(write.status).toBe(403);
    expect(write.headers.get('www-authenticate')).toContain('scope="audiences:write"');
    expect((await h.api('GET', '/v1/audiences', { token: other })).status).toBe(403);
  });
});
