import { defineChannel } from '../channel.js';
import { MARKDOWN } from '../common/escape.js';
import { discord as connection } from './config.js';

/** Discord: see ./config.ts (what a connection holds), ./send.ts (how a message goes out). */
export const discordChannel = defineChannel({
  ...connection,
  type: 'discord',
  label: 'Discord',
  format: () => MARKDOWN,
  // A webhook edits and deletes the messages it posted. It cannot reply to a message: it threads
  // only in a forum (the first post opens the incident's thread) or a thread given by thread_id.
  conversation: (c) => ({ thread: c.forum === true || c.thread_id !== undefined, edit: true, delete: true }),
  pacing: { perSecond: 2.5, burst: 5 }, // 5 per 2 s per webhook
  adapter: async () => (await import('./send.js')).adapter,
});
