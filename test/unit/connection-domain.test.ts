import { describe, expect, expectTypeOf, it } from 'vitest';
import { OutboundAllow, parseOutboundAllow } from '../../src/domain/connection/address-policy.js';
import { CHANNEL_TYPES } from '../../src/channels/index.js';
import {
  changedDestinations,
  checkConfigRules,
  completeConfig,
  configShapeErrors,
  HEALTHY,
  joinSecrets,
  lastFour,
  mergeConfig,
  missingSecrets,
  newConnectionRecord,
  nextHealth,
  disabledHealth,
  parseConnectionCreate,
  signingSecretOf,
  splitSecrets,
  type DeliveryConnection,
} from '../../src/domain/connection/connection.js';
import { CHANNELS } from '../../src/channels/index.js';
import { presentConnection } from '../../src/http/presenters/connection.js';
import { DomainError } from '../../src/domain/common/errors.js';
import { domainErrorOf } from '../support/domain-error.js';

const none = OutboundAllow.none;
const local = parseOutboundAllow(['127.0.0.1/32']);

const errorOf = domainErrorOf;

const VALID: Record<(typeof CHANNEL_TYPES)[number], Record<string, unknown>> = {
  slack: { webhook_url: 'https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX' },
  teams: {
    webhook_url: 'https://prod-01.westeurope.logic.azure.com/workflows/abc/triggers/manual/paths/invoke?sig=xyz',
  },
  discord: { webhook_url: 'https://discord.com/api/webhooks/123456789/abcDEF_-token' },
  email: {
    host: 'smtp.example.com',
    port: 587,
    security: 'starttls',
    username: 'u',
    password: 'pass-word-123',
    from: 'Herald <alerts@example.com>',
    to: ['ops@example.com'],
  },
  mattermost: { webhook_url: 'https://mm.example.com/hooks/xyz', channel: 'town-square' },
  google_chat: { webhook_url: 'https://chat.googleapis.com/v1/spaces/AAA/messages?key=k&token=t', thread_key: 'inc' },
  telegram: { bot_token: '123456:ABCdefGhIJKlmnOPQrstUVwxyz012345', chat_id: -1001234567890 },
  webhook: { url: 'https://example.com/hook', headers: { 'X-Api-Key': 'key-abcdefghijkl' } },
  status_page: { title: 'Example status', public_url: 'https://status.example.com' },
};

describe('the type registry', () => {
  it('has one definition per channel type', () => {
    expect(Object.keys(CHANNELS).sort()).toEqual([...CHANNEL_TYPES].sort());
    for (const t of CHANNEL_TYPES) expect(CHANNELS[t].type).toBe(t);
  });

  it.each(CHANNEL_TYPES)('accepts a valid %s config and passes the rules', (type) => {
    const draft = parseConnectionCreate({ name: `my ${type}`, type, config: VALID[type] });
    expect(draft).toMatchObject({ type, enabled: true, rate_limit_per_minute: null });
    const config = completeConfig(type, draft.config, (n) => Buffer.alloc(n, 7));
    expect(configShapeErrors(type, config)).toEqual([]);
    expect(() => checkConfigRules(type, config, none)).not.toThrow();
  });

  it('types the delivery view per channel type', () => {
    const c = {} as DeliveryConnection;
    if (c.type === 'email') expectTypeOf(c.config.to).toEqualTypeOf<string[]>();
    if (c.type === 'telegram') expectTypeOf(c.config.parse_mode).toEqualTypeOf<'HTML' | 'MarkdownV2' | undefined>();
  });
});

describe('create validation', () => {
  it('reports every bad field at once, config fields under config.', () => {
    const e = errorOf(() =>
      parseConnectionCreate({
        type: 'email',
        colour: 'red',
        config: { host: 'bad host!', port: 0, security: 'ssl', from: 'nope', to: [], extra: 1 },
      }),
    );
    expect(e.code).toBe('validation_failed');
    const fields = e.errors.map((x) => x.field).sort();
    expect(fields).toEqual([
      'colour',
      'config.extra',
      'config.from',
      'config.host',
      'config.port',
      'config.security',
      'config.to',
      'name',
    ]);
  });

  it('validates e-mail recipients one by one', () => {
    const e = errorOf(() =>
      parseConnectionCreate({
        name: 'm',
        type: 'email',
        config: { ...VALID.email, to: ['ok@example.com', 'not-an-address'], cc: ['x'] },
      }),
    );
    expect(e.errors.map((x) => x.field).sort()).toEqual(['config.cc.0', 'config.to.1']);
  });

  it('needs a known type and an object config', () => {
    const e = errorOf(() => parseConnectionCreate({ name: 'x', type: 'pager', config: [] }));
    expect(e.errors.map((x) => x.field).sort()).toEqual(['config', 'type']);
  });

  it('slack: exactly one mode; bot mode needs a channel', () => {
    const both = errorOf(() =>
      parseConnectionCreate({
        name: 's',
        type: 'slack',
        config: { webhook_url: 'https://hooks.slack.com/x', bot_token: 'xoxb-1-2-3' },
      }),
    );
    expect(both.errors.map((x) => x.field)).toEqual(['config.bot_token']);
    const neither = errorOf(() => parseConnectionCreate({ name: 's', type: 'slack', config: { username: 'herald' } }));
    expect(neither.errors.map((x) => x.field)).toEqual(['config.webhook_url']);
    const noChannel = errorOf(() =>
      parseConnectionCreate({ name: 's', type: 'slack', config: { bot_token: 'xoxb-1-2-3' } }),
    );
    expect(noChannel.errors).toEqual([expect.objectContaining({ field: 'config.channel', code: 'required' })]);
    expect(
      parseConnectionCreate({ name: 's', type: 'slack', config: { bot_token: 'xoxb-1-2-3', channel: 'C0123' } }).config,
    ).toMatchObject({ channel: 'C0123' });
  });

  it('telegram: parse_mode is HTML or MarkdownV2; chat_id a number or @name', () => {
    const e = errorOf(() =>
      parseConnectionCreate({
        name: 't',
        type: 'telegram',
        config: { ...VALID.telegram, parse_mode: 'Markdown', chat_id: 'general' },
      }),
    );
    expect(e.errors.map((x) => x.field).sort()).toEqual(['config.chat_id', 'config.parse_mode']);
  });

  it('webhook: reserved or malformed header names and bad secrets are refused', () => {
    const e = errorOf(() =>
      parseConnectionCreate({
        name: 'w',
        type: 'webhook',
        config: {
          url: 'https://example.com',
          secret: 'plain',
          headers: { 'Webhook-Signature': 'x', 'Bad Name': 'y', Host: 'z' },
        },
      }),
    );
    expect(e.errors.map((x) => x.field).sort()).toEqual([
      'config.headers.Bad Name',
      'config.headers.Host',
      'config.headers.Webhook-Signature',
      'config.secret',
    ]);
  });
});

describe('type rules and the address policy', () => {
  it('teams: legacy Office 365 connector URLs are refused with an explanation', () => {
    for (const url of ['https://contoso.webhook.office.com/webhookb2/abc', 'https://outlook.office.com/webhook/abc']) {
      const e = errorOf(() => checkConfigRules('teams', { webhook_url: url }, none));
      expect(e.code).toBe('legacy_webhook_not_supported');
      expect(e.errors[0]?.field).toBe('config.webhook_url');
      expect(e.message).toMatch(/retired/);
      expect(e.message).toMatch(/Workflows/);
    }
  });

  it('discord: the URL must be a Discord webhook, unless its host is allow-listed', () => {
    const e = errorOf(() => checkConfigRules('discord', { webhook_url: 'https://example.com/api/webhooks/1/x' }, none));
    expect(e.code).toBe('validation_failed');
    expect(e.errors[0]).toMatchObject({ field: 'config.webhook_url', code: 'invalid_format' });
    expect(() =>
      checkConfigRules('discord', { webhook_url: 'https://discordapp.com/api/v10/webhooks/1/tok' }, none),
    ).not.toThrow();
    expect(() => checkConfigRules('discord', { webhook_url: 'http://127.0.0.1:9999/anything' }, local)).not.toThrow();
  });

  it('refuses literal non-public destinations and plain http, unless allowed', () => {
    const loop = errorOf(() => checkConfigRules('mattermost', { webhook_url: 'https://127.0.0.1/hooks/x' }, none));
    expect(loop.code).toBe('destination_not_allowed');
    expect(loop.errors[0]).toMatchObject({ field: 'config.webhook_url', code: 'destination_not_allowed' });
    expect(
      errorOf(() => checkConfigRules('webhook', { url: 'https://[::ffff:7f00:1]/x', secret: 'whsec_x' }, none)).code,
    ).toBe('destination_not_allowed');
    expect(
      errorOf(() => checkConfigRules('webhook', { url: 'https://169.254.169.254/latest/meta-data', secret: 's' }, none))
        .code,
    ).toBe('destination_not_allowed');
    const http = errorOf(() => checkConfigRules('google_chat', { webhook_url: 'http://chat.example.com/x' }, none));
    expect(http.errors[0]).toMatchObject({ field: 'config.webhook_url', code: 'https_required' });
    expect(errorOf(() => checkConfigRules('email', { ...VALID.email, host: '10.0.0.5' }, none)).errors[0]?.field).toBe(
      'config.host',
    );
    expect(() => checkConfigRules('mattermost', { webhook_url: 'http://127.0.0.1:8080/hooks/x' }, local)).not.toThrow();
    // Names are judged at connect time, not here.
    expect(() => checkConfigRules('webhook', { url: 'https://internal.corp/x', secret: 's' }, none)).not.toThrow();
  });
});

describe('secrets', () => {
  it('splits secrets (header values as headers.<Name>) and joins them back', () => {
    const config = {
      url: 'https://example.com/h',
      secret: 'whsec_abc',
      headers: { 'X-Api-Key': 'k1', Authorization: 'Bearer t' },
    };
    const { plain, secrets } = splitSecrets('webhook', config);
    expect(plain).toEqual({ url: 'https://example.com/h' });
    expect(secrets).toEqual({ secret: 'whsec_abc', 'headers.X-Api-Key': 'k1', 'headers.Authorization': 'Bearer t' });
    expect(joinSecrets('webhook', plain, secrets)).toEqual(config);
  });

  it('generates a whsec_ signing secret when none is given, and keeps a given one', () => {
    const generated = completeConfig('webhook', { url: 'https://example.com' }, (n) => Buffer.alloc(n, 1));
    expect(generated.secret).toBe(`whsec_${Buffer.alloc(24, 1).toString('base64')}`);
    expect(signingSecretOf('webhook', generated)).toBe(generated.secret);
    const given = `whsec_${Buffer.alloc(32, 2).toString('base64')}`;
    expect(completeConfig('webhook', { url: 'https://example.com', secret: given }, () => Buffer.alloc(0)).secret).toBe(
      given,
    );
    expect(signingSecretOf('slack', VALID.slack)).toBeNull();
  });

  it('shows last4 only of long enough secrets', () => {
    expect(lastFour('xoxb-123456789-abcd')).toBe('abcd');
    expect(lastFour('short')).toBeNull();
  });

  it('presents secrets as {set, last4} and never a sealed value', () => {
    const record = newConnectionRecord(
      'con_01J00000000000000000000000',
      { name: 'x', type: 'slack', enabled: true, rate_limit_per_minute: null, update_mode: 'thread' },
      { username: 'herald' },
      { webhook_url: { sealed: 'v1.SEALED', last4: 'XXXX' } },
      '2026-01-01T00:00:00.000Z',
    );
    const wire = presentConnection(record);
    expect(wire.secrets).toEqual({ webhook_url: { set: true, last4: 'XXXX' } });
    expect(JSON.stringify(wire)).not.toContain('SEALED');
    expect(wire).not.toHaveProperty('rev');
    expect(wire.health).toEqual(HEALTHY);
  });
});

describe('PATCH: merge and secret_required', () => {
  it('merges: sent fields replace, others kept, null removes; headers merge per name', () => {
    const before = { url: 'https://a.example/h', secret: 's', headers: { 'X-One': '1', 'X-Two': '2' } };
    const after = mergeConfig('webhook', before, { headers: { 'x-one': 'uno', 'X-Two': null, 'X-Three': '3' } });
    expect(after).toEqual({ url: 'https://a.example/h', secret: 's', headers: { 'x-one': 'uno', 'X-Three': '3' } });
    expect(mergeConfig('email', VALID.email, { password: null, username: null })).not.toHaveProperty('password');
  });

  it('moving a destination host needs every secret sent there, one entry each', () => {
    const before = { url: 'https://a.example/h', secret: 's', headers: { 'X-One': '1', 'X-Two': '2' } };
    const patch = { url: 'https://b.example/h', headers: { 'X-One': 'new' } };
    const after = mergeConfig('webhook', before, patch);
    expect(missingSecrets('webhook', before, after, patch)).toEqual([
      expect.objectContaining({ field: 'config.headers.X-Two', code: 'secret_required' }),
    ]);
    // Same host, other path: nothing needed.
    const samePatch = { url: 'https://a.example/other' };
    expect(missingSecrets('webhook', before, mergeConfig('webhook', before, samePatch), samePatch)).toEqual([]);
  });

  it('e-mail: a new host needs the password again; a webhook URL is its own secret', () => {
    const patch = { host: 'smtp.other.example' };
    const after = mergeConfig('email', VALID.email, patch);
    expect(missingSecrets('email', VALID.email, after, patch).map((e) => e.field)).toEqual(['config.password']);
    const withPw = { host: 'smtp.other.example', password: 'new-password-1' };
    expect(missingSecrets('email', VALID.email, mergeConfig('email', VALID.email, withPw), withPw)).toEqual([]);
    const slackPatch = { webhook_url: 'https://hooks.other.example/x' };
    expect(missingSecrets('slack', VALID.slack, mergeConfig('slack', VALID.slack, slackPatch), slackPatch)).toEqual([]);
  });

  it('only changed destinations are re-judged by the policy', () => {
    const changed = changedDestinations('webhook', { url: 'http://127.0.0.1/x', secret: 's' });
    expect(() => checkConfigRules('webhook', { url: 'http://127.0.0.1/x', secret: 's' }, none, changed)).not.toThrow();
    expect(() => checkConfigRules('webhook', { url: 'http://127.0.0.1/y', secret: 's' }, none, changed)).toThrow(
      DomainError,
    );
  });
});

describe('health', () => {
  it('counts failures, degrades, recovers, and stays disabled until re-enabled', () => {
    const h1 = nextHealth(HEALTHY, { ok: false, error: 'HTTP 500' });
    expect(h1).toEqual({ state: 'degraded', consecutive_failures: 1, last_error: 'HTTP 500', disabled_reason: null });
    const h2 = nextHealth(h1, { ok: true });
    expect(h2).toMatchObject({ state: 'ok', consecutive_failures: 0, last_error: 'HTTP 500' });
    const off = disabledHealth(h2, 'HTTP 404: webhook deleted');
    expect(off).toMatchObject({ state: 'disabled', disabled_reason: 'HTTP 404: webhook deleted' });
    expect(nextHealth(off, { ok: true }).state).toBe('disabled');
  });
});
