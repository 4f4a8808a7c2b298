import { defineChannel, NO_CONVERSATION } from '../channel.js';
import { MARKDOWN } from '../common/escape.js';
import { mattermost as connection } from './config.js';

/** Mattermost: see ./config.ts (what a connection holds), ./send.ts (how a message goes out). */
export const mattermostChannel = defineChannel({
  ...connection,
  type: 'mattermost',
  label: 'Mattermost',
  format: () => MARKDOWN,
  // An incoming webhook answers `ok` and never says which post it made.
  conversation: () => NO_CONVERSATION,
  pacing: { perSecond: 10, burst: 10 },
  adapter: async () => (await import('./send.js')).adapter,
});
