import type { SubscriberNotice } from '../ports/subscribers.js';
import {
  INDICATOR_DESCRIPTION,
  INDICATOR_OF_COMPONENT,
  INDICATOR_RANK,
  pageId,
  type Indicator,
} from '../status/model.js';
import type { SubscriberLinks } from './mail.js';

/**
 * What a webhook subscriber receives: Statuspage's subscriber-webhook shape (meta, page,
 * incident with its incident_updates, component_update), so receivers written for Statuspage
 * (chat integrations, aggregators) read it unchanged. What Statuspage has no word for is under
 * `herald`: the notice id (the webhook-id is `<notice id>.<subscriber id>`) and its kind, since a
 * correction or a retraction would otherwise read like one more update. A maintenance is sent as
 * an `incident` with impact `maintenance`, as Statuspage does.
 *
 * - `incident_updates` holds the one update the notice is about: the new one, the corrected one
 *   (its new words, `updated_at` set), or for a retraction the one withdrawn (its id; a receiver
 *   that knows `herald.kind` drops it);
 * - `page.status_indicator` is judged from what the notice knows (its components, the incident's
 *   impact while unresolved, a maintenance under way), not from the whole page;
 * - `component_update` names the first component the notice names (Statuspage sends one per
 *   component; `incident.components` lists them all). Herald does not know the old status.
 */

type Json = Record<string, unknown>;

/** The page indicator as this notice shows it (the same ranks as the page's overall indicator). */
function indicatorOf(n: SubscriberNotice): Indicator {
  let worst: Indicator = 'none';
  const consider = (i: Indicator) => {
    if (INDICATOR_RANK[i] > INDICATOR_RANK[worst]) worst = i;
  };
  for (const c of n.components) consider(INDICATOR_OF_COMPONENT[c.status] ?? 'none');
  if (n.incident && n.incident.status !== 'resolved')
    consider(n.incident.impact === 'none' ? 'minor' : n.incident.impact);
  const m = n.maintenance;
  if (m && (m.status === 'in_progress' || m.status === 'verifying')) consider('maintenance');
  return worst;
}

function updateJson(n: SubscriberNotice, parentId: string): Json {
  const u = n.update;
  return {
    id: u.id,
    status: u.status,
    body: u.body,
    incident_id: parentId,
    created_at: u.created_at,
    updated_at: u.updated_at ?? u.created_at,
    display_at: u.created_at,
  };
}

const componentsJson = (n: SubscriberNotice): Json[] =>
  n.components.map((c) => ({ id: c.id, name: c.name, status: c.status }));

function incidentJson(n: SubscriberNotice): Json | null {
  if (n.kind === 'maintenance' && n.maintenance) {
    const m = n.maintenance;
    return {
      id: m.id,
      name: m.name,
      status: m.status,
      impact: 'maintenance',
      // The notice does not carry the maintenance's creation: when the notice was opened stands in.
      created_at: n.created_at,
      updated_at: n.created_at,
      shortlink: m.url,
      scheduled_for: m.scheduled_for,
      scheduled_until: m.scheduled_until,
      incident_updates: [updateJson(n, m.id)],
      components: componentsJson(n),
    };
  }
  if (!n.incident) return null;
  const i = n.incident;
  return {
    id: i.id,
    name: i.name,
    status: i.status,
    impact: i.impact,
    created_at: i.created_at,
    // The incident changed when the page wrote what opened the notice (a correction or retraction too).
    updated_at: n.created_at,
    shortlink: i.url,
    incident_updates: [updateJson(n, i.id)],
    components: componentsJson(n),
  };
}

/** The body POSTed to a webhook subscriber for a notice. */
export function webhookPayload(n: SubscriberNotice, links: SubscriberLinks, nowMs: number): Record<string, unknown> {
  const indicator = indicatorOf(n);
  const out: Json = {
    meta: { unsubscribe: links.unsubscribe, documentation: links.page, generated_at: new Date(nowMs).toISOString() },
    // The same id as the page's own Statuspage-compatible JSON (/api/v2), so a consumer can match them.
    page: {
      id: pageId(n.page.public_url),
      status_indicator: indicator,
      status_description: INDICATOR_DESCRIPTION[indicator],
    },
  };
  const incident = incidentJson(n);
  if (incident) out.incident = incident;
  const first = n.components[0];
  if (first)
    out.component_update = { component_id: first.id, new_status: first.status, created_at: n.update.created_at };
  out.herald = { notice_id: n.id, kind: n.kind };
  return out;
}

/**
 * The challenge a new webhook subscriber must answer (2xx with the challenge in its body) before
 * it is confirmed; it carries the secret later payloads are signed with, and the way out.
 */
export function challengePayload(o: {
  challenge: string;
  secret: string;
  links: SubscriberLinks;
  page: { title: string; public_url: string };
}): Record<string, unknown> {
  return {
    type: 'subscription.challenge',
    challenge: o.challenge,
    secret: o.secret,
    manage_url: o.links.manage,
    unsubscribe_url: o.links.unsubscribe,
    page: { title: o.page.title, url: o.page.public_url },
  };
}
