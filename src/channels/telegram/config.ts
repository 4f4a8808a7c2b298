import { z } from 'zod';
import { defineConnectionType, headerSafeToken } from '../common/config-fields.js';

/**
 * Telegram Bot API. The token goes only to TELEGRAM_API_URL (the operator's, trusted), so there
 * is no user-supplied destination to police.
 */
const TelegramConfigSchema = z
  .strictObject({
    bot_token: headerSafeToken('bot_token', 256).regex(
      /^\d{1,20}:[A-Za-z0-9_-]{20,}$/,
      'bot_token looks like 123456789:AA… (from @BotFather).',
    ),
    chat_id: z.union([
      z.int(),
      z
        .string()
        .regex(/^(?:-?\d{1,20}|@[A-Za-z][A-Za-z0-9_]{3,31})$/, 'chat_id is a numeric chat id or @channelusername.'),
    ]),
    parse_mode: z.enum(['HTML', 'MarkdownV2']).optional(),
  })
  .meta({ id: 'TelegramConnectionConfig' });

export type TelegramConfig = z.output<typeof TelegramConfigSchema>;

export const telegram = defineConnectionType({
  configSchema: TelegramConfigSchema,
  secretFields: ['bot_token'],
  readOnlyCheck: () => 'getMe',
});
