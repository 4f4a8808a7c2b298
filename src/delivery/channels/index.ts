import type { ChannelType } from '../../domain/channel-types.js';
import type { DeliveryConnection } from '../../domain/connection.js';
import type { OutboundMessage } from '../../ports.js';
import type { OutboundHttp } from '../outbound-http.js';
import { createDiscordSender } from './discord.js';
import { createEmailSender, createSmtpClient, type SmtpClient, type SmtpClientOptions } from './email.js';
import { createGoogleChatSender } from './google-chat.js';
import { scrubResult, type ChannelResult } from './http-outcome.js';
import { createMattermostSender } from './mattermost.js';
import { createSlackSender } from './slack.js';
import { createTeamsSender } from './teams.js';
import { createTelegramSender } from './telegram.js';
import { createWebhookSender } from './webhook.js';

/**
 * The eight channel senders, one file each (adding a channel type: a sender file here, one line
 * below, and its connection definition in domain/connection-types/). Every result passes through
 * one scrub of the connection's secret values, whatever a platform echoed back.
 */

export interface ChannelSenderDeps {
  /** The guarded HTTP client (createOutboundHttp) with SLACK_API_URL and TELEGRAM_API_URL trusted. */
  http: OutboundHttp;
  /** SLACK_API_URL. */
  slackApiUrl: string;
  /** TELEGRAM_API_URL. */
  telegramApiUrl: string;
  /** Wall clock in ms (webhook timestamps, Discord embed time, HTTP-date Retry-After). */
  now?: () => number;
  /** SMTP: extra CA and time-outs (the guard is the HTTP client's). */
  smtp?: Omit<SmtpClientOptions, 'guard'>;
  /** Per-request budget for HTTP platforms (default: the client's, 10 s). */
  timeoutMs?: number;
}

/** A sender as built here: its results may name a failure's cause (read by the connection tester). */
export interface HeraldChannelSender<T extends ChannelType> {
  send(target: Extract<DeliveryConnection, { type: T }>, message: OutboundMessage): Promise<ChannelResult>;
}

/** Assignable to the ChannelSenders port. */
export type HeraldChannelSenders = { [T in ChannelType]: HeraldChannelSender<T> };

export function createChannelSenders(deps: ChannelSenderDeps, smtp: SmtpClient = createSmtpClient({ ...deps.smtp, guard: deps.http.guard })): HeraldChannelSenders {
  const common = { http: deps.http, ...(deps.now ? { now: deps.now } : {}), ...(deps.timeoutMs ? { timeoutMs: deps.timeoutMs } : {}) };
  return {
    slack: scrubbing<'slack'>(createSlackSender({ ...common, apiUrl: deps.slackApiUrl })),
    teams: scrubbing<'teams'>(createTeamsSender(common)),
    discord: scrubbing<'discord'>(createDiscordSender(common)),
    email: scrubbing<'email'>(createEmailSender({ smtp })),
    mattermost: scrubbing<'mattermost'>(createMattermostSender(common)),
    google_chat: scrubbing<'google_chat'>(createGoogleChatSender(common)),
    telegram: scrubbing<'telegram'>(createTelegramSender({ ...common, apiUrl: deps.telegramApiUrl })),
    webhook: scrubbing<'webhook'>(createWebhookSender(common)),
  };
}

function scrubbing<T extends ChannelType>(sender: HeraldChannelSender<T>): HeraldChannelSender<T> {
  return {
    async send(target, message) {
      return scrubResult(await sender.send(target, message), Object.values(target.secrets));
    },
  };
}

export type { ChannelResult, FailureCause } from './http-outcome.js';
