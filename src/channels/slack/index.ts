import { defineChannel, NO_CONVERSATION } from '../channel.js';
import { slack as connection } from './config.js';
import { escapeSlack } from './escape.js';

/** Slack's Web API: the default of the operator's SLACK_API_URL (a local stand-in in tests). */
export const SLACK_API_BASE_URL = 'https://slack.com/api/';

/** Slack: see ./config.ts (what a connection holds), ./send.ts (how a message goes out). */
export const slackChannel = defineChannel({
  ...connection,
  type: 'slack',
  label: 'Slack',
  format: () => ({ escape: escapeSlack, html: false }),
  // Bot mode threads (thread_ts), edits (chat.update) and deletes (chat.delete) its own messages;
  // an incoming webhook only posts, and never says which message it made.
  conversation: (c) => (c.bot_token !== undefined ? { thread: true, edit: true, delete: true } : NO_CONVERSATION),
  pacing: { perSecond: 1, burst: 1 }, // 1 message per second per channel
  adapter: async () => (await import('./send.js')).adapter,
});
