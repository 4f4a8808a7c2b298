import { z } from 'zod';
import type { ChannelModule } from './channel.js';
import { discordChannel } from './discord/index.js';
import { emailChannel } from './email/index.js';
import { googleChatChannel } from './google-chat/index.js';
import { mattermostChannel } from './mattermost/index.js';
import { slackChannel } from './slack/index.js';
import { teamsChannel } from './teams/index.js';
import { telegramChannel } from './telegram/index.js';
import { webhookChannel } from './webhook/index.js';

/**
 * The registry of channel types (README "Adding a channel type"): one line per platform, in the
 * order the README and the OpenAPI list them. Everything else about a type is in its folder.
 */
const MODULES = [
  slackChannel,
  teamsChannel,
  discordChannel,
  emailChannel,
  mattermostChannel,
  googleChatChannel,
  telegramChannel,
  webhookChannel,
] as const;

type Modules = typeof MODULES;
export type ChannelType = Modules[number]['type'];

/** The channel types Herald delivers to; templates and connections share this list. */
export const CHANNEL_TYPES = MODULES.map((m) => m.type) as unknown as TypesOf<Modules>;

/** A tuple of modules → the tuple of their type names (a homomorphic map keeps it a tuple). */
type TypesOf<M extends readonly { type: string }[]> = { readonly [K in keyof M]: M[K]['type'] };

export const ChannelTypeSchema = z.enum(CHANNEL_TYPES).meta({ id: 'ChannelType' });

/** Channel type → its module. */
export const CHANNELS = Object.fromEntries(MODULES.map((m) => [m.type, m])) as {
  readonly [M in Modules[number] as M['type']]: M;
};

/** The full config (secrets included) of one type, as validated and as the delivery code sees it. */
export type ConfigOf<T extends ChannelType> =
  (typeof CHANNELS)[T] extends ChannelModule<T, infer S, infer _C> ? z.output<S> : never;

/** The module of a type, seen through the common interface (for code that handles every type). */
export function channelOf(type: ChannelType): ChannelModule<ChannelType> {
  return CHANNELS[type];
}

export type { ChannelModule, MessageFormat } from './channel.js';
export type { Destination } from './common/config-fields.js';
export type { DiscordConfig } from './discord/config.js';
export type { EmailConfig } from './email/config.js';
export type { GoogleChatConfig } from './google-chat/config.js';
export type { MattermostConfig } from './mattermost/config.js';
export type { SlackConfig } from './slack/config.js';
export type { TeamsConfig } from './teams/config.js';
export type { TelegramConfig } from './telegram/config.js';
export type { WebhookConfig } from './webhook/config.js';
