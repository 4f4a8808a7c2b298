import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StatusSnapshot } from '../../src/domain/status/public.js';
import { createLogger } from '../../src/log.js';
import { createStatusSite } from '../../src/status/site.js';
import { fixedSource, type SnapshotSource } from '../../src/status/source.js';
import { fixtureSnapshot, NOW, PAGE } from '../support/status-fixtures.js';

/** The site's HTTP behaviour over a fixed snapshot: caching, negotiation, headers, errors. */
let snap: StatusSnapshot | null = fixtureSnapshot({
  page: { ...PAGE, frame_ancestors: ['https://a.example', 'https://b.example:8443'] },
});
const source: SnapshotSource = { current: () => snap, close: () => Promise.resolve() };
let server: Server;
let url: string;

beforeAll(async () => {
  const site = createStatusSite({ source, clock: { now: () => new Date(NOW) }, log: createLogger('silent') });
  const app = express();
  app.use('/status', site.handler('/status'));
  app.use('/', site.handler(''));
  server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const get = (path: string, headers: Record<string, string> = {}, method = 'GET') =>
  fetch(`${url}${path}`, { headers, method });

describe('the status site', () => {
  it('JSON: strong ETag, 304, CORS open, no Vary', async () => {
    const r = await get('/status/api/v2/summary.json');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(r.headers.get('access-control-allow-origin')).toBe('*');
    expect(r.headers.get('vary')).toBeNull();
    const etag = r.headers.get('etag')!;
    expect(etag.startsWith('W/')).toBe(false);
    expect((await get('/status/api/v2/summary.json', { 'If-None-Match': `"x", ${etag}` })).status).toBe(304);
    expect((await get('/status/api/v2/summary.json', { 'If-None-Match': `W/${etag}` })).status).toBe(304);
    expect((await get('/status/api/v2/summary.json', { 'If-None-Match': '"other"' })).status).toBe(200);
  });

  it('negotiates the language per request, with Vary and an ETag per language', async () => {
    const en = await get('/status', { 'Accept-Language': 'fr, en;q=0.5' });
    const de = await get('/status', { 'Accept-Language': 'de-CH' });
    expect(en.headers.get('vary')).toBe('Accept-Language');
    expect(await en.text()).toContain('<html lang="en">');
    expect(await de.text()).toContain('<html lang="de">');
    expect(de.headers.get('etag')).not.toBe(en.headers.get('etag'));
    expect(await (await get('/status?locale=de')).text()).toContain('<html lang="de">');
  });

  it('frames only by the configured origins; every answer carries the security headers', async () => {
    for (const path of [
      '/status',
      '/status/feed.atom',
      '/status/badge.svg',
      '/status/nope',
      '/status/incidents/inc_nope',
    ]) {
      const r = await get(path);
      expect(r.headers.get('content-security-policy'), path).toContain(
        'frame-ancestors https://a.example https://b.example:8443;',
      );
      expect(r.headers.get('content-security-policy'), path).not.toContain('script-src');
      expect(r.headers.get('x-content-type-options'), path).toBe('nosniff');
      expect(r.headers.get('referrer-policy'), path).toBe('strict-origin-when-cross-origin');
    }
  });

  it('unknown ids, pages and paths are HTML 404 pages; other methods 405; HEAD has no body', async () => {
    for (const path of [
      '/status/incidents/inc_nope',
      '/status/maintenances/mnt_nope',
      '/status/components/cmp_nope/feed.atom',
      '/status/history?page=9',
      '/status/history?page=x',
      '/status/api/v2/nope.json',
      `/status/incidents/${'x'.repeat(200)}`,
    ]) {
      const r = await get(path);
      expect(r.status, path).toBe(404);
      expect(r.headers.get('content-type'), path).toBe('text/html; charset=utf-8');
      expect(await r.text(), path).toContain('<h1>Page not found</h1>');
    }
    expect((await get('/status', {}, 'DELETE')).status).toBe(405);
    const head = await get('/status/incidents/inc_active', {}, 'HEAD');
    expect(head.status).toBe(200);
    expect(Number(head.headers.get('content-length'))).toBeGreaterThan(1000);
    expect(await head.text()).toBe('');
  });

  it('links within the mount: /status/… there, /… on a host of its own', async () => {
    expect(await (await get('/status/incidents/inc_active')).text()).toContain('href="/status/history"');
    const own = await (await get('/incidents/inc_active')).text();
    expect(own).toContain('href="/history"');
    expect(own).not.toContain('href="/status');
    expect(own).toContain('<link rel="canonical" href="https://status.acme.test/incidents/inc_active">');
  });

  it('without a page: 404 "not set up"; before any snapshot: 503', async () => {
    snap = fixtureSnapshot({ page: null });
    const r = await get('/status/api/v2/status.json');
    expect(r.status).toBe(404);
    expect(await r.text()).toContain('The status page is not set up.');
    expect((await get('/status', { 'Accept-Language': 'de' })).status).toBe(404);
    snap = null;
    const u = await get('/status');
    expect(u.status).toBe(503);
    expect(u.headers.get('cache-control')).toBe('no-store');
    snap = fixtureSnapshot();
  });

  it('fixedSource serves a snapshot as given', () => {
    const s = fixtureSnapshot();
    expect(fixedSource(s).current()).toBe(s);
  });
});
