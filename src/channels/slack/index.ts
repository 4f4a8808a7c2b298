import { defineChannel } from '../channel.js';
import { slack as connection } from './config.js';
import { escapeSlack } from './escape.js';

/** Slack: see ./config.ts (what a connection holds), ./send.ts (how a message goes out). */
export const slackChannel = defineChannel({
  ...connection,
  type: 'slack',
  label: 'Slack',
  format: () => ({ escape: escapeSlack, html: false }),
  pacing: { perSecond: 1, burst: 1 }, // 1 message per second per channel
  adapter: async () => (await import('./send.js')).adapter,
});
