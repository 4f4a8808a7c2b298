import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Incident } from '../../src/domain/incident/incident.js';
import type { Announcement } from '../../src/ports/index.js';
import { Announcer, type AnnouncerPacing } from '../../src/slack/announcer.js';
import type { SlackDeps } from '../../src/slack/deps.js';
import { anIncident } from '../support/factories.js';
import { noPacing } from '../service/fakes.js';

/** The announcer against in-memory fakes: coalescing, channel fallback, receipts following. */
function setup(opts: { failChannels?: string[]; pacing?: Partial<AnnouncerPacing> } = {}) {
  let incident: Incident = anIncident();
  const stored = new Map<string, Announcement>();
  const updates: any[] = [];
  const posts: any[] = [];
  let release: (() => void) | null = null;
  let inFlight = 0;
  let maxInFlight = 0;
  let gate = false;
  const client = {
    chat: {
      postMessage: (args: any) => {
        posts.push({ ...args, at: Date.now() });
        if (opts.failChannels?.includes(args.channel))
          return Promise.reject(
            Object.assign(new Error('An API error occurred: channel_not_found'), {
              data: { error: 'channel_not_found' },
            }),
          );
        return Promise.resolve({ ok: true, channel: args.channel, ts: '1.000001' });
      },
      update: async (args: any) => {
        updates.push({ ...args, at: Date.now() });
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        if (gate) await new Promise<void>((r) => (release = r));
        inFlight--;
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
          Promise.resolve({
            execution: {
              id: exe,
              incident_id: 'inc_1',
              variables: {},
              created_at: '',
              template_versions: {},
              delivery_ids: ['dlv_1'],
            },
            deliveries: [
              {
                id: 'dlv_1',
                connection_id: 'con_1',
                connection_type: 'webhook',
                template_id: null,
                template_version: null,
                status: 'delivered',
                attempts: [],
                possible_duplicate: false,
                delivered_at: null,
              },
            ],
          }),
      },
      connections: { get: () => Promise.resolve({ name: 'Hook' }) },
    },
    settings: { admins: [], defaultChannel: 'CDEFAULT' },
    client,
    log: pino({ level: 'silent' }),
    now: () => new Date(),
  } as unknown as SlackDeps;
  return {
    announcer: new Announcer(deps, { pacer: noPacing, ...opts.pacing }),
    maxInFlight: () => maxInFlight,
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
    t.announcer.incidentChanged(
      { id: 'inc_1', created_by: { type: 'slack_user', id: 'U', name: 'u' } } as Incident,
      'created',
    );
    await new Promise((r) => setImmediate(r));
    expect(t.posts).toHaveLength(0);
    t.announcer.incidentChanged(
      { id: 'inc_1', created_by: { type: 'api_key', id: 'k', name: 'k' } } as Incident,
      'created',
    );
    await waitUntil(() => t.posts.length === 1);
    expect(t.posts[0].channel).toBe('CDEFAULT');
  });

  it('coalesces a burst of changes into one more update that shows the latest state', async () => {
    // Pacing is tested on its own below (virtual time).
    const t = setup({ pacing: { updateIntervalMs: 1, postIntervalMs: 1 } });
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
    const t = setup({ pacing: { updateIntervalMs: 1, postIntervalMs: 1 } });
    await t.announcer.announce('inc_1', ['C1']);
    await t.announcer.idle();
    t.announcer.deliveryChanged({ incident_id: 'inc_1', execution_id: 'exe_2' });
    await waitUntil(() => t.updates.some((u) => JSON.stringify(u.blocks).includes('exe_2')));
    await t.announcer.idle();
    expect(JSON.stringify(t.updates.at(-1).blocks)).toMatch(/delivered — \*Hook\* \(webhook\)/);
  });
});

describe('Announcer pacing (virtual time)', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('posts to one channel at most once a second, queueing every post (none dropped)', async () => {
    vi.useFakeTimers();
    const t = setup();
    const ids = ['inc_1', 'inc_2', 'inc_3', 'inc_4', 'inc_5'];
    const all = Promise.all(ids.map((id) => t.announcer.announce(id, ['CBUSY'])));
    // Another channel is not held up by the busy one.
    const other = t.announcer.announce('inc_9', ['COTHER']);
    await vi.advanceTimersByTimeAsync(10);
    expect(t.posts.filter((p) => p.channel === 'CBUSY')).toHaveLength(1);
    expect(t.posts.filter((p) => p.channel === 'COTHER')).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(5_000);
    await all;
    await other;
    const busy = t.posts.filter((p) => p.channel === 'CBUSY');
    expect(busy).toHaveLength(5);
    for (let i = 1; i < busy.length; i++) expect(busy[i].at - busy[i - 1].at).toBeGreaterThanOrEqual(1000);
  });

  it('updates one announcement at most once every two seconds, one at a time, ending on the latest state', async () => {
    vi.useFakeTimers();
    const t = setup();
    const announced = t.announcer.announce('inc_1', ['C1']);
    await vi.advanceTimersByTimeAsync(10);
    await announced;
    // 232 changes over a minute (the receipts storm): one every ~260 ms.
    const statuses = ['identified', 'monitoring', 'resolved', 'investigating'] as const;
    for (let n = 0; n < 232; n++) {
      t.setIncident({ status: statuses[n % statuses.length], impact: `change ${n}` });
      t.announcer.refresh('inc_1');
      await vi.advanceTimersByTimeAsync(260);
    }
    await vi.advanceTimersByTimeAsync(5_000);
    await t.announcer.idle();
    const gaps = t.updates.slice(1).map((u, i) => u.at - t.updates[i].at);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(2000);
    expect(t.updates.length).toBeLessThanOrEqual(1 + Math.ceil((232 * 260) / 2000) + 1);
    expect(t.maxInFlight()).toBe(1);
    expect(JSON.stringify(t.updates.at(-1).blocks)).toContain('change 231');
  });

  it('shares its slots through a pacer when one is given', async () => {
    vi.useFakeTimers();
    const asked: string[] = [];
    const pacer = {
      reserve: (key: string) => {
        asked.push(key);
        const posts = asked.filter((k) => k.startsWith('slack-channel.')).length;
        return Promise.resolve(key.startsWith('slack-channel.') && posts > 1 ? 1500 : 0);
      },
      take: () => Promise.resolve(0),
      reset: () => Promise.resolve(),
    };
    const t = setup({ pacing: { pacer } });
    const first = t.announcer.announce('inc_1', ['C1']);
    await vi.advanceTimersByTimeAsync(10);
    await first;
    expect(asked.filter((k) => k.startsWith('slack-channel.'))).toEqual(['slack-channel.C1']);
    // The announcement's updates take their slots under their own key.
    await vi.advanceTimersByTimeAsync(10);
    expect(asked).toContain('slack-update.inc_1');
    // The second post waits for the slot the pacer names (another process took the one before).
    const second = t.announcer.announce('inc_2', ['C1']);
    await vi.advanceTimersByTimeAsync(1000 + 1400);
    expect(t.posts.filter((p) => p.channel === 'C1')).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(200);
    await second;
    expect(t.posts.filter((p) => p.channel === 'C1')).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(5000);
    await t.announcer.idle();
  });
});

async function waitUntil(check: () => boolean): Promise<void> {
  const deadline = Date.now() + 2000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met');
    await new Promise((r) => setTimeout(r, 5));
  }
}
