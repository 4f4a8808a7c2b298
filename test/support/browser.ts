import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { AxeBuilder } from '@axe-core/playwright';
import { chromium, type Browser, type BrowserContext, type BrowserContextOptions, type Page } from 'playwright-core';

/**
 * A real browser for the tests: Debian's Chromium driven by playwright-core. Nothing is ever
 * downloaded: the executable is the system's (`HERALD_TEST_CHROMIUM` overrides the path). The
 * flags keep it off the network on its own account (no updates, sync, field trials or QUIC), so a
 * test only sees the requests its pages make.
 */
export const CHROMIUM_PATH = process.env.HERALD_TEST_CHROMIUM ?? '/usr/bin/chromium';

export const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** The WCAG 2.2 AA rule sets of axe-core (A and AA of 2.0, 2.1 and 2.2). */
export const WCAG_AA_TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa'];

/** Where the tests write what a person should look at (screenshots); ignored by git. */
export const TEST_OUTPUT = join(process.cwd(), 'test-output');

export interface TestBrowser {
  browser: Browser;
  /** A fresh context (own cookies, cache); closed with the browser. */
  context(opts?: BrowserContextOptions): Promise<BrowserContext>;
  /** A page in a fresh context of this width (height 800), optionally with JavaScript off. */
  page(opts: { width: number; javaScript?: boolean; locale?: string }): Promise<Page>;
  close(): Promise<void>;
}

/** True when the system Chromium is there (a test file may skip, with a reason, when not). */
export const chromiumAvailable = (): boolean => existsSync(CHROMIUM_PATH);

/**
 * Launches Chromium. playwright-core gives every launch a fresh temporary user-data-dir of its
 * own (it refuses a `--user-data-dir` flag) and deletes it on close, so no profile, cache or
 * cookie survives from one test file to the next.
 */
export async function launchBrowser(): Promise<TestBrowser> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: CHROMIUM_FLAGS,
    // A browser that does not come up is an environment problem: say so quickly.
    timeout: 60_000,
  });
  const contexts: BrowserContext[] = [];
  const context = async (opts: BrowserContextOptions = {}) => {
    const c = await browser.newContext(opts);
    contexts.push(c);
    return c;
  };
  return {
    browser,
    context,
    async page({ width, javaScript = true, locale }) {
      const c = await context({
        viewport: { width, height: 800 },
        javaScriptEnabled: javaScript,
        ...(locale === undefined ? {} : { locale, extraHTTPHeaders: { 'Accept-Language': locale } }),
      });
      return c.newPage();
    },
    async close() {
      for (const c of contexts) await c.close().catch(() => undefined);
      await browser.close();
    },
  };
}

export interface AxeViolation {
  id: string;
  impact: string | null | undefined;
  help: string;
  nodes: string[];
}

/** Runs axe-core with the WCAG 2.2 AA tags on the page as it is now; returns the violations, readable. */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  const results = await new AxeBuilder({ page }).withTags(WCAG_AA_TAGS).analyze();
  return results.violations.map((v) => ({
    id: v.id,
    impact: v.impact,
    help: v.help,
    nodes: v.nodes.map((n) => `${n.target.join(' ')}: ${n.failureSummary ?? ''}`),
  }));
}

/** A full-page PNG under test-output/<relative path>. */
export async function screenshot(page: Page, relative: string): Promise<string> {
  const path = join(TEST_OUTPUT, relative);
  mkdirSync(dirname(path), { recursive: true });
  await page.screenshot({ path, fullPage: true });
  return path;
}

/**
 * The little of the DOM the checks below use. The project compiles without the DOM library (it
 * is a server): these functions run in the page, where `globalThis` is the window.
 */
interface DomElement {
  tagName: string;
  tabIndex: number;
  disabled?: boolean;
  innerText?: string;
  getAttribute(name: string): string | null;
  checkVisibility(opts: { visibilityProperty: boolean }): boolean;
  blur(): void;
}
interface DomWindow {
  document: {
    activeElement: DomElement | null;
    body: DomElement;
    querySelectorAll(selector: string): ArrayLike<DomElement>;
  };
  getComputedStyle(el: DomElement): {
    outlineStyle: string;
    outlineWidth: string;
    boxShadow: string;
    visibility: string;
  };
  scrollTo(x: number, y: number): void;
}

export interface FocusStop {
  tag: string;
  href: string | null;
  text: string;
  /** The focus indicator is visible: an outline or a box-shadow drawn while focused. */
  visible: boolean;
}

/**
 * Presses Tab from the top of the page until focus leaves the document or comes back to where it
 * started, recording each element that takes focus and whether its focus shows. At most `max` stops.
 */
export async function tabStops(page: Page, max = 200): Promise<FocusStop[]> {
  // Start from the document itself, as a keyboard user arriving on the page does.
  await page.evaluate(() => {
    const w = globalThis as unknown as DomWindow;
    w.document.activeElement?.blur();
    w.scrollTo(0, 0);
  });
  const stops: FocusStop[] = [];
  const seen = new Set<number>();
  for (let i = 0; i < max; i++) {
    await page.keyboard.press('Tab');
    const stop = await page.evaluate(() => {
      const w = globalThis as unknown as DomWindow;
      const el = w.document.activeElement;
      if (!el || el === w.document.body) return null;
      const style = w.getComputedStyle(el);
      const outline = style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) > 0;
      const shadow = style.boxShadow !== 'none' && style.boxShadow !== '';
      // A stable identity across evaluate calls: the element's position in document order.
      const index = Array.from(w.document.querySelectorAll('*')).indexOf(el);
      return {
        index,
        tag: el.tagName.toLowerCase(),
        href: el.getAttribute('href'),
        text: (el.innerText || el.getAttribute('aria-label') || '').trim().slice(0, 80),
        visible: outline || shadow,
      };
    });
    if (stop === null || seen.has(stop.index)) break;
    seen.add(stop.index);
    stops.push({ tag: stop.tag, href: stop.href, text: stop.text, visible: stop.visible });
  }
  return stops;
}

/** Every link and control a keyboard user should reach, in document order (visible ones only). */
export async function focusableTargets(page: Page): Promise<{ tag: string; href: string | null }[]> {
  return page.evaluate(() => {
    const w = globalThis as unknown as DomWindow;
    const selector = 'a[href], button, input, select, textarea, details > summary, [tabindex]';
    return (
      Array.from(w.document.querySelectorAll(selector))
        .filter((el) => el.tabIndex >= 0 && el.disabled !== true)
        // Rendered and not inside a closed <details> (checkVisibility knows both).
        .filter((el) => el.checkVisibility({ visibilityProperty: true }))
        .map((el) => ({ tag: el.tagName.toLowerCase(), href: el.getAttribute('href') }))
    );
  });
}
