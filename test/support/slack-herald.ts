import { startHerald, type TestHerald } from './herald.js';
import { startSlack, type SlackPeer } from './peers/slack.js';
import { slackClient, type SlackClient, type SlackUser } from './slack-client.js';

/** A Herald with its Slack app on, talking to a fake Slack workspace, and a signed client for it. */
export interface SlackHerald {
  h: TestHerald;
  slack: SlackPeer;
  client: SlackClient;
  /** Stops Slack's side of Herald, Herald, then the fake workspace. */
  close(): Promise<void>;
}

/**
 * The set-up every Slack test file shares: the fake Web API, a Herald signed with `secret` that
 * announces in `channel`, and a client acting as `user`. `env` adds to Herald's environment.
 */
export async function startSlackHerald(opts: {
  secret: string;
  channel: string;
  user: SlackUser;
  env?: Record<string, string>;
}): Promise<SlackHerald> {
  const slack = await startSlack();
  const h = await startHerald({
    SLACK_SIGNING_SECRET: opts.secret,
    SLACK_BOT_TOKEN: 'xoxb-test',
    SLACK_API_URL: slack.apiUrl,
    HERALD_SLACK_CHANNEL: opts.channel,
    ...opts.env,
  });
  return {
    h,
    slack,
    client: slackClient(h.url, opts.secret, opts.user),
    async close() {
      await h.herald.slack?.stop();
      await h.close();
      await slack.close();
    },
  };
}
