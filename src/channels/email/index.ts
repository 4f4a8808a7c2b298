import { defineChannel } from '../channel.js';
import { email as connection } from './config.js';

/** E-mail: see ./config.ts (what a connection holds), ./send.ts (how a message goes out). */
export const emailChannel = defineChannel({
  ...connection,
  type: 'email',
  label: 'E-mail',
  format: () => ({ escape: (v) => v, html: true }),
  // In-Reply-To and References thread the mails; a sent mail cannot be changed or recalled.
  conversation: () => ({ thread: true, edit: false, delete: false }),
  pacing: { perSecond: 5, burst: 5 },
  adapter: async () => (await import('./send.js')).adapter,
});
