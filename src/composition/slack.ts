import type { Express } from 'express';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { StartupError } from './cli.js';
import type { Clock } from '../domain/common/clock.js';
import type { createSlackEdge, SlackEdge } from '../slack/app.js';
import type { RolePlan } from './role.js';

/**
 * The Slack app when Slack is configured: SLACK_BOT_TOKEN plus SLACK_SIGNING_SECRET (HTTP mode,
 * mounted on `app` at /slack/events) or SLACK_APP_TOKEN (Socket Mode). Without any Slack setting
 * Herald runs the API alone and says so; a half-done setup is refused, naming what is missing.
 * Bolt is loaded only when Slack is configured: without Slack it is ~10 MB of memory and a
 * tenth of a second of start-up for nothing.
 */
export async function slackEdge(
  config: Config,
  plan: RolePlan,
  log: Logger,
  clock: Clock,
  app: Express,
  wiring: Pick<
    Parameters<typeof createSlackEdge>[0],
    'services' | 'access' | 'idempotency' | 'pacer' | 'approvalMessages'
  >,
): Promise<SlackEdge | null> {
  const { SLACK_BOT_TOKEN: botToken, SLACK_SIGNING_SECRET: signingSecret, SLACK_APP_TOKEN: appToken } = config;
  // A worker receives no Slack requests; with the bot token it keeps announcements current
  // (the delivery receipts happen here), so the bot token alone is its whole Slack setup.
  const worker = !plan.receiveSlack;
  if (botToken === undefined && signingSecret === undefined && appToken === undefined) {
    log.info(
      worker
        ? 'Slack is not configured (no SLACK_BOT_TOKEN): this worker will not update Slack announcements with delivery receipts.'
        : 'Slack is not configured (no SLACK_BOT_TOKEN): running the API alone.',
    );
    return null;
  }
  if (botToken === undefined)
    throw new StartupError(
      'Slack is half configured: SLACK_BOT_TOKEN (xoxb-…) is missing. Set it, or unset SLACK_SIGNING_SECRET and SLACK_APP_TOKEN to run the API alone.',
    );
  if (!worker && signingSecret === undefined && appToken === undefined) {
    throw new StartupError(
      'Slack is half configured: set SLACK_SIGNING_SECRET (HTTP mode, /slack/events) or SLACK_APP_TOKEN (Socket Mode), or unset SLACK_BOT_TOKEN to run the API alone.',
    );
  }
  const { createSlackEdge } = await import('../slack/app.js');
  if (worker) {
    const edge = createSlackEdge(
      {
        botToken,
        apiUrl: config.SLACK_API_URL,
        // No listeners read the admins here; the admin notices (event endpoints disabled) do.
        settings: { admins: config.HERALD_SLACK_ADMINS, defaultChannel: config.HERALD_SLACK_CHANNEL ?? null },
        log,
        now: () => clock.now(),
        ...wiring,
      },
      app,
    );
    log.info(
      { mode: edge.mode },
      'Slack: this worker keeps announcements current (delivery receipts); it receives no Slack requests',
    );
    return edge;
  }
  const edge = createSlackEdge(
    {
      botToken,
      ...(signingSecret !== undefined ? { signingSecret } : {}),
      ...(appToken !== undefined ? { appToken } : {}),
      apiUrl: config.SLACK_API_URL,
      settings: { admins: config.HERALD_SLACK_ADMINS, defaultChannel: config.HERALD_SLACK_CHANNEL ?? null },
      log,
      now: () => clock.now(),
      ...wiring,
    },
    app,
  );
  log.info(
    { mode: edge.mode, admins: config.HERALD_SLACK_ADMINS.length, channel: config.HERALD_SLACK_CHANNEL ?? null },
    edge.mode === 'http' ? 'Slack app on /slack/events (HTTP mode)' : 'Slack app over Socket Mode',
  );
  return edge;
}
