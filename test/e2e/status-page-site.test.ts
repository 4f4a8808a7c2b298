import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STATUS_CONNECTION } from '../support/status-fixtures.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { waitFor } from '../support/wait.js';
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';

/**
 * The status page mounted on a whole Herald, over HTTP: the page before and after a status_page
 * connection exists, its caching (ETag, 304) and headers, the status host that serves nothing
 * else, and that an internal incident never published appears on no route.
 */
const STATUS_HOST = 'status.herald.test';
let h: TestHerald;
/** Shared by the second Herald of the last test, which opens the same data. */
const SECRET_KEY = randomBytes(32).toString('base64');
beforeAll(async () => {
  h = await startHerald({ HERALD_SECRET_KEY: SECRET_KEY });
});
afterAll(async () => {
  await h.close();
});

const get = (path: string, headers: Record<string, string> = {}) => fetch(`${h.url}${path}`, { headers });

const ROUTES = [
  '/status',
  '/status/history',
  '/status/feed.atom',
  '/status/feed.rss',
  '/status/badge.svg',
  '/status/shields.json',
  '/status/api/v2/summary.json',
  '/status/api/v2/status.json',
  '/status/api/v2/components.json',
  '/status/api/v2/incidents.json',
  '/status/api/v2/incidents/unresolved.json',
  '/status/api/v2/scheduled-maintenances.json',
  '/status/api/v2/scheduled-maintenances/upcoming.json',
  '/status/api/v2/scheduled-maintenances/active.json',
];

describe('the status page on a Herald', () => {
  it('without a status_page connection: a 404 page that says it is not set up', async () => {
    const r = await get('/status');
    expect(r.status).toBe(404);
    expect(r.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await r.text()).toContain('The status page is not set up.');
    const json = await get('/status/api/v2/summary.json');
    expect(json.status).toBe(404);
  });

  it('serves every route once the connection exists, with an internal incident on none of them', async () => {
    const secret = `Internal only ${Date.now()}`;
    const inc = await h.api('POST', '/v1/incidents', {
      body: { title: secret, severity: 'critical' },
    });
    expect(inc.status).toBe(201);
    const con = await h.api('POST', '/v1/connections', { body: STATUS_CONNECTION });
    expect(con.status).toBe(201);
    await waitFor(async () => (await get('/status')).status === 200, { what: 'the page to be set up' });
    for (const path of ROUTES) {
      const r = await get(path);
      expect(r.status, path).toBe(200);
      const body = await r.text();
      expect(body, path).not.toContain(secret);
      expect(body, path).not.toContain(inc.body.id as string);
      expect(body, path).not.toContain(con.body.id as string);
    }
    expect((await get(`/status/incidents/${inc.body.id as string}`)).status).toBe(404);
  });

  it('answers with a strong ETag, 304 on If-None-Match, short caching and the security headers', async () => {
    const r = await get('/status');
    expect(r.status).toBe(200);
    const etag = r.headers.get('etag');
    expect(etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
    expect(r.headers.get('cache-control')).toBe('public, max-age=10, stale-while-revalidate=30');
    expect(r.headers.get('content-security-policy')).toBe(
      "default-src 'none'; style-src 'self'; img-src 'self' https: data:; frame-ancestors https://intranet.example.com; base-uri 'none'; form-action 'self'",
    );
    expect(r.headers.get('x-content-type-options')).toBe('nosniff');
    expect(r.headers.get('referrer-policy')).toBe('strict-origin-when-cross-origin');
    expect(r.headers.get('vary')).toBe('Accept-Language');
    const again = await get('/status', { 'If-None-Match': etag! });
    expect(again.status).toBe(304);
    expect(again.headers.get('etag')).toBe(etag);
    expect(await again.text()).toBe('');
    // The stylesheet named in the page is served for a year.
    const css = /href="([^"]+\.css)"/.exec(await r.text())![1]!;
    const sheet = await get(css);
    expect(sheet.status).toBe(200);
    expect(sheet.headers.get('content-type')).toMatch(/^text\/css/);
    expect(sheet.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
  });

  it('never hands the page to the API: auth, body parsers and the API 404 are not in its way', async () => {
    const r = await fetch(`${h.url}/status`, {
      method: 'POST',
      body: '{"x":',
      headers: { 'Content-Type': 'application/json' },
    });
    expect(r.status).toBe(405);
    const missing = await get('/status/no/such/page');
    expect(missing.status).toBe(404);
    expect(missing.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await missing.text()).toContain('There is no page at this address.');
  });

  it('on HERALD_STATUS_HOST serves the page at / and nothing else', async () => {
    // A second Herald on the same data, with the page on a host of its own.
    const hs = await startHerald({
      HERALD_KEY_PREFIX: h.prefix,
      HERALD_SECRET_KEY: SECRET_KEY,
      HERALD_STATUS_HOST: STATUS_HOST,
    });
    try {
      await onItsHost(hs);
    } finally {
      await hs.close({ keepData: true });
    }
  });
});

async function onItsHost(hs: TestHerald): Promise<void> {
  {
    // fetch() does not send a Host of our choosing: node:http does.
    const onHost = (path: string, headers: Record<string, string> = {}) =>
      hostGet(hs.url, path, { Host: STATUS_HOST, ...headers });
    const home = await onHost('/');
    expect(home.status).toBe(200);
    const html = home.text;
    expect(html).toContain('href="/history"');
    expect(html).not.toContain('href="/status');
    expect((await onHost('/api/v2/status.json')).status).toBe(200);
    for (const path of [
      '/v1/incidents',
      '/healthz',
      '/readyz',
      '/metrics',
      '/slack/events',
      '/status',
      '/v1/openapi.json',
    ]) {
      const r = await onHost(path, { Authorization: `Bearer ${hs.token}` });
      expect(r.status, path).toBe(404);
      expect(r.headers['content-type'], path).toMatch(/^text\/html/);
    }
    // Other hosts keep the API, and the page is no longer at /status there: it moved to its host.
    expect((await hs.api('GET', '/v1/incidents')).status).toBe(200);
    expect((await hostGet(hs.url, '/status', {})).status).toBe(404);
  }
}

function hostGet(
  base: string,
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end();
  });
}
