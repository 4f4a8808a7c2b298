import { createHash } from 'node:crypto';
import {
  COMPONENT_STATUS_RANK,
  type ComponentStatus,
  type PublicComponent,
  type PublicIncident,
  type PublicMaintenance,
  type StatusSnapshot,
} from '../domain/status/public.js';
import type { TimeFormat } from './i18n.js';

/**
 * What the page derives from a snapshot, the same for the HTML, the feeds and the JSON: the
 * overall indicator, the group structure, which incidents and maintenances are current, and the
 * daily history of each component.
 */

/** Statuspage's overall indicator (status.json), plus `maintenance` when only maintenance is on. */
export type Indicator = 'none' | 'minor' | 'major' | 'critical' | 'maintenance';

export const INDICATOR_RANK: Record<Indicator, number> = { none: 0, maintenance: 1, minor: 2, major: 3, critical: 4 };

export const INDICATOR_OF_COMPONENT: Record<ComponentStatus, Indicator> = {
  operational: 'none',
  under_maintenance: 'maintenance',
  degraded_performance: 'minor',
  partial_outage: 'major',
  major_outage: 'critical',
};

export const isUnresolved = (i: PublicIncident): boolean => i.status !== 'resolved';
export const isActiveMaintenance = (m: PublicMaintenance): boolean =>
  m.status === 'in_progress' || m.status === 'verifying';
export const isUpcomingMaintenance = (m: PublicMaintenance): boolean => m.status === 'scheduled';

/** The worst of: the components' statuses and the unresolved incidents' impacts. */
export function overallIndicator(s: StatusSnapshot): Indicator {
  let worst: Indicator = 'none';
  const consider = (i: Indicator) => {
    if (INDICATOR_RANK[i] > INDICATOR_RANK[worst]) worst = i;
  };
  for (const c of s.components) consider(INDICATOR_OF_COMPONENT[c.status]);
  for (const i of s.incidents) if (isUnresolved(i)) consider(i.impact === 'none' ? 'minor' : i.impact);
  if (worst === 'none' && s.maintenances.some(isActiveMaintenance)) worst = 'maintenance';
  return worst;
}

/** Statuspage's English descriptions of the indicator (status.json's `description`). */
export const INDICATOR_DESCRIPTION: Record<Indicator, string> = {
  none: 'All Systems Operational',
  minor: 'Minor Service Outage',
  major: 'Partial System Outage',
  critical: 'Major Service Outage',
  maintenance: 'Service Under Maintenance',
};

export function worstStatus(statuses: ComponentStatus[]): ComponentStatus {
  let worst: ComponentStatus = 'operational';
  for (const s of statuses) if (COMPONENT_STATUS_RANK[s] > COMPONENT_STATUS_RANK[worst]) worst = s;
  return worst;
}

/** A stable, opaque id for a group (groups have no record of their own): from its name. */
export function groupId(name: string): string {
  return `grp_${createHash('sha256').update(name, 'utf8').digest('hex').slice(0, 20)}`;
}

/** A stable page id for the JSON, from the page's public URL. */
export function pageId(publicUrl: string): string {
  return createHash('sha256').update(publicUrl, 'utf8').digest('hex').slice(0, 12);
}

export interface GroupEntry {
  kind: 'group';
  id: string;
  name: string;
  status: ComponentStatus;
  position: number;
  members: PublicComponent[];
}
export interface ComponentEntry {
  kind: 'component';
  component: PublicComponent;
  position: number;
}
export type Entry = GroupEntry | ComponentEntry;

/**
 * The page's top-level rows, in order: ungrouped components and groups interleaved by position
 * (a group sits where its first member would), members inside by position then name.
 */
export function entries(components: PublicComponent[]): Entry[] {
  const byPos = (a: PublicComponent, b: PublicComponent) =>
    a.position - b.position || a.name.localeCompare(b.name) || a.id.localeCompare(b.id);
  const sorted = [...components].sort(byPos);
  const out: Entry[] = [];
  const groups = new Map<string, GroupEntry>();
  for (const c of sorted) {
    if (c.group === null || c.group === '') {
      out.push({ kind: 'component', component: c, position: c.position });
      continue;
    }
    let g = groups.get(c.group);
    if (!g) {
      g = {
        kind: 'group',
        id: groupId(c.group),
        name: c.group,
        status: 'operational',
        position: c.position,
        members: [],
      };
      groups.set(c.group, g);
      out.push(g);
    }
    g.members.push(c);
  }
  for (const g of groups.values()) g.status = worstStatus(g.members.map((m) => m.status));
  return out;
}

export const HISTORY_DAYS = 90;

/**
 * How much of its time a status counts as down in the uptime percentage, as Statuspage weighs
 * it: a major outage fully, a partial outage at 30 %; degradation and maintenance not at all.
 */
const DOWN_WEIGHT: Partial<Record<ComponentStatus, number>> = { major_outage: 1, partial_outage: 0.3 };

export interface DayBar {
  /** Start of the local day, UTC ms. */
  start: number;
  /** null: the component did not exist yet that day. */
  worst: ComponentStatus | null;
  /** ms spent in the worst non-operational status that day (for the text). */
  worstMs: number;
}

export interface UptimeHistory {
  days: DayBar[];
  /** Share of observed time not in an outage, 0..1; null when nothing was observed. */
  uptime: number | null;
}

/**
 * The starts (UTC ms) of the last HISTORY_DAYS local days, oldest first, today last. The same for
 * every component of a page: computed once per render (each day boundary asks Intl for the offset).
 */
export function dayStarts(nowMs: number, tf: TimeFormat): number[] {
  const starts: number[] = [];
  let s = tf.startOfDay(nowMs);
  for (let i = 0; i < HISTORY_DAYS; i++) {
    starts.unshift(s);
    s = tf.startOfDay(s - 1);
  }
  return starts;
}

/**
 * The last HISTORY_DAYS local days of a component, oldest first: each day's worst status and how
 * long it lasted, from the effective-status changes (the one before the window tells how the
 * window began). Time before the component existed is not counted.
 */
export function uptimeHistory(
  c: PublicComponent,
  nowMs: number,
  tf: TimeFormat,
  starts: number[] = dayStarts(nowMs, tf),
): UptimeHistory {
  const createdMs = Date.parse(c.created_at);
  // Segments [from, to) of one status, clipped to the window's start and now.
  const changes = [...c.history].sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
  const segs: { from: number; to: number; status: ComponentStatus }[] = [];
  const windowStart = Math.max(starts[0]!, Number.isFinite(createdMs) ? createdMs : starts[0]!);
  let cur: ComponentStatus = 'operational';
  let curFrom = windowStart;
  let known = false;
  for (const ch of changes) {
    const at = Date.parse(ch.at);
    if (!Number.isFinite(at)) continue;
    if (at <= windowStart) {
      cur = ch.status;
      known = true;
      continue;
    }
    if (at >= nowMs) break;
    segs.push({ from: curFrom, to: at, status: known ? cur : 'operational' });
    cur = ch.status;
    known = true;
    curFrom = at;
  }
  // With no change at all the current status stands for the whole window.
  if (!known && changes.length === 0) cur = c.status;
  segs.push({ from: curFrom, to: nowMs, status: cur });

  let observed = 0;
  let down = 0;
  const days: DayBar[] = starts.map((start, i) => {
    const dayEnd = i === starts.length - 1 ? nowMs : Math.min(starts[i + 1]!, nowMs);
    if (dayEnd <= windowStart) return { start, worst: null, worstMs: 0 };
    const per = new Map<ComponentStatus, number>();
    for (const seg of segs) {
      const from = Math.max(seg.from, start);
      const to = Math.min(seg.to, dayEnd);
      if (to <= from) continue;
      per.set(seg.status, (per.get(seg.status) ?? 0) + (to - from));
      observed += to - from;
      down += (to - from) * (DOWN_WEIGHT[seg.status] ?? 0);
    }
    const worst = worstStatus([...per.keys()]);
    return { start, worst: per.size === 0 ? null : worst, worstMs: per.get(worst) ?? 0 };
  });
  return { days, uptime: observed > 0 ? (observed - down) / observed : null };
}

/** Incidents that name a component (as last published or in any update). */
export function incidentNames(i: PublicIncident, componentId: string): boolean {
  return (
    i.component_ids.includes(componentId) ||
    i.updates.some((u) => u.affected_components.some((a) => a.id === componentId))
  );
}
