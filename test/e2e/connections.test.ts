import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHerald, type ApiResponse, type RequestOptions, type TestHerald } from '../support/herald.js';
import { CONNECTION_BODIES as BODIES, CONNECTION_SECRETS as SECRETS } from '../support/connection-bodies.js';

/**
 * Connections over HTTP. `h` is the usual test Herald (127.0.0.1 allow-listed); `strict` shares
 * its Redis prefix and secret key but has NO outbound holes, as if the operator closed them.
 */
let h: TestHerald;
let strict: TestHerald;
beforeAll(async () => {
  h = await startHerald();
  strict = await startHerald({
    HERALD_KEY_PREFIX: h.prefix,
    HERALD_SECRET_KEY: h.herald.config.HERALD_SECRET_KEY!,
    HERALD_OUTBOUND_ALLOW: '',
  });
});
afterAll(async () => {
  await strict.close();
  await h.close();
});

/** Every response body seen, to prove no secret ever leaves. */
const seen: string[] = [];
async function api(method: string, path: string, opts: RequestOptions = {}, on: TestHerald = h): Promise<ApiResponse> {
  const r = await on.api(method, path, opts);
  seen.push(r.text);
  return r;
}

const create = (body: Record<string, unknown>, on: TestHerald = h) => api('POST', '/v1/connections', { body }, on);

describe('creating connections', () => {
  it.each(Object.keys(BODIES))(
    'creates a %s connection: 201, Location, ETag, secrets as {set, last4}',
    async (kind) => {
      const body = BODIES[kind]!;
      const r = await create(body);
      expect(r.status).toBe(201);
      expect(r.body.id).toMatch(/^con_[0-9A-Z]{26}$/);
      expect(r.headers.get('location')).toBe(`/v1/connections/${r.body.id}`);
      expect(r.headers.get('etag')).toMatch(/^"r\d+"$/);
      expect(r.body).toMatchObject({
        name: body.name,
        type: body.type,
        enabled: true,
        rate_limit_per_minute: body.rate_limit_per_minute ?? null,
        health: { state: 'ok', consecutive_failures: 0, last_error: null, disabled_reason: null },
        last_test: null,
      });
      expect(r.body.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      for (const s of Object.values<{ set: boolean; last4: string | null }>(r.body.secrets)) {
        expect(s.set).toBe(true);
        expect(s.last4 === null || s.last4.length === 4).toBe(true);
      }
      expect(r.body).not.toHaveProperty('rev');
    },
  );

  it('shows each type its own secrets, and only the non-secret config', async () => {
    const email = await create(BODIES.email!);
    expect(email.body.config).toEqual({
      host: 'smtp.example.com',
      port: 587,
      security: 'starttls',
      username: 'herald',
      from: 'Herald <status@example.com>',
      to: ['ops@example.com'],
      cc: ['cto@example.com'],
    });
    expect(email.body.secrets).toEqual({ password: { set: true, last4: 'CRET' } });
    const bot = await create(BODIES.slack_bot!);
    expect(bot.body.config).toEqual({ channel: 'C0123456', username: null, icon_emoji: null, reply_broadcast: null });
    expect(Object.keys(bot.body.secrets)).toEqual(['bot_token']);
    const hook = await create(BODIES.webhook!);
    expect(hook.body.config).toEqual({ url: 'https://hooks.example.com/herald' });
    // Optional fields that are not set are null, never omitted (docs/api.md).
    const plainMail = await create({
      ...BODIES.email!,
      config: { host: 'smtp.example.com', port: 25, security: 'none', from: 'a@example.com', to: ['b@example.com'] },
    });
    expect(plainMail.body.config).toEqual({
      host: 'smtp.example.com',
      port: 25,
      security: 'none',
      username: null,
      from: 'a@example.com',
      to: ['b@example.com'],
      cc: null,
    });
    expect(plainMail.body.secrets).toEqual({});
    expect(hook.body.secrets).toEqual({
      secret: { set: true, last4: expect.any(String) },
      'headers.Authorization': { set: true, last4: 'CRET' },
    });
  });

  it('returns a webhook signing secret once, in the create response only', async () => {
    const r = await create(BODIES.webhook!);
    expect(r.body.signing_secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    const secret: string = r.body.signing_secret;
    const got = await api('GET', `/v1/connections/${r.body.id}`);
    expect(got.body).not.toHaveProperty('signing_secret');
    expect(got.text).not.toContain(secret);
    const list = await api('GET', '/v1/connections?type=webhook');
    expect(list.text).not.toContain(secret);
    const patched = await api('PATCH', `/v1/connections/${r.body.id}`, { body: { name: 'renamed' } });
    expect(patched.text).not.toContain(secret);
    const other = await create(BODIES.slack!);
    expect(other.body).not.toHaveProperty('signing_secret');
  });

  it('answers 422 with one entry per bad field', async () => {
    const r = await create({
      type: 'email',
      extra: true,
      config: { host: 'smtp.example.com', port: 70000, security: 'ssl', from: 'x', to: ['ok@example.com', 'nope'] },
    });
    expect(r.status).toBe(422);
    expect(r.body.code).toBe('validation_failed');
    expect(r.body.errors.map((e: { field: string }) => e.field).sort()).toEqual([
      'config.from',
      'config.port',
      'config.security',
      'config.to.1',
      'extra',
      'name',
    ]);
    const slack = await create({
      name: 'x',
      type: 'slack',
      config: { webhook_url: SECRETS.slackWebhook, bot_token: SECRETS.slackBot },
    });
    expect(slack.status).toBe(422);
    expect(slack.body.errors[0].field).toBe('config.bot_token');
    const type = await create({ name: 'x', type: 'pagerduty', config: {} });
    expect(type.body.errors.map((e: { field: string }) => e.field)).toEqual(['type']);
  });

  it('refuses tokens, URLs and header values that could never be sent (422 with the field), on create and PATCH', async () => {
    // The README's own placeholder, pasted literally: "…" is not ASCII and never fits a header.
    const cases: [Record<string, unknown>, string][] = [
      [{ type: 'slack', config: { bot_token: 'xoxb-…', channel: 'C0123456' } }, 'config.bot_token'],
      [{ type: 'slack', config: { bot_token: 'xoxb-123-456-ab\u00a0cd', channel: 'C0123456' } }, 'config.bot_token'],
      [
        { type: 'telegram', config: { bot_token: '987654321:TELEGRAMSECRETTOKEN_abcdef…', chat_id: '-100123' } },
        'config.bot_token',
      ],
      [
        { type: 'discord', config: { webhook_url: 'https://discord.com/api/webhooks/112233/TOKEN…' } },
        'config.webhook_url',
      ],
      [
        {
          type: 'teams',
          config: {
            webhook_url: 'https://prod-07.westeurope.logic.azure.com/workflows/x/triggers/manual/paths/invoke?sig=a\tb',
          },
        },
        'config.webhook_url',
      ],
      [{ type: 'mattermost', config: { webhook_url: 'https://mm.example.com/hooks/ünïcode' } }, 'config.webhook_url'],
      [
        {
          type: 'webhook',
          config: { url: 'https://hooks.example.com/herald', headers: { Authorization: 'Bearer tok…' } },
        },
        'config.headers.Authorization',
      ],
      [
        { type: 'webhook', config: { url: 'https://hooks.example.com/herald', headers: { 'X-Token': 'a\u0007b' } } },
        'config.headers.X-Token',
      ],
    ];
    for (const [body, field] of cases) {
      const r = await create({ name: 'unsafe', ...body });
      expect(r.status, `${field}: ${JSON.stringify(body)}`).toBe(422);
      expect(r.body.errors.map((e: { field: string }) => e.field)).toContain(field);
    }
    // The same values through PATCH of a valid connection of each type.
    for (const [body, field] of cases) {
      const type = body.type as string;
      const valid = BODIES[type === 'slack' ? 'slack_bot' : type]!;
      const { body: c } = await create(valid);
      const r = await api('PATCH', `/v1/connections/${c.id}`, { body: { config: body.config } });
      expect(r.status, `PATCH ${field}`).toBe(422);
      expect(r.body.errors.map((e: { field: string }) => e.field)).toContain(field);
    }
  });

  it('refuses legacy Teams connector URLs, explaining why', async () => {
    const r = await create({
      name: 'old',
      type: 'teams',
      config: { webhook_url: 'https://contoso.webhook.office.com/webhookb2/abc@def/IncomingWebhook/123/456' },
    });
    expect(r.status).toBe(422);
    expect(r.body.code).toBe('legacy_webhook_not_supported');
    expect(r.body.errors[0].field).toBe('config.webhook_url');
    expect(r.body.detail).toMatch(/retired/);
    expect(r.body.detail).toMatch(/Workflows/);
  });

  it('checks the Discord URL shape, except for allow-listed hosts', async () => {
    const bad = await create({
      name: 'd',
      type: 'discord',
      config: { webhook_url: 'https://example.com/not-discord' },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.errors[0]).toMatchObject({ field: 'config.webhook_url', code: 'invalid_format' });
    const local = await create({ name: 'd', type: 'discord', config: { webhook_url: 'http://127.0.0.1:9/anything' } });
    expect(local.status).toBe(201);
  });

  it('refuses literal non-public destinations and plain http when not allow-listed', async () => {
    const cases: [Record<string, unknown>, string, string][] = [
      [{ type: 'webhook', config: { url: 'https://127.0.0.1:8443/hook' } }, 'config.url', 'destination_not_allowed'],
      [
        { type: 'mattermost', config: { webhook_url: 'https://10.0.0.1/hooks/x' } },
        'config.webhook_url',
        'destination_not_allowed',
      ],
      [
        { type: 'google_chat', config: { webhook_url: 'https://169.254.169.254/latest' } },
        'config.webhook_url',
        'destination_not_allowed',
      ],
      [
        { type: 'webhook', config: { url: 'https://[::ffff:127.0.0.1]/hook' } },
        'config.url',
        'destination_not_allowed',
      ],
      [{ type: 'webhook', config: { url: 'https://[fd00::1]/hook' } }, 'config.url', 'destination_not_allowed'],
      [{ type: 'webhook', config: { url: 'https://localhost/hook' } }, 'config.url', 'destination_not_allowed'],
      [
        {
          type: 'email',
          config: { host: '192.168.1.10', port: 25, security: 'none', from: 'a@example.com', to: ['b@example.com'] },
        },
        'config.host',
        'destination_not_allowed',
      ],
      [{ type: 'webhook', config: { url: 'http://hooks.example.com/plain' } }, 'config.url', 'https_required'],
    ];
    for (const [body, field, code] of cases) {
      const r = await create({ name: 'blocked', ...body }, strict);
      expect(r.status, JSON.stringify(body)).toBe(422);
      expect(r.body.code).toBe('destination_not_allowed');
      expect(r.body.errors[0]).toMatchObject({ field, code });
    }
    const mattermost = await create(
      { name: 'blocked', type: 'mattermost', config: { webhook_url: 'https://10.0.0.1/hooks/x' } },
      strict,
    );
    expect(mattermost.body.errors[0].message).toMatch(
      /^config\.webhook_url is not allowed: 10\.0\.0\.1 is a private address\. /,
    );
    // The same literal is fine where the operator allow-listed it, and names pass (checked at connect time).
    expect((await create({ name: 'ok', type: 'webhook', config: { url: 'http://127.0.0.1:8443/hook' } })).status).toBe(
      201,
    );
    expect(
      (await create({ name: 'ok', type: 'webhook', config: { url: 'https://internal.example/hook' } }, strict)).status,
    ).toBe(201);
  });

  it('needs connections:write to create and connections:read to read', async () => {
    const reader = await h.tokenWith(['connections:read']);
    const r = await api('POST', '/v1/connections', { body: BODIES.slack, token: reader });
    expect(r.status).toBe(403);
    expect(r.headers.get('www-authenticate')).toContain('scope="connections:write"');
    const none = await h.tokenWith(['incidents:read']);
    expect((await api('GET', '/v1/connections', { token: none })).status).toBe(403);
    expect((await api('GET', '/v1/connections', { token: reader })).status).toBe(200);
  });
});

describe('reading and listing', () => {
  it('gets one (404 for unknown or malformed ids) and lists with filters', async () => {
    const { body: c } = await create(BODIES.telegram!);
    const got = await api('GET', `/v1/connections/${c.id}`);
    expect(got.status).toBe(200);
    expect(got.headers.get('etag')).toBe('"r1"');
    expect(got.body).toEqual(c);
    expect((await api('GET', '/v1/connections/con_01J00000000000000000000000')).status).toBe(404);
    expect((await api('GET', '/v1/connections/nope')).status).toBe(404);

    await create({ ...BODIES.mattermost, name: 'off', enabled: false });
    const list = await api('GET', '/v1/connections?type=telegram,mattermost&limit=100');
    expect(list.status).toBe(200);
    expect(list.body.pagination).toEqual({ next_cursor: null, limit: 100 });
    expect(new Set(list.body.data.map((x: { type: string }) => x.type))).toEqual(new Set(['telegram', 'mattermost']));
    const off = await api('GET', '/v1/connections?enabled=false');
    expect(off.body.data.length).toBeGreaterThan(0);
    expect(off.body.data.every((x: { enabled: boolean }) => !x.enabled)).toBe(true);
    const bad = await api('GET', '/v1/connections?type=fax&enabled=maybe');
    expect(bad.status).toBe(422);
    expect(bad.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(['enabled', 'type.0']);
  });

  it('pages newest first', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await create({ ...BODIES.google_chat, name: `page ${i}` })).body.id);
    const p1 = await api('GET', '/v1/connections?type=google_chat&limit=2');
    const p2 = await api('GET', `/v1/connections?type=google_chat&limit=2&cursor=${p1.body.pagination.next_cursor}`);
    const all = [...p1.body.data, ...p2.body.data].map((x: { id: string }) => x.id);
    expect(all.slice(0, 3)).toEqual([...ids].reverse());
  });
});

describe('PATCH', () => {
  it('merges config: sent fields replace, others kept, null removes; secrets kept unless sent', async () => {
    const { body: c } = await create(BODIES.discord!);
    const r = await api('PATCH', `/v1/connections/${c.id}`, {
      body: { name: 'Discord #ops', config: { username: 'Status', thread_id: null }, rate_limit_per_minute: 20 },
    });
    expect(r.status).toBe(200);
    expect(r.headers.get('etag')).toBe('"r2"');
    expect(r.body).toMatchObject({ name: 'Discord #ops', rate_limit_per_minute: 20, config: { username: 'Status' } });
    // Removed, and shown as null like every optional field that is not set (never omitted).
    expect(r.body.config).toEqual({ username: 'Status', avatar_url: null, thread_id: null, forum: null });
    expect(r.body.secrets).toEqual(c.secrets);
    const noop = await api('PATCH', `/v1/connections/${c.id}`, { body: { name: 'Discord #ops' } });
    expect(noop.headers.get('etag')).toBe('"r2"');
    expect(noop.body.updated_at).toBe(r.body.updated_at);
    const unknown = await api('PATCH', `/v1/connections/${c.id}`, { body: { config: { colour: 'blue' } } });
    expect(unknown.status).toBe(422);
    expect(unknown.body.errors[0]).toMatchObject({ field: 'config.colour', code: 'unknown_field' });
    const empty = await api('PATCH', `/v1/connections/${c.id}`, { body: {} });
    expect(empty.status).toBe(422);
    // One answer names every bad field, the envelope's and the config's together.
    const both = await api('PATCH', `/v1/connections/${c.id}`, { body: { name: '', config: { username: 42 } } });
    expect(both.status).toBe(422);
    expect(both.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(['config.username', 'name']);
  });

  it('switches Slack modes when the other mode is nulled', async () => {
    const { body: c } = await create(BODIES.slack!);
    const r = await api('PATCH', `/v1/connections/${c.id}`, {
      body: { config: { webhook_url: null, bot_token: SECRETS.slackBot, channel: 'C999' } },
    });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body.secrets)).toEqual(['bot_token']);
    expect(r.body.config).toEqual({
      username: 'Herald',
      icon_emoji: ':rotating_light:',
      channel: 'C999',
      reply_broadcast: null,
    });
  });

  it('moving a destination to another host needs its secrets again (secret_required)', async () => {
    const { body: mail } = await create(BODIES.email!);
    const moved = await api('PATCH', `/v1/connections/${mail.id}`, {
      body: { config: { host: 'smtp.elsewhere.example' } },
    });
    expect(moved.status).toBe(422);
    expect(moved.body.code).toBe('secret_required');
    expect(moved.body.errors).toEqual([expect.objectContaining({ field: 'config.password', code: 'secret_required' })]);
    const withPw = await api('PATCH', `/v1/connections/${mail.id}`, {
      body: { config: { host: 'smtp.elsewhere.example', password: 'another-password' } },
    });
    expect(withPw.status).toBe(200);
    expect(withPw.body.secrets.password.last4).toBe('word');
    // Same host, another port: no secret needed.
    expect((await api('PATCH', `/v1/connections/${mail.id}`, { body: { config: { port: 2525 } } })).status).toBe(200);

    const { body: hook } = await create({
      ...BODIES.webhook,
      config: { url: 'https://a.example.com/h', headers: { 'X-One': 'one-value-123456', 'X-Two': 'two-value-123456' } },
    });
    const hookMoved = await api('PATCH', `/v1/connections/${hook.id}`, {
      body: { config: { url: 'https://b.example.com/h', headers: { 'X-One': 'new-one-value-1' } } },
    });
    expect(hookMoved.status).toBe(422);
    expect(hookMoved.body.errors.map((e: { field: string }) => e.field)).toEqual(['config.headers.X-Two']);
    // Dropping the header (null) instead of re-sending it is fine; the signing secret is kept.
    const ok = await api('PATCH', `/v1/connections/${hook.id}`, {
      body: { config: { url: 'https://b.example.com/h', headers: { 'X-One': 'new-one-value-1', 'X-Two': null } } },
    });
    expect(ok.status).toBe(200);
    expect(Object.keys(ok.body.secrets).sort()).toEqual(['headers.X-One', 'secret']);
    expect(ok.body.secrets.secret).toEqual(hook.secrets.secret);
  });

  it('applies the address policy to a changed destination', async () => {
    const { body: c } = await create(BODIES.mattermost!, strict);
    const r = await api(
      'PATCH',
      `/v1/connections/${c.id}`,
      { body: { config: { webhook_url: 'https://[::1]/hooks/x' } } },
      strict,
    );
    expect(r.status).toBe(422);
    expect(r.body.code).toBe('destination_not_allowed');
    expect(r.body.errors[0].field).toBe('config.webhook_url');
  });

  it('honours If-Match (412 when stale) and re-enabling resets health', async () => {
    const { body: c } = await create(BODIES.teams!);
    const stale = await api('PATCH', `/v1/connections/${c.id}`, {
      body: { enabled: false },
      headers: { 'If-Match': '"r7"' },
    });
    expect(stale.status).toBe(412);
    expect(stale.body.code).toBe('precondition_failed');
    const off = await api('PATCH', `/v1/connections/${c.id}`, {
      body: { enabled: false },
      headers: { 'If-Match': '"r1"' },
    });
    expect(off.status).toBe(200);
    await h.herald.services.connections.disable(c.id, 'HTTP 404 from the webhook URL');
    const disabled = await api('GET', `/v1/connections/${c.id}`);
    expect(disabled.body.health).toMatchObject({ state: 'disabled', disabled_reason: 'HTTP 404 from the webhook URL' });
    const on = await api('PATCH', `/v1/connections/${c.id}`, { body: { enabled: true } });
    expect(on.body.enabled).toBe(true);
    expect(on.body.health).toEqual({ state: 'ok', consecutive_failures: 0, last_error: null, disabled_reason: null });
  });
});

describe('DELETE', () => {
  it('answers 204, then 404; If-Match is honoured', async () => {
    const { body: c } = await create(BODIES.mattermost!);
    expect((await api('DELETE', `/v1/connections/${c.id}`, { headers: { 'If-Match': '"r9"' } })).status).toBe(412);
    const del = await api('DELETE', `/v1/connections/${c.id}`, { headers: { 'If-Match': '"r1"' } });
    expect(del.status).toBe(204);
    expect(del.text).toBe('');
    expect((await api('GET', `/v1/connections/${c.id}`)).status).toBe(404);
    expect((await api('DELETE', `/v1/connections/${c.id}`)).status).toBe(404);
  });

  it('answers 405 with Allow for other methods', async () => {
    const r = await api('PUT', '/v1/connections/con_01J00000000000000000000000', { body: {} });
    expect(r.status).toBe(405);
    expect(r.headers.get('allow')).toBe('GET, HEAD, PATCH, DELETE');
  });
});

describe('POST /connections/{id}/test', () => {
  it('answers needs_send_message for a type with no read-only check, and stores it', async () => {
    const { body: c } = await create(BODIES.teams!);
    const r = await api('POST', `/v1/connections/${c.id}/test`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      ok: false,
      status: 'needs_send_message',
      method: null,
      sent_message: false,
      http_status: null,
      provider_code: null,
      latency_ms: null,
    });
    expect(r.body.checked_at).toMatch(/Z$/);
    expect(r.body.detail).toMatch(/send_message/);
    const explicit = await api('POST', `/v1/connections/${c.id}/test`, { body: { send_message: false } });
    expect(explicit.body.status).toBe('needs_send_message');
    const got = await api('GET', `/v1/connections/${c.id}`);
    expect(got.body.last_test).toEqual(explicit.body);
  });

  it('answers blocked_by_policy when a destination is no longer allowed', async () => {
    const { body: c } = await create({ name: 'local', type: 'webhook', config: { url: 'http://127.0.0.1:9/hook' } });
    const r = await api('POST', `/v1/connections/${c.id}/test`, { body: { send_message: true } }, strict);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ ok: false, status: 'blocked_by_policy', sent_message: false });
    expect((await api('GET', `/v1/connections/${c.id}`)).body.last_test.status).toBe('blocked_by_policy');
  });

  it('validates the body strictly and 404s unknown connections first', async () => {
    const { body: c } = await create(BODIES.teams!);
    const bad = await api('POST', `/v1/connections/${c.id}/test`, { body: { send_message: 'yes', dry: 1 } });
    expect(bad.status).toBe(422);
    expect(bad.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(['dry', 'send_message']);
    expect(
      (await api('POST', '/v1/connections/con_01J00000000000000000000000/test', { body: { send_message: 'yes' } }))
        .status,
    ).toBe(404);
    const reader = await h.tokenWith(['connections:read']);
    expect((await api('POST', `/v1/connections/${c.id}/test`, { token: reader })).status).toBe(403);
  });
});

describe('secrets never leave', () => {
  it('no response body contained a configured secret', () => {
    expect(seen.length).toBeGreaterThan(40);
    const everything = seen.join('\n');
    for (const [name, value] of Object.entries(SECRETS)) expect(everything.includes(value), name).toBe(false);
    for (const fragment of [
      'SLACKSECRETPART1',
      'TEAMSSECRET',
      'DISCORDSECRETTOKEN',
      'GCHATSECRET',
      'MATTERMOSTSECRET',
      'TELEGRAMSECRETTOKEN',
      'WEBHOOKHEADERSECRET',
    ]) {
      expect(everything.includes(fragment), fragment).toBe(false);
    }
  });
});
