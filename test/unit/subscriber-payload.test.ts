import { describe, expect, it } from 'vitest';
import type { SubscriberNotice } from '../../src/ports/subscribers.js';
import { subscriberLinks } from '../../src/subscribers/mail.js';
import { challengePayload, webhookPayload } from '../../src/subscribers/payload.js';
import { pageId } from '../../src/status/model.js';

/** The body a webhook subscriber receives (src/subscribers/payload.ts): Statuspage's subscriber-webhook shape. */

const PAGE = { title: 'Acme', public_url: 'https://status.acme.test' };
const LINKS = subscriberLinks(PAGE.public_url, { manage: 'man.1', unsubscribe: 'uns.2' });
const NOW = Date.parse('2026-11-27T19:31:05.000Z');

const incidentNotice = (over: Partial<SubscriberNotice> = {}): SubscriberNotice => ({
  id: 'ntc_dlv_01JH40A1',
  kind: 'incident_update',
  created_at: '2026-11-27T19:31:00.000Z',
  execution_id: 'exe_1',
  page: PAGE,
  component_ids: ['cmp_api', 'cmp_web'],
  components: [
    { id: 'cmp_api', name: 'API', status: 'partial_outage' },
    { id: 'cmp_web', name: 'Web', status: 'degraded_performance' },
  ],
  incident: {
    id: 'pin_1',
    name: 'Checkout errors',
    impact: 'major',
    status: 'identified',
    url: 'https://status.acme.test/incidents/pin_1',
    created_at: '2026-11-27T19:00:00.000Z',
  },
  maintenance: null,
  update: {
    id: 'dlv_01JH40A1',
    status: 'identified',
    body: 'We found the cause.',
    created_at: '2026-11-27T19:30:00.000Z',
    updated_at: null,
  },
  ...over,
});

const maintenanceNotice = (status: 'scheduled' | 'in_progress'): SubscriberNotice => ({
  id: 'ntc_mnt_1_mup_2',
  kind: 'maintenance',
  created_at: '2026-11-27T19:31:00.000Z',
  execution_id: null,
  page: PAGE,
  component_ids: ['cmp_db'],
  components: [
    { id: 'cmp_db', name: 'Database', status: status === 'in_progress' ? 'under_maintenance' : 'operational' },
  ],
  incident: null,
  maintenance: {
    id: 'mnt_1',
    name: 'Database upgrade',
    status,
    scheduled_for: '2026-11-28T01:00:00.000Z',
    scheduled_until: '2026-11-28T03:00:00.000Z',
    url: 'https://status.acme.test/maintenances/mnt_1',
  },
  update: { id: 'mup_2', status, body: 'Starting now.', created_at: '2026-11-28T01:00:00.000Z', updated_at: null },
});

describe('webhookPayload', () => {
  it('an incident update: meta, page, incident with its update, component_update, herald', () => {
    expect(webhookPayload(incidentNotice(), LINKS, NOW)).toEqual({
      meta: {
        unsubscribe: 'https://status.acme.test/subscriptions/unsubscribe?token=uns.2',
        documentation: 'https://status.acme.test',
        generated_at: '2026-11-27T19:31:05.000Z',
      },
      page: { id: pageId(PAGE.public_url), status_indicator: 'major', status_description: 'Partial System Outage' },
      incident: {
        id: 'pin_1',
        name: 'Checkout errors',
        status: 'identified',
        impact: 'major',
        created_at: '2026-11-27T19:00:00.000Z',
        updated_at: '2026-11-27T19:31:00.000Z',
        shortlink: 'https://status.acme.test/incidents/pin_1',
        incident_updates: [
          {
            id: 'dlv_01JH40A1',
            status: 'identified',
            body: 'We found the cause.',
            incident_id: 'pin_1',
            created_at: '2026-11-27T19:30:00.000Z',
            updated_at: '2026-11-27T19:30:00.000Z',
            display_at: '2026-11-27T19:30:00.000Z',
          },
        ],
        components: [
          { id: 'cmp_api', name: 'API', status: 'partial_outage' },
          { id: 'cmp_web', name: 'Web', status: 'degraded_performance' },
        ],
      },
      component_update: {
        component_id: 'cmp_api',
        new_status: 'partial_outage',
        created_at: '2026-11-27T19:30:00.000Z',
      },
      herald: { notice_id: 'ntc_dlv_01JH40A1', kind: 'incident_update' },
    });
  });

  it('a correction carries the new words with updated_at; a retraction names the update withdrawn', () => {
    const corrected = incidentNotice({
      kind: 'incident_correction',
      update: { ...incidentNotice().update, body: 'Only EU.', updated_at: '2026-11-27T19:40:00.000Z' },
    });
    const c = webhookPayload(corrected, LINKS, NOW) as {
      incident: { incident_updates: Record<string, unknown>[] };
      herald: unknown;
    };
    expect(c.incident.incident_updates[0]).toMatchObject({ body: 'Only EU.', updated_at: '2026-11-27T19:40:00.000Z' });
    expect(c.herald).toEqual({ notice_id: 'ntc_dlv_01JH40A1', kind: 'incident_correction' });
    const r = webhookPayload(incidentNotice({ kind: 'incident_retraction' }), LINKS, NOW) as {
      incident: { incident_updates: { id: string }[] };
      herald: { kind: string };
    };
    expect(r.herald.kind).toBe('incident_retraction');
    expect(r.incident.incident_updates.map((u) => u.id)).toEqual(['dlv_01JH40A1']);
  });

  it('a maintenance is an incident with impact "maintenance", its window, and the maintenance indicator', () => {
    const p = webhookPayload(maintenanceNotice('in_progress'), LINKS, NOW) as Record<string, Record<string, unknown>>;
    expect(p.page).toEqual({
      id: pageId(PAGE.public_url),
      status_indicator: 'maintenance',
      status_description: 'Service Under Maintenance',
    });
    expect(p.incident).toMatchObject({
      id: 'mnt_1',
      name: 'Database upgrade',
      status: 'in_progress',
      impact: 'maintenance',
      shortlink: 'https://status.acme.test/maintenances/mnt_1',
      scheduled_for: '2026-11-28T01:00:00.000Z',
      scheduled_until: '2026-11-28T03:00:00.000Z',
    });
    expect(p.incident!.incident_updates).toEqual([
      expect.objectContaining({ id: 'mup_2', status: 'in_progress', body: 'Starting now.', incident_id: 'mnt_1' }),
    ]);
    expect(p.herald).toEqual({ notice_id: 'ntc_mnt_1_mup_2', kind: 'maintenance' });
    // Scheduled, nothing under way: all operational.
    const s = webhookPayload(maintenanceNotice('scheduled'), LINKS, NOW) as Record<string, Record<string, unknown>>;
    expect(s.page).toMatchObject({ status_indicator: 'none', status_description: 'All Systems Operational' });
  });

  it('no component_update when no component is named; a resolved incident no longer raises the indicator', () => {
    const n = incidentNotice({
      components: [],
      component_ids: [],
      incident: { ...incidentNotice().incident!, status: 'resolved' },
    });
    const p = webhookPayload(n, LINKS, NOW);
    expect(p).not.toHaveProperty('component_update');
    expect(p.page).toEqual({
      id: pageId(PAGE.public_url),
      status_indicator: 'none',
      status_description: 'All Systems Operational',
    });
    // An unresolved incident of impact none still counts as minor, like the page's own indicator.
    const q = webhookPayload(
      incidentNotice({ components: [], incident: { ...incidentNotice().incident!, impact: 'none' } }),
      LINKS,
      NOW,
    );
    expect(q.page).toMatchObject({ status_indicator: 'minor' });
  });

  it('is plain JSON: it survives a round trip unchanged', () => {
    const p = webhookPayload(
      incidentNotice({ update: { ...incidentNotice().update, body: '<b>"x"</b>\n' } }),
      LINKS,
      NOW,
    );
    expect(JSON.parse(JSON.stringify(p))).toEqual(p);
  });
});

describe('challengePayload', () => {
  it('carries the challenge, the signing secret and the way out', () => {
    expect(challengePayload({ challenge: 'chl_abc', secret: 'whsec_c2VjcmV0', links: LINKS, page: PAGE })).toEqual({
      type: 'subscription.challenge',
      challenge: 'chl_abc',
      secret: 'whsec_c2VjcmV0',
      manage_url: 'https://status.acme.test/subscriptions/manage?token=man.1',
      unsubscribe_url: 'https://status.acme.test/subscriptions/unsubscribe?token=uns.2',
      page: { title: 'Acme', url: 'https://status.acme.test' },
    });
  });
});
