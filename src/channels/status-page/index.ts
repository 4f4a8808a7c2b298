import { defineChannel, PLAIN } from '../channel.js';
import { statusPage as connection } from './config.js';

/**
 * The public status page: see ./config.ts (how the page presents itself), ./send.ts (how an
 * update is published). Values are rendered plain: the page escapes when it renders HTML.
 */
export const statusPageChannel = defineChannel({
  ...connection,
  type: 'status_page',
  label: 'Status page',
  publishesPublicly: true,
  format: () => PLAIN,
  // Every update of an incident joins its public incident; a correction edits an update in place
  // (marked "Updated"), a retraction removes it.
  conversation: () => ({ thread: true, edit: true, delete: true }),
  // A write to Herald's own store, nothing outside to protect: generous.
  pacing: { perSecond: 50, burst: 50 },
  adapter: async () => (await import('./send.js')).adapter,
});
