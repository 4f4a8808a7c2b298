import type { z } from 'zod';
import type { ChannelType } from '../channel-types.js';
import type { ConnectionTypeDefinition } from './definition.js';
import { discord } from './discord.js';
import { email } from './email.js';
import { googleChat } from './google-chat.js';
import { mattermost } from './mattermost.js';
import { slack } from './slack.js';
import { teams } from './teams.js';
import { telegram } from './telegram.js';
import { webhook } from './webhook.js';

/** Channel type → its connection definition. Adding a type: one file beside this one, one line here. */
export const CONNECTION_TYPES = {
  slack,
  teams,
  discord,
  email,
  mattermost,
  google_chat: googleChat,
  telegram,
  webhook,
} as const satisfies Record<ChannelType, { type: ChannelType }>;

export type ConnectionTypes = typeof CONNECTION_TYPES;

/** The full config (secrets included) of one type, as validated and as the delivery code sees it. */
export type ConfigOf<T extends ChannelType> = ConnectionTypes[T] extends ConnectionTypeDefinition<infer S, infer _C> ? z.output<S> : never;

/** The definition of a type, seen through the common interface (for code that handles every type). */
export function definitionOf(type: ChannelType): ConnectionTypeDefinition {
  return CONNECTION_TYPES[type];
}

export type { ConnectionTypeDefinition, Destination } from './definition.js';
export type { DiscordConfig } from './discord.js';
export type { EmailConfig } from './email.js';
export type { GoogleChatConfig } from './google-chat.js';
export type { MattermostConfig } from './mattermost.js';
export type { SlackConfig } from './slack.js';
export type { TeamsConfig } from './teams.js';
export type { TelegramConfig } from './telegram.js';
export type { WebhookConfig } from './webhook.js';
