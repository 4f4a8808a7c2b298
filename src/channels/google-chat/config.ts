import { z } from 'zod';
import { defineConnectionType, httpUrl, shortText, urlDestination } from '../common/config-fields.js';

/** Google Chat space webhook (the URL carries key and token: secret); thread_key groups messages. */
const GoogleChatConfigSchema = z
  .strictObject({
    webhook_url: httpUrl('webhook_url'),
    thread_key: shortText('thread_key', 128).optional(),
  })
  .meta({ id: 'GoogleChatConnectionConfig' });

export type GoogleChatConfig = z.output<typeof GoogleChatConfigSchema>;

export const googleChat = defineConnectionType({
  configSchema: GoogleChatConfigSchema,
  secretFields: ['webhook_url'],
  destinations: (c) => [urlDestination('webhook_url', c.webhook_url)],
});
