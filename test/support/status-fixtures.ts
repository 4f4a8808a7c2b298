import type {
  PublicComponent,
  PublicIncident,
  PublicMaintenance,
  PublicPageConfig,
  StatusSnapshot,
} from '../../src/domain/status/public.js';

/**
 * Snapshots of the public page for tests of the renderers and the site (no Redis): a page with a
 * group, an active and a resolved incident, maintenance ahead and under way. `NOW` is the clock
 * the tests pin; times are relative to it.
 */
export const NOW = Date.parse('2026-11-27T12:00:00.000Z');
export const at = (minutesAgo: number): string => new Date(NOW - minutesAgo * 60_000).toISOString();
const DAY_MIN = 24 * 60;

export const PAGE: PublicPageConfig = {
  title: 'Acme',
  public_url: 'https://status.acme.test',
  logo_url: null,
  time_zone: 'Europe/Berlin',
  locale: 'en',
  support_url: 'https://acme.test/support',
  frame_ancestors: [],
};

export function component(over: Partial<PublicComponent> & { id: string; name: string }): PublicComponent {
  return {
    description: '',
    group: null,
    position: 0,
    status: 'operational',
    created_at: at(200 * DAY_MIN),
    updated_at: at(200 * DAY_MIN),
    history: [],
    ...over,
  };
}

export function fixtureSnapshot(over: Partial<StatusSnapshot> = {}): StatusSnapshot {
  const components: PublicComponent[] = [
    component({
      id: 'cmp_api',
      name: 'API',
      description: 'The public REST API',
      group: 'Core',
      position: 1,
      status: 'partial_outage',
      updated_at: at(30),
      history: [
        { at: at(95 * DAY_MIN), status: 'operational' },
        { at: at(3 * DAY_MIN), status: 'major_outage' },
        { at: at(3 * DAY_MIN - 90), status: 'operational' },
        { at: at(30), status: 'partial_outage' },
      ],
    }),
    component({ id: 'cmp_web', name: 'Website', group: 'Core', position: 2, history: [] }),
    component({
      id: 'cmp_db',
      name: 'Database',
      position: 0,
      status: 'under_maintenance',
      created_at: at(10 * DAY_MIN),
      history: [
        { at: at(10 * DAY_MIN), status: 'operational' },
        { at: at(20), status: 'under_maintenance' },
      ],
    }),
  ];
  const incidents: PublicIncident[] = [
    {
      id: 'inc_active',
      name: 'Elevated API errors',
      impact: 'major',
      status: 'identified',
      created_at: at(30),
      updated_at: at(10),
      resolved_at: null,
      component_ids: ['cmp_api'],
      updates: [
        {
          id: 'dlv_2',
          status: 'identified',
          body: 'We found the cause.\nA fix is rolling out.',
          created_at: at(10),
          updated_at: at(5),
          affected_components: [{ id: 'cmp_api', status: 'partial_outage' }],
        },
        {
          id: 'dlv_1',
          status: 'investigating',
          body: 'We are looking into errors on the API.',
          created_at: at(30),
          updated_at: null,
          affected_components: [{ id: 'cmp_api', status: 'major_outage' }],
        },
      ],
    },
    {
      id: 'inc_old',
      name: 'Slow website',
      impact: 'minor',
      status: 'resolved',
      created_at: at(3 * DAY_MIN),
      updated_at: at(3 * DAY_MIN - 90),
      resolved_at: at(3 * DAY_MIN - 90),
      component_ids: ['cmp_web'],
      updates: [
        {
          id: 'dlv_old2',
          status: 'resolved',
          body: 'Fixed.',
          created_at: at(3 * DAY_MIN - 90),
          updated_at: null,
          affected_components: [],
        },
        {
          id: 'dlv_old1',
          status: 'investigating',
          body: 'The website is slow.',
          created_at: at(3 * DAY_MIN),
          updated_at: null,
          affected_components: [{ id: 'cmp_web', status: 'degraded_performance' }],
        },
      ],
    },
  ];
  const maintenances: PublicMaintenance[] = [
    {
      id: 'mnt_now',
      name: 'Database upgrade',
      status: 'in_progress',
      scheduled_for: at(20),
      scheduled_until: at(-40),
      component_ids: ['cmp_db'],
      created_at: at(2 * DAY_MIN),
      updated_at: at(20),
      updates: [
        { id: 'mu_2', status: 'in_progress', body: 'The upgrade has started.', kind: 'transition', created_at: at(20) },
        {
          id: 'mu_1',
          status: 'scheduled',
          body: 'We will upgrade the database.',
          kind: 'update',
          created_at: at(2 * DAY_MIN),
        },
      ],
    },
    {
      id: 'mnt_next',
      name: 'Network work',
      status: 'scheduled',
      scheduled_for: at(-2 * DAY_MIN),
      scheduled_until: at(-2 * DAY_MIN - 60),
      component_ids: ['cmp_web', 'cmp_api'],
      created_at: at(60),
      updated_at: at(60),
      updates: [
        { id: 'mu_3', status: 'scheduled', body: 'Switches are replaced.', kind: 'update', created_at: at(60) },
      ],
    },
  ];
  return {
    version: 7,
    page: PAGE,
    components,
    incidents,
    maintenances,
    read_at: new Date(NOW).toISOString(),
    ...over,
  };
}

/** A status_page connection's create body (POST /v1/connections). */
export const STATUS_CONNECTION = {
  name: 'Public status',
  type: 'status_page',
  config: {
    title: 'Herald test status',
    public_url: 'https://status.herald.test',
    time_zone: 'Europe/Berlin',
    locale: 'en',
    support_url: 'https://herald.test/support',
    frame_ancestors: ['https://intranet.example.com'],
  },
};
