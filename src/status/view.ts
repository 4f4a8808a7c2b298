import Mustache from 'mustache';
import { escapeHtml } from '../channels/common/escape.js';
import type {
  ComponentStatus,
  PublicComponent,
  PublicIncident,
  PublicMaintenance,
  PublicPageConfig,
  StatusSnapshot,
} from '../domain/status/public.js';
import { fill, STATUS_LOCALES, stringsOf, TimeFormat, type StatusLocale } from './i18n.js';
import { INDICATOR_ICON, STATUS_ICON } from './icons.js';
import type { LocaleStrings } from './locales/en.js';
import {
  entries,
  HISTORY_DAYS,
  isActiveMaintenance,
  isUnresolved,
  isUpcomingMaintenance,
  overallIndicator,
  uptimeHistory,
  dayStarts,
  type Indicator,
} from './model.js';
import { STYLE_FILE } from './style.js';
import { TEMPLATES } from './templates.js';

/**
 * The HTML pages: a view model per page, built from the snapshot alone, rendered through the
 * mustache templates (which escape every value). Links inside the HTML are relative to where the
 * page is mounted (`base`: `/status`, or `` on HERALD_STATUS_HOST); feeds and the JSON use the
 * page's public URL instead.
 */

export interface RenderContext {
  snap: StatusSnapshot;
  page: PublicPageConfig;
  locale: StatusLocale;
  /** Path prefix of the page on this host, without trailing slash (`/status` or ``). */
  base: string;
  nowMs: number;
  /** E-mail subscriptions are on (HERALD_SMTP_URL): the index page shows the subscribe form. */
  emailSubscriptions?: boolean;
}

export const HISTORY_PAGE_SIZE = 20;
const RECENT_DAYS = 14;
const RECENT_MAX = 10;
const LANGUAGE_NAMES: Record<StatusLocale, string> = { en: 'English', de: 'Deutsch' };

/** Paths of the page under `base` (also used by the router). */
export function pathsOf(base: string) {
  return {
    home: base === '' ? '/' : base,
    history: `${base}/history`,
    historyPage: (n: number) => (n <= 1 ? `${base}/history` : `${base}/history?page=${n}`),
    incident: (id: string) => `${base}/incidents/${encodeURIComponent(id)}`,
    maintenance: (id: string) => `${base}/maintenances/${encodeURIComponent(id)}`,
    atom: `${base}/feed.atom`,
    rss: `${base}/feed.rss`,
    componentAtom: (id: string) => `${base}/components/${encodeURIComponent(id)}/feed.atom`,
    componentRss: (id: string) => `${base}/components/${encodeURIComponent(id)}/feed.rss`,
    api: `${base}/api/v2/summary.json`,
    css: `${base}/assets/${STYLE_FILE}`,
  };
}

interface DayGrid {
  starts: number[];
  labels: string[];
  /** Each day's text when nothing happened, and before the component existed (HTML-escaped). */
  operational: string[];
  noData: string[];
}

interface TimeView {
  text: string;
  iso: string;
  utc: string;
}

interface StatusView {
  status: ComponentStatus;
  label: string;
  icon: string;
}

class Page {
  readonly s: LocaleStrings;
  readonly tf: TimeFormat;
  readonly paths: ReturnType<typeof pathsOf>;
  readonly names: Map<string, string>;
  readonly byId: Map<string, PublicComponent>;

  constructor(readonly ctx: RenderContext) {
    this.s = stringsOf(ctx.locale);
    this.tf = timeFormat(ctx.locale, ctx.page.time_zone);
    this.paths = pathsOf(ctx.base);
    this.names = new Map(ctx.snap.components.map((c) => [c.id, c.name]));
    this.byId = new Map(ctx.snap.components.map((c) => [c.id, c]));
  }

  time(iso: string): TimeView {
    return this.tf.time(iso);
  }

  status(status: ComponentStatus): StatusView {
    return { status, label: this.s.component_status[status], icon: STATUS_ICON[status] };
  }

  affected(ids: string[]): string[] {
    return ids.map((id) => this.names.get(id)).filter((n): n is string => n !== undefined);
  }

  incidentUpdates(i: PublicIncident) {
    return i.updates.map((u) => ({
      state: this.s.public_state[u.status],
      at: this.time(u.created_at),
      edited: u.updated_at !== null ? { label: this.s.updated_label, at: this.time(u.updated_at) } : null,
      body: u.body,
    }));
  }

  maintenanceUpdates(m: PublicMaintenance) {
    return m.updates.map((u) => ({
      state: this.s.maintenance_state[u.status],
      at: this.time(u.created_at),
      edited: null,
      body: u.body,
    }));
  }

  /** "Scheduled from <time> to <time>": the end shows its time only when on the same local day. */
  window(m: PublicMaintenance) {
    const from = this.time(m.scheduled_for);
    const until = this.tf.sameDay(m.scheduled_for, m.scheduled_until)
      ? { ...this.time(m.scheduled_until), text: this.tf.timeText(m.scheduled_until) }
      : this.time(m.scheduled_until);
    return { parts: sentenceParts(this.s.scheduled_window, { from, until }) };
  }

  /** The named components that are on the page, each with its current status. */
  affectedWithStatus(ids: string[]) {
    return ids.flatMap((id) => {
      const c = this.byId.get(id);
      return c ? [{ name: c.name, st: this.status(c.status) }] : [];
    });
  }

  affectedText(ids: string[]): string | null {
    const names = this.affected(ids);
    return names.length > 0 ? `${this.s.affected}: ${names.join(', ')}` : null;
  }

  /** A past incident as the history and the recent list show it. */
  pastCard(i: PublicIncident) {
    return {
      id: i.id,
      href: this.paths.incident(i.id),
      name: i.name,
      impact: i.impact,
      resolved: i.status === 'resolved',
      state: this.s.public_state[i.status],
      impactLabel: this.s.impact[i.impact],
      at: this.time(i.created_at),
      resolvedAt: i.resolved_at !== null ? { at: this.time(i.resolved_at) } : null,
      latest: firstLine(i.updates[0]?.body ?? ''),
    };
  }

  incidentCard(i: PublicIncident) {
    return {
      id: i.id,
      href: this.paths.incident(i.id),
      name: i.name,
      impact: i.impact,
      state: this.s.public_state[i.status],
      impactLabel: this.s.impact[i.impact],
      affected: this.affectedText(i.component_ids),
      updates: this.incidentUpdates(i),
    };
  }

  maintenanceCard(m: PublicMaintenance) {
    return {
      id: m.id,
      href: this.paths.maintenance(m.id),
      name: m.name,
      state: this.s.maintenance_state[m.status],
      window: this.window(m),
      affected: this.affectedText(m.component_ids),
      latest: m.updates[0]?.body ?? null,
    };
  }

  componentRow(c: PublicComponent) {
    const grid = this.dayGrid();
    const h = uptimeHistory(c, this.ctx.nowMs, this.tf, grid.starts);
    // The bars are the bulk of a page (90 per component): written here as one string per
    // component, every text through escapeHtml and every class from the fixed status names,
    // instead of 90 template sections each (the render was mostly mustache's per-section work).
    let bars = '';
    h.days.forEach((d, i) => {
      let text: string;
      if (d.worst === null) text = grid.noData[i]!;
      else if (d.worst === 'operational') text = grid.operational[i]!;
      else if (d.worst === 'under_maintenance')
        text = escapeHtml(fill(this.s.day_maintenance, { date: grid.labels[i]!, duration: this.duration(d.worstMs) }));
      else
        text = escapeHtml(
          fill(this.s.day_status, {
            date: grid.labels[i]!,
            status: this.s.component_status[d.worst],
            duration: this.duration(d.worstMs),
          }),
        );
      bars += `<li class="d d-${d.worst ?? 'none'}" title="${text}"><span class="vh">${text}</span></li>\n`;
    });
    return {
      name: c.name,
      description: c.description === '' ? null : c.description,
      st: this.status(c.status),
      uptimeText:
        h.uptime === null ? this.s.uptime_no_data : fill(this.s.uptime_percent, { percent: this.percent(h.uptime) }),
      barsLabel: `${fill(this.s.uptime_heading, { days: HISTORY_DAYS })}: ${c.name}`,
      bars,
      axisFrom: fill(this.s.days_ago, { days: HISTORY_DAYS }),
      axisFrom30: this.s.days_ago_30,
      axisTo: this.s.today,
    };
  }

  private grid: DayGrid | null = null;

  /** The 90 days' starts and texts, once per page: the same for every component. */
  dayGrid(): DayGrid {
    if (this.grid === null) {
      const starts = dayStarts(this.ctx.nowMs, this.tf);
      const labels = starts.map((st) => this.tf.dateText(st + 12 * 3_600_000));
      this.grid = {
        starts,
        labels,
        operational: labels.map((date) => escapeHtml(fill(this.s.day_operational, { date }))),
        noData: labels.map((date) => escapeHtml(fill(this.s.day_no_data, { date }))),
      };
    }
    return this.grid;
  }

  private percentFormat: Intl.NumberFormat | null = null;

  percent(share: number): string {
    // Floor, not round: 99.999 % is not shown as 100 % while there was downtime.
    const floored = Math.floor(share * 10_000) / 10_000;
    this.percentFormat ??= new Intl.NumberFormat(this.ctx.locale, {
      style: 'percent',
      minimumFractionDigits: 2,
      maximumFractionDigits: 2,
    });
    return this.percentFormat.format(floored);
  }

  duration(ms: number): string {
    const totalMin = Math.max(1, Math.round(ms / 60_000));
    const h = Math.floor(totalMin / 60);
    const m = totalMin % 60;
    return h > 0 ? fill(this.s.hours_minutes, { h, m }) : fill(this.s.minutes, { m });
  }

  /** What the layout needs around any page's content. */
  frame(documentTitle: string, nav: { home?: boolean; history?: boolean }, canonicalPath: string | null) {
    const { page, locale } = this.ctx;
    const title = fill(this.s.feed_title, { title: page.title });
    return {
      lang: locale,
      s: this.s,
      title: page.title,
      logo: webUrl(page.logo_url, true),
      support: webUrl(page.support_url),
      documentTitle,
      nav,
      links: this.paths,
      feeds: [
        { type: 'application/atom+xml', title: `${title} (Atom)`, href: this.paths.atom },
        { type: 'application/rss+xml', title: `${title} (RSS)`, href: this.paths.rss },
      ],
      canonical: canonicalPath === null ? null : `${page.public_url}${canonicalPath}`,
      footerZone: fill(this.s.footer, { zone: page.time_zone }),
      languages: STATUS_LOCALES.map((code, i) => ({
        code,
        name: LANGUAGE_NAMES[code],
        current: code === locale,
        first: i === 0,
      })),
    };
  }

  render(content: string, view: object): string {
    return Mustache.render(TEMPLATES.layout, view, { content }, ESCAPE);
  }
}

/**
 * Values are escaped for text and quoted attributes (& < > " '), nothing more: mustache's own
 * default also escapes `/`, `=` and backquotes, which only makes every link three times longer.
 */
const ESCAPE = { escape: (v: unknown) => escapeHtml(String(v)) };

/** Only web links are followed from the page's config (the connection validates; this is the page's own guard). */
const webUrl = (u: string | null, httpsOnly = false): string | null =>
  u !== null && (httpsOnly ? /^https:\/\//i : /^https?:\/\//i).test(u) ? u : null;

/** One TimeFormat per (locale, zone): Intl formatters are costly to build. */
const formats = new Map<string, TimeFormat>();
function timeFormat(locale: StatusLocale, zone: string): TimeFormat {
  const key = `${locale}|${zone}`;
  let tf = formats.get(key);
  if (!tf) {
    if (formats.size > 64) formats.clear();
    tf = new TimeFormat(locale, zone);
    formats.set(key, tf);
  }
  return tf;
}

export function renderIndex(ctx: RenderContext): string {
  const p = new Page(ctx);
  const { snap, page, nowMs } = ctx;
  const indicator = overallIndicator(snap);
  const active = snap.incidents.filter(isUnresolved).map((i) => p.incidentCard(i));
  const activeMaintenance = snap.maintenances.filter(isActiveMaintenance).map((m) => p.maintenanceCard(m));
  const upcoming = snap.maintenances.filter(isUpcomingMaintenance).map((m) => p.maintenanceCard(m));
  const since = nowMs - RECENT_DAYS * 86_400_000;
  const recent = snap.incidents
    .filter((i) => !isUnresolved(i) && Date.parse(i.resolved_at ?? i.updated_at) >= since)
    .slice(0, RECENT_MAX)
    .map((i) => p.pastCard(i));
  const list = entries(snap.components).map((e) =>
    e.kind === 'group'
      ? { group: { name: e.name, st: p.status(e.status), members: e.members.map((m) => p.componentRow(m)) } }
      : { component: p.componentRow(e.component) },
  );
  const heading = fill(p.s.home_title, { title: page.title });
  return p.render(TEMPLATES.index, {
    ...p.frame(heading, { home: true }, '/'),
    heading,
    indicator,
    bannerIcon: INDICATOR_ICON[indicator],
    bannerText: p.s.banner[indicator],
    hasActive: active.length > 0,
    active,
    hasActiveMaintenance: activeMaintenance.length > 0,
    activeMaintenance,
    hasUpcoming: upcoming.length > 0,
    upcoming,
    uptimeHeading: fill(p.s.uptime_heading, { days: HISTORY_DAYS }),
    hasEntries: list.length > 0,
    entries: list,
    hasRecent: recent.length > 0,
    recent,
    noRecent: fill(p.s.no_recent_incidents, { days: RECENT_DAYS }),
    hasComponentFeeds: snap.components.length > 0,
    componentFeeds: snap.components.map((c) => ({
      name: c.name,
      atom: p.paths.componentAtom(c.id),
      rss: p.paths.componentRss(c.id),
    })),
    emailForm: ctx.emailSubscriptions === true ? emailForm(ctx) : null,
  });
}

/** The e-mail subscribe form (posted to src/status/subscriptions/routes.ts): components grouped as on the page. */
function emailForm(ctx: RenderContext) {
  const row = (c: PublicComponent) => ({ id: c.id, name: c.name });
  const choices = entries(ctx.snap.components).map((e) =>
    e.kind === 'group'
      ? { group: { name: e.name, members: e.members.map(row) }, component: null }
      : { group: null, component: row(e.component) },
  );
  return { action: `${ctx.base}/subscriptions`, hasChoices: choices.length > 0, choices };
}

/** null: no such public incident. */
export function renderIncident(ctx: RenderContext, id: string): string | null {
  const i = ctx.snap.incidents.find((x) => x.id === id);
  if (!i) return null;
  const p = new Page(ctx);
  const affectedList = p.affectedWithStatus(i.component_ids);
  const banner = incidentBanner(i);
  return p.render(TEMPLATES.incident, {
    ...p.frame(`${i.name} · ${ctx.page.title}`, {}, `/incidents/${encodeURIComponent(i.id)}`),
    name: i.name,
    bannerClass: banner,
    bannerIcon: INDICATOR_ICON[banner],
    bannerText: `${p.s.public_state[i.status]} · ${p.s.impact[i.impact]}`,
    hasAffected: affectedList.length > 0,
    affectedList,
    updatesHeading: p.s.updates_heading,
    updates: p.incidentUpdates(i),
  });
}

/** null: no such maintenance. */
export function renderMaintenance(ctx: RenderContext, id: string): string | null {
  const m = ctx.snap.maintenances.find((x) => x.id === id);
  if (!m) return null;
  const p = new Page(ctx);
  const affectedList = p.affectedWithStatus(m.component_ids);
  const banner: Indicator = m.status === 'completed' ? 'none' : 'maintenance';
  return p.render(TEMPLATES.maintenance, {
    ...p.frame(`${m.name} · ${ctx.page.title}`, {}, `/maintenances/${encodeURIComponent(m.id)}`),
    name: m.name,
    bannerClass: banner,
    bannerIcon: INDICATOR_ICON[banner],
    bannerText: p.s.maintenance_state[m.status],
    window: p.window(m),
    hasAffected: affectedList.length > 0,
    affectedList,
    updatesHeading: p.s.updates_heading,
    updates: p.maintenanceUpdates(m),
  });
}

/** null: a page number past the last page. */
export function renderHistory(ctx: RenderContext, pageNo: number): string | null {
  const p = new Page(ctx);
  const all = ctx.snap.incidents;
  const pages = Math.max(1, Math.ceil(all.length / HISTORY_PAGE_SIZE));
  if (pageNo < 1 || pageNo > pages) return null;
  const months: { key: string; label: string; items: object[] }[] = [];
  for (const i of all.slice((pageNo - 1) * HISTORY_PAGE_SIZE, pageNo * HISTORY_PAGE_SIZE)) {
    const m = p.tf.month(Date.parse(i.created_at));
    let month = months.at(-1);
    if (month?.key !== m.key) {
      month = { ...m, items: [] };
      months.push(month);
    }
    month.items.push(p.pastCard(i));
  }
  return p.render(TEMPLATES.history, {
    ...p.frame(
      `${p.s.history_title} · ${ctx.page.title}`,
      { history: true },
      pageNo === 1 ? '/history' : `/history?page=${pageNo}`,
    ),
    hasItems: months.length > 0,
    months,
    paged: pages > 1,
    pageOf: fill(p.s.page_of, { page: pageNo, pages }),
    newer: pageNo > 1 ? p.paths.historyPage(pageNo - 1) : null,
    older: pageNo < pages ? p.paths.historyPage(pageNo + 1) : null,
  });
}

/**
 * A localized sentence whose `{name}` placeholders are times: its parts, each a text or a time,
 * for the `sentence` template (every part has both keys, so neither is looked up further out).
 */
function sentenceParts(template: string, times: Record<string, TimeView>): { text: string; at: TimeView | null }[] {
  const parts: { text: string; at: TimeView | null }[] = [];
  let last = 0;
  for (const m of template.matchAll(/\{(\w+)\}/g)) {
    const t = times[m[1]!];
    if (!t) continue;
    if (m.index > last) parts.push({ text: template.slice(last, m.index), at: null });
    parts.push({ text: '', at: t });
    last = m.index + m[0].length;
  }
  if (last < template.length) parts.push({ text: template.slice(last), at: null });
  return parts;
}

/** The banner class of an incident's own page: its impact while open, green once resolved. */
function incidentBanner(i: PublicIncident): Indicator {
  if (i.status === 'resolved') return 'none';
  return i.impact === 'none' ? 'minor' : i.impact;
}

/** An update's first line, cut at a word near 200 characters: the history's excerpt. */
function firstLine(body: string): string | null {
  const line =
    body
      .split('\n')
      .find((l) => l.trim() !== '')
      ?.trim() ?? '';
  if (line === '') return null;
  if (line.length <= 200) return line;
  const cut = line.slice(0, 200);
  return `${cut.slice(0, Math.max(cut.lastIndexOf(' '), 150))}…`;
}

/** A page of the site that says one thing (not found), with the page's header and footer. */
export function renderMessage(ctx: RenderContext, kind: 'not_found'): string {
  const p = new Page(ctx);
  const heading = p.s.not_found_title;
  return p.render(TEMPLATES.message, {
    ...p.frame(`${heading} · ${ctx.page.title}`, {}, null),
    heading,
    body: kind === 'not_found' ? p.s.not_found_body : '',
    showHome: true,
  });
}

/** A page without the page's config: not set up, or not readable yet. */
export function renderBare(locale: StatusLocale, base: string, kind: 'not_set_up' | 'unavailable'): string {
  const s = stringsOf(locale);
  return Mustache.render(
    TEMPLATES.bare,
    {
      lang: locale,
      css: pathsOf(base).css,
      heading: kind === 'not_set_up' ? s.not_set_up_title : s.unavailable_title,
      body: kind === 'not_set_up' ? s.not_set_up_body : s.unavailable_body,
    },
    {},
    ESCAPE,
  );
}
