import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { de } from '../../src/status/locales/de.js';
import { en } from '../../src/status/locales/en.js';
import { startHerald, type ApiResponse, type TestHerald } from '../support/herald.js';
import {
  axeViolations,
  focusableTargets,
  launchBrowser,
  screenshot,
  tabStops,
  type TestBrowser,
} from '../support/browser.js';
import { waitFor } from '../support/wait.js';

/**
 * The public status page in a real browser (Debian's Chromium), as a customer meets it: a real
 * Herald whose page is fed through its API — components in two groups, an incident affecting two
 * of them with updates published through the status_page connection, a resolved incident in the
 * history, a scheduled and an in-progress maintenance. Every page type, at a phone's width and a
 * desktop's: the right content, zero axe-core violations (WCAG 2.2 AA), readable with JavaScript
 * off, every link reachable with Tab and its focus visible, status in words and not colour alone,
 * <html lang> following Accept-Language. A full-page screenshot of each is written under
 * test-output/status-page/ for a person to look at.
 */

let h: TestHerald;
let b: TestBrowser;

const WIDTHS = [320, 1280] as const;

const TITLE = 'Acme Cloud';
/** Names and words the page must show; made distinct so one never matches inside another. */
const C = {
  api: { name: 'Public API', group: 'Platform', status: 'partial_outage' },
  dashboard: { name: 'Web dashboard', group: 'Platform', status: 'operational' },
  checkout: { name: 'Checkout', group: 'Payments', status: 'degraded_performance' },
  invoices: { name: 'Invoicing', group: 'Payments', status: 'operational' },
  docs: { name: 'Documentation site', group: null, status: 'operational' },
} as const;
type ComponentKey = keyof typeof C;
const componentId: Record<ComponentKey, string> = { api: '', dashboard: '', checkout: '', invoices: '', docs: '' };

const ACTIVE = {
  title: 'Elevated error rates on API and checkout',
  updates: [
    { state: 'investigating', body: 'We are investigating elevated error rates on the public API.' },
    { state: 'identified', body: 'A faulty load balancer rule was identified as the cause.' },
    { state: 'monitoring', body: 'A fix is rolled out; we are monitoring error rates.' },
  ],
} as const;
const PAST = {
  title: 'Delayed invoice emails',
  updates: [
    { state: 'investigating', body: 'Invoice emails are delayed by up to an hour.' },
    { state: 'resolved', body: 'All delayed invoice emails have been sent.' },
  ],
} as const;
const ACTIVE_MAINT = { title: 'Database failover drill', body: 'We are moving the primary database.' };
const UPCOMING_MAINT = { title: 'Payment provider upgrade', body: 'Checkout may be slow for a few minutes.' };

const ids = { statusPage: '', active: '', past: '', activeMaint: '', upcomingMaint: '' };

async function ok(r: Promise<ApiResponse>, status: number): Promise<any> {
  const res = await r;
  expect(res.status, `${res.status} ${res.text}`).toBe(status);
  return res.body;
}

/** Executes to the status page connection and waits until the update is delivered (published). */
async function publish(incidentId: string, message: string, publicStatus: string): Promise<void> {
  const exe = await ok(
    h.api('POST', `/v1/incidents/${incidentId}/execute`, {
      body: { connection_ids: [ids.statusPage], variables: { message }, public_status: publicStatus },
    }),
    202,
  );
  await waitFor(
    async () => {
      const e = (await h.api('GET', `/v1/incidents/${incidentId}/executions/${exe.id}`)).body as {
        deliveries: { status: string; last_error?: unknown }[];
      };
      if (e.deliveries.some((d) => d.status === 'failed')) throw new Error(JSON.stringify(e.deliveries));
      return e.deliveries.every((d) => d.status === 'delivered');
    },
    { timeoutMs: 30_000, intervalMs: 100, what: `the update "${message}" delivered` },
  );
}

beforeAll(async () => {
  h = await startHerald({ HERALD_RATE_LIMIT: '100000', HERALD_EXECUTE_RATE_LIMIT: '100000' });
  ids.statusPage = (
    await ok(
      h.api('POST', '/v1/connections', {
        body: {
          name: 'Status page',
          type: 'status_page',
          config: {
            title: TITLE,
            public_url: `${h.url}/status`,
            time_zone: 'Europe/Berlin',
            locale: 'en',
            support_url: 'https://support.example.com/',
          },
        },
      }),
      201,
    )
  ).id;

  let position = 0;
  for (const key of Object.keys(C) as ComponentKey[]) {
    const c = C[key];
    componentId[key] = (
      await ok(
        h.api('POST', '/v1/components', {
          body: {
            name: c.name,
            description: `${c.name} for every customer.`,
            group: c.group,
            position: position++,
            status: 'operational',
          },
        }),
        201,
      )
    ).id;
  }

  const template = (
    await ok(h.api('POST', '/v1/templates', { body: { name: 'status update', body: '{{message}}' } }), 201)
  ).id;

  // The resolved incident first, so the active one is the newest.
  ids.past = (
    await ok(
      h.api('POST', '/v1/incidents', {
        body: {
          title: PAST.title,
          severity: 'minor',
          template_ids: [template],
          components: [{ id: componentId.invoices, status: 'degraded_performance' }],
        },
      }),
      201,
    )
  ).id;
  await publish(ids.past, PAST.updates[0].body, PAST.updates[0].state);
  await ok(h.api('PATCH', `/v1/incidents/${ids.past}`, { body: { status: 'resolved' } }), 200);
  await publish(ids.past, PAST.updates[1].body, PAST.updates[1].state);

  ids.active = (
    await ok(
      h.api('POST', '/v1/incidents', {
        body: {
          title: ACTIVE.title,
          severity: 'major',
          template_ids: [template],
          components: [
            { id: componentId.api, status: C.api.status },
            { id: componentId.checkout, status: C.checkout.status },
          ],
        },
      }),
      201,
    )
  ).id;
  for (const u of ACTIVE.updates) await publish(ids.active, u.body, u.state);

  const at = (ms: number) => new Date(Date.now() + ms).toISOString();
  ids.upcomingMaint = (
    await ok(
      h.api('POST', '/v1/maintenances', {
        body: {
          title: UPCOMING_MAINT.title,
          body: UPCOMING_MAINT.body,
          components: [componentId.checkout],
          scheduled_for: at(3 * 86_400_000),
          scheduled_until: at(3 * 86_400_000 + 2 * 3_600_000),
          remind_before: 60,
        },
      }),
      201,
    )
  ).id;
  ids.activeMaint = (
    await ok(
      h.api('POST', '/v1/maintenances', {
        body: {
          title: ACTIVE_MAINT.title,
          body: ACTIVE_MAINT.body,
          components: [componentId.docs],
          scheduled_for: at(3_600_000),
          scheduled_until: at(3 * 3_600_000),
        },
      }),
      201,
    )
  ).id;
  // Started early by hand (a manual update may move the state forward).
  const started = await h.api('POST', `/v1/maintenances/${ids.activeMaint}/updates`, {
    body: { status: 'in_progress', body: 'The drill has started early.' },
  });
  expect([200, 201], started.text).toContain(started.status);

  // The page follows the store within a moment (its snapshot is rebuilt when the version moves).
  await waitFor(
    async () => {
      const r = await fetch(`${h.url}/status`);
      const html = await r.text();
      return r.status === 200 && html.includes(ACTIVE_MAINT.title) && html.includes(ACTIVE.updates[2].body);
    },
    { timeoutMs: 15_000, intervalMs: 100, what: 'the page to show everything published' },
  );
  b = await launchBrowser();
}, 180_000);

afterAll(async () => {
  await b?.close();
  await h?.close();
});

// ---------------------------------------------------------------------------------------------

interface PageType {
  name: string;
  path: () => string;
  /** Text that must be on the page, in this order (checked against the page's visible text). */
  inOrder: () => string[];
  /** Text that must be there, anywhere. */
  present: () => string[];
  /** Text that must not be there. */
  absent: () => string[];
}

const label = en.component_status;

const PAGES: PageType[] = [
  {
    name: 'index',
    path: () => '/status',
    inOrder: () => [
      en.banner.major,
      // The active incident, its updates newest first.
      ACTIVE.title,
      ACTIVE.updates[2].body,
      ACTIVE.updates[1].body,
      ACTIVE.updates[0].body,
    ],
    present: () => [
      TITLE,
      'Platform',
      'Payments',
      ...Object.values(C).map((c) => c.name),
      label.partial_outage,
      label.degraded_performance,
      label.operational,
      ACTIVE_MAINT.title,
      UPCOMING_MAINT.title,
    ],
    absent: () => [],
  },
  {
    name: 'incident',
    path: () => `/status/incidents/${ids.active}`,
    inOrder: () => [
      ACTIVE.title,
      en.public_state.monitoring,
      ACTIVE.updates[2].body,
      en.public_state.identified,
      ACTIVE.updates[1].body,
      en.public_state.investigating,
      ACTIVE.updates[0].body,
    ],
    present: () => [C.api.name, C.checkout.name],
    absent: () => [PAST.title, ACTIVE_MAINT.title],
  },
  {
    name: 'history',
    path: () => '/status/history',
    // Newest first.
    inOrder: () => [ACTIVE.title, PAST.title],
    present: () => [en.history_title],
    absent: () => [],
  },
  {
    name: 'maintenance',
    path: () => `/status/maintenances/${ids.activeMaint}`,
    inOrder: () => [ACTIVE_MAINT.title],
    present: () => [en.maintenance_state.in_progress, 'The drill has started early.', C.docs.name],
    absent: () => [ACTIVE.title, UPCOMING_MAINT.title],
  },
];

/** The page's visible text, whitespace folded. */
const visibleText = async (page: Page) => (await page.locator('body').innerText()).replace(/\s+/g, ' ');

function expectContent(text: string, p: PageType): void {
  let from = 0;
  for (const s of p.inOrder()) {
    const at = text.indexOf(s, from);
    expect(at, `"${s}" after position ${from} on the ${p.name} page:\n${text}`).toBeGreaterThanOrEqual(0);
    from = at + s.length;
  }
  for (const s of p.present()) expect(text, `the ${p.name} page shows "${s}"`).toContain(s);
  for (const s of p.absent()) expect(text, `the ${p.name} page does not show "${s}"`).not.toContain(s);
}

async function open(path: string, opts: { width: number; javaScript?: boolean; locale?: string }): Promise<Page> {
  const page = await b.page({ locale: 'en', ...opts });
  const res = await page.goto(`${h.url}${path}`);
  expect(res?.status(), path).toBe(200);
  return page;
}

describe.each(PAGES)('the $name page', (p) => {
  it.each(WIDTHS)('at %i px: right content, 0 axe violations, every link on Tab, screenshot', async (width) => {
    const page = await open(p.path(), { width });
    expectContent(await visibleText(page), p);

    expect(await axeViolations(page)).toEqual([]);

    // Nothing is wider than the viewport (no sideways scrolling on a phone).
    const overflow = await page.evaluate(
      () =>
        (globalThis as unknown as { document: { documentElement: { scrollWidth: number } } }).document.documentElement
          .scrollWidth,
    );
    expect(overflow, 'page width').toBeLessThanOrEqual(width);

    // Tab reaches every link and control, in document order, each with a visible focus.
    const targets = await focusableTargets(page);
    const stops = await tabStops(page);
    expect(targets.length).toBeGreaterThan(0);
    expect(stops.map((s) => `${s.tag} ${s.href}`).join('\n'), 'Tab stops').toBe(
      targets.map((t) => `${t.tag} ${t.href}`).join('\n'),
    );
    const hidden = stops.filter((s) => !s.visible);
    expect(hidden, 'links whose focus does not show').toEqual([]);

    // Every time shown carries the exact instant (UTC) in a machine-readable attribute.
    const times = await page
      .locator('time')
      .evaluateAll((els) =>
        els.map((e) => (e as unknown as { getAttribute(n: string): string | null }).getAttribute('datetime')),
      );
    for (const t of times) expect(Number.isNaN(Date.parse(t ?? '')), `<time datetime="${t}">`).toBe(false);

    await screenshot(page, `status-page/${p.name}-${width}.png`);
    await page.context().close();
  });

  it('reads the same with JavaScript off', async () => {
    for (const width of WIDTHS) {
      const page = await open(p.path(), { width, javaScript: false });
      expectContent(await visibleText(page), p);
      // No script on the page at all: nothing depends on it.
      expect(await page.locator('script').count()).toBe(0);
      await page.context().close();
    }
  });

  it('<html lang> follows Accept-Language (en, de)', async () => {
    for (const [locale, strings] of [
      ['en', en],
      ['de', de],
    ] as const) {
      const page = await open(p.path(), { width: 1280, locale });
      expect(await page.locator('html').getAttribute('lang')).toBe(locale);
      expect(await visibleText(page)).toContain(strings.nav_history);
      await page.context().close();
    }
  });
});

describe('status is in words, not colour alone', () => {
  it('each component shows its status as text next to its name, and each day bar has a text equivalent', async () => {
    const page = await open('/status', { width: 1280, javaScript: false });
    for (const key of Object.keys(C) as ComponentKey[]) {
      const c = C[key];
      // The component's name, and the row (its parent) that holds it: the status word is in it.
      const row = page.getByText(c.name, { exact: true }).first().locator('xpath=..');
      const expected = key === 'docs' ? label.under_maintenance : label[c.status];
      expect(await row.innerText(), `${c.name}'s row`).toContain(expected);
    }
    // The 90-day bars: every day of every component says in text what it was.
    const heading = en.uptime_heading.split('{days}')[0]!;
    const days = page.locator(`ol[aria-label^="${heading}"] > li`);
    const texts = await days.allTextContents();
    expect(texts.length).toBe(90 * Object.keys(C).length);
    for (const t of texts) expect(t.trim(), 'a day bar without text').not.toBe('');
    await page.context().close();
  });
});
