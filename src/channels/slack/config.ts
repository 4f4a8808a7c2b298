import { z } from 'zod';
import { defineConnectionType, headerSafeToken, httpUrl, shortText, urlDestination } from '../common/config-fields.js';

/**
 * Slack: an incoming webhook (`webhook_url`, itself the secret), or a bot token posting to a
 * channel through the Web API (SLACK_API_URL, the operator's, so no user destination). Only bot
 * mode keeps an incident's conversation (threads, edits, deletes; see ./index.ts), so only bot
 * mode takes `reply_broadcast`.
 */
const SlackConfigSchema = z
  .strictObject({
    webhook_url: httpUrl('webhook_url').optional(),
    bot_token: headerSafeToken('bot_token', 256)
      .regex(/^xox[a-z]-\S+$/, 'bot_token must be a Slack token (xoxb-…).')
      .optional(),
    channel: shortText('channel', 80)
      .regex(/^[^\s]+$/, 'channel is a channel ID (C0123…) or #name, without spaces.')
      .optional(),
    username: shortText('username', 80).optional(),
    icon_emoji: z
      .string()
      .regex(/^:[a-z0-9_+'-]{1,100}:$/, 'icon_emoji looks like :rotating_light:.')
      .optional(),
    reply_broadcast: z.boolean().optional().meta({
      description:
        "Bot mode: an incident's later messages, posted in its first message's thread, are also shown in the channel (Slack's \"Also send to channel\").",
    }),
  })
  .superRefine((c, ctx) => {
    // Exactly one mode. To switch modes with PATCH, set the other mode's fields to null.
    if (c.webhook_url !== undefined && c.bot_token !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['bot_token'],
        message: 'Use either webhook_url or bot_token + channel, not both.',
      });
    } else if (c.webhook_url === undefined && c.bot_token === undefined) {
      ctx.addIssue({ code: 'custom', path: ['webhook_url'], message: 'Send webhook_url, or bot_token with channel.' });
    }
    if (c.bot_token !== undefined && c.webhook_url === undefined && c.channel === undefined) {
      ctx.addIssue({
        code: 'invalid_type',
        expected: 'string',
        input: undefined,
        path: ['channel'],
        message: 'channel is required with bot_token.',
      });
    }
    if (c.webhook_url !== undefined && c.channel !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['channel'],
        message: 'channel applies to bot_token mode only; a webhook posts to the channel it was made for.',
      });
    }
    // An incoming webhook cannot reply in a thread, so there is nothing to broadcast.
    if (c.webhook_url !== undefined && c.reply_broadcast !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['reply_broadcast'],
        message: 'reply_broadcast applies to bot_token mode only; an incoming webhook cannot reply in a thread.',
      });
    }
  })
  .meta({ id: 'SlackConnectionConfig' });

export type SlackConfig = z.output<typeof SlackConfigSchema>;

export const slack = defineConnectionType({
  configSchema: SlackConfigSchema,
  secretFields: ['webhook_url', 'bot_token'],
  destinations: (c) => (c.webhook_url !== undefined ? [urlDestination('webhook_url', c.webhook_url)] : []),
  readOnlyCheck: (c) => (c.bot_token !== undefined ? 'auth.test' : null),
});
