import { z } from 'zod';
import { fieldError } from '../../domain/common/errors.js';
import { defineConnectionType, hostOfUrl, httpUrl, shortText, urlDestination } from '../common/config-fields.js';

/** Discord through a channel webhook (the URL, which carries the token, is the secret). */
const DiscordConfigSchema = z
  .strictObject({
    webhook_url: httpUrl('webhook_url'),
    username: shortText('username', 80).optional(),
    avatar_url: httpUrl('avatar_url').optional(),
    thread_id: z
      .string()
      .regex(/^\d{1,20}$/, 'thread_id is a Discord snowflake (digits).')
      .optional(),
    forum: z.boolean().optional().meta({
      description:
        "The webhook posts into a forum (or media) channel: an incident's first message opens a post (a thread) named after it, and later ones continue that post.",
    }),
  })
  .superRefine((c, ctx) => {
    if (c.forum === true && c.thread_id !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['forum'],
        message: 'Use forum (a post per incident) or thread_id (every message in one thread), not both.',
      });
  })
  .meta({ id: 'DiscordConnectionConfig' });

export type DiscordConfig = z.output<typeof DiscordConfigSchema>;

const DISCORD_HOSTS = new Set(['discord.com', 'discordapp.com', 'ptb.discord.com', 'canary.discord.com']);
const WEBHOOK_PATH = /^\/api(?:\/v\d{1,2})?\/webhooks\/\d{1,20}\/[A-Za-z0-9_-]{1,200}\/?$/;

/** True for https://discord.com/api/webhooks/<id>/<token> (and its discordapp.com/ptb/canary forms). */
export function isDiscordWebhookUrl(url: string): boolean {
  try {
    const u = new URL(url);
    return u.protocol === 'https:' && DISCORD_HOSTS.has(u.hostname.toLowerCase()) && WEBHOOK_PATH.test(u.pathname);
  } catch {
    return false;
  }
}

export const discord = defineConnectionType({
  configSchema: DiscordConfigSchema,
  secretFields: ['webhook_url'],
  destinations: (c) => [urlDestination('webhook_url', c.webhook_url)],
  readOnlyCheck: () => 'get_webhook',
  rules(c, allow) {
    // An allow-listed host (a local stand-in for Discord) may use any path.
    if (isDiscordWebhookUrl(c.webhook_url) || allow.allows(hostOfUrl(c.webhook_url))) return null;
    return fieldError(
      'validation_failed',
      'config.webhook_url',
      'webhook_url must be a Discord webhook URL: https://discord.com/api/webhooks/<id>/<token>.',
      'invalid_format',
    );
  },
});
