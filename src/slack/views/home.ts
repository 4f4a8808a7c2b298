import { keyState, type ApiKey } from '../../domain/common/api-key.js';
import { escapeSlack } from '../../channels/slack/escape.js';
import type { Incident } from '../../domain/incident/incident.js';
import { ACTIONS } from './action-ids.js';
import {
  button,
  context,
  divider,
  escapedText,
  header,
  section,
  truncate,
  type HomeView,
  type KnownBlock,
} from './block-kit.js';
import { incidentActions, incidentLine } from './incident.js';

/** A connection as the admin section shows it (a subset of the /v1 shape). */
export interface HomeConnection {
  id: string;
  name: string;
  type: string;
  enabled: boolean;
  health: { state: string; consecutive_failures: number; last_error: string | null; disabled_reason: string | null };
  last_test: {
    ok: boolean;
    status: string;
    checked_at: string;
    latency_ms: number | null;
    detail: string | null;
  } | null;
}

export interface HomeAdminData {
  connections: HomeConnection[];
  moreConnections: boolean;
  keys: ApiKey[];
  moreKeys: boolean;
}

/** Caps that keep the tab under Slack's 100 blocks with every section full. */
export const HOME_CAPS = { incidents: 15, connections: 12, keys: 12 } as const;
// Worst case: 3 + 15×2 + 1 + 2 + 12×2 + 1 + 3 + 12 + 1 = 77 blocks.

const HEALTH: Record<string, string> = {
  ok: ':large_green_circle: ok',
  degraded: ':large_yellow_circle: degraded',
  disabled: ':red_circle: disabled',
};

function connectionText(c: HomeConnection): string {
  const parts = [
    `*${escapeSlack(truncate(c.name, 80))}* (${c.type})`,
    c.enabled ? (HEALTH[c.health.state] ?? c.health.state) : ':white_circle: not enabled',
  ];
  if (c.health.disabled_reason) parts.push(escapeSlack(truncate(c.health.disabled_reason, 120)));
  else if (c.health.last_error) parts.push(`last error: ${escapeSlack(truncate(c.health.last_error, 120))}`);
  if (c.last_test) {
    const latency = c.last_test.latency_ms === null ? '' : `, ${c.last_test.latency_ms} ms`;
    parts.push(
      `\nlast test ${c.last_test.ok ? ':white_check_mark:' : ':x:'} ${c.last_test.status}${latency} · ${c.last_test.checked_at}`,
    );
  }
  return `${parts.join(' · ')}\n\`${c.id}\``;
}

function keyText(k: ApiKey, now: Date): string {
  const state = keyState(k, now);
  const scopes = k.scopes.map((s) => `\`${s}\``).join(' ');
  const when = [
    `created ${k.created_at}`,
    k.expires_at ? `expires ${k.expires_at}` : 'never expires',
    k.last_used_at ? `last used ${k.last_used_at}` : 'never used',
  ];
  return `*${escapeSlack(truncate(k.name, 80))}* · ${state === 'active' ? ':key: active' : state === 'expired' ? ':hourglass: expired' : ':no_entry: revoked'}\n${scopes}\n${when.join(' · ')} · \`${k.id}\``;
}

export function homeView(p: {
  incidents: Incident[];
  moreIncidents: boolean;
  admin: HomeAdminData | null;
  now: Date;
}): HomeView {
  const blocks: KnownBlock[] = [
    header('Herald'),
    {
      type: 'actions',
      block_id: 'home_actions',
      elements: [button('Declare an incident', ACTIONS.incidentNew, 'new', 'primary')],
    },
    header('Open incidents'),
  ];
  if (p.incidents.length === 0) blocks.push(section(':sunny: No open incidents.'));
  for (const i of p.incidents.slice(0, HOME_CAPS.incidents)) {
    blocks.push(section(incidentLine(i)), ...incidentActions(i, `incident:${i.id}`));
  }
  if (p.moreIncidents) blocks.push(context('More incidents are open: `/incident list`.'));

  if (p.admin) {
    const a = p.admin;
    blocks.push(divider(), header('Connections'));
    if (a.connections.length === 0) blocks.push(context('No connections yet: add them with POST /v1/connections.'));
    for (const c of a.connections.slice(0, HOME_CAPS.connections)) {
      blocks.push({
        type: 'section',
        block_id: `connection:${c.id}`,
        text: { type: 'mrkdwn', text: connectionText(c) },
        accessory: button('Test', ACTIONS.connectionTest, c.id),
      });
      // Webhook-style types have no read-only check: offer the explicit, marked test message.
      if (c.last_test?.status === 'needs_send_message') {
        blocks.push({
          type: 'actions',
          block_id: `connection_send:${c.id}`,
          elements: [button('Send test message', ACTIONS.connectionTestSend, c.id)],
        });
      }
    }
    if (a.moreConnections) blocks.push(context('More connections exist: GET /v1/connections.'));

    blocks.push(divider(), header('Settings → API keys'));
    blocks.push({
      type: 'actions',
      block_id: 'api_key_actions',
      elements: [button('Generate API key', ACTIONS.apiKeyGenerate, 'generate', 'primary')],
    });
    if (a.keys.length === 0) blocks.push(context('No API keys yet.'));
    for (const k of a.keys.slice(0, HOME_CAPS.keys)) {
      const revocable = keyState(k, p.now) === 'active';
      blocks.push({
        type: 'section',
        block_id: `api_key:${k.id}`,
        text: { type: 'mrkdwn', text: keyText(k, p.now) },
        ...(revocable
          ? {
              accessory: {
                ...button('Revoke', ACTIONS.apiKeyRevoke, k.id, 'danger'),
                confirm: {
                  title: { type: 'plain_text', text: 'Revoke this key?' },
                  // A confirm dialog's text holds 300 characters: the escaped name gets what is left.
                  text: {
                    type: 'mrkdwn',
                    text: `Requests with *${escapedText(k.name, 160)}* stop working at once, on every Herald instance.`,
                  },
                  confirm: { type: 'plain_text', text: 'Revoke' },
                  deny: { type: 'plain_text', text: 'Keep' },
                  style: 'danger',
                },
              },
            }
          : {}),
      });
    }
    if (a.moreKeys) blocks.push(context('More keys exist: `npm run herald -- keys list`.'));
  }
  return { type: 'home', blocks: blocks.slice(0, 100) };
}
