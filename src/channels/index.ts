import type { z } from 'zod';
import type { CHANNEL_TYPES, ChannelModule, ChannelType } from '../contracts/channel.js';
import { discordChannel } from './discord/index.js';
import { emailChannel } from './email/index.js';
import { googleChatChannel } from './google-chat/index.js';
import { mattermostChannel } from './mattermost/index.js';
import { slackChannel } from './slack/index.js';
import { statusPageChannel } from './status-page/index.js';
import { teamsChannel } from './teams/index.js';
import { telegramChannel } from './telegram/index.js';
import { webhookChannel } from './webhook/index.js';

/**
 * The registry of channel types (CONTRIBUTING.md "Adding a channel type"): one line per platform, in the
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
  statusPageChannel,
] as const satisfies ModulesOf<typeof CHANNEL_TYPES>;

/** One module per type of the contract's CHANNEL_TYPES, in its order: the registry cannot drift from it. */
type ModulesOf<T extends readonly string[]> = { readonly [K in keyof T]: { type: T[K] } };

type Modules = typeof MODULES;

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

export { CHANNEL_TYPES, ChannelTypeSchema } from '../contracts/channel.js';
export type { ChannelModule, ChannelType, Destination, MessageFormat } from '../contracts/channel.js';
export type { DiscordConfig } from './discord/config.js';
export type { EmailConfig } from './email/config.js';
export type { GoogleChatConfig } from './google-chat/config.js';
export type { MattermostConfig } from './mattermost/config.js';
export type { SlackConfig } from './slack/config.js';
export type { StatusPageConfig } from './status-page/config.js';
export type { TeamsConfig } from './teams/config.js';
export type { TelegramConfig } from './telegram/config.js';
export type { WebhookConfig } from './webhook/config.js';
