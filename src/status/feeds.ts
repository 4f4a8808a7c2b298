import { Feed, type Item } from 'feed';
import { escapeHtml } from '../channels/common/escape.js';
import type { PublicIncident, PublicMaintenance, PublicPageConfig, StatusSnapshot } from '../domain/status/public.js';
import { fill, stringsOf, type StatusLocale } from './i18n.js';
import { incidentNames } from './model.js';

/**
 * Atom 1.0 and RSS 2.0 feeds of the page, or of one component: an entry per public update of an
 * incident and per maintenance notice (its scheduling and each of its updates). Every link is
 * absolute, from the page's public URL; an entry's id is its own URL with a fragment naming the
 * update, so it is unique and stays the same when a correction edits the text (the entry's
 * `updated` moves instead). Feeds are in the page's own locale: a feed reader sends no
 * Accept-Language worth following.
 */

export const FEED_ENTRIES = 50;

export interface FeedContext {
  snap: StatusSnapshot;
  page: PublicPageConfig;
  locale: StatusLocale;
  /** A component's id: only what names it. */
  componentId?: string;
}

interface Entry {
  id: string;
  title: string;
  link: string;
  date: Date;
  published: Date;
  content: string;
}

export function feedOf(c: FeedContext, kind: 'atom' | 'rss'): string | null {
  const { snap, page, locale } = c;
  const s = stringsOf(locale);
  let title = fill(s.feed_title, { title: page.title });
  let self = page.public_url;
  let incidents = snap.incidents;
  let maintenances = snap.maintenances;
  if (c.componentId !== undefined) {
    const id = c.componentId;
    const component = snap.components.find((x) => x.id === id);
    if (!component) return null;
    title = fill(s.feed_component_title, { title: page.title, name: component.name });
    self = `${page.public_url}/components/${encodeURIComponent(id)}`;
    incidents = incidents.filter((i) => incidentNames(i, id));
    maintenances = maintenances.filter((m) => m.component_ids.includes(id));
  }
  const list = [
    ...incidents.flatMap((i) => incidentEntries(c, i)),
    ...maintenances.flatMap((m) => maintenanceEntries(c, m)),
  ]
    .sort((a, b) => b.date.getTime() - a.date.getTime() || (a.id < b.id ? -1 : 1))
    .slice(0, FEED_ENTRIES);
  const updated = list[0]?.date ?? new Date(newestOf(snap) ?? snap.read_at);
  const feed = new Feed({
    id: `${self}/`,
    title,
    link: `${page.public_url}/`,
    language: locale,
    updated,
    generator: 'Herald',
    copyright: page.title,
    feedLinks: { atom: `${self}/feed.atom`, rss: `${self}/feed.rss` },
    ...(page.logo_url ? { image: page.logo_url } : {}),
  });
  for (const e of list) {
    // The feed package writes titles and content as HTML (Atom type="html", RSS in CDATA): the
    // plain text is escaped into HTML first, so it reads as typed and can carry no markup.
    const html = escapeHtml(e.content).replace(/\r?\n/g, '<br>');
    const item: Item = {
      id: e.id,
      guid: e.id,
      title: escapeHtml(e.title),
      link: e.link,
      date: e.date,
      published: e.published,
      description: html,
      content: html,
    };
    feed.addItem(item);
  }
  return kind === 'atom' ? feed.atom1() : feed.rss2();
}

function newestOf(s: StatusSnapshot): string | null {
  let latest: string | null = null;
  for (const x of [...s.incidents, ...s.maintenances])
    if (latest === null || x.updated_at > latest) latest = x.updated_at;
  return latest;
}

function incidentEntries(c: FeedContext, i: PublicIncident): Entry[] {
  const s = stringsOf(c.locale);
  const link = `${c.page.public_url}/incidents/${encodeURIComponent(i.id)}`;
  return i.updates.map((u) => ({
    id: `${link}#update-${u.id}`,
    title: fill(s.feed_update_title, { state: s.public_state[u.status], name: i.name }),
    link,
    date: new Date(u.updated_at ?? u.created_at),
    published: new Date(u.created_at),
    content: u.body,
  }));
}

function maintenanceEntries(c: FeedContext, m: PublicMaintenance): Entry[] {
  const s = stringsOf(c.locale);
  const link = `${c.page.public_url}/maintenances/${encodeURIComponent(m.id)}`;
  const window = fill(s.scheduled_window, {
    from: `${m.scheduled_for.slice(0, 16).replace('T', ' ')} UTC`,
    until: `${m.scheduled_until.slice(0, 16).replace('T', ' ')} UTC`,
  });
  const scheduled: Entry = {
    id: `${link}#scheduled`,
    title: fill(s.feed_maintenance_scheduled, { name: m.name }),
    link,
    date: new Date(m.created_at),
    published: new Date(m.created_at),
    content: window,
  };
  return [
    scheduled,
    ...m.updates.map((u) => ({
      id: `${link}#update-${u.id}`,
      title: fill(s.feed_update_title, { state: s.maintenance_state[u.status], name: m.name }),
      link,
      date: new Date(u.created_at),
      published: new Date(u.created_at),
      content: u.body,
    })),
  ];
}
