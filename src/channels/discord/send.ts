import type { DiscordConfig } from './config.js';
import type { OutboundMessage } from '../../ports/index.js';
import type { OutboundHttp, OutboundResponse } from '../../delivery/outbound/http.js';
import { exchange, fromHttpStatus, hostOf, jsonOf, secondsToMs, stringOf, withQuery, type ChannelResult } from '../common/http-outcome.js';
import { subjectOf, truncate } from '../common/message-text.js';
import type { ChannelAdapter } from '../adapter.js';

/**
 * Discord through a channel webhook, executed with `?wait=true` so a 200 carries the created
 * message (proof of delivery) — and `thread_id` when the connection posts into a thread. One embed:
 * the subject as its title, the body as its description (values were escaped as Markdown at
 * render), coloured by severity, linking the incident when Herald has a public URL.
 * `allowed_mentions: {parse: []}` makes Discord ping nobody, whatever the text says.
 *
 * Discord's limits (title 256, description 4,096, 6,000 per message) are met by cutting with a
 * visible "… (truncated)": an incident message half-shown beats none. With one embed of at most
 * 256 + 4,096 characters the 6,000 total cannot be exceeded.
 * A 429 carries `retry_after` in seconds (a float) in the JSON body, used over the header.
 */

export interface DiscordSenderDeps {
  http: OutboundHttp;
  /** Wall clock: the embed's timestamp and HTTP-date Retry-After values. */
  now?: () => number;
  timeoutMs?: number;
}

export const DISCORD_TITLE_LIMIT = 256;
export const DISCORD_DESCRIPTION_LIMIT = 4096;

/** Severity → embed colour (red, orange, yellow, blue; grey for anything else). */
const SEVERITY_COLOURS: Record<string, number> = { critical: 0xd92d20, major: 0xf79009, minor: 0xfdb022, low: 0x2e90fa };
const DEFAULT_COLOUR = 0x98a2b3;

export function discordPayload(message: OutboundMessage, config: Pick<DiscordConfig, 'username' | 'avatar_url'>, nowMs: number): Record<string, unknown> {
  const title = truncate(subjectOf(message), DISCORD_TITLE_LIMIT);
  const description = truncate(message.content.body, DISCORD_DESCRIPTION_LIMIT);
  const embed: Record<string, unknown> = {
    ...(title !== '' ? { title } : {}),
    ...(description !== '' ? { description } : {}),
    color: SEVERITY_COLOURS[message.incident.severity] ?? DEFAULT_COLOUR,
    timestamp: new Date(nowMs).toISOString(),
    ...(message.incident.url !== null && /^https?:\/\//.test(message.incident.url) ? { url: message.incident.url } : {}),
  };
  return {
    ...(config.username !== undefined ? { username: config.username } : {}),
    ...(config.avatar_url !== undefined ? { avatar_url: config.avatar_url } : {}),
    embeds: [embed],
    allowed_mentions: { parse: [] },
  };
}

/** The webhook URL with `wait=true` (and `thread_id`), keeping whatever query it had. */
export function discordExecuteUrl(config: Pick<DiscordConfig, 'webhook_url' | 'thread_id'>): string {
  return withQuery(config.webhook_url, { wait: 'true', ...(config.thread_id !== undefined ? { thread_id: config.thread_id } : {}) });
}

export function createDiscordSender(deps: DiscordSenderDeps) {
  const now = deps.now ?? Date.now;
  return {
    send(target: { config: DiscordConfig }, message: OutboundMessage): Promise<ChannelResult> {
      const config = target.config;
      const body = JSON.stringify(discordPayload(message, config, now()));
      const req = { method: 'POST', url: discordExecuteUrl(config), headers: { 'content-type': 'application/json' }, body, ...(deps.timeoutMs ? { timeoutMs: deps.timeoutMs } : {}) };
      return exchange(deps.http, req, (res) => readDiscordAnswer(res, hostOf(config.webhook_url), now()));
    },
  };
}

/** Discord errors: `{message, code}`; 429: `{retry_after, global}`. */
export function readDiscordAnswer(res: OutboundResponse, host: string, nowMs: number): ChannelResult {
  const json = jsonOf(res);
  return fromHttpStatus(res, {
    urlAddressed: true,
    who: `Discord (${host})`,
    providerCode: res.status >= 400 ? stringOf(json?.code) : null,
    detail: res.status >= 400 ? stringOf(json?.message) : null,
    retryAfterMs: res.status === 429 ? secondsToMs(json?.retry_after) : null,
    nowMs,
  });
}

export const adapter: ChannelAdapter<DiscordConfig> = {
  createSender: (deps) => createDiscordSender(deps),
  /** GET on the webhook URL answers its name without posting. */
  async check(config, deps) {
    const req = { method: 'GET', url: config.webhook_url, ...(deps.timeoutMs ? { timeoutMs: deps.timeoutMs } : {}) };
    const nowMs = (deps.now ?? Date.now)();
    let name = '';
    const result = await exchange(deps.http, req, (res) => {
      name = stringOf(jsonOf(res)?.name) ?? '';
      return readDiscordAnswer(res, 'Discord', nowMs);
    });
    return { result, okDetail: `The Discord webhook exists${name ? ` ("${name}")` : ''}.` };
  },
};
