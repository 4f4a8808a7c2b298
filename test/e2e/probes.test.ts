import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHerald } from '../../src/composition/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { startPrivateRedis } from '../support/child.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { uniquePrefix } from '../support/redis.js';

const METRICS_TOKEN = 'metrics-token-0123456789';

let h: TestHerald;
let guarded: TestHerald;
beforeAll(async () => {
  [h, guarded] = await Promise.all([startHerald(), startHerald({ HERALD_METRICS_TOKEN: METRICS_TOKEN })]);
});
afterAll(async () => {
  await Promise.all([h.close(), guarded.close()]);
});

describe('probes and metrics (no API key needed)', () => {
  it('GET /healthz answers 200', async () => {
    const r = await h.api('GET', '/healthz', { token: null });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ status: 'ok' });
  });

  it('GET /readyz reports Redis and its persistence', async () => {
    const r = await h.api('GET', '/readyz', { token: null });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ status: 'ready', redis: 'ok', persistence: expect.stringMatching(/^(aof|rdb|none)$/) });
  });

  it('GET /metrics serves Prometheus text', async () => {
    await h.api('GET', '/healthz', { token: null });
    const r = await h.api('GET', '/metrics', { token: null });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(r.text).toMatch(/^# HELP herald_http_requests_total /m);
    expect(r.text).toMatch(/^herald_process_cpu_user_seconds_total /m);
  });

  it('with HERALD_METRICS_TOKEN, /metrics needs that bearer token (and the probes still do not)', async () => {
    const none = await guarded.api('GET', '/metrics', { token: null });
    expect(none.status).toBe(401);
    expect(none.text).not.toContain('herald_');
    const wrong = await guarded.api('GET', '/metrics', { token: 'metrics-token-wrong-456789' });
    expect(wrong.status).toBe(401);
    const right = await guarded.api('GET', '/metrics', { token: METRICS_TOKEN });
    expect(right.status).toBe(200);
    expect(right.text).toContain('herald_http_requests_total');
    expect((await guarded.api('GET', '/healthz', { token: null })).status).toBe(200);
    expect((await guarded.api('GET', '/readyz', { token: null })).status).toBe(200);
  });
});

describe('/readyz when Redis goes away', () => {
  it('answers 503 within 2 s when Redis hangs, and when it is gone', async () => {
    const redis = await startPrivateRedis([]);
    const config = loadConfig({
      HERALD_KEY_PREFIX: uniquePrefix('probe'),
      HERALD_SECRET_KEY: randomBytes(32).toString('base64'),
      HERALD_DATA_DIR: '/nonexistent-not-used',
      LOG_LEVEL: 'silent',
    });
    // No delivery worker: its blocking connections would only add reconnect noise once Redis dies.
    const herald = await createHerald({ config, redisUrl: redis.url, log: createLogger('silent'), worker: false });
    herald.redis.on('error', () => undefined);
    const server: Server = await new Promise((resolve) => {
      const s = herald.app.listen(0, '127.0.0.1', () => resolve(s));
    });
    const readyz = async () => {
      const t0 = Date.now();
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/readyz`);
      return { status: res.status, body: (await res.json()) as Record<string, string>, ms: Date.now() - t0 };
    };
    try {
      const up = await readyz();
      expect(up.status).toBe(200);
      expect(up.body).toEqual({ status: 'ready', redis: 'ok', persistence: 'none' });

      // A stopped process accepts nothing and answers nothing: the probe must not hang with it.
      redis.proc.kill('SIGSTOP');
      const hung = await readyz();
      expect(hung.status).toBe(503);
      expect(hung.body).toMatchObject({ status: 'unavailable', redis: 'unreachable' });
      expect(hung.ms).toBeLessThanOrEqual(2000);

      redis.kill();
      await new Promise((r) => redis.proc.once('exit', r));
      const gone = await readyz();
      expect(gone.status).toBe(503);
      expect(gone.ms).toBeLessThanOrEqual(2000);
    } finally {
      redis.kill();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      herald.redis.disconnect();
    }
  });
});
