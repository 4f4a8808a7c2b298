import { z } from 'zod';
import { defineConnectionType, httpUrl, shortText, urlDestination } from '../common/config-fields.js';

/** Mattermost incoming webhook (the URL is the secret); channel/username override its defaults. */
const MattermostConfigSchema = z
  .strictObject({
    webhook_url: httpUrl('webhook_url'),
    channel: shortText('channel', 64).optional(),
    username: shortText('username', 64).optional(),
  })
  .meta({ id: 'MattermostConnectionConfig' });

export type MattermostConfig = z.output<typeof MattermostConfigSchema>;

export const mattermost = defineConnectionType({
  configSchema: MattermostConfigSchema,
  secretFields: ['webhook_url'],
  destinations: (c) => [urlDestination('webhook_url', c.webhook_url)],
});
