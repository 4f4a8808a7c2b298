import { describe, expect, it } from 'vitest';
import { xml2js, type ElementCompact } from 'xml-js';
import type { StatusSnapshot } from '../../src/domain/status/public.js';
import { badgeSvg, shieldsJson } from '../../src/status/badge.js';
import { feedOf } from '../../src/status/feeds.js';
import { negotiateLocale, TimeFormat } from '../../src/status/i18n.js';
import { groupId, overallIndicator, uptimeHistory } from '../../src/status/model.js';
import type { V2_FILES } from '../../src/status/statuspage-v2.js';
import { v2Document } from '../../src/status/statuspage-v2.js';
import {
  renderHistory,
  renderIncident,
  renderIndex,
  renderMaintenance,
  type RenderContext,
} from '../../src/status/view.js';
import { at, component, fixtureSnapshot, NOW, PAGE } from '../support/status-fixtures.js';

/** The page's renderers over fixture snapshots: escaping, languages, time zones, the JSON, the feeds, the badge. */
const ctx = (snap: StatusSnapshot = fixtureSnapshot(), over: Partial<RenderContext> = {}): RenderContext => ({
  snap,
  page: snap.page!,
  locale: 'en',
  base: '/status',
  nowMs: NOW,
  ...over,
});

const EVIL = `<script>alert(1)</script>"' onmouseover=x & <img src=x onerror=y>`;

function hostileSnapshot(): StatusSnapshot {
  const s = fixtureSnapshot();
  s.page = { ...PAGE, title: `Acme ${EVIL}`, support_url: 'javascript:alert(1)' };
  s.components[0]!.name = `API ${EVIL}`;
  s.components[0]!.description = EVIL;
  s.components[0]!.group = `Core ${EVIL}`;
  s.incidents[0]!.name = `Outage ${EVIL}`;
  s.incidents[0]!.updates[0]!.body = `Body ${EVIL}\n]]> <![CDATA[ x`;
  s.maintenances[0]!.name = `Work ${EVIL}`;
  s.maintenances[0]!.updates[0]!.body = `Note ${EVIL}`;
  return s;
}

describe('escaping', () => {
  it('hostile text is shown as text on every HTML page, never as markup', () => {
    const c = ctx(hostileSnapshot());
    const pages = [
      renderIndex(c),
      renderIncident(c, 'inc_active')!,
      renderMaintenance(c, 'mnt_now')!,
      renderHistory(c, 1)!,
    ];
    for (const html of pages) {
      expect(html).not.toContain('<script');
      expect(html).not.toContain('<img');
      expect(html).not.toMatch(/\s onmouseover=x/);
      expect(html).not.toContain('javascript:');
      expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39; onmouseover=x &amp;');
    }
  });

  it('feeds and JSON carry hostile text as data: the XML parses, the JSON round-trips', () => {
    const s = hostileSnapshot();
    for (const kind of ['atom', 'rss'] as const) {
      const xml = feedOf({ snap: s, page: s.page!, locale: 'en' }, kind)!;
      expect(() => xml2js(xml, { compact: true })).not.toThrow();
      // The text inside is HTML-escaped (type="html" / CDATA): no live markup for a reader to run.
      expect(xml).not.toContain('<script');
      expect(xml).not.toContain('<img');
    }
    const summary = JSON.parse(JSON.stringify(v2Document({ snap: s, page: s.page! }, 'summary.json'))) as {
      incidents: { name: string; incident_updates: { body: string }[] }[];
    };
    expect(summary.incidents[0]!.name).toBe(`Outage ${EVIL}`);
    expect(summary.incidents[0]!.incident_updates[0]!.body).toBe(`Body ${EVIL}\n]]> <![CDATA[ x`);
    const svg = badgeSvg(s, s.page!.title);
    expect(() => xml2js(svg)).not.toThrow();
    expect(svg).not.toContain('<script');
  });
});

describe('languages and time zones', () => {
  it('Accept-Language picks a supported locale by q, falls back to the page locale; ?locale= wins', () => {
    expect(negotiateLocale(undefined, 'de-AT,de;q=0.9,en;q=0.5', 'en')).toBe('de');
    expect(negotiateLocale(undefined, 'fr-FR, en;q=0.4, de;q=0.8', 'en')).toBe('de');
    expect(negotiateLocale(undefined, 'fr, es', 'de')).toBe('de');
    expect(negotiateLocale(undefined, '*', 'de')).toBe('de');
    expect(negotiateLocale(undefined, undefined, 'en')).toBe('en');
    expect(negotiateLocale(undefined, 'de;q=0', 'en')).toBe('en');
    expect(negotiateLocale('de', 'en', 'en')).toBe('de');
    expect(negotiateLocale('xx', 'de', 'en')).toBe('de');
    expect(negotiateLocale(undefined, 'en', 'xx')).toBe('en');
  });

  it('renders German with lang="de" and the same structure', () => {
    const html = renderIndex(ctx(fixtureSnapshot(), { locale: 'de' }));
    expect(html).toContain('<html lang="de">');
    expect(html).toContain('Teilweiser Systemausfall');
    expect(html).toContain('Aktuelle Vorfälle');
    expect(html).toContain('Zum Inhalt springen');
    expect(html.match(/<h1[ >]/g)).toHaveLength(1);
  });

  it("shows times in the page's zone, with the UTC instant in datetime and the tooltip", () => {
    const html = renderIncident(ctx(), 'inc_active')!;
    // 11:50 UTC is 12:50 in Berlin (CET) on 27 November.
    expect(html).toContain(
      '<time datetime="2026-11-27T11:50:00.000Z" title="2026-11-27 11:50 UTC">Nov 27, 2026, 12:50 PM',
    );
    const ny = renderIncident(
      ctx(fixtureSnapshot({ page: { ...PAGE, time_zone: 'America/New_York' } })),
      'inc_active',
    )!;
    expect(ny).toContain('Nov 27, 2026, 6:50 AM');
    const de = renderIncident(ctx(fixtureSnapshot(), { locale: 'de' }), 'inc_active')!;
    expect(de).toMatch(/27\. Nov\. 2026, 12:50/);
  });

  it('day boundaries follow the zone across a DST switch', () => {
    const tf = new TimeFormat('en', 'Europe/Berlin');
    // 2026-03-29 is the spring switch in Berlin: that local day starts at 23:00 UTC the day before.
    expect(new Date(tf.startOfDay(Date.parse('2026-03-29T12:00:00Z'))).toISOString()).toBe('2026-03-28T23:00:00.000Z');
    expect(new Date(tf.startOfDay(Date.parse('2026-03-30T12:00:00Z'))).toISOString()).toBe('2026-03-29T22:00:00.000Z');
  });
});

describe('the index page', () => {
  it('shows the banner, groups, every update newest first, maintenance and text for each bar', () => {
    const html = renderIndex(ctx());
    expect(html).toContain('Partial system outage');
    expect(html.indexOf('We found the cause.')).toBeLessThan(html.indexOf('We are looking into errors on the API.'));
    expect(html).toContain('Maintenance in progress');
    expect(html).toContain('Scheduled maintenance');
    expect(html).toMatch(/<h3 class="row"><span class="name">Core<\/span>/);
    // Status as icon + word + colour, never colour alone.
    expect(html).toMatch(
      /<span class="st st-partial_outage"><svg[^>]*aria-hidden="true"[^>]*>.*?<\/svg><span>Partial outage<\/span>/,
    );
    // 90 bars per component, each with a text equivalent.
    expect(html.match(/<li class="d d-/g)).toHaveLength(90 * 3);
    expect(html).toContain('Nov 24, 2026: Major outage for 1 h 30 min');
    expect(html).toContain('<link rel="alternate" type="application/atom+xml"');
    expect(html).toMatch(/<a class="skip" href="#main">/);
    for (const landmark of ['<header', '<nav', '<main', '<footer']) expect(html).toContain(landmark);
  });

  it('with nothing public: all operational, no incidents', () => {
    const s = fixtureSnapshot({ components: [], incidents: [], maintenances: [] });
    const html = renderIndex(ctx(s));
    expect(html).toContain('All systems operational');
    expect(html).toContain('No components are listed yet.');
    expect(overallIndicator(s)).toBe('none');
  });
});

describe('history', () => {
  it('pages 20 at a time, grouped by month, and has no page past the last', () => {
    const s = fixtureSnapshot();
    s.incidents = Array.from({ length: 45 }, (_, n) => ({
      ...s.incidents[1]!,
      id: `inc_${String(n).padStart(3, '0')}`,
      name: `Incident ${n}`,
      created_at: at(n * 24 * 60),
    }));
    const one = renderHistory(ctx(s), 1)!;
    expect(one.match(/<article /g)).toHaveLength(20);
    expect(one).toContain('Page 1 of 3');
    expect(one).toContain('<h2 id="m-2026-11">November 2026</h2>');
    expect(one).toContain('rel="next" href="/status/history?page=2"');
    const three = renderHistory(ctx(s), 3)!;
    expect(three.match(/<article /g)).toHaveLength(5);
    expect(three).toContain('rel="prev" href="/status/history?page=2"');
    expect(renderHistory(ctx(s), 4)).toBeNull();
  });
});

describe('uptime', () => {
  it('counts outages as down time (partial ones at 30 %), not degradation or maintenance; nothing before the component existed', () => {
    const tf = new TimeFormat('en', 'UTC');
    const c = component({
      id: 'cmp_x',
      name: 'X',
      created_at: at(10 * 24 * 60),
      history: [
        { at: at(10 * 24 * 60), status: 'operational' },
        { at: at(24 * 60), status: 'major_outage' },
        { at: at(24 * 60 - 144), status: 'degraded_performance' },
        { at: at(24 * 60 - 288), status: 'operational' },
      ],
    });
    const h = uptimeHistory(c, NOW, tf);
    expect(h.days).toHaveLength(90);
    expect(h.days.filter((d) => d.worst === null)).toHaveLength(79);
    // 144 minutes down out of 10 days.
    expect(h.uptime).toBeCloseTo(1 - 144 / (10 * 24 * 60), 6);
    const bad = h.days.find((d) => d.worst === 'major_outage')!;
    expect(bad.worstMs).toBe(144 * 60_000);
    // A partial outage counts at 30 % of its time, as Statuspage weighs it.
    const partial = uptimeHistory({ ...c, history: [{ at: at(10 * 24 * 60), status: 'partial_outage' }] }, NOW, tf);
    expect(partial.uptime).toBeCloseTo(0.7, 6);
  });
});

describe('Statuspage v2 JSON', () => {
  const doc = (file: (typeof V2_FILES)[number]) =>
    v2Document({ snap: fixtureSnapshot(), page: PAGE }, file) as Record<string, any>;

  it('summary.json has Statuspage fields, groups as group components', () => {
    const s = doc('summary.json');
    expect(Object.keys(s).sort()).toEqual(['components', 'incidents', 'page', 'scheduled_maintenances', 'status']);
    expect(Object.keys(s.page).sort()).toEqual(['id', 'name', 'time_zone', 'updated_at', 'url']);
    expect(s.status).toEqual({ indicator: 'major', description: 'Partial System Outage' });
    const group = s.components.find((c: any) => c.group === true);
    expect(group).toMatchObject({ id: groupId('Core'), name: 'Core', status: 'partial_outage', group_id: null });
    expect(group.components).toEqual(['cmp_api', 'cmp_web']);
    const api = s.components.find((c: any) => c.id === 'cmp_api');
    expect(Object.keys(api).sort()).toEqual(
      [
        'created_at',
        'description',
        'group',
        'group_id',
        'id',
        'name',
        'only_show_if_degraded',
        'page_id',
        'position',
        'showcase',
        'start_date',
        'status',
        'updated_at',
      ].sort(),
    );
    expect(api.group_id).toBe(group.id);
    expect(s.incidents.map((i: any) => i.id)).toEqual(['inc_active']);
    const inc = s.incidents[0];
    expect(inc.shortlink).toBe('https://status.acme.test/incidents/inc_active');
    expect(inc.incident_updates.map((u: any) => u.status)).toEqual(['identified', 'investigating']);
    expect(inc.incident_updates[0].affected_components).toEqual([
      { code: 'cmp_api', name: 'API', old_status: 'major_outage', new_status: 'partial_outage' },
    ]);
    // The correction's time is the incident's latest change.
    expect(inc.updated_at).toBe(at(5));
    expect(s.scheduled_maintenances.map((m: any) => [m.id, m.status, m.impact])).toEqual([
      ['mnt_now', 'in_progress', 'maintenance'],
      ['mnt_next', 'scheduled', 'maintenance'],
    ]);
  });

  it('each file holds its part', () => {
    expect(Object.keys(doc('status.json'))).toEqual(['page', 'status']);
    expect(doc('components.json').components).toHaveLength(4);
    expect(doc('incidents.json').incidents.map((i: any) => i.id)).toEqual(['inc_active', 'inc_old']);
    expect(doc('incidents/unresolved.json').incidents.map((i: any) => i.id)).toEqual(['inc_active']);
    expect(doc('scheduled-maintenances/upcoming.json').scheduled_maintenances.map((m: any) => m.id)).toEqual([
      'mnt_next',
    ]);
    expect(doc('scheduled-maintenances/active.json').scheduled_maintenances.map((m: any) => m.id)).toEqual(['mnt_now']);
    expect(doc('scheduled-maintenances.json').scheduled_maintenances).toHaveLength(2);
  });
});

describe('feeds', () => {
  type Node = ElementCompact & Record<string, any>;
  const list = <T>(x: T | T[] | undefined): T[] => (x === undefined ? [] : Array.isArray(x) ? x : [x]);

  it('Atom: unique ids, updated on feed and entries, absolute links, self link', () => {
    const s = fixtureSnapshot();
    const feed = (xml2js(feedOf({ snap: s, page: PAGE, locale: 'en' }, 'atom')!, { compact: true }) as Node).feed;
    expect(feed._attributes.xmlns).toBe('http://www.w3.org/2005/Atom');
    expect(feed.updated._text).toBe(at(5));
    const entries = list<Node>(feed.entry);
    // 4 incident updates + 2 maintenances scheduled + 3 maintenance updates.
    expect(entries).toHaveLength(9);
    const ids = entries.map((e) => e.id._text as string);
    expect(new Set(ids).size).toBe(ids.length);
    for (const e of entries) {
      expect(e.updated._text).toMatch(/^\d{4}-\d\d-\d\dT/);
      expect(e.link._attributes.href).toMatch(/^https:\/\/status\.acme\.test\//);
      expect(e.id._text).toMatch(/^https:\/\/status\.acme\.test\//);
    }
    const links = list<Node>(feed.link).map((l) => l._attributes);
    expect(links).toContainEqual({ rel: 'self', href: 'https://status.acme.test/feed.atom' });
  });

  it('RSS 2.0: a channel with items, each with a unique guid and a date; per component only what names it', () => {
    const s = fixtureSnapshot();
    const rss = (xml2js(feedOf({ snap: s, page: PAGE, locale: 'en' }, 'rss')!, { compact: true }) as Node).rss;
    expect(rss._attributes.version).toBe('2.0');
    const items = list<Node>(rss.channel.item);
    expect(items).toHaveLength(9);
    const guids = items.map((i) => i.guid._text as string);
    expect(new Set(guids).size).toBe(guids.length);
    for (const i of items) expect(new Date(i.pubDate._text as string).getTime()).not.toBeNaN();
    const web = (
      xml2js(feedOf({ snap: s, page: PAGE, locale: 'en', componentId: 'cmp_web' }, 'atom')!, { compact: true }) as Node
    ).feed;
    const titles = list<Node>(web.entry).map((e) => e.title._cdata ?? e.title._text);
    expect(titles).toEqual(
      expect.arrayContaining([
        'Maintenance scheduled: Network work',
        'Resolved: Slow website',
        'Investigating: Slow website',
      ]),
    );
    expect(titles.join()).not.toContain('Elevated API errors');
    expect(feedOf({ snap: s, page: PAGE, locale: 'en', componentId: 'cmp_nope' }, 'atom')).toBeNull();
  });
});

describe('badge and shields', () => {
  it('say the status in words; the SVG has a title and an accessible name', () => {
    const s = fixtureSnapshot();
    expect(shieldsJson(s)).toEqual({ schemaVersion: 1, label: 'status', message: 'partial outage', color: 'bc4c00' });
    const svg = badgeSvg(s, 'Acme');
    expect(svg).toContain('role="img"');
    expect(svg).toContain('<title>Acme status: partial outage</title>');
    expect(svg).toContain('>partial outage</text>');
    const calm = fixtureSnapshot({ components: [], incidents: [], maintenances: [] });
    expect(shieldsJson(calm)).toMatchObject({ message: 'operational' });
  });
});
