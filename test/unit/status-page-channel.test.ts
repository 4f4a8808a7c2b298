import { describe, expect, it } from 'vitest';
import { statusPageChannel } from '../../src/channels/status-page/index.js';
import { createStatusPageSender, incidentPermalink } from '../../src/channels/status-page/send.js';
import type {
  EditPublishedRequest,
  OutboundMessage,
  PublishRequest,
  RemovePublishedRequest,
  StatusPagePort,
} from '../../src/contracts/channel.js';
import { publicStatusOf } from '../../src/contracts/channel.js';
import { PUBLIC_STATES } from '../../src/domain/status/public.js';
import { PUBLIC_STATUSES } from '../../src/contracts/channel.js';
import { configShapeErrors } from '../../src/domain/connection/connection.js';
import { defaultMessageSource, publicMessageSource } from '../../src/domain/template/render.js';
import { builtInSource, targetConnections } from '../../src/services/execution-plan.js';

/** The status_page connection type: its config rules and what its sender asks of the store. */
const BASE = { title: 'Example status', public_url: 'https://status.example.com' };
const parse = (config: Record<string, unknown>) => statusPageChannel.configSchema.safeParse({ ...BASE, ...config });
const errorsOf = (config: Record<string, unknown>) =>
  configShapeErrors('status_page', { ...BASE, ...config }).map((e) => e.field);

describe('status_page config', () => {
  it('fills the defaults and keeps no trailing slash on public_url', () => {
    const r = statusPageChannel.configSchema.parse({ ...BASE, public_url: 'https://status.example.com/status///' });
    expect(r).toEqual({
      title: 'Example status',
      public_url: 'https://status.example.com/status',
      logo_url: null,
      time_zone: 'UTC',
      locale: 'en',
      support_url: null,
      frame_ancestors: [],
      subscriber_templates: null,
    });
  });

  it('requires title and public_url', () => {
    expect(
      configShapeErrors('status_page', {})
        .map((e) => e.field)
        .sort(),
    ).toEqual(['config.public_url', 'config.title']);
    expect(errorsOf({ title: '   ' })).toEqual(['config.title']);
  });

  it('validates the time zone with Intl and keeps its canonical name', () => {
    expect(parse({ time_zone: 'Europe/Berlin' }).data?.time_zone).toBe('Europe/Berlin');
    expect(parse({ time_zone: 'utc' }).data?.time_zone).toBe('UTC');
    for (const bad of ['Mars/Olympus', 'Europe/Berlin; drop', ''])
      expect(errorsOf({ time_zone: bad }), bad).toEqual(['config.time_zone']);
  });

  it('takes only the supported locales', () => {
    expect(parse({ locale: 'de' }).success).toBe(true);
    expect(errorsOf({ locale: 'fr' })).toEqual(['config.locale']);
    expect(errorsOf({ locale: 'EN' })).toEqual(['config.locale']);
  });

  it('checks the URLs: public_url http(s) without query, logo https, support any http(s) or null', () => {
    expect(errorsOf({ public_url: 'ftp://status.example.com' })).toEqual(['config.public_url']);
    expect(errorsOf({ public_url: 'https://status.example.com/?x=1' })).toEqual(['config.public_url']);
    expect(errorsOf({ public_url: 'not a url' })).toEqual(['config.public_url']);
    expect(errorsOf({ logo_url: 'http://cdn.example.com/logo.png' })).toEqual(['config.logo_url']);
    expect(errorsOf({ logo_url: 'https://cdn.example.com/logo.png' })).toEqual([]);
    expect(errorsOf({ logo_url: null, support_url: null })).toEqual([]);
    expect(errorsOf({ support_url: 'javascript:alert(1)' })).toEqual(['config.support_url']);
  });

  it('frame_ancestors are bare origins', () => {
    expect(parse({ frame_ancestors: ['https://www.example.com', 'https://app.example.com:8443'] }).success).toBe(true);
    expect(errorsOf({ frame_ancestors: ['https://www.example.com/embed'] })).toEqual(['config.frame_ancestors.0']);
    expect(new Set(errorsOf({ frame_ancestors: ["'self'"] }))).toEqual(new Set(['config.frame_ancestors.0']));
  });

  it('refuses unknown fields, holds no secrets and sends nowhere', () => {
    expect(errorsOf({ colour: 'red' }).length).toBeGreaterThan(0);
    expect(statusPageChannel.secretFields).toEqual([]);
    expect(statusPageChannel.destinations(statusPageChannel.configSchema.parse(BASE))).toEqual([]);
    expect(statusPageChannel.readOnlyCheck(statusPageChannel.configSchema.parse(BASE))).toBeNull();
    expect(statusPageChannel.publishesPublicly).toBe(true);
  });
});

describe('public states', () => {
  it('the contract’s list is the snapshot’s', () => {
    expect([...PUBLIC_STATUSES]).toEqual([...PUBLIC_STATES]);
  });

  it('maps the incident status, closed showing resolved', () => {
    expect(['investigating', 'identified', 'monitoring', 'resolved', 'closed'].map(publicStatusOf)).toEqual([
      'investigating',
      'identified',
      'monitoring',
      'resolved',
      'resolved',
    ]);
  });
});

describe('status_page sender', () => {
  const config = statusPageChannel.configSchema.parse(BASE);
  const calls: unknown[] = [];
  const port: StatusPagePort = {
    publish: (p: PublishRequest) => {
      calls.push(['publish', p]);
      return Promise.resolve({ id: p.deliveryId, channel: p.incident.id, permalink: null });
    },
    edit: (p: EditPublishedRequest) => {
      calls.push(['edit', p]);
      return Promise.resolve(
        p.updateId === 'gone' ? null : { id: p.updateId, channel: p.incident.id, permalink: null },
      );
    },
    remove: (p: RemovePublishedRequest) => {
      calls.push(['remove', p]);
      return Promise.resolve();
    },
  };
  const message = (over: Partial<OutboundMessage> = {}): OutboundMessage => ({
    deliveryId: 'dlv_1',
    executionId: 'exe_1',
    incident: { id: 'inc_1', title: 'Checkout', severity: 'major', status: 'monitoring', url: null },
    content: { subject: 'Subject', body: 'Body' },
    ...over,
  });

  it('publishes with the message’s public state, else the incident’s, and links the incident page', async () => {
    calls.length = 0;
    const s = createStatusPageSender({ statusPage: port });
    const r = await s.send({ config }, message());
    expect(r).toMatchObject({
      outcome: 'delivered',
      message: { id: 'dlv_1', channel: 'inc_1', permalink: 'https://status.example.com/incidents/inc_1' },
    });
    expect(incidentPermalink(config, 'inc_1')).toBe('https://status.example.com/incidents/inc_1');
    await s.send({ config }, message({ publicStatus: 'resolved' }));
    expect(calls.map((c) => (c as [string, PublishRequest])[1].status)).toEqual(['monitoring', 'resolved']);
  });

  it('edits and removes the target update; an edit of a retracted one fails for good', async () => {
    calls.length = 0;
    const s = createStatusPageSender({ statusPage: port });
    const target = { id: 'dlv_0', channel: 'inc_1', permalink: null };
    expect(await s.send({ config }, message({ action: 'edit', target }))).toMatchObject({ outcome: 'delivered' });
    expect(await s.send({ config }, message({ action: 'delete', target }))).toMatchObject({
      outcome: 'delivered',
      message: null,
    });
    expect(calls.map((c) => (c as [string])[0])).toEqual(['edit', 'remove']);
    // A correction keeps the state of what it corrects; an execute in update mode `edit` moves it.
    expect((calls[0] as [string, EditPublishedRequest])[1].status).toBeUndefined();
    calls.length = 0;
    const conversation = {
      sequence: 2,
      previousDeliveryId: 'dlv_0',
      kind: 'announcement' as const,
      targetDeliveryId: null,
      threaded: true,
    };
    await s.send({ config }, message({ action: 'edit', target, publicStatus: 'resolved', conversation }));
    expect((calls[0] as [string, EditPublishedRequest])[1].status).toBe('resolved');
    expect(await s.send({ config }, message({ action: 'edit', target: { ...target, id: 'gone' } }))).toMatchObject({
      outcome: 'permanent',
    });
  });

  it('never publishes a test message, fails for good without a store, retries when the store fails', async () => {
    calls.length = 0;
    expect(await createStatusPageSender({ statusPage: port }).send({ config }, message({ test: true }))).toMatchObject({
      outcome: 'permanent',
    });
    expect(calls).toEqual([]);
    expect(await createStatusPageSender({}).send({ config }, message())).toMatchObject({ outcome: 'permanent' });
    const failing: StatusPagePort = { ...port, publish: () => Promise.reject(new Error('READONLY')) };
    expect(await createStatusPageSender({ statusPage: failing }).send({ config }, message())).toMatchObject({
      outcome: 'retryable',
      ambiguous: false,
    });
  });
});

describe('what an execute sends to the page', () => {
  const conn = (id: string, type: 'webhook' | 'status_page', enabled = true) => ({ id, type, enabled, config: {} });

  it('never as part of "every enabled connection"; only when named', () => {
    const all = [conn('con_hook', 'webhook'), conn('con_page', 'status_page')];
    expect(targetConnections(all, undefined).map((c) => c.id)).toEqual(['con_hook']);
    expect(targetConnections(all, ['con_page']).map((c) => c.id)).toEqual(['con_page']);
    expect(() => targetConnections([conn('con_page', 'status_page')], undefined)).toThrow(/no enabled connection/);
  });

  it('its built-in message is the public one', () => {
    expect(builtInSource('status_page')).toEqual(publicMessageSource());
    expect(builtInSource('webhook')).toEqual(defaultMessageSource());
    expect(JSON.stringify(publicMessageSource())).not.toMatch(/severity|description|variable|incident\.url/);
  });
});
