import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/domain/common/clock.js';
import { createLogger } from '../../src/log.js';
import { REDIS_STATUS_LOADERS } from '../../src/status/loaders.js';
import { createStatusSite, type StatusSite } from '../../src/status/site.js';
import { createRedisSnapshotSource } from '../../src/status/source.js';
import { connectTestRedis, useTestRedis } from '../support/redis.js';
import { STATUS_CONNECTION } from '../support/status-fixtures.js';
import { waitFor } from '../support/wait.js';

/**
 * The page's snapshot over Redis: requests are answered from memory (no command but the
 * version poll while nothing changes, and the page still served with Redis gone), and a change
 * committed with a version bump is on the page within a second.
 */
const t = useTestRedis('status-cache');
const reader = connectTestRedis();
const commands: string[] = [];
// Every command of the page's own connection passes sendCommand: count them by name and key.
const send = reader.sendCommand.bind(reader);
reader.sendCommand = (cmd: { name: string; args: unknown[] }) => {
  commands.push(`${cmd.name} ${String(cmd.args[0] ?? '')}`);
  return send(cmd as never);
};

let site: StatusSite;
let server: Server;
let url: string;

const connection = (title: string) =>
  JSON.stringify({
    id: 'con_status',
    name: STATUS_CONNECTION.name,
    type: 'status_page',
    enabled: true,
    config: { ...STATUS_CONNECTION.config, title },
    secrets: {},
    rate_limit_per_minute: null,
    health: { state: 'ok', consecutive_failures: 0, last_error: null, disabled_reason: null },
    last_test: null,
    created_at: '2026-11-27T10:00:00.000Z',
    updated_at: '2026-11-27T10:00:00.000Z',
    rev: 1,
  });

beforeAll(async () => {
  await t.redis.set(t.keys.statusPage(), 'con_status');
  await t.redis.set(t.keys.connection('con_status'), connection('First title'));
  await t.redis.hincrby(t.keys.statusVersion(), 'v', 1);
  const log = createLogger('silent');
  const source = createRedisSnapshotSource({
    redis: reader,
    keys: t.keys,
    clock: systemClock,
    log,
    loaders: REDIS_STATUS_LOADERS,
  });
  site = createStatusSite({ source, clock: systemClock, log });
  const app = express();
  app.use('/status', site.handler('/status'));
  server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await site.close();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  reader.disconnect();
});

describe('the status page snapshot over Redis', () => {
  it('answers from memory: a burst of requests sends no command but the version poll', async () => {
    const first = await fetch(`${url}/status`);
    expect(first.status).toBe(200);
    expect(await first.text()).toContain('First title');
    commands.length = 0;
    const started = Date.now();
    const paths = ['/status', '/status/api/v2/summary.json', '/status/feed.atom', '/status/history'];
    for (let round = 0; round < 50; round++) {
      const answers = await Promise.all(paths.map((p) => fetch(`${url}${p}`)));
      for (const a of answers) {
        expect(a.status).toBe(200);
        await a.arrayBuffer();
      }
    }
    const elapsed = Date.now() - started;
    // 200 requests; only the poll's HGET of the version, about one per 200 ms.
    expect(
      commands.every((c) => c === `hget ${t.keys.statusVersion()}`),
      commands.join(', '),
    ).toBe(true);
    expect(commands.length).toBeLessThanOrEqual(Math.ceil(elapsed / 200) + 2);
  });

  it('shows a change within a second of its version bump', async () => {
    await t.redis
      .multi()
      .set(t.keys.connection('con_status'), connection('Second title'))
      .hincrby(t.keys.statusVersion(), 'v', 1)
      .exec();
    const committed = Date.now();
    await waitFor(async () => (await (await fetch(`${url}/status`)).text()).includes('Second title'), {
      timeoutMs: 1000,
      intervalMs: 10,
      what: 'the new title on the page',
    });
    expect(Date.now() - committed).toBeLessThan(1000);
  });

  it('keeps serving the cached page, same ETag, with its Redis connection gone', async () => {
    const before = await fetch(`${url}/status`);
    const etag = before.headers.get('etag')!;
    reader.disconnect();
    await waitFor(() => reader.status === 'end', { what: 'the connection to close' });
    for (let i = 0; i < 5; i++) {
      const r = await fetch(`${url}/status`);
      expect(r.status).toBe(200);
      expect(r.headers.get('etag')).toBe(etag);
      expect(await r.text()).toContain('Second title');
      const cached = await fetch(`${url}/status`, { headers: { 'If-None-Match': etag } });
      expect(cached.status).toBe(304);
    }
  });
});
