import { defineChannel } from '../channel.js';
import { telegram as connection } from './config.js';
import { escapeTelegram } from './escape.js';

/** The Telegram Bot API: the default of the operator's TELEGRAM_API_URL (a local stand-in in tests). */
export const TELEGRAM_API_BASE_URL = 'https://api.telegram.org';

/** Telegram: see ./config.ts (what a connection holds), ./send.ts (how a message goes out). */
export const telegramChannel = defineChannel({
  ...connection,
  type: 'telegram',
  label: 'Telegram',
  format: (config) => ({ escape: (v) => escapeTelegram(v, config?.parse_mode ?? null), html: false }),
  // Replies (reply_parameters), editMessageText and deleteMessage on the bot's own messages.
  conversation: () => ({ thread: true, edit: true, delete: true }),
  pacing: { perSecond: 1, burst: 1 }, // 1 per second per chat
  adapter: async () => (await import('./send.js')).adapter,
});
