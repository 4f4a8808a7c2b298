import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { axeViolations, focusableTargets, launchBrowser, tabStops, type TestBrowser } from '../support/browser.js';

/**
 * The browser harness itself: the checks the status page tests rely on must be able to fail.
 * A page with known defects (an image without text, a link whose focus is hidden, a script that
 * writes text) is served locally and each check is shown to notice them.
 */

const GOOD = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Good</title></head>
<body><main><h1>Fine</h1><p><a href="/a">First</a> <a href="/b">Second</a></p>
<p id="js">no script</p><script>document.getElementById('js').textContent = 'script ran'</script></main></body></html>`;
const BAD = `<!doctype html><html><head><meta charset="utf-8"><title>Bad</title>
<style>a:focus { outline: none }</style></head>
<body><img src="/x.png"><a href="/a">First</a><div style="color:#bbb;background:#fff">faint text</div></body></html>`;

let server: Server;
let base = '';
let b: TestBrowser;

beforeAll(async () => {
  server = createServer((req, res) => {
    res.setHeader('content-type', 'text/html; charset=utf-8');
    res.end(req.url === '/bad' ? BAD : GOOD);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  b = await launchBrowser();
});

afterAll(async () => {
  await b?.close();
  await new Promise((r) => server?.close(r));
});

describe('the browser harness', () => {
  it('runs the system Chromium, with and without JavaScript', async () => {
    const on = await b.page({ width: 1280 });
    await on.goto(`${base}/good`);
    expect(await on.textContent('#js')).toBe('script ran');
    expect(b.browser.version()).toMatch(/^\d+\./);
    const off = await b.page({ width: 320, javaScript: false });
    await off.goto(`${base}/good`);
    expect(await off.textContent('#js')).toBe('no script');
    expect(off.viewportSize()?.width).toBe(320);
  });

  it('axe finds nothing on a clean page and names the defects of a bad one', async () => {
    const p = await b.page({ width: 1280 });
    await p.goto(`${base}/good`);
    expect(await axeViolations(p)).toEqual([]);
    await p.goto(`${base}/bad`);
    const ids = (await axeViolations(p)).map((v) => v.id);
    expect(ids).toEqual(expect.arrayContaining(['html-has-lang', 'image-alt', 'color-contrast']));
  });

  it('Tab walks every link and tells a visible focus from a hidden one', async () => {
    const p = await b.page({ width: 1280 });
    await p.goto(`${base}/good`);
    const stops = await tabStops(p);
    expect(stops.map((s) => s.href)).toEqual(['/a', '/b']);
    expect(stops.every((s) => s.visible)).toBe(true);
    expect((await focusableTargets(p)).map((t) => t.href)).toEqual(['/a', '/b']);
    await p.goto(`${base}/bad`);
    const bad = await tabStops(p);
    expect(bad.map((s) => [s.href, s.visible])).toEqual([['/a', false]]);
  });
});
