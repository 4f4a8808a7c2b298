import { OPEN_STATUSES } from '../../domain/incident/incident.js';
import { slackUser, type SlackDeps } from '../deps.js';
import { HOME_CAPS, homeView, type HomeAdminData } from '../views/home.js';

/**
 * Publishes a user's App Home: open incidents for everyone; connections and API keys only for
 * HERALD_SLACK_ADMINS (AccessPolicy decides, per user, on every publish).
 */
export async function publishHome(deps: SlackDeps, userId: string): Promise<void> {
  const s = deps.services;
  const incidents = await s.incidents.list(
    { status: [...OPEN_STATUSES] },
    { limit: HOME_CAPS.incidents + 1, cursor: null },
  );
  let admin: HomeAdminData | null = null;
  if (deps.access.can(slackUser(userId), 'view_admin')) {
    const [connections, keys] = await Promise.all([
      s.connections.list({}, { limit: HOME_CAPS.connections + 1, cursor: null }),
      s.apiKeys.list({ limit: HOME_CAPS.keys + 1, cursor: null }),
    ]);
    admin = {
      connections: connections.data.slice(0, HOME_CAPS.connections),
      moreConnections: connections.data.length > HOME_CAPS.connections,
      keys: keys.data.slice(0, HOME_CAPS.keys),
      moreKeys: keys.data.length > HOME_CAPS.keys,
    };
  }
  const view = homeView({
    incidents: incidents.data.slice(0, HOME_CAPS.incidents),
    moreIncidents: incidents.data.length > HOME_CAPS.incidents,
    admin,
    now: deps.now(),
  });
  await deps.client.views.publish({ user_id: userId, view });
}
