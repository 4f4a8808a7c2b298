import type { ChannelType } from '../../src/channels/index.js';
import { HEALTHY, splitSecrets, type DeliveryConnection } from '../../src/domain/connection/connection.js';
import type { ConfigOf } from '../../src/channels/index.js';
import { expect } from 'vitest';
import type { ConversationContext, MessageRef, OutboundMessage, SendResult } from '../../src/ports/index.js';

/**
 * Builders for what the delivery service hands a sender: a connection with its secrets opened,
 * and an outbound message. For tests that call senders and the tester directly.
 */

let seq = 0;

export function targetOf<T extends ChannelType>(
  type: T,
  config: ConfigOf<T>,
  name = `${type} test`,
): Extract<DeliveryConnection, { type: T }> {
  return {
    id: `con_01J0000000000000000000${String(++seq).padStart(4, '0')}`,
    name,
    type,
    enabled: true,
    config,
    secrets: splitSecrets(type, config as Record<string, unknown>).secrets,
    rateLimitPerMinute: null,
    health: HEALTHY,
  } as unknown as Extract<DeliveryConnection, { type: T }>;
}

export function messageOf(
  over: Partial<OutboundMessage> & { subject?: string; body?: string; html?: string } = {},
): OutboundMessage {
  const { subject = 'Database outage', body = 'The primary database is down. ETA 30 min.', html, ...rest } = over;
  return {
    deliveryId: `dlv_01J00000000000000000${String(++seq).padStart(6, '0')}`,
    executionId: 'exe_01J000000000000000000000EX',
    incident: {
      id: 'inc_01J000000000000000000000IN',
      title: 'Database outage',
      severity: 'critical',
      status: 'investigating',
      url: 'https://herald.example.com/v1/incidents/inc_01J000000000000000000000IN',
    },
    content: { subject, body, ...(html !== undefined ? { html } : {}) },
    ...rest,
  };
}

/** A message's place in a conversation, for a sender test: number `sequence`, threaded, an announcement. */
export const conversationContext = (
  sequence: number,
  over: Partial<ConversationContext> = {},
): ConversationContext => ({
  sequence,
  previousDeliveryId: sequence === 1 ? null : 'dlv_previous',
  kind: 'announcement',
  targetDeliveryId: null,
  threaded: true,
  ...over,
});

/** The message a delivered send answered (fails the test when it was not delivered or has none). */
export function deliveredRef(r: SendResult): MessageRef {
  expect(r.outcome).toBe('delivered');
  const ref = r.outcome === 'delivered' ? r.message : null;
  expect(ref).toBeTruthy();
  return ref!;
}
