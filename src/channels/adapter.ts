import type { OutboundHttp } from '../delivery/outbound/http.js';
import type { OutboundMessage } from '../ports/index.js';
import type { SmtpClient } from './email/send.js';
import type { ChannelResult } from './common/http-outcome.js';

/**
 * The I/O half of a channel module (its `send.ts` default export): how a message is sent and
 * how a connection is checked without sending one.
 */

/** What every channel's I/O may use; each takes only what it needs. */
export interface ChannelDeps {
  /** The guarded HTTP client (createOutboundHttp) with SLACK_API_URL and TELEGRAM_API_URL trusted. */
  http: OutboundHttp;
  /** SMTP, through the same guard. */
  smtp: SmtpClient;
  /** SLACK_API_URL. */
  slackApiUrl: string;
  /** TELEGRAM_API_URL. */
  telegramApiUrl: string;
  /** Wall clock in ms (webhook timestamps, Discord embed time, HTTP-date Retry-After). */
  now?: () => number;
  /** Per-request budget for HTTP platforms (default: the client's, 10 s). */
  timeoutMs?: number;
}

/** The part of a connection a sender sees. */
export interface SendTarget<Config> {
  config: Config;
  secrets: Record<string, string>;
}

export interface ChannelSender<Config> {
  send(target: SendTarget<Config>, message: OutboundMessage): Promise<ChannelResult>;
}

/** A read-only check's answer: the platform's result and what to tell the user when it is fine. */
export interface CheckAnswer {
  result: ChannelResult;
  okDetail: string;
}

export interface ChannelAdapter<Config> {
  createSender(deps: ChannelDeps): ChannelSender<Config>;
  /**
   * The read-only check named by the config module's `readOnlyCheck` (Slack `auth.test`, Discord
   * GET webhook, Telegram `getMe`, SMTP verify); null when the type (or this config) has none.
   */
  check: ((config: Config, deps: ChannelDeps) => Promise<CheckAnswer | null>) | null;
}
