import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/domain/common/clock.js';
import type {
  NoticeRepo,
  Recipient,
  Subscriber,
  SubscriberNotice,
  SubscriberRepo,
} from '../../src/ports/subscribers.js';
import { SubscriberAdminService } from '../../src/services/subscriber-admin.js';
import { createSecretBox } from '../../src/store/crypto.js';
import { openSubscriberKey, type SubscriberIds } from '../../src/store/subscriber-key.js';
import { RedisNoticeRepo, RedisSubscriberRepo } from '../../src/store/subscribers.js';
import { CONNECTION_BODIES } from '../support/connection-bodies.js';
import { startHerald, type ApiResponse, type RequestOptions, type TestHerald } from '../support/herald.js';
import { waitFor } from '../support/wait.js';

/**
 * The admin API of the status page's subscribers (docs/api.md, Subscribers) over real HTTP and a
 * real Herald's keys, store and executions: scopes, the list's filters and cursor walk, export
 * (CSV and NDJSON, every subscriber once, hostile cells defused), import idempotency, erase, and
 * the subscriber tally and receipts an execution shows.
 */

let h: TestHerald;
let repo: SubscriberRepo;
let ids: SubscriberIds;
let notices: NoticeRepo;
let componentId: string;

/** The Herald's own API (its composition mounts these routes). */
const api = (method: string, path: string, opts?: RequestOptions): Promise<ApiResponse> => h.api(method, path, opts);

/** An export as sent: its text is never parsed as one JSON document (NDJSON is many). */
async function download(query: string): Promise<{ status: number; headers: Headers; text: string }> {
  const res = await fetch(`${h.url}/v1/subscribers/export${query}`, {
    headers: { Authorization: `Bearer ${h.token}` },
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

beforeAll(async () => {
  // No worker: nothing is delivered, so no notice opens but the ones this file opens itself.
  h = await startHerald({}, { worker: false });
  const { redis, keys } = h.herald;
  // The same subscriber key as the Herald's (made once, SET NX): the same ids for the same addresses.
  const box = createSecretBox(Buffer.from(h.secretKey, 'base64'));
  ({ ids } = await openSubscriberKey(redis, keys, box));
  repo = new RedisSubscriberRepo(redis, keys, box, ids, 7 * 86_400_000);
  notices = new RedisNoticeRepo(redis, keys, 86_400_000);
  const component = await h.api('POST', '/v1/components', { body: { name: 'API' } });
  componentId = component.body.id;
});

afterAll(async () => {
  await h?.close();
});

/** Stores a subscriber as the public pages would have made it. */
async function seed(address: string, o: Partial<Subscriber> = {}): Promise<Subscriber> {
  const kind = o.kind ?? 'email';
  const now = new Date().toISOString();
  const s: Subscriber = {
    id: ids.idOf(kind, address),
    kind,
    address,
    state: 'confirmed',
    components: [],
    locale: 'en',
    source: 'page',
    created_at: now,
    confirmed_at: now,
    unsubscribed_at: null,
    bounced_at: null,
    bounce_reason: null,
    token_version: 1,
    confirm: null,
    webhook_secret: kind === 'webhook' ? 'whsec_dGVzdHNlY3JldHRlc3RzZWNyZXQ=' : null,
    rev: 1,
    ...o,
  };
  expect(await repo.put({ ...s, rev: 1 }, null)).toBe(true);
  return { ...s, rev: 1 };
}

async function walk(path: string, token?: string): Promise<{ ids: string[]; pages: number }> {
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const r = await api('GET', `${path}${sep}limit=7${cursor ? `&cursor=${cursor}` : ''}`, { token });
    expect(r.status).toBe(200);
    seen.push(...(r.body.data as { id: string }[]).map((s) => s.id));
    cursor = r.body.pagination.next_cursor;
    pages++;
    expect(pages).toBeLessThan(200);
  } while (cursor !== null);
  return { ids: seen, pages };
}

async function everyone(): Promise<Subscriber[]> {
  const all: Subscriber[] = [];
  for (let b = 0; b < repo.buckets; b++) all.push(...(await repo.bucket(b)));
  return all;
}

describe('subscriber admin API', () => {
  it('answers a wrong method on /export and /import with their own 405, not as a subscriber id', async () => {
    // /v1/subscribers/:id would also match these paths; the literal routes answer first.
    const del = await api('DELETE', '/v1/subscribers/export', { token: null });
    expect(del.status).toBe(405);
    expect(del.headers.get('allow')).toBe('GET, HEAD');
    const get = await api('GET', '/v1/subscribers/import', { token: null });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
  });

  it('enforces scopes: a read key lists and reads, but cannot erase or import', async () => {
    const s = await seed('scoped@example.com');
    const read = await h.tokenWith(['subscribers:read']);
    const none = await h.tokenWith(['incidents:read']);
    expect((await api('GET', '/v1/subscribers', { token: read })).status).toBe(200);
    expect((await api('GET', `/v1/subscribers/${s.id}`, { token: read })).status).toBe(200);
    expect((await api('GET', '/v1/subscribers', { token: none })).status).toBe(403);
    expect((await api('GET', '/v1/subscribers/export', { token: none })).status).toBe(403);
    const erase = await api('DELETE', `/v1/subscribers/${s.id}`, { token: read });
    expect(erase.status).toBe(403);
    expect(erase.headers.get('www-authenticate')).toContain('subscribers:write');
    const imp = await api('POST', '/v1/subscribers/import', {
      token: read,
      body: { source: 'x', subscribers: [{ email: 'new@example.com', confirmed: true }] },
    });
    expect(imp.status).toBe(403);
    expect(await repo.get(ids.idOf('email', 'new@example.com'))).toBeNull();
    expect(await repo.get(s.id)).not.toBeNull();
    expect((await api('GET', '/v1/subscribers', { token: null })).status).toBe(401);
  });

  it('gets one with its address, the list masks it; unknown and malformed ids are 404', async () => {
    const s = await seed('Jane.Doe@example.org', { components: [componentId], locale: 'de' });
    const one = await api('GET', `/v1/subscribers/${s.id}`);
    expect(one.status).toBe(200);
    expect(one.headers.get('etag')).toBe('"r1"');
    expect(one.body).toMatchObject({
      id: s.id,
      address: 'Jane.Doe@example.org',
      components: [componentId],
      locale: 'de',
    });
    expect(one.body).not.toHaveProperty('webhook_secret');
    expect(one.body).not.toHaveProperty('token_version');
    const listed = await api('GET', `/v1/subscribers?email=${encodeURIComponent('Jane.Doe@EXAMPLE.org')}`);
    expect(listed.body.data).toHaveLength(1);
    expect(listed.body.data[0].address_masked).toBe('J•••@example.org');
    expect(listed.text).not.toContain('Jane.Doe');
    expect((await api('GET', '/v1/subscribers/sub_00000000000000000000000000')).status).toBe(404);
    const bad = await api('GET', '/v1/subscribers/nonsense');
    expect(bad.status).toBe(404);
    expect(bad.headers.get('content-type')).toContain('application/problem+json');
  });

  it('filters by state, kind, component and e-mail, and walks the cursor over many pages without loss or repeat', async () => {
    const made: Subscriber[] = [];
    for (let i = 0; i < 60; i++) {
      const state = i % 4 === 0 ? 'unsubscribed' : i % 4 === 1 ? 'pending' : 'confirmed';
      made.push(
        await seed(`walk${i}@walk.example`, {
          state,
          components: i % 3 === 0 ? [componentId] : [],
          unsubscribed_at: state === 'unsubscribed' ? new Date().toISOString() : null,
          confirmed_at: state === 'pending' ? null : new Date().toISOString(),
        }),
      );
    }
    made.push(await seed('https://hooks.example.com/walk', { kind: 'webhook' }));
    const all = await everyone();

    const walked = await walk('/v1/subscribers');
    expect(walked.pages).toBeGreaterThan(2);
    expect(new Set(walked.ids).size).toBe(walked.ids.length);
    expect([...walked.ids].sort()).toEqual(all.map((s) => s.id).sort());

    const unsub = await walk('/v1/subscribers?state=unsubscribed');
    expect(unsub.ids.sort()).toEqual(
      all
        .filter((s) => s.state === 'unsubscribed')
        .map((s) => s.id)
        .sort(),
    );
    expect(unsub.ids).toHaveLength(15);

    const hooks = await walk('/v1/subscribers?kind=webhook');
    expect(hooks.ids).toEqual([ids.idOf('webhook', 'https://hooks.example.com/walk')]);

    // Those who hear of the component: who chose it, and who chose all.
    const comp = await walk(`/v1/subscribers?component_id=${componentId}&state=pending`);
    const expected = all.filter(
      (s) => s.state === 'pending' && (s.components.length === 0 || s.components.includes(componentId)),
    );
    expect(comp.ids.sort()).toEqual(expected.map((s) => s.id).sort());

    const byMail = await api('GET', '/v1/subscribers?email=walk5@walk.example');
    expect(byMail.body.data.map((s: { id: string }) => s.id)).toEqual([made[5]!.id]);
    const wrongState = await api('GET', '/v1/subscribers?email=walk5@walk.example&state=bounced');
    expect(wrongState.body.data).toEqual([]);

    expect((await api('GET', '/v1/subscribers?state=nope')).status).toBe(422);
    expect((await api('GET', '/v1/subscribers?email=not-an-address')).status).toBe(422);
    expect((await api('GET', '/v1/subscribers?cursor=garbage')).status).toBe(400);
  });

  it('exports every subscriber exactly once, with addresses, as CSV (hostile cells defused) and NDJSON', async () => {
    const hostile = await seed('=HYPERLINK("http://evil.example","x")@evil.example', {
      bounce_reason: '+1, "quoted"\nline',
    });
    await seed('-lead@example.com', { state: 'bounced', bounced_at: new Date().toISOString() });
    const all = await everyone();

    const nd = await download('?format=ndjson');
    expect(nd.status).toBe(200);
    expect(nd.headers.get('content-type')).toContain('application/x-ndjson');
    expect(nd.headers.get('content-disposition')).toMatch(/^attachment; filename="subscribers\.ndjson"$/);
    const lines = nd.text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as { id: string; address: string });
    expect(lines.map((l) => l.id).sort()).toEqual(all.map((s) => s.id).sort());
    expect(new Set(lines.map((l) => l.id)).size).toBe(lines.length);
    expect(lines.find((l) => l.id === hostile.id)?.address).toBe(hostile.address);
    expect(nd.text).not.toContain('whsec_');

    const csv = await download('');
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toContain('text/csv');
    expect(csv.headers.get('content-disposition')).toBe('attachment; filename="subscribers.csv"');
    const rows = parseCsv(csv.text);
    expect(rows[0]).toEqual([
      'id',
      'kind',
      'address',
      'state',
      'components',
      'locale',
      'source',
      'created_at',
      'confirmed_at',
      'unsubscribed_at',
      'bounced_at',
      'bounce_reason',
    ]);
    const body = rows.slice(1);
    expect(body.map((r) => r[0]).sort()).toEqual(all.map((s) => s.id).sort());
    expect(body.every((r) => r.length === 12)).toBe(true);
    const evil = body.find((r) => r[0] === hostile.id)!;
    expect(evil[2]).toBe(`'${hostile.address}`);
    expect(evil[11]).toBe(`'+1, "quoted"\nline`);
    expect(body.find((r) => r[2] === "'-lead@example.com")).toBeDefined();
    // No cell starts a formula.
    expect(body.flat().filter((c) => /^[=+\-@]/.test(c))).toEqual([]);

    expect((await download('?format=xml')).status).toBe(422);
  });

  it("exports at the reader's pace: while a write waits, it reads no more than a few buckets ahead", async () => {
    let reads = 0;
    const counting: SubscriberRepo = {
      buckets: repo.buckets,
      idOf: (kind, address) => repo.idOf(kind, address),
      bucketOf: (id) => repo.bucketOf(id),
      get: (id) => repo.get(id),
      put: (next, rev) => repo.put(next, rev),
      erase: (id) => repo.erase(id),
      bucket: (b) => {
        reads++;
        return repo.bucket(b);
      },
      bucketIds: (b) => repo.bucketIds(b),
      many: (list) => repo.many(list),
      counts: () => repo.counts(),
      eraseExpired: (now, limit) => repo.eraseExpired(now, limit),
    };
    const slow = new SubscriberAdminService({
      repo: counting,
      ids,
      notices,
      clock: systemClock,
      componentIds: async () => new Set(),
    });
    const all = await everyone();
    const firstFull = Math.min(...all.map((x) => repo.bucketOf(x.id)));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let writes = 0;
    let readsWhenBlocked = -1;
    const running = slow.export('ndjson', async () => {
      if (++writes === 1) {
        readsWhenBlocked = reads;
        await gate;
      }
    });
    await waitFor(() => writes === 1, { what: 'the first chunk' });
    // The first bucket with subscribers is being written; only the read-ahead is in flight.
    expect(readsWhenBlocked).toBeLessThanOrEqual(firstFull + 1 + 4);
    expect(reads).toBe(readsWhenBlocked);
    release();
    expect(await running).toBe(all.length);
    expect(reads).toBe(repo.buckets);
  });

  it('imports idempotently: a second run changes nothing, and an unsubscribed address is not resubscribed', async () => {
    const pending = await seed('pending-imp@example.com', { state: 'pending', confirmed_at: null });
    const gone = await seed('left-imp@example.com', {
      state: 'unsubscribed',
      confirmed_at: null,
      unsubscribed_at: new Date().toISOString(),
    });
    await seed('already-imp@example.com');
    const body = {
      source: 'legacy',
      subscribers: [
        { email: 'fresh-imp@Example.COM', components: [componentId], locale: 'de', confirmed: true },
        { email: 'pending-imp@example.com', confirmed: true },
        { email: 'left-imp@example.com', confirmed: true },
        { email: 'already-imp@example.com', confirmed: true },
        { email: 'not an address', confirmed: true },
        { email: 'comp-imp@example.com', components: ['cmp_00000000000000000000000000'], confirmed: true },
        { email: 'noconsent-imp@example.com' },
        { email: 'fresh-imp@example.com', confirmed: true },
      ],
    };
    const first = await api('POST', '/v1/subscribers/import', { body });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ created: 1, confirmed: 1, unchanged: 2, skipped: 1 });
    expect(first.body.errors.map((e: { index: number }) => e.index)).toEqual([4, 5, 6]);
    expect(JSON.stringify(first.body.errors)).not.toContain('@');

    const fresh = (await repo.get(ids.idOf('email', 'fresh-imp@example.com')))!;
    expect(fresh).toMatchObject({
      state: 'confirmed',
      source: 'import:legacy',
      components: [componentId],
      locale: 'de',
    });
    expect((await repo.get(pending.id))!.state).toBe('confirmed');
    expect((await repo.get(gone.id))!.state).toBe('unsubscribed');

    const second = await api('POST', '/v1/subscribers/import', { body });
    expect(second.body).toMatchObject({ created: 0, confirmed: 0, unchanged: 4, skipped: 1 });
    expect((await repo.get(gone.id))!.state).toBe('unsubscribed');

    // An Idempotency-Key replays the first answer.
    const headers = { 'Idempotency-Key': 'import-once' };
    const one = { source: 'keyed', subscribers: [{ email: 'keyed-imp@example.com', confirmed: true }] };
    const a = await api('POST', '/v1/subscribers/import', { body: one, headers });
    const b = await api('POST', '/v1/subscribers/import', { body: one, headers });
    expect(a.body.created).toBe(1);
    expect(b.body).toEqual(a.body);
    expect(b.headers.get('idempotent-replayed')).toBe('true');

    const tooMany = await api('POST', '/v1/subscribers/import', {
      body: { source: 'big', subscribers: Array.from({ length: 10_001 }, () => ({})) },
    });
    expect(tooMany.status).toBe(422);
    expect(tooMany.body.errors[0]).toMatchObject({ field: 'subscribers', code: 'too_many' });
    expect((await api('POST', '/v1/subscribers/import', { body: { subscribers: [] } })).status).toBe(422);
  });

  it('imports 10,000 rows in one request (its body may be 2 MiB, past the 256 KiB of other bodies)', async () => {
    const rows = Array.from({ length: 10_000 }, (_, i) => ({
      email: `bulk-subscriber-number-${i}@bulk.example`,
      components: [],
      locale: 'en',
      confirmed: true as const,
    }));
    const body = { source: 'bulk', subscribers: rows };
    expect(JSON.stringify(body).length).toBeGreaterThan(256 * 1024);
    const first = await api('POST', '/v1/subscribers/import', { body });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ created: 10_000, confirmed: 0, unchanged: 0, skipped: 0, errors: [] });
    expect((await repo.counts()).confirmed).toBeGreaterThanOrEqual(10_000);
    const again = await api('POST', '/v1/subscribers/import', {
      body: { source: 'bulk', subscribers: rows.slice(0, 100) },
    });
    expect(again.body).toMatchObject({ unchanged: 100, created: 0 });
    // Past its own limit it is refused like any body too large, naming the limit.
    const huge = { source: 'bulk', subscribers: rows.map((r) => ({ ...r, email: `${'x'.repeat(190)}${r.email}` })) };
    const refused = await api('POST', '/v1/subscribers/import', { body: huge });
    expect(refused.status).toBe(413);
    expect(refused.body).toMatchObject({ code: 'payload_too_large', detail: 'The body is larger than 2048 KiB.' });
    // Gone again, so the rest of the file sees the set it made.
    await Promise.all(rows.map((r) => repo.erase(ids.idOf('email', r.email))));
  }, 90_000);

  it('erases a subscriber at once: GET 404, absent from list and export', async () => {
    const s = await seed('erase-me@example.com');
    expect((await api('DELETE', `/v1/subscribers/${s.id}`)).status).toBe(204);
    expect((await api('GET', `/v1/subscribers/${s.id}`)).status).toBe(404);
    expect((await api('DELETE', `/v1/subscribers/${s.id}`)).status).toBe(404);
    expect((await api('GET', '/v1/subscribers?email=erase-me@example.com')).body.data).toEqual([]);
    const nd = await download('?format=ndjson');
    expect(nd.text).not.toContain(s.id);
    expect(nd.text).not.toContain('erase-me@example.com');
  });

  it("shows an execution's subscriber tally and receipts once its notice has recipients", async () => {
    const page = await h.api('POST', '/v1/connections', { body: CONNECTION_BODIES.status_page });
    expect(page.status).toBe(201);
    const incident = await h.api('POST', '/v1/incidents', { body: { title: 'Subscribers told', severity: 'minor' } });
    const executed = await h.api('POST', `/v1/incidents/${incident.body.id}/execute`, {
      body: { connection_ids: [page.body.id] },
    });
    expect(executed.status).toBe(202);
    const exe: string = executed.body.id;
    const get = () => api('GET', `/v1/incidents/${incident.body.id}/executions/${exe}`);

    expect((await get()).body).not.toHaveProperty('subscribers');
    expect((await api('GET', `/v1/executions/${exe}/subscribers`)).status).toBe(404);

    const noticeId = `ntc_${executed.body.deliveries[0].id}`;
    await notices.open(notice(noticeId, exe));
    const subs = ['a', 'b', 'c'].map((x) => ids.idOf('email', `${x}-rcpt@example.com`)).sort();
    const at = new Date().toISOString();
    const rec = (subscriber_id: string, state: Recipient['state'], possible_duplicate = false): Recipient => ({
      subscriber_id,
      state,
      attempts: 1,
      at,
      error: state === 'bounced' ? '550 5.1.1 unknown user' : null,
      possible_duplicate,
    });
    await notices.record(noticeId, rec(subs[0]!, 'delivered'));
    await notices.record(noticeId, rec(subs[1]!, 'bounced'));
    await notices.record(noticeId, rec(subs[2]!, 'sending', true));

    const view = await get();
    expect(view.body.subscribers).toEqual({
      total: 3,
      delivered: 1,
      failed: 0,
      pending: 1,
      bounced: 1,
      possible_duplicates: 1,
      complete: false,
    });
    const listed = await api('GET', `/v1/incidents/${incident.body.id}/executions`);
    expect(listed.body.data.find((e: { id: string }) => e.id === exe).subscribers.total).toBe(3);

    const receipts = await api('GET', `/v1/executions/${exe}/subscribers?limit=2`);
    expect(receipts.status).toBe(200);
    expect(receipts.body.data.map((r: { subscriber_id: string }) => r.subscriber_id)).toEqual(subs.slice(0, 2));
    expect(receipts.body.data[0]).toMatchObject({ notice_id: noticeId, state: 'delivered' });
    const rest = await api(
      'GET',
      `/v1/executions/${exe}/subscribers?limit=2&cursor=${receipts.body.pagination.next_cursor}`,
    );
    expect(rest.body.data.map((r: { subscriber_id: string }) => r.subscriber_id)).toEqual([subs[2]]);
    expect(rest.body.pagination.next_cursor).toBeNull();
    const bounced = await api('GET', `/v1/executions/${exe}/subscribers?state=bounced`);
    expect(bounced.body.data).toEqual([
      expect.objectContaining({ subscriber_id: subs[1], error: '550 5.1.1 unknown user' }),
    ]);
    expect((await api('GET', `/v1/executions/${exe}/subscribers?state=nope`)).status).toBe(422);

    const n = await api('GET', `/v1/subscriber-notices/${noticeId}`);
    expect(n.status).toBe(200);
    expect(n.body).toMatchObject({ id: noticeId, kind: 'incident_update', execution_id: exe, tally: { total: 3 } });
    const r = await api('GET', `/v1/subscriber-notices/${noticeId}/recipients?state=delivered`);
    expect(r.body.data.map((x: { subscriber_id: string }) => x.subscriber_id)).toEqual([subs[0]]);
    expect((await api('GET', '/v1/subscriber-notices/ntc_nothing')).status).toBe(404);
    expect((await api('GET', '/v1/subscriber-notices/ntc_nothing/recipients')).status).toBe(404);
  });
});

function notice(id: string, executionId: string): SubscriberNotice {
  const now = new Date().toISOString();
  return {
    id,
    kind: 'incident_update',
    created_at: now,
    execution_id: executionId,
    page: { title: 'Example status', public_url: 'https://status.example.com' },
    component_ids: [],
    components: [],
    incident: {
      id: 'pin_1',
      name: 'Subscribers told',
      impact: 'minor',
      status: 'investigating',
      url: 'https://status.example.com/incidents/pin_1',
      created_at: now,
    },
    maintenance: null,
    update: { id: 'upd_1', status: 'investigating', body: 'Looking into it.', created_at: now, updated_at: null },
  };
}

/** RFC 4180: quoted cells may hold commas, quotes (doubled) and line breaks. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (c === '"') quoted = false;
      else cell += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      row.push(cell);
      cell = '';
    } else if (c === '\r' && text[i + 1] === '\n') {
      row.push(cell);
      rows.push(row);
      row = [];
      cell = '';
      i++;
    } else cell += c;
  }
  if (cell !== '' || row.length > 0) rows.push([...row, cell]);
  return rows;
}
