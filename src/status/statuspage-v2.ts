import type {
  ComponentStatus,
  PublicComponent,
  PublicIncident,
  PublicMaintenance,
  StatusSnapshot,
} from '../domain/status/public.js';
import {
  entries,
  INDICATOR_DESCRIPTION,
  isActiveMaintenance,
  isUnresolved,
  isUpcomingMaintenance,
  overallIndicator,
  pageId,
} from './model.js';
import type { PublicPageConfig } from '../domain/status/public.js';

/**
 * Statuspage's public API v2 (`/api/v2/*.json`), the format widgets, aggregators and migration
 * scripts read: the same field names, enums and nesting. What Herald has no counterpart for is
 * filled with Statuspage's own neutral value (docs/status-page.md lists each):
 * - `showcase` true (the page shows every component's history), `only_show_if_degraded` false;
 * - incident updates: `deliver_notifications` true, `custom_tweet`/`tweet_id` null;
 *   `affected_components[].old_status` is the status the previous update published for it
 *   (`operational` for the first);
 * - incidents: `postmortem_body`/`postmortem_published_at` are not carried (no postmortems),
 *   `started_at` is the first publication, `monitoring_at` the first `monitoring` update;
 * - overall `status.indicator`: `none|minor|major|critical` like Statuspage (Herald's
 *   `maintenance` banner reads as `none` there, with Statuspage's "Service Under Maintenance").
 */

type Json = Record<string, unknown>;

export interface V2Context {
  snap: StatusSnapshot;
  page: PublicPageConfig;
}

/** Statuspage returns the 50 most recent incidents and maintenances. */
const RECENT = 50;

function pageJson(c: V2Context): Json {
  return {
    id: pageId(c.page.public_url),
    name: c.page.title,
    url: c.page.public_url,
    time_zone: c.page.time_zone,
    updated_at: lastUpdate(c.snap),
  };
}

/** The latest change anything on the page shows, else when the snapshot was read. */
function lastUpdate(s: StatusSnapshot): string {
  let latest = '';
  const see = (t: string | null | undefined) => {
    if (t && t > latest) latest = t;
  };
  for (const c of s.components) see(c.updated_at);
  for (const i of s.incidents) see(i.updated_at);
  for (const m of s.maintenances) see(m.updated_at);
  return latest === '' ? s.read_at : latest;
}

function componentsJson(c: V2Context): Json[] {
  const pid = pageId(c.page.public_url);
  const one = (x: PublicComponent, groupId: string | null): Json => ({
    id: x.id,
    name: x.name,
    status: x.status,
    created_at: x.created_at,
    updated_at: x.updated_at,
    position: x.position,
    description: x.description === '' ? null : x.description,
    showcase: true,
    start_date: x.created_at.slice(0, 10),
    group_id: groupId,
    page_id: pid,
    group: false,
    only_show_if_degraded: false,
  });
  const out: Json[] = [];
  for (const e of entries(c.snap.components)) {
    if (e.kind === 'component') {
      out.push(one(e.component, null));
      continue;
    }
    const created = e.members.map((m) => m.created_at).sort()[0]!;
    const updated = e.members
      .map((m) => m.updated_at)
      .sort()
      .at(-1)!;
    out.push({
      id: e.id,
      name: e.name,
      status: e.status,
      created_at: created,
      updated_at: updated,
      position: e.position,
      description: null,
      showcase: false,
      start_date: null,
      group_id: null,
      page_id: pid,
      group: true,
      only_show_if_degraded: false,
      components: e.members.map((m) => m.id),
    });
    for (const m of e.members) out.push(one(m, e.id));
  }
  return out;
}

function incidentJson(c: V2Context, i: PublicIncident, comps: Map<string, Json>): Json {
  const pid = pageId(c.page.public_url);
  // Oldest first to know each update's previous component statuses, then newest first again.
  const last = new Map<string, ComponentStatus>();
  const updates = [...i.updates].reverse().map((u) => {
    const affected = u.affected_components.map((a) => {
      const old = last.get(a.id) ?? 'operational';
      last.set(a.id, a.status);
      const name = comps.get(a.id)?.name;
      return { code: a.id, name: typeof name === 'string' ? name : a.id, old_status: old, new_status: a.status };
    });
    return {
      id: u.id,
      status: u.status,
      body: u.body,
      incident_id: i.id,
      created_at: u.created_at,
      updated_at: u.updated_at ?? u.created_at,
      display_at: u.created_at,
      affected_components: affected.length > 0 ? affected : null,
      deliver_notifications: true,
      custom_tweet: null,
      tweet_id: null,
    };
  });
  updates.reverse();
  const monitoring = [...i.updates].reverse().find((u) => u.status === 'monitoring');
  return {
    id: i.id,
    name: i.name,
    status: i.status,
    created_at: i.created_at,
    // A correction moves the incident's updated_at too, as Statuspage's does.
    updated_at: i.updates.reduce((t, u) => maxIso(t, u.updated_at ?? u.created_at), i.updated_at),
    monitoring_at: monitoring?.created_at ?? null,
    resolved_at: i.resolved_at,
    impact: i.impact,
    shortlink: `${c.page.public_url}/incidents/${encodeURIComponent(i.id)}`,
    started_at: i.created_at,
    page_id: pid,
    incident_updates: updates,
    components: i.component_ids.map((id) => comps.get(id)).filter((x): x is Json => x !== undefined),
  };
}

function maintenanceJson(c: V2Context, m: PublicMaintenance, comps: Map<string, Json>): Json {
  const pid = pageId(c.page.public_url);
  const oldestFirst = [...m.updates].reverse();
  const started = oldestFirst.find((u) => u.status === 'in_progress');
  const completed = oldestFirst.find((u) => u.status === 'completed');
  return {
    id: m.id,
    name: m.name,
    status: m.status,
    created_at: m.created_at,
    updated_at: m.updated_at,
    monitoring_at: null,
    resolved_at: m.status === 'completed' ? (completed?.created_at ?? m.updated_at) : null,
    impact: 'maintenance',
    shortlink: `${c.page.public_url}/maintenances/${encodeURIComponent(m.id)}`,
    started_at: started?.created_at ?? m.scheduled_for,
    page_id: pid,
    incident_updates: m.updates.map((u) => ({
      id: u.id,
      status: u.status,
      body: u.body,
      incident_id: m.id,
      created_at: u.created_at,
      updated_at: u.created_at,
      display_at: u.created_at,
      affected_components: null,
      deliver_notifications: true,
      custom_tweet: null,
      tweet_id: null,
    })),
    components: m.component_ids.map((id) => comps.get(id)).filter((x): x is Json => x !== undefined),
    scheduled_for: m.scheduled_for,
    scheduled_until: m.scheduled_until,
  };
}

const maxIso = (a: string, b: string): string => (Date.parse(b) > Date.parse(a) ? b : a);

function statusJson(c: V2Context): Json {
  const indicator = overallIndicator(c.snap);
  return {
    indicator: indicator === 'maintenance' ? 'none' : indicator,
    description: INDICATOR_DESCRIPTION[indicator],
  };
}

/** The files of /api/v2, by their path under it. */
export const V2_FILES = [
  'summary.json',
  'status.json',
  'components.json',
  'incidents.json',
  'incidents/unresolved.json',
  'scheduled-maintenances.json',
  'scheduled-maintenances/upcoming.json',
  'scheduled-maintenances/active.json',
] as const;
export type V2File = (typeof V2_FILES)[number];

export function isV2File(s: string): s is V2File {
  return (V2_FILES as readonly string[]).includes(s);
}

/** One /api/v2 file's document. */
export function v2Document(c: V2Context, file: V2File): Json {
  const components = componentsJson(c);
  const byId = new Map(components.map((x) => [x.id as string, x]));
  const page = pageJson(c);
  const incidents = (list: PublicIncident[]) => list.map((i) => incidentJson(c, i, byId));
  const maintenances = (list: PublicMaintenance[]) => list.map((m) => maintenanceJson(c, m, byId));
  const { snap } = c;
  // Soonest first for what is ahead, like Statuspage; the full list newest first.
  const upcoming = snap.maintenances.filter(isUpcomingMaintenance);
  const active = snap.maintenances.filter(isActiveMaintenance);
  switch (file) {
    case 'summary.json':
      return {
        page,
        components,
        incidents: incidents(snap.incidents.filter(isUnresolved)),
        scheduled_maintenances: maintenances([...active, ...upcoming]),
        status: statusJson(c),
      };
    case 'status.json':
      return { page, status: statusJson(c) };
    case 'components.json':
      return { page, components };
    case 'incidents.json':
      return { page, incidents: incidents(snap.incidents.slice(0, RECENT)) };
    case 'incidents/unresolved.json':
      return { page, incidents: incidents(snap.incidents.filter(isUnresolved)) };
    case 'scheduled-maintenances.json':
      return {
        page,
        scheduled_maintenances: maintenances(
          [...snap.maintenances].sort((a, b) => (a.scheduled_for < b.scheduled_for ? 1 : -1)).slice(0, RECENT),
        ),
      };
    case 'scheduled-maintenances/upcoming.json':
      return { page, scheduled_maintenances: maintenances(upcoming) };
    case 'scheduled-maintenances/active.json':
      return { page, scheduled_maintenances: maintenances(active) };
  }
}
