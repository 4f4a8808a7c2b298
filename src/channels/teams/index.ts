import { defineChannel, NO_CONVERSATION } from '../channel.js';
import { MARKDOWN } from '../common/escape.js';
import { teams as connection } from './config.js';

/** Microsoft Teams: see ./config.ts (what a connection holds), ./send.ts (how a message goes out). */
export const teamsChannel = defineChannel({
  ...connection,
  type: 'teams',
  label: 'Microsoft Teams',
  format: () => MARKDOWN,
  // A Workflows trigger answers 202 with nothing: no message id to reply under, edit or delete.
  conversation: () => NO_CONVERSATION,
  pacing: { perSecond: 4, burst: 4 },
  // A Workflows trigger answers 202 before the flow runs: delivered means accepted, not yet posted.
  acceptsOnly: true,
  adapter: async () => (await import('./send.js')).adapter,
});
