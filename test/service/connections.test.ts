import { describe, expect, it } from 'vitest';
import { OutboundAllow } from '../../src/domain/connection/address-policy.js';
import { CONNECTION_BODIES as BODIES, CONNECTION_SECRETS as SECRETS } from '../support/connection-bodies.js';
import { FakeTester, fieldsOf, idOf, refusal, slackActor } from './fakes.js';
import { webhookBody, world } from './world.js';

/** ConnectionService's rules over in-memory fakes. */

describe('ConnectionService.create', () => {
  it('seals every secret (only last4 kept in clear), keeps the rest as config, and hands out a webhook signing secret once', async () => {
    const w = world();
    const { connection: mail, signingSecret: none } = await w.services.connections.create(BODIES.email!);
    expect(none).toBeNull();
    expect(mail.config).toMatchObject({ host: 'smtp.example.com', port: 587, from: 'Herald <status@example.com>' });
    expect(mail.config).not.toHaveProperty('password');
    expect(mail.secrets.password!.last4).toBe('CRET');
    expect(mail.secrets.password!.sealed).not.toContain(SECRETS.smtpPassword);
    expect(w.box.open(mail.secrets.password!.sealed)).toBe(SECRETS.smtpPassword);
    const { connection: hook, signingSecret } = await w.services.connections.create(BODIES.webhook!);
    expect(signingSecret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(w.repos.connections.signingSecrets.get(hook.id)).toBe(signingSecret);
    expect(Object.keys(hook.secrets).sort()).toEqual(['headers.Authorization', 'secret']);
    expect(hook).toMatchObject({ enabled: true, rev: 1, health: { state: 'ok', consecutive_failures: 0 } });
  });

  it('names every bad field in one answer and stores nothing', async () => {
    const w = world();
    const e = await refusal(
      w.services.connections.create({
        type: 'email',
        extra: true,
        config: { host: 'smtp.example.com', port: 70000, security: 'ssl', from: 'x', to: ['ok@example.com', 'nope'] },
      }),
    );
    expect(e.code).toBe('validation_failed');
    expect(e.errors.map((x) => x.field).sort()).toEqual([
      'config.from',
      'config.port',
      'config.security',
      'config.to.1',
      'extra',
      'name',
    ]);
    expect(
      (await refusal(w.services.connections.create({ name: 'x', type: 'pagerduty', config: {} }))).errors.map(
        (x) => x.field,
      ),
    ).toEqual(['type']);
    expect(w.repos.connections.writes).toBe(0);
  });

  it('refuses literal non-public destinations unless allow-listed (destination_not_allowed on the field)', async () => {
    const strict = world();
    for (const [body, field] of [
      [{ type: 'webhook', config: { url: 'https://127.0.0.1:8443/hook' } }, 'config.url'],
      [{ type: 'mattermost', config: { webhook_url: 'https://10.0.0.1/hooks/x' } }, 'config.webhook_url'],
      [{ type: 'webhook', config: { url: 'https://localhost/hook' } }, 'config.url'],
    ] as const) {
      const e = await refusal(strict.services.connections.create({ name: 'blocked', ...body }));
      expect(e.code).toBe('destination_not_allowed');
      expect(e.errors[0]!.field).toBe(field);
    }
    const lenient = world({ allow: OutboundAllow.parse(['10.0.0.0/8']) });
    await expect(
      lenient.services.connections.create({
        name: 'ok',
        type: 'mattermost',
        config: { webhook_url: 'https://10.0.0.1/hooks/x' },
      }),
    ).resolves.toBeDefined();
  });
});

describe('ConnectionService.get / list / listAll', () => {
  it('answers not_found for unknown and malformed ids', async () => {
    const w = world();
    expect((await refusal(w.services.connections.get(idOf('connection', 4)))).code).toBe('not_found');
    expect((await refusal(w.services.connections.get('con_bad'))).code).toBe('not_found');
  });

  it('lists newest first with filters and a cursor; listAll reads every page', async () => {
    const w = world();
    for (let n = 0; n < 3; n++) await w.services.connections.create(webhookBody(`W${n}`));
    await w.services.connections.create(BODIES.teams!);
    const hooks = await w.services.connections.list({ type: ['webhook'] }, { limit: 2, cursor: null });
    expect(hooks.data.map((c) => c.name)).toEqual(['W2', 'W1']);
    const rest = await w.services.connections.list({ type: ['webhook'] }, { limit: 2, cursor: hooks.nextCursor });
    expect(rest.data.map((c) => c.name)).toEqual(['W0']);
    expect((await refusal(() => w.services.connections.list({}, { limit: 2, cursor: { offset: 0 } }))).code).toBe(
      'invalid_cursor',
    );
    for (let n = 3; n < 205; n++)
      w.repos.connections.connections.set(idOf('connection', 10_000 + n), {
        ...hooks.data[0]!,
        id: idOf('connection', 10_000 + n),
      });
    expect((await w.services.connections.listAll()).length).toBe(206);
  });
});

describe('ConnectionService.update', () => {
  it('merges config (null removes), keeps secrets unless sent, bumps rev; a no-op keeps rev and updated_at', async () => {
    const w = world();
    const { connection: c } = await w.services.connections.create(BODIES.discord!);
    w.clock.advance(1000);
    const next = await w.services.connections.update(c.id, {
      name: 'Discord #ops',
      config: { username: 'Status', thread_id: null },
      rate_limit_per_minute: 20,
    });
    expect(next).toMatchObject({
      name: 'Discord #ops',
      rate_limit_per_minute: 20,
      rev: 2,
      updated_at: '2026-11-22T10:00:01.000Z',
    });
    // Stored without the removed thread_id (presenting shows unset optionals as null).
    expect(next.config).toEqual({ username: 'Status' });
    expect(next.secrets).toEqual(c.secrets);
    w.clock.advance(1000);
    const same = await w.services.connections.update(c.id, { name: 'Discord #ops' });
    expect(same).toEqual(next);
  });

  it('refuses an empty patch, and names the envelope’s and the config’s bad fields together', async () => {
    const w = world();
    const { connection: c } = await w.services.connections.create(BODIES.discord!);
    expect(fieldsOf(await refusal(w.services.connections.update(c.id, {})))).toEqual([':empty_patch']);
    const both = await refusal(w.services.connections.update(c.id, { name: '', config: { username: 42 } }));
    expect(both.errors.map((x) => x.field).sort()).toEqual(['config.username', 'name']);
    expect(fieldsOf(await refusal(w.services.connections.update(c.id, { config: { colour: 'blue' } })))).toEqual([
      'config.colour:unknown_field',
    ]);
  });

  it('needs the secrets again when the destination moves to another host (secret_required)', async () => {
    const w = world();
    const { connection: mail } = await w.services.connections.create(BODIES.email!);
    const moved = await refusal(w.services.connections.update(mail.id, { config: { host: 'smtp.elsewhere.example' } }));
    expect(moved.code).toBe('secret_required');
    expect(fieldsOf(moved)).toEqual(['config.password:secret_required']);
    const ok = await w.services.connections.update(mail.id, {
      config: { host: 'smtp.elsewhere.example', password: 'another-password' },
    });
    expect(ok.secrets.password!.last4).toBe('word');
    await expect(w.services.connections.update(mail.id, { config: { port: 2525 } })).resolves.toMatchObject({
      config: { port: 2525 },
    });
  });

  it('applies the address policy to a changed destination', async () => {
    const w = world();
    const { connection: c } = await w.services.connections.create(BODIES.mattermost!);
    const e = await refusal(w.services.connections.update(c.id, { config: { webhook_url: 'https://[::1]/hooks/x' } }));
    expect(e.code).toBe('destination_not_allowed');
    expect(e.errors[0]!.field).toBe('config.webhook_url');
  });

  it('honours If-Match (412 when stale), tells the delivery layer on disabling, and re-enabling resets health', async () => {
    const w = world();
    const { connection: c } = await w.services.connections.create(BODIES.teams!);
    expect((await refusal(w.services.connections.update(c.id, { enabled: false }, 7))).code).toBe(
      'precondition_failed',
    );
    expect(w.seen.disabled).toEqual([]);
    await w.services.connections.update(c.id, { enabled: false }, 1);
    expect(w.seen.disabled).toEqual([c.id]);
    await w.services.connections.disable(c.id, 'HTTP 404 from the webhook URL');
    expect((await w.services.connections.get(c.id)).health).toMatchObject({
      state: 'disabled',
      disabled_reason: 'HTTP 404 from the webhook URL',
    });
    const on = await w.services.connections.update(c.id, { enabled: true });
    expect(on.health).toEqual({ state: 'ok', consecutive_failures: 0, last_error: null, disabled_reason: null });
  });
});

describe('ConnectionService.delete', () => {
  it('deletes (If-Match honoured), then tells the delivery layer; a second delete is not_found', async () => {
    const w = world();
    const { connection: c } = await w.services.connections.create(BODIES.mattermost!);
    expect((await refusal(w.services.connections.delete(c.id, 9))).code).toBe('precondition_failed');
    expect(w.seen.deleted).toEqual([]);
    await w.services.connections.delete(c.id, 1);
    expect(w.seen.deleted).toEqual([c.id]);
    expect((await refusal(w.services.connections.delete(c.id))).code).toBe('not_found');
  });
});

describe('ConnectionService system updates', () => {
  it('recordHealth counts a failure streak (degraded) and a success clears it; null for a gone connection', async () => {
    const w = world();
    const { connection: c } = await w.services.connections.create(BODIES.teams!);
    await w.services.connections.recordHealth(c.id, { ok: false, error: 'HTTP 503' });
    const twice = await w.services.connections.recordHealth(c.id, { ok: false, error: 'HTTP 503' });
    expect(twice!.health).toMatchObject({ state: 'degraded', consecutive_failures: 2, last_error: 'HTTP 503' });
    const ok = await w.services.connections.recordHealth(c.id, { ok: true });
    expect(ok!.health).toMatchObject({ state: 'ok', consecutive_failures: 0 });
    expect(ok!.updated_at).toBe(c.updated_at);
    expect(await w.services.connections.recordHealth(idOf('connection', 9), { ok: true })).toBeNull();
  });

  it('getForDelivery opens the secrets; null when the connection is gone', async () => {
    const w = world();
    const { connection: c } = await w.services.connections.create(BODIES.telegram!);
    const target = await w.services.connections.getForDelivery(c.id);
    expect(target!.config).toMatchObject({ bot_token: SECRETS.telegram, chat_id: '-1001234567890' });
    expect(await w.services.connections.getForDelivery(idOf('connection', 9))).toBeNull();
  });
});

describe('ConnectionService.test', () => {
  it('answers needs_send_message for a type without a read-only check (tester not asked) and stores it as last_test', async () => {
    const w = world();
    const { connection: c } = await w.services.connections.create(BODIES.teams!);
    const r = await w.services.connections.test(c.id, {}, slackActor);
    expect(r).toMatchObject({ ok: false, status: 'needs_send_message', method: null, sent_message: false });
    expect(w.tester.calls).toEqual([]);
    expect((await w.services.connections.get(c.id)).last_test).toEqual(r);
  });

  it('hands the opened connection to the tester, with send_message as asked', async () => {
    const w = world();
    const { connection: c } = await w.services.connections.create(BODIES.teams!);
    const r = await w.services.connections.test(c.id, { send_message: true }, slackActor);
    expect(r.status).toBe('ok');
    expect(w.tester.calls).toEqual([
      { id: c.id, sendMessage: true, config: expect.objectContaining({ webhook_url: SECRETS.teams }) },
    ]);
  });

  it('answers blocked_by_policy for a destination no longer allowed, without the tester', async () => {
    const lenient = world({ allow: OutboundAllow.parse(['127.0.0.1']) });
    const { connection: c } = await lenient.services.connections.create({
      name: 'local',
      type: 'webhook',
      config: { url: 'http://127.0.0.1:9/hook' },
    });
    const strict = world();
    strict.repos.connections.connections.set(c.id, c);
    const r = await strict.services.connections.test(c.id, { send_message: true }, slackActor);
    expect(r).toMatchObject({ ok: false, status: 'blocked_by_policy', sent_message: false });
    expect(strict.tester.calls).toEqual([]);
  });

  it('answers what the tester answers when the destination cannot be reached (unreachable), and stores it', async () => {
    const w = world({
      tester: new FakeTester((conn) => ({
        ok: false,
        status: 'unreachable',
        method: 'send',
        sent_message: false,
        http_status: null,
        provider_code: null,
        latency_ms: 3,
        checked_at: '2026-11-22T10:00:00.000Z',
        detail: `could not connect to ${conn.type}`,
      })),
    });
    const { connection: c } = await w.services.connections.create(BODIES.teams!);
    const r = await w.services.connections.test(c.id, { send_message: true }, slackActor);
    expect(r).toMatchObject({ status: 'unreachable', detail: 'could not connect to teams' });
    expect((await w.services.connections.get(c.id)).last_test).toEqual(r);
  });

  it('refuses a Slack user who is not an admin itself (insufficient_scope): nothing tested, nothing stored', async () => {
    const w = world();
    const { connection: c } = await w.services.connections.create(BODIES.teams!);
    const mallory = { type: 'slack_user' as const, id: 'UMALLORY', name: 'mallory' };
    const e = await refusal(w.services.connections.test(c.id, { send_message: true }, mallory));
    expect(e.code).toBe('insufficient_scope');
    expect(e.meta).toEqual({ task: 'test_connections' });
    expect(w.tester.calls).toEqual([]);
    expect((await w.services.connections.get(c.id)).last_test).toBeNull();
    // An API key may test (its scope, connections:write, is the HTTP edge's to check).
    const apiKey = { type: 'api_key' as const, id: 'key_1', name: 'ci' };
    expect((await w.services.connections.test(c.id, { send_message: true }, apiKey)).status).toBe('ok');
  });

  it('validates the body strictly, after the 404', async () => {
    const w = world();
    const { connection: c } = await w.services.connections.create(BODIES.teams!);
    const bad = await refusal(w.services.connections.test(c.id, { send_message: 'yes', dry: 1 }, slackActor));
    expect(bad.errors.map((x) => x.field).sort()).toEqual(['dry', 'send_message']);
    expect(
      (await refusal(w.services.connections.test(idOf('connection', 9), { send_message: 'yes' }, slackActor))).code,
    ).toBe('not_found');
  });
});
