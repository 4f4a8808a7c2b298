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
  /**
   * The hard bound on one delivery attempt, whatever the channel (DNS, connect, TLS, an SMTP
   * server that answers one byte at a time). Default 60 s: above every per-step time-out.
   */
  attemptDeadlineMs?: number;
}

export const ATTEMPT_DEADLINE_MS = 60_000;

/** A sender as built here: its results may name a failure's cause (read by the connection tester). */
export interface HeraldChannelSender<T extends ChannelType> {
  send(target: Extract<DeliveryConnection, { type: T }>, message: OutboundMessage): Promise<ChannelResult>;
}

/** Assignable to the ChannelSenders port. */
export type HeraldChannelSenders = { [T in ChannelType]: HeraldChannelSender<T> };

export function createChannelSenders(deps: ChannelSenderDeps, smtp: SmtpClient = createSmtpClient({ ...deps.smtp, guard: deps.http.guard })): HeraldChannelSenders {
  const common = { http: deps.http, ...(deps.now ? { now: deps.now } : {}), ...(deps.timeoutMs ? { timeoutMs: deps.timeoutMs } : {}) };
  const deadline = deps.attemptDeadlineMs ?? ATTEMPT_DEADLINE_MS;
  const wrap = <T extends ChannelType>(sender: HeraldChannelSender<T>) => scrubbing<T>(bounded<T>(sender, deadline));
  return {
    slack: wrap<'slack'>(createSlackSender({ ...common, apiUrl: deps.slackApiUrl })),
    teams: wrap<'teams'>(createTeamsSender(common)),
    discord: wrap<'discord'>(createDiscordSender(common)),
    email: wrap<'email'>(createEmailSender({ smtp })),
    mattermost: wrap<'mattermost'>(createMattermostSender(common)),
    google_chat: wrap<'google_chat'>(createGoogleChatSender(common)),
    telegram: wrap<'telegram'>(createTelegramSender({ ...common, apiUrl: deps.telegramApiUrl })),
    webhook: wrap<'webhook'>(createWebhookSender(common)),
  };
}

function scrubbing<T extends ChannelType>(sender: HeraldChannelSender<T>): HeraldChannelSender<T> {
  return {
    async send(target, message) {
      return scrubResult(await sender.send(target, message), Object.values(target.secrets));
    },
  };
}

/**
 * Past the deadline the attempt counts as a retryable failure. Ambiguous: the message may have
 * gone out before the platform stalled, so a retry is flagged as a possible duplicate. What is
 * still pending ends on its own time-outs; its late result is ignored.
 */
function bounded<T extends ChannelType>(sender: HeraldChannelSender<T>, deadlineMs: number): HeraldChannelSender<T> {
  return {
    async send(target, message) {
      let timer: NodeJS.Timeout | undefined;
      const expired = new Promise<ChannelResult>((resolve) => {
        timer = setTimeout(() => {
          resolve({ outcome: 'retryable', httpStatus: null, providerCode: null, latencyMs: deadlineMs, retryAfterMs: null, error: `the attempt did not finish within ${deadlineMs >= 1000 ? `${Math.round(deadlineMs / 1000)} s` : `${deadlineMs} ms`}`, ambiguous: true });
        }, deadlineMs);
      });
      try {
        return await Promise.race([sender.send(target, message), expired]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

export type { ChannelResult, FailureCause } from './http-outcome.js';
