import { defineChannel } from '../channel.js';
import { googleChat as connection } from './config.js';
import { escapeGoogleChat } from './escape.js';

/** Google Chat: see ./config.ts (what a connection holds), ./send.ts (how a message goes out). */
export const googleChatChannel = defineChannel({
  ...connection,
  type: 'google_chat',
  label: 'Google Chat',
  format: () => ({ escape: escapeGoogleChat, html: false }),
  // A space webhook threads by threadKey, but cannot edit or delete (that needs the Chat API's own auth).
  conversation: () => ({ thread: true, edit: false, delete: false }),
  pacing: { perSecond: 1, burst: 1 }, // 60 per minute per space
  adapter: async () => (await import('./send.js')).adapter,
});
