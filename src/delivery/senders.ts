import { createSmtpClient, type SmtpClientOptions } from '../channels/email/send.js';
import { CHANNEL_TYPES, channelOf, type ChannelType, type ConfigOf } from '../channels/index.js';
import { scrubResult } from '../channels/common/http-outcome.js';
import type { ChannelAdapter, ChannelDeps, ChannelSender, SendResult } from '../contracts/channel.js';
import type { ChannelSenders } from '../ports/index.js';
import type { GuardedOutboundHttp } from './outbound/http.js';

/**
 * The senders of every registered channel type (src/channels/<type>/send.ts), built once from
 * their lazily loaded modules. Every sender is wrapped the same way here: one hard deadline per
 * attempt, and one scrub of the connection's secret values from whatever a platform echoed back.
 */

export type ChannelAdapters = { [T in ChannelType]: ChannelAdapter<ConfigOf<T>> };

/** Loads the I/O half of every channel module (each `send.ts`), once per process. */
export async function loadChannelAdapters(): Promise<ChannelAdapters> {
  const entries = await Promise.all(CHANNEL_TYPES.map(async (t) => [t, await channelOf(t).adapter()] as const));
  return Object.fromEntries(entries) as unknown as ChannelAdapters;
}

export interface ChannelSenderDeps extends Omit<ChannelDeps, 'smtp' | 'http'> {
  /** The guarded HTTP client (createOutboundHttp) with SLACK_API_URL and TELEGRAM_API_URL trusted. */
  http: GuardedOutboundHttp;
  /** The SMTP client; by default one through the HTTP client's guard, with `smtpOptions`. */
  smtp?: ChannelDeps['smtp'];
  smtpOptions?: Omit<SmtpClientOptions, 'guard'>;
  /**
   * The hard bound on one delivery attempt, whatever the channel (DNS, connect, TLS, an SMTP
   * server that answers one byte at a time). Default 60 s: above every per-step time-out.
   */
  attemptDeadlineMs?: number;
}

export const ATTEMPT_DEADLINE_MS = 60_000;

/** The ChannelDeps every adapter receives, with the default SMTP client filled in. */
export function channelDeps(deps: ChannelSenderDeps): ChannelDeps {
  const { smtp, smtpOptions, attemptDeadlineMs: _deadline, ...rest } = deps;
  return { ...rest, smtp: smtp ?? createSmtpClient({ ...smtpOptions, guard: deps.http.guard }) };
}

export function createChannelSenders(adapters: ChannelAdapters, deps: ChannelSenderDeps): ChannelSenders {
  const shared = channelDeps(deps);
  const deadline = deps.attemptDeadlineMs ?? ATTEMPT_DEADLINE_MS;
  const build = <T extends ChannelType>(t: T): ChannelSender<ConfigOf<T>> => {
    // Each adapter is typed with its own config; here they are handled alike (the map pairs them).
    const sender = adapters[t].createSender(shared) as ChannelSender<unknown>;
    return {
      send: async (target, message) => scrubbed(bounded(sender.send(target, message), deadline), target.secrets),
    };
  };
  return Object.fromEntries(CHANNEL_TYPES.map((t) => [t, build(t)])) as unknown as ChannelSenders;
}

async function scrubbed(result: Promise<SendResult>, secrets: Record<string, string>): Promise<SendResult> {
  return scrubResult(await result, Object.values(secrets));
}

/**
 * Past the deadline the attempt counts as a retryable failure. Ambiguous: the message may have
 * gone out before the platform stalled, so a retry is flagged as a possible duplicate. What is
 * still pending ends on its own time-outs; its late result is ignored.
 */
async function bounded(attempt: Promise<SendResult>, deadlineMs: number): Promise<SendResult> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<SendResult>((resolve) => {
    timer = setTimeout(() => {
      resolve({
        outcome: 'retryable',
        httpStatus: null,
        providerCode: null,
        latencyMs: deadlineMs,
        retryAfterMs: null,
        error: `the attempt did not finish within ${deadlineMs >= 1000 ? `${Math.round(deadlineMs / 1000)} s` : `${deadlineMs} ms`}`,
        ambiguous: true,
      });
    }, deadlineMs);
  });
  try {
    return await Promise.race([attempt, expired]);
  } finally {
    clearTimeout(timer);
  }
}
