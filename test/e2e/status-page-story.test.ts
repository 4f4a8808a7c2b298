import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { en } from '../../src/status/locales/en.js';
import { startHerald, type ApiResponse, type TestHerald } from '../support/herald.js';
import { waitFor } from '../support/wait.js';

/**
 * The story of issue 32, end to end through a real Herald's public API: components, an incident
 * affecting two of them, three updates published to the status page through the `customers`
 * audience (approval required, four eyes), one corrected, one retracted, the incident resolved.
 * At every step the page's HTML, its Atom and RSS feeds (the page's and each affected
 * component's) and every /status/api/v2 file show exactly what was published: nothing held for
 * approval, nothing internal, the correction marked "Updated", the retracted update gone. Every
 * JSON file is checked against Statuspage's documented public API (v2) shapes at every step.
 */

// ---- Statuspage's public API v2, as documented (field names, enums, nesting) ------------------
// The shapes every client of a Statuspage page reads (the page's /api page, e.g.
// https://www.githubstatus.com/api): strict objects, so a field Statuspage does not have (and
// so nothing internal) fails the test as much as a missing one.

const Iso = z.iso.datetime({ offset: true });
const IsoOrNull = Iso.nullable();
const ComponentStatus = z.enum([
  'operational',
  'degraded_performance',
  'partial_outage',
  'major_outage',
  'under_maintenance',
]);
const IncidentStatus = z.enum(['investigating', 'identified', 'monitoring', 'resolved', 'postmortem']);
const MaintenanceStatus = z.enum(['scheduled', 'in_progress', 'verifying', 'completed']);
const Impact = z.enum(['none', 'minor', 'major', 'critical']);

const SpPage = z.strictObject({
  id: z.string().min(1),
  name: z.string().min(1),
  url: z.url(),
  time_zone: z.string().min(1),
  updated_at: Iso,
});

const SpComponent = z.strictObject({
  id: z.string().min(1),
  name: z.string().min(1),
  status: ComponentStatus,
  created_at: Iso,
  updated_at: Iso,
  position: z.number().int(),
  description: z.string().nullable(),
  showcase: z.boolean(),
  start_date: z.iso.date().nullable(),
  group_id: z.string().nullable(),
  page_id: z.string().min(1),
  group: z.boolean(),
  only_show_if_degraded: z.boolean(),
  /** A group's member component ids (groups only). */
  components: z.array(z.string()).optional(),
});

const SpAffectedComponent = z.strictObject({
  code: z.string().min(1),
  name: z.string().min(1),
  old_status: ComponentStatus,
  new_status: ComponentStatus,
});

const spUpdate = <S extends z.ZodType>(status: S) =>
  z.strictObject({
    id: z.string().min(1),
    status,
    body: z.string(),
    incident_id: z.string().min(1),
    created_at: Iso,
    updated_at: Iso,
    display_at: Iso,
    affected_components: z.array(SpAffectedComponent).nullable(),
    deliver_notifications: z.boolean(),
    custom_tweet: z.string().nullable(),
    tweet_id: z.string().nullable(),
  });

const incidentFields = {
  id: z.string().min(1),
  name: z.string().min(1),
  created_at: Iso,
  updated_at: Iso,
  monitoring_at: IsoOrNull,
  resolved_at: IsoOrNull,
  shortlink: z.url(),
  started_at: Iso,
  page_id: z.string().min(1),
  components: z.array(SpComponent),
};

const SpIncident = z.strictObject({
  ...incidentFields,
  status: IncidentStatus,
  impact: Impact,
  incident_updates: z.array(spUpdate(IncidentStatus)),
});

const SpMaintenance = z.strictObject({
  ...incidentFields,
  status: MaintenanceStatus,
  impact: z.enum(['none', 'minor', 'major', 'critical', 'maintenance']),
  scheduled_for: Iso,
  scheduled_until: Iso,
  incident_updates: z.array(spUpdate(MaintenanceStatus)),
});

const SpStatus = z.strictObject({
  indicator: z.enum(['none', 'minor', 'major', 'critical', 'maintenance']),
  description: z.string().min(1),
});

const V2 = {
  'summary.json': z.strictObject({
    page: SpPage,
    components: z.array(SpComponent),
    incidents: z.array(SpIncident),
    scheduled_maintenances: z.array(SpMaintenance),
    status: SpStatus,
  }),
  'status.json': z.strictObject({ page: SpPage, status: SpStatus }),
  'components.json': z.strictObject({ page: SpPage, components: z.array(SpComponent) }),
  'incidents.json': z.strictObject({ page: SpPage, incidents: z.array(SpIncident) }),
  'incidents/unresolved.json': z.strictObject({ page: SpPage, incidents: z.array(SpIncident) }),
  'scheduled-maintenances.json': z.strictObject({ page: SpPage, scheduled_maintenances: z.array(SpMaintenance) }),
  'scheduled-maintenances/upcoming.json': z.strictObject({
    page: SpPage,
    scheduled_maintenances: z.array(SpMaintenance),
  }),
  'scheduled-maintenances/active.json': z.strictObject({
    page: SpPage,
    scheduled_maintenances: z.array(SpMaintenance),
  }),
} as const;
type V2File = keyof typeof V2;
type V2Body<F extends V2File> = z.infer<(typeof V2)[F]>;
type SpIncidentT = z.infer<typeof SpIncident>;

// ---- The story's Herald -----------------------------------------------------------------------

let h: TestHerald;
const tok = { requester: '', approver: '' };
const ids = { page: '', api: '', checkout: '', storage: '', incident: '' };

const TITLE = 'Acme Cloud';
const INCIDENT = 'Checkout and API errors';
/** Written on the incident, never published: must not appear in anything public. */
const INTERNAL = `INTERNAL-${randomUUID().slice(0, 8)} db-7 disk full, ask Sam`;
const U = {
  first: 'We are investigating failed checkouts and API errors.',
  second: 'The cause is a faulty load balancer rule (rollback at 14:00).',
  secondFixed: 'The cause is a faulty load balancer rule; it was rolled back at 14:05.',
  third: 'Error rates are back to normal; we are monitoring.',
  resolved: 'Checkout and the API work normally again. Sorry for the trouble.',
} as const;

async function ok(r: Promise<ApiResponse>, status: number): Promise<any> {
  const res = await r;
  expect(res.status, `${res.status} ${res.text}`).toBe(status);
  return res.body;
}

interface ExecutionView {
  id: string;
  status: string;
  deliveries: { id: string; status: string; audience: string | null }[];
}

const getExecution = async (executionId: string): Promise<ExecutionView> =>
  ok(h.api('GET', `/v1/incidents/${ids.incident}/executions/${executionId}`), 200);

async function settled(executionId: string, pred: (e: ExecutionView) => boolean, what: string) {
  return waitFor(
    async () => {
      const e = await getExecution(executionId);
      if (e.deliveries.some((d) => d.status === 'failed')) throw new Error(`failed: ${JSON.stringify(e)}`);
      return pred(e) ? e : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 100, what },
  );
}
const allDelivered = (e: ExecutionView) =>
  e.deliveries.length > 0 && e.deliveries.every((d) => d.status === 'delivered');
const allHeld = (e: ExecutionView) => e.deliveries.every((d) => d.status === 'pending_approval');

/** Execute to the customers audience: the answer holds it for approval. */
async function executeHeld(message: string, publicStatus?: string): Promise<string> {
  const exe: ExecutionView = await ok(
    h.api('POST', `/v1/incidents/${ids.incident}/execute`, {
      body: {
        audiences: ['customers'],
        variables: { message },
        ...(publicStatus === undefined ? {} : { public_status: publicStatus }),
      },
      token: tok.requester,
    }),
    202,
  );
  expect(allHeld(exe), JSON.stringify(exe)).toBe(true);
  return exe.id;
}

async function approve(executionId: string): Promise<void> {
  const r = await h.api('POST', `/v1/incidents/${ids.incident}/executions/${executionId}/approve`, {
    body: { reason: 'wording checked' },
    token: tok.approver,
  });
  expect([200, 202], r.text).toContain(r.status);
  await settled(executionId, allDelivered, `execution ${executionId} delivered`);
}

beforeAll(async () => {
  h = await startHerald({ HERALD_RATE_LIMIT: '100000', HERALD_EXECUTE_RATE_LIMIT: '100000' });
  tok.requester = await h.tokenWith(['incidents:read', 'incidents:write', 'incidents:execute'], 'requester');
  tok.approver = await h.tokenWith(['incidents:read', 'approvals:write', 'audiences:write'], 'approver');

  ids.page = (
    await ok(
      h.api('POST', '/v1/connections', {
        body: {
          name: 'Status page',
          type: 'status_page',
          config: { title: TITLE, public_url: 'https://status.example.com', time_zone: 'Europe/Berlin' },
        },
      }),
      201,
    )
  ).id;
  const component = async (name: string, group: string) =>
    (await ok(h.api('POST', '/v1/components', { body: { name, group, description: `${name}.` } }), 201)).id as string;
  ids.api = await component('Public API', 'Platform');
  ids.storage = await component('Object storage', 'Platform');
  ids.checkout = await component('Checkout', 'Payments');

  const tpl = (
    await ok(h.api('POST', '/v1/templates', { body: { name: 'customer update', body: '{{message}}' } }), 201)
  ).id as string;
  await ok(
    h.api('POST', '/v1/audiences', {
      body: {
        key: 'customers',
        name: 'Customers',
        visibility: 'external',
        connection_ids: [ids.page],
        template_ids: [tpl],
        approval: {
          required: true,
          approvers: { api_key_scopes: ['audiences:write'] },
          four_eyes: true,
          expires_in: '2h',
        },
      },
    }),
    201,
  );
  ids.incident = (
    await ok(
      h.api('POST', '/v1/incidents', {
        body: {
          title: INCIDENT,
          severity: 'major',
          description: INTERNAL,
          template_ids: [tpl],
          components: [
            { id: ids.api, status: 'partial_outage' },
            { id: ids.checkout, status: 'degraded_performance' },
          ],
        },
        token: tok.requester,
      }),
      201,
    )
  ).id;
}, 120_000);

afterAll(async () => {
  await h?.close();
});

// ---- What the public sees ---------------------------------------------------------------------

interface Published {
  /** Bodies newest first, with their public state and whether a correction edited them. */
  updates: { body: string; status: string; corrected?: boolean }[];
  /** The incident's public status (null: not public at all). */
  status: string | null;
  components: Record<'api' | 'checkout' | 'storage', string>;
  /** Text that must appear nowhere public. */
  never: string[];
}

const get = async (path: string) => {
  const r = await fetch(`${h.url}${path}`, { headers: { 'Accept-Language': 'en' } });
  const text = await r.text();
  if (r.status !== 200) throw new Error(`${path}: ${r.status} ${text.slice(0, 300)}`);
  return { text, type: r.headers.get('content-type') ?? '' };
};

async function v2<F extends V2File>(file: F): Promise<V2Body<F>> {
  const { text, type } = await get(`/status/api/v2/${file}`);
  expect(type, file).toMatch(/^application\/json/);
  const parsed = V2[file].safeParse(JSON.parse(text));
  if (!parsed.success) throw new Error(`${file} is not Statuspage's shape: ${z.prettifyError(parsed.error)}\n${text}`);
  return parsed.data as V2Body<F>;
}

/** Entries (Atom) or items (RSS) of a feed, as raw XML. */
function feedEntries(xml: string, kind: 'atom' | 'rss'): string[] {
  const tag = kind === 'atom' ? 'entry' : 'item';
  return [...xml.matchAll(new RegExp(`<${tag}[\\s>][\\s\\S]*?</${tag}>`, 'g'))].map((m) => m[0]);
}

/** XML text unescaped enough to find a body in it (the bodies here have no markup). */
const xmlText = (s: string) =>
  s
    .replace(/<!\[CDATA\[([\s\S]*?)\]\]>/g, '$1')
    .replace(/&apos;|&#39;|&#x27;/g, "'")
    .replace(/&quot;/g, '"')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');

function expectIncident(inc: SpIncidentT, want: Published, where: string): void {
  expect(inc.name, where).toBe(INCIDENT);
  expect(inc.status, where).toBe(want.status);
  expect(inc.impact, where).toBe('major');
  // Thrown as text, so a difference reads in full in the waiting's timeout message.
  const got = JSON.stringify(inc.incident_updates.map((u) => [u.body, u.status]));
  const wanted = JSON.stringify(want.updates.map((u) => [u.body, u.status]));
  if (got !== wanted) throw new Error(`${where}: the updates, newest first: got ${got}, want ${wanted}`);
  for (const [i, u] of inc.incident_updates.entries()) {
    expect(u.incident_id, where).toBe(inc.id);
    const corrected = want.updates[i]!.corrected === true;
    // A correction edits in place: the same update, a later updated_at.
    if (corrected)
      expect(Date.parse(u.updated_at), `${where}: corrected update`).toBeGreaterThan(Date.parse(u.created_at));
    else expect(u.updated_at, `${where}: untouched update`).toBe(u.created_at);
  }
  expect(inc.resolved_at === null, where).toBe(want.status !== 'resolved');
  expect(inc.components.map((c) => c.id).sort(), where).toEqual([ids.api, ids.checkout].sort());
  // Newest first by creation.
  const created = inc.incident_updates.map((u) => Date.parse(u.created_at));
  expect(
    [...created].sort((a, b) => b - a),
    where,
  ).toEqual(created);
}

/** Checks every public output once; throws (with the reason) on the first difference. */
async function checkPublished(want: Published): Promise<void> {
  const bodies = want.updates.map((u) => u.body);
  const everything: string[] = [];

  // --- The JSON (Statuspage v2): every file, every time.
  const files = {} as { [F in V2File]: V2Body<F> };
  for (const f of Object.keys(V2) as V2File[]) {
    (files as Record<string, unknown>)[f] = await v2(f);
    everything.push(JSON.stringify(files[f]));
  }
  const all = files['incidents.json'].incidents;
  const unresolved = files['incidents/unresolved.json'].incidents;
  const summary = files['summary.json'];
  if (want.status === null) {
    expect(all, 'incidents.json').toEqual([]);
    expect(unresolved, 'unresolved.json').toEqual([]);
    expect(summary.incidents, 'summary.json incidents').toEqual([]);
  } else {
    expect(all, 'incidents.json').toHaveLength(1);
    expectIncident(all[0]!, want, 'incidents.json');
    const open = want.status !== 'resolved';
    expect(unresolved.length, 'unresolved.json').toBe(open ? 1 : 0);
    expect(summary.incidents.length, 'summary.json incidents').toBe(open ? 1 : 0);
    if (open) {
      expectIncident(unresolved[0]!, want, 'unresolved.json');
      expectIncident(summary.incidents[0]!, want, 'summary.json');
    }
  }
  for (const f of ['summary.json', 'components.json'] as const) {
    const comps = files[f].components;
    const byId = new Map(comps.map((c) => [c.id, c]));
    for (const key of ['api', 'checkout', 'storage'] as const)
      expect(byId.get(ids[key])?.status, `${f}: ${key}`).toBe(want.components[key]);
    // Groups as Statuspage nests them: a group component lists its members, each names its group.
    const groups = comps.filter((c) => c.group);
    expect(groups.map((g) => g.name).sort(), f).toEqual(['Payments', 'Platform']);
    for (const g of groups)
      for (const member of g.components ?? []) expect(byId.get(member)?.group_id, `${f}: ${member}`).toBe(g.id);
    expect(byId.get(ids.api)?.group_id, f).toBe(groups.find((g) => g.name === 'Platform')?.id);
  }
  const worst = Object.values(want.components).includes('partial_outage')
    ? 'major'
    : Object.values(want.components).includes('degraded_performance')
      ? 'minor'
      : want.status !== null && want.status !== 'resolved'
        ? 'major'
        : 'none';
  expect(files['status.json'].status.indicator, 'status.json').toBe(worst);
  expect(summary.status).toEqual(files['status.json'].status);
  for (const f of [
    'scheduled-maintenances.json',
    'scheduled-maintenances/upcoming.json',
    'scheduled-maintenances/active.json',
  ] as const)
    expect(files[f].scheduled_maintenances, f).toEqual([]);
  expect(summary.scheduled_maintenances).toEqual([]);

  // --- The HTML: the front page and the incident's own page.
  const index = (await get('/status')).text;
  everything.push(index);
  const open = want.status !== null && want.status !== 'resolved';
  // While open, the front page shows the incident with every update (once resolved it may list
  // it under recent incidents: what it shows then is the incident page's to say).
  if (open) {
    expect(index).toContain(INCIDENT);
    for (const b of bodies) expect(index, `/status shows "${b}"`).toContain(b);
  }
  if (want.status !== null) {
    const page = (await get(`/status/incidents/${ids.incident}`)).text;
    everything.push(page);
    let from = 0;
    for (const b of bodies) {
      const at = page.indexOf(b, from);
      expect(at, `the incident page shows "${b}" in order`).toBeGreaterThanOrEqual(from);
      from = at;
    }
    // The correction is marked "Updated …" (once per corrected update), the others are not.
    const marker = en.updated.split('{time}')[0]!.trim();
    const marks = page.split(marker).length - 1;
    expect(marks, 'the "Updated" marks').toBe(want.updates.filter((u) => u.corrected).length);
    const history = (await get('/status/history')).text;
    everything.push(history);
    expect(history).toContain(INCIDENT);
  } else {
    const r = await fetch(`${h.url}/status/incidents/${ids.incident}`);
    expect(r.status, 'an unpublished incident has no page').toBe(404);
    expect(index).not.toContain(INCIDENT);
  }

  // --- The feeds: the page's and each affected component's, Atom and RSS.
  const feeds = [
    ['/status/feed.atom', 'atom'],
    ['/status/feed.rss', 'rss'],
    [`/status/components/${ids.api}/feed.atom`, 'atom'],
    [`/status/components/${ids.checkout}/feed.rss`, 'rss'],
  ] as const;
  for (const [path, kind] of feeds) {
    const xml = (await get(path)).text;
    everything.push(xml);
    const entries = feedEntries(xml, kind).map(xmlText);
    expect(entries.length, `${path}: one entry per public update`).toBe(bodies.length);
    for (const b of bodies) expect(entries.filter((e) => e.includes(b)).length, `${path}: an entry for "${b}"`).toBe(1);
    // Atom says when an entry was edited: <updated> moves past <published> for the corrected one.
    if (kind === 'atom')
      for (const u of want.updates) {
        const entry = entries.find((e) => e.includes(u.body))!;
        const updated = Date.parse(/<updated>([^<]+)<\/updated>/.exec(entry)?.[1] ?? '');
        const published = Date.parse(/<published>([^<]+)<\/published>/.exec(entry)?.[1] ?? '');
        expect(Number.isNaN(updated) || Number.isNaN(published), `${path}: entry dates`).toBe(false);
        if (u.corrected === true) expect(updated, `${path}: corrected entry`).toBeGreaterThan(published);
        else expect(updated, `${path}: entry`).toBe(published);
      }
  }
  // The unaffected component's feed has nothing of this incident.
  const storageFeed = xmlText((await get(`/status/components/${ids.storage}/feed.atom`)).text);
  for (const b of bodies) expect(storageFeed).not.toContain(b);

  // --- Nothing unpublished, retracted or internal, anywhere.
  for (const text of everything.map(xmlText))
    for (const n of [INTERNAL, ...want.never]) expect(text.includes(n), `"${n}" is public`).toBe(false);
}

/** Waits (a snapshot rebuilds within a moment of a commit) until everything public shows `want`. */
async function expectPublished(want: Published): Promise<void> {
  await waitFor(
    async () => {
      await checkPublished(want);
      return true;
    },
    { timeoutMs: 10_000, intervalMs: 150, what: 'the published state everywhere' },
  );
}

const impacted = { api: 'partial_outage', checkout: 'degraded_performance', storage: 'operational' };
const fine = { api: 'operational', checkout: 'operational', storage: 'operational' };

describe('the status page story: publish, correct, retract, resolve', () => {
  const exe = { first: '', second: '', third: '', resolved: '' };

  it('an internal incident is not public; its components show its impact', async () => {
    await expectPublished({ updates: [], status: null, components: impacted, never: [INCIDENT, ...Object.values(U)] });
  });

  it('update 1: held for approval it is not public; approved it is', async () => {
    exe.first = await executeHeld(U.first, 'investigating');
    // Held: the page has nothing of it (the state is checked again only after a settle).
    await settled(exe.first, allHeld, 'held');
    await checkPublished({ updates: [], status: null, components: impacted, never: [U.first, INCIDENT] });
    await approve(exe.first);
    await expectPublished({
      updates: [{ body: U.first, status: 'investigating' }],
      status: 'investigating',
      components: impacted,
      never: [U.second, U.third],
    });
  });

  it('updates 2 and 3, each after its approval, newest first', async () => {
    exe.second = await executeHeld(U.second, 'identified');
    await checkPublished({
      updates: [{ body: U.first, status: 'investigating' }],
      status: 'investigating',
      components: impacted,
      never: [U.second],
    });
    await approve(exe.second);
    exe.third = await executeHeld(U.third, 'monitoring');
    await expectPublished({
      updates: [
        { body: U.second, status: 'identified' },
        { body: U.first, status: 'investigating' },
      ],
      status: 'identified',
      components: impacted,
      never: [U.third],
    });
    await approve(exe.third);
    await expectPublished({
      updates: [
        { body: U.third, status: 'monitoring' },
        { body: U.second, status: 'identified' },
        { body: U.first, status: 'investigating' },
      ],
      status: 'monitoring',
      components: impacted,
      never: [],
    });
  });

  it('a correction of update 2 waits for its approval, then edits it in place, marked "Updated"', async () => {
    const r = await h.api('POST', `/v1/incidents/${ids.incident}/executions/${exe.second}/correct`, {
      // Variables only: a note would be shown with the corrected text (the corrections' own rule).
      body: { variables: { message: U.secondFixed } },
      token: tok.requester,
    });
    expect(r.status, r.text).toBe(202);
    const correction = r.body as ExecutionView;
    const updateIdOf = async (body: string) =>
      (await v2('incidents.json')).incidents[0]!.incident_updates.find((u) => u.body === body)?.id;
    const before = await updateIdOf(U.second);
    expect(before).toBeDefined();
    await settled(correction.id, allHeld, 'the correction held');
    await checkPublished({
      updates: [
        { body: U.third, status: 'monitoring' },
        { body: U.second, status: 'identified' },
        { body: U.first, status: 'investigating' },
      ],
      status: 'monitoring',
      components: impacted,
      never: [U.secondFixed],
    });
    await approve(correction.id);
    await expectPublished({
      updates: [
        { body: U.third, status: 'monitoring' },
        { body: U.secondFixed, status: 'identified', corrected: true },
        { body: U.first, status: 'investigating' },
      ],
      status: 'monitoring',
      components: impacted,
      never: [U.second],
    });
    // The same update, edited: its id (and so its feed entry's id and its anchor) stays.
    expect(await updateIdOf(U.secondFixed)).toBe(before);
    const atom = (await get('/status/feed.atom')).text;
    expect(feedEntries(atom, 'atom').find((e) => xmlText(e).includes(U.secondFixed))).toContain(`update-${before}`);
  });

  it('a retraction of update 1 removes it everywhere, without waiting for approval', async () => {
    const r = await h.api('POST', `/v1/incidents/${ids.incident}/executions/${exe.first}/retract`, {
      body: { reason: 'posted too early' },
      token: tok.requester,
    });
    expect(r.status, r.text).toBe(202);
    await settled((r.body as ExecutionView).id, allDelivered, 'the retraction delivered');
    await expectPublished({
      updates: [
        { body: U.third, status: 'monitoring' },
        { body: U.secondFixed, status: 'identified', corrected: true },
      ],
      status: 'monitoring',
      components: impacted,
      never: [U.first, U.second, 'posted too early'],
    });
  });

  it('resolving: the incident shows resolved, its components recover; the resolved update publishes after approval', async () => {
    await ok(
      h.api('PATCH', `/v1/incidents/${ids.incident}`, { body: { status: 'resolved' }, token: tok.requester }),
      200,
    );
    // Resolved internally: the public incident shows resolved at once, with the updates it has.
    await expectPublished({
      updates: [
        { body: U.third, status: 'monitoring' },
        { body: U.secondFixed, status: 'identified', corrected: true },
      ],
      status: 'resolved',
      components: fine,
      never: [U.first, U.second, U.resolved],
    });
    // No public_status: mapped from the incident's status (resolved).
    exe.resolved = await executeHeld(U.resolved);
    await approve(exe.resolved);
    await expectPublished({
      updates: [
        { body: U.resolved, status: 'resolved' },
        { body: U.third, status: 'monitoring' },
        { body: U.secondFixed, status: 'identified', corrected: true },
      ],
      status: 'resolved',
      components: fine,
      never: [U.first, U.second],
    });
    const inc = (await v2('incidents.json')).incidents[0]!;
    expect(inc.resolved_at).not.toBeNull();
    expect(inc.monitoring_at).not.toBeNull();
  });
});
