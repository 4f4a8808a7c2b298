import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseOutboundAllow } from '../../src/domain/connection/address-policy.js';
import { SYSTEM_ACTOR } from '../../src/domain/common/actor.js';
import { systemClock } from '../../src/domain/common/clock.js';
import type { ConnectionTestResult, DeliveryConnection } from '../../src/domain/connection/connection.js';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import type { ConnectionTester } from '../../src/ports/index.js';
import { AccessPolicy } from '../../src/services/access.js';
import { ConnectionService } from '../../src/services/connections.js';
import { RedisConnectionRepo } from '../../src/store/connections.js';
import { createSecretBox, nodeTokenCrypto } from '../../src/store/crypto.js';
import { createKeys } from '../../src/store/keys.js';
import { connectTestRedis, dropPrefix, uniquePrefix } from '../support/redis.js';

let redis: Redis;
const prefix = uniquePrefix('cons');
const keys = createKeys(prefix);
const box = createSecretBox(randomBytes(32));
let repo: RedisConnectionRepo;
let svc: ConnectionService;
const deleted: string[] = [];

/** What the tester answers when the destination cannot be reached (the default here: no network in these tests). */
const unreachableTester: ConnectionTester = {
  test: (conn) =>
    Promise.resolve({
      ok: false,
      status: 'unreachable',
      method: conn.type === 'telegram' ? 'getMe' : 'send',
      sent_message: false,
      http_status: null,
      provider_code: null,
      latency_ms: 1,
      checked_at: new Date().toISOString(),
      detail: 'could not connect',
    }),
};

/** A service over the shared repo and key; tests swap the allow list or the tester. */
const makeService = (over: Partial<ConstructorParameters<typeof ConnectionService>[0]> = {}) =>
  new ConnectionService({
    repo,
    box,
    clock: systemClock,
    ids: createIdGenerator(),
    crypto: nodeTokenCrypto,
    allow: parseOutboundAllow([]),
    tester: unreachableTester,
    access: new AccessPolicy({ slackAdmins: [] }),
    // No delivery layer here: nothing is queued for a connection to cancel.
    onDeleted: () => undefined,
    onDisabled: () => undefined,
    ...over,
  });

beforeAll(() => {
  redis = connectTestRedis();
  repo = new RedisConnectionRepo(redis, keys);
  svc = makeService({
    onDeleted: (id) => {
      deleted.push(id);
    },
  });
});
afterAll(async () => {
  await dropPrefix(redis, prefix);
  await redis.quit();
});

const BOT_TOKEN = 'xoxb-1111-2222-PLAINTEXTBOTTOKEN';
const HEADER = 'header-value-PLAINTEXT-9876';
const PASSWORD = 'smtp-password-PLAINTEXT';

describe('connections on Redis', () => {
  it('stores secrets sealed: the raw record never holds a plaintext secret', async () => {
    const slack = await svc.create({ name: 'ops', type: 'slack', config: { bot_token: BOT_TOKEN, channel: 'C0123' } });
    const hook = await svc.create({
      name: 'sink',
      type: 'webhook',
      config: { url: 'https://example.com/h', headers: { 'X-Api-Key': HEADER } },
    });
    const mail = await svc.create({
      name: 'mail',
      type: 'email',
      config: {
        host: 'smtp.example.com',
        port: 465,
        security: 'tls',
        username: 'u',
        password: PASSWORD,
        from: 'a@example.com',
        to: ['b@example.com'],
      },
    });
    expect(hook.signingSecret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    const raw = await redis.mget(
      keys.connection(slack.connection.id),
      keys.connection(hook.connection.id),
      keys.connection(mail.connection.id),
    );
    const all = raw.join('\n');
    for (const secret of [BOT_TOKEN, HEADER, PASSWORD, hook.signingSecret!]) expect(all).not.toContain(secret);
    const stored = JSON.parse(raw[0]!);
    expect(stored.secrets.bot_token.sealed).toMatch(/^v1\./);
    expect(stored.secrets.bot_token.last4).toBe('OKEN');
    expect(stored.config).toEqual({ channel: 'C0123' });
    expect(JSON.parse(raw[1]!).secrets).toHaveProperty(['headers.X-Api-Key']);

    // ...and they open again for delivery.
    const conn = await svc.getForDelivery(slack.connection.id);
    expect(conn?.type === 'slack' && conn.config.bot_token).toBe(BOT_TOKEN);
    const hookConn = await svc.getForDelivery(hook.connection.id);
    expect(hookConn?.type === 'webhook' && hookConn.config).toMatchObject({
      secret: hook.signingSecret,
      headers: { 'X-Api-Key': HEADER },
    });
    expect(hookConn?.secrets['headers.X-Api-Key']).toBe(HEADER);
    expect(await svc.getForDelivery('con_01J00000000000000000000000')).toBeNull();
  });

  it('keeps sealed secrets untouched when a PATCH does not send them', async () => {
    const { connection } = await svc.create({
      name: 'ops2',
      type: 'slack',
      config: { bot_token: BOT_TOKEN, channel: 'C1' },
    });
    const before = JSON.parse((await redis.get(keys.connection(connection.id)))!);
    const next = await svc.update(connection.id, { config: { channel: 'C2' }, name: 'renamed' });
    const after = JSON.parse((await redis.get(keys.connection(connection.id)))!);
    expect(after.secrets.bot_token.sealed).toBe(before.secrets.bot_token.sealed);
    expect(next).toMatchObject({ name: 'renamed', config: { channel: 'C2' }, rev: 2 });
  });

  it('lists newest first with type and enabled filters, paging without gaps', async () => {
    const made: string[] = [];
    for (let i = 0; i < 5; i++) {
      const { connection } = await svc.create({
        name: `mm${i}`,
        type: 'mattermost',
        enabled: i % 2 === 0,
        config: { webhook_url: `https://mm.example.com/hooks/${i}` },
      });
      made.push(connection.id);
    }
    const p1 = await svc.list({ type: ['mattermost'] }, { limit: 2, cursor: null });
    const p2 = await svc.list({ type: ['mattermost'] }, { limit: 2, cursor: p1.nextCursor });
    const p3 = await svc.list({ type: ['mattermost'] }, { limit: 2, cursor: p2.nextCursor });
    expect([...p1.data, ...p2.data, ...p3.data].map((c) => c.id)).toEqual([...made].reverse());
    expect(p3.nextCursor).toBeNull();
    const enabled = await svc.list({ type: ['mattermost'], enabled: true }, { limit: 10, cursor: null });
    expect(enabled.data.map((c) => c.name)).toEqual(['mm4', 'mm2', 'mm0']);
  });

  it('updates are compare-and-set: a stale record loses', async () => {
    const { connection } = await svc.create({
      name: 'cas',
      type: 'teams',
      config: { webhook_url: 'https://x.logic.azure.com/workflows/1' },
    });
    expect(await repo.update(connection, { ...connection, name: 'a', rev: 2 })).toBe(true);
    expect(await repo.update(connection, { ...connection, name: 'b', rev: 2 })).toBe(false);
    expect((await repo.get(connection.id))?.name).toBe('a');
    expect(await repo.delete(connection)).toBe(false);
  });

  it('records health, disables, stores the last test, under concurrency', async () => {
    const { connection } = await svc.create({
      name: 'h',
      type: 'google_chat',
      config: { webhook_url: 'https://chat.googleapis.com/v1/spaces/A/messages?key=k' },
    });
    await Promise.all(
      Array.from({ length: 20 }, () => svc.recordHealth(connection.id, { ok: false, error: 'HTTP 503' })),
    );
    let c = await svc.get(connection.id);
    expect(c.health).toMatchObject({ state: 'degraded', consecutive_failures: 20, last_error: 'HTTP 503' });
    expect(c.updated_at).toBe(connection.updated_at);
    await svc.disable(connection.id, 'HTTP 404 from the webhook: it was deleted');
    c = await svc.get(connection.id);
    expect(c).toMatchObject({
      enabled: false,
      health: { state: 'disabled', disabled_reason: 'HTTP 404 from the webhook: it was deleted' },
    });
    const result: ConnectionTestResult = {
      ok: true,
      status: 'ok',
      method: 'send_message',
      sent_message: true,
      http_status: 200,
      provider_code: null,
      latency_ms: 12,
      checked_at: new Date().toISOString(),
      detail: 'delivered',
    };
    await svc.setLastTest(connection.id, result);
    expect((await svc.get(connection.id)).last_test).toEqual(result);
    const reenabled = await svc.update(connection.id, { enabled: true });
    expect(reenabled.health).toEqual({ state: 'ok', consecutive_failures: 0, last_error: null, disabled_reason: null });
    expect(await svc.recordHealth('con_01J00000000000000000000000', { ok: true })).toBeNull();
  });

  it('deletes atomically with its index entry and calls onDeleted', async () => {
    const { connection } = await svc.create({
      name: 'gone',
      type: 'telegram',
      config: { bot_token: '123:ABCDEFGHIJKLMNOPQRSTUVWXYZ', chat_id: '@herald_ops' },
    });
    await svc.delete(connection.id);
    expect(await redis.exists(keys.connection(connection.id))).toBe(0);
    expect(await redis.zscore(keys.connections(), connection.id)).toBeNull();
    expect(deleted).toContain(connection.id);
  });

  it('test(): the tester gets the opened connection; what it answers (unreachable, ok) is the result, stored', async () => {
    const { connection } = await svc.create({
      name: 'bot',
      type: 'telegram',
      config: { bot_token: '123:ABCDEFGHIJKLMNOPQRSTUVWXYZ', chat_id: 42 },
    });
    const untested = await svc.test(connection.id, undefined, SYSTEM_ACTOR);
    expect(untested).toMatchObject({
      ok: false,
      status: 'unreachable',
      method: 'getMe',
      detail: 'could not connect',
    });
    expect((await svc.get(connection.id)).last_test).toEqual(untested);

    const calls: { conn: DeliveryConnection; sendMessage: boolean }[] = [];
    const withTester = makeService({
      tester: {
        test: async (conn, opts) => {
          calls.push({ conn, sendMessage: opts.sendMessage });
          return {
            ok: true,
            status: 'ok',
            method: 'getMe',
            sent_message: false,
            http_status: 200,
            provider_code: null,
            latency_ms: 5,
            checked_at: new Date().toISOString(),
            detail: 'bot @herald_bot',
          };
        },
      },
    });
    const ok = await withTester.test(connection.id, { send_message: true }, SYSTEM_ACTOR);
    expect(ok.status).toBe('ok');
    expect(calls).toHaveLength(1);
    expect(calls[0]!.sendMessage).toBe(true);
    expect(calls[0]!.conn.type === 'telegram' && calls[0]!.conn.config.bot_token).toBe(
      '123:ABCDEFGHIJKLMNOPQRSTUVWXYZ',
    );
    expect((await svc.get(connection.id)).last_test).toEqual(ok);

    // A type with no read-only check never reaches the tester unless asked to send.
    const { connection: teams } = await svc.create({
      name: 't',
      type: 'teams',
      config: { webhook_url: 'https://x.logic.azure.com/workflows/1' },
    });
    expect((await withTester.test(teams.id, {}, SYSTEM_ACTOR)).status).toBe('needs_send_message');
    expect(calls).toHaveLength(1);
  });

  it('test(): a stored config the rules no longer accept is invalid_config', async () => {
    const allowing = makeService({ allow: parseOutboundAllow(['discord.test']) });
    const { connection } = await allowing.create({
      name: 'd',
      type: 'discord',
      config: { webhook_url: 'https://discord.test/any/path' },
    });
    const r = await svc.test(connection.id, {}, SYSTEM_ACTOR);
    expect(r).toMatchObject({ ok: false, status: 'invalid_config', sent_message: false });
    expect(r.detail).toMatch(/config.webhook_url/);
  });
});
