import { OPEN_STATUSES } from '../../domain/incident/incident.js';
import { slackUser, type SlackDeps } from '../deps.js';
import { HOME_CAPS, homeView, type HomeAdminData } from '../views/home.js';

/**
 * Publishes a user's App Home: open incidents for everyone; connections and API keys only for
 * HERALD_SLACK_ADMINS. AdminViewService refuses anyone else; asking AccessPolicy first only keeps
 * a non-admin's Home from costing a refusal (presentation).
 */
export async function publishHome(deps: SlackDeps, userId: string): Promise<void> {
  const s = deps.services;
  const incidents = await s.incidents.list(
    { status: [...OPEN_STATUSES] },
    { limit: HOME_CAPS.incidents + 1, cursor: null },
  );
  let admin: HomeAdminData | null = null;
  const user = slackUser(userId);
  if (deps.access.can(user, 'view_admin')) {
    admin = await s.admin.overview(user, { connections: HOME_CAPS.connections, keys: HOME_CAPS.keys });
  }
  const view = homeView({
    incidents: incidents.data.slice(0, HOME_CAPS.incidents),
    moreIncidents: incidents.data.length > HOME_CAPS.incidents,
    admin,
    now: deps.now(),
  });
  await deps.client.views.publish({ user_id: userId, view });
}
