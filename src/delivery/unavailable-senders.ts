import { CHANNEL_TYPES } from '../domain/channel-types.js';
import type { ChannelSender, ChannelSenders, SendResult } from '../ports.js';

/** Placeholder senders: every send fails permanently (replaced by the real channel senders). */
export function unavailableSenders(): ChannelSenders {
  const result: SendResult = { outcome: 'permanent', httpStatus: null, providerCode: null, latencyMs: null, error: 'no sender for this channel type', disable: null };
  const sender: ChannelSender = { send: () => Promise.resolve(result) };
  return Object.fromEntries(CHANNEL_TYPES.map((t) => [t, sender])) as unknown as ChannelSenders;
}
