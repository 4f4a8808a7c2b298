import { z } from 'zod';

/** The channel types Herald delivers to (README "Delivery semantics"); templates and connections share this list. */
export const CHANNEL_TYPES = ['slack', 'teams', 'discord', 'email', 'mattermost', 'google_chat', 'telegram', 'webhook'] as const;

export const ChannelTypeSchema = z.enum(CHANNEL_TYPES).meta({ id: 'ChannelType' });
export type ChannelType = z.infer<typeof ChannelTypeSchema>;
