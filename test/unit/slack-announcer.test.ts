import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { Incident } from '../../src/domain/incident.js';
import type { Announcement } from '../../src/ports.js';
import { Announcer } from '../../src/slack/announcer.js';
import type { SlackDeps } from '../../src/slack/deps.js';
import { anIncident } from '../support/factories.js';

/** The announcer against in-memory fakes: coalescing, channel fallback, receipts following. */
function setup(opts: { failChannels?: string[] } = {}) {
  let incident: Incident = anIncident();
  const stored = new Map<string, Announcement>();
  const updates: any[] = [];
  const posts: any[] = [];
  let release: (() => void) | null = null;
  let gate = false;
  const client = {
    chat: {
      postMessage: (args: any) => {
        posts.push(args);
        if (opts.failChannels?.includes(args.channel)) return Promise.reject(Object.assign(new Error('An API error occurred: channel_not_found'), { data: { error: 'channel_not_found' } }));
        return Promise.resolve({ ok: true, channel: args.channel, ts: '1.000001' });
      },
      update: async (args: any) => {
        updates.push(args);
        if (gate) await new Promise<void>((r) => (release = r));
        return { ok: true };
      },
    },
  };
  const deps = {
    services: {
      incidents: { get: () => Promise.resolve(incident) },
      announcements: {
        find: (id: string) => Promise.resolve(stored.get(id) ?? null),
        remember: (id: string, channel: string, ts: string) => {
          if (stored.has(id)) return Promise.resolve(false);
          stored.set(id, { channel, ts, execution_id: null });
          return Promise.resolve(true);
        },
        refreshExclusively: (_id: string, _token: string, render: () => Promise<void>) => render(),
        trackExecution: (id: string, exe: string) => {
          const a = stored.get(id);
          if (!a) return Promise.resolve(null);
          if (a.execution_id === null || a.execution_id < exe) a.execution_id = exe;
          return Promise.resolve(a);
        },
      },
      executions: {
        get: (_i: string, exe: string) =>
          Promise.resolve({ id: exe, incident_id: 'inc_1', status: 'in_progress', variables: {}, created_at: '', completed_at: null, deliveries: [{ id: 'dlv_1', connection_id: 'con_1', connection_type: 'webhook', template_id: null, template_version: null, status: 'delivered', attempts: [], possible_duplicate: false, delivered_at: null }] }),
      },
      connections: { get: () => Promise.resolve({ name: 'Hook' }) },
    },
    settings: { admins: [], defaultChannel: 'CDEFAULT' },
    client,
    log: pino({ level: 'silent' }),
    now: () => new Date(),
  } as unknown as SlackDeps;
  return {
    announcer: new Announcer(deps),
    updates,
    posts,
    stored,
    setIncident: (patch: Partial<Incident>) => (incident = { ...incident, ...patch }),
    hold: () => (gate = true),
    letGo: () => {
      gate = false;
      release?.();
    },
  };
}

describe('Announcer', () => {
  it('announces in the first channel that takes the message and remembers it', async () => {
    const t = setup({ failChannels: ['CPRIVATE'] });
    await t.announcer.announce('inc_1', ['CPRIVATE', null, 'CDEFAULT', 'UALICE']);
    expect(t.posts.map((p) => p.channel)).toEqual(['CPRIVATE', 'CDEFAULT']);
    expect(t.stored.get('inc_1')).toEqual({ channel: 'CDEFAULT', ts: '1.000001', execution_id: null });
    await t.announcer.idle();
  });

  it('announces API-made incidents in the default channel, and leaves Slack-made ones to the listener', async () => {
    const t = setup();
    t.announcer.incidentChanged({ id: 'inc_1', created_by: { type: 'slack_user', id: 'U', name: 'u' } } as Incident, 'created');
    await new Promise((r) => setImmediate(r));
    expect(t.posts).toHaveLength(0);
    t.announcer.incidentChanged({ id: 'inc_1', created_by: { type: 'api_key', id: 'k', name: 'k' } } as Incident, 'created');
    await waitUntil(() => t.posts.length === 1);
    expect(t.posts[0].channel).toBe('CDEFAULT');
  });

  it('coalesces a burst of changes into one more update that shows the latest state', async () => {
    const t = setup();
    await t.announcer.announce('inc_1', ['C1']);
    await t.announcer.idle();
    t.updates.length = 0;
    t.hold();
    t.announcer.refresh('inc_1');
    await waitUntil(() => t.updates.length === 1);
    for (const s of ['identified', 'monitoring', 'resolved'] as const) {
      t.setIncident({ status: s });
      t.announcer.refresh('inc_1');
    }
    t.letGo();
    await t.announcer.idle();
    expect(t.updates).toHaveLength(2);
    expect(JSON.stringify(t.updates[1].blocks)).toContain('Resolved');
  });

  it('shows the receipts of the newest execution after a delivery change', async () => {
    const t = setup();
    await t.announcer.announce('inc_1', ['C1']);
    await t.announcer.idle();
    t.announcer.deliveryChanged({ incident_id: 'inc_1', execution_id: 'exe_2' });
    await waitUntil(() => t.updates.some((u) => JSON.stringify(u.blocks).includes('exe_2')));
    await t.announcer.idle();
    expect(JSON.stringify(t.updates.at(-1).blocks)).toMatch(/delivered — \*Hook\* \(webhook\)/);
  });
});

async function waitUntil(check: () => boolean): Promise<void> {
  const deadline = Date.now() + 2000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met');
    await new Promise((r) => setTimeout(r, 5));
  }
}
