import { request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type Express } from 'express';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { LONG_STRING, sendLongStringsAsStrings } from '../../src/http/string-send.js';

/** A JSON text past Express's conversion threshold, with characters of 2, 3 and 4 bytes in UTF-8. */
const LONG = JSON.stringify({
  items: Array.from({ length: 40 }, (_, i) => ({ i, title: `Zahlungsausfall é — 支付 🔥 ${i}` })),
});

/** The same routes on Herald's app settings, with and without the string send. */
function app(withStringSend: boolean): Express {
  const a = express();
  a.disable('x-powered-by');
  a.set('etag', false);
  if (withStringSend) sendLongStringsAsStrings(a);
  a.get('/json', (_req, res) => {
    res.json(JSON.parse(LONG));
  });
  a.get('/typed', (_req, res) => {
    res.type('application/json').send(LONG);
  });
  a.get('/short', (_req, res) => {
    res.type('application/json').send('{"ok":true}');
  });
  a.get('/untyped', (_req, res) => {
    res.send(LONG);
  });
  a.get('/upper', (_req, res) => {
    res.set('Content-Type', 'text/plain; charset=UTF-8').send(LONG);
  });
  a.get('/versioned', (_req, res) => {
    res.set('ETag', '"r7"').type('application/json').send(LONG);
  });
  a.get('/no-content', (_req, res) => {
    res.status(204).type('application/json').send(LONG);
  });
  a.get('/parameters', (_req, res) => {
    // Prometheus' type: a parameter besides the charset, left to Express.
    res.set('Content-Type', 'text/plain; version=0.0.4; charset=utf-8').send(LONG);
  });
  a.get('/problem', (_req, res) => {
    res.status(404).type('application/problem+json').send(LONG);
  });
  a.get('/captured', (_req, res) => {
    // As the idempotency middleware does: a wrapper on res.send that calls the original.
    const send = res.send.bind(res);
    res.send = ((body?: unknown) => send(body)) as typeof res.send;
    res.status(201).json(JSON.parse(LONG));
  });
  return a;
}

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

function fetchRaw(server: Server, method: string, path: string, headers: Record<string, string> = {}): Promise<Raw> {
  const { port } = server.address() as AddressInfo;
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const { date: _date, ...rest } = res.headers;
        resolve({ status: res.statusCode ?? 0, headers: rest, body: Buffer.concat(chunks) });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

let plain: Server;
let herald: Server;
beforeAll(async () => {
  const listen = (a: Express) =>
    new Promise<Server>((resolve) => {
      const s = a.listen(0, '127.0.0.1', () => resolve(s));
    });
  [plain, herald] = await Promise.all([listen(app(false)), listen(app(true))]);
});
afterAll(async () => {
  await Promise.all([plain, herald].map((s) => new Promise((r) => s.close(r))));
});

describe('long string bodies written as strings', () => {
  it('is past the threshold in these tests', () => {
    expect(LONG.length).toBeGreaterThanOrEqual(LONG_STRING);
  });

  const cases: [string, string, Record<string, string>][] = [];
  for (const path of [
    '/json',
    '/typed',
    '/short',
    '/untyped',
    '/upper',
    '/versioned',
    '/no-content',
    '/parameters',
    '/problem',
    '/captured',
  ]) {
    for (const method of ['GET', 'HEAD']) cases.push([method, path, {}]);
  }
  cases.push(
    ['GET', '/versioned', { 'if-none-match': '"r7"' }],
    ['HEAD', '/versioned', { 'if-none-match': '"r7"' }],
    ['GET', '/versioned', { 'if-none-match': '"r6"' }],
  );

  it.each(cases)('%s %s %o answers exactly as Express does', async (method, path, headers) => {
    const [a, b] = await Promise.all([fetchRaw(plain, method, path, headers), fetchRaw(herald, method, path, headers)]);
    expect(b.status).toBe(a.status);
    expect(b.headers).toEqual(a.headers);
    expect(b.body.equals(a.body)).toBe(true);
  });

  it('a long JSON answer has its full UTF-8 length and body, and a fresh copy gets a bare 304', async () => {
    const r = await fetchRaw(herald, 'GET', '/typed');
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(r.headers['content-length']).toBe(String(Buffer.byteLength(LONG)));
    expect(r.body.toString('utf8')).toBe(LONG);
    const head = await fetchRaw(herald, 'HEAD', '/typed');
    expect(head.headers['content-length']).toBe(String(Buffer.byteLength(LONG)));
    expect(head.body.length).toBe(0);
    const fresh = await fetchRaw(herald, 'GET', '/versioned', { 'if-none-match': '"r7"' });
    expect(fresh.status).toBe(304);
    expect(fresh.headers['content-type']).toBeUndefined();
    expect(fresh.headers['content-length']).toBeUndefined();
    expect(fresh.body.length).toBe(0);
  });

  it('never turns the long string into a Buffer (Express does)', async () => {
    const from = vi.spyOn(Buffer, 'from');
    try {
      const converted = () => from.mock.calls.filter(([value]) => value === LONG).length;
      await fetchRaw(plain, 'GET', '/typed');
      expect(converted()).toBe(1);
      from.mockClear();
      for (const path of ['/typed', '/versioned', '/captured', '/json']) await fetchRaw(herald, 'GET', path);
      expect(converted()).toBe(0);
      // res.json stringifies on its own: nothing of that size is converted either.
      expect(from.mock.calls.filter(([value]) => typeof value === 'string' && value.length >= LONG_STRING)).toEqual([]);
    } finally {
      from.mockRestore();
    }
  });
});
