import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import type { Router } from 'express';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createHttpApp } from '../../src/http/server.js';
import { createLogger } from '../../src/log.js';
import { waitFor } from '../support/wait.js';

describe('access log', () => {
  it('logs the full path of a /v1 request (not the router-relative one), without the query', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
        done();
      },
    });
    const api = (app: Router) => {
      app.get('/v1/incidents', (_req, res) => {
        res.json({ ok: true });
      });
    };
    const { app, finish } = createHttpApp({
      log: createLogger('info', sink),
      registry: new Registry(),
      metricsToken: undefined,
      readiness: () => Promise.resolve({ redis: 'ok', persistence: 'aof' }),
      api,
      trustProxy: false,
    });
    finish();
    const server: Server = await new Promise((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/incidents?cursor=abc`, {
        headers: { 'X-Request-Id': 'log-path-1' },
      });
      expect(res.status).toBe(200);
      const entry = () =>
        lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((e) => e.request_id === 'log-path-1');
      await waitFor(() => entry() !== undefined, { what: 'the access log line' });
      expect(entry()).toMatchObject({ msg: 'request', method: 'GET', path: '/v1/incidents', status: 200 });
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
