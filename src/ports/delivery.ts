import type { ChannelSender, ChannelType } from '../contracts/channel.js';
import type { ConnectionTestResult, DeliveryConnection } from '../domain/connection/connection.js';
import type { PacingRule } from '../domain/execution/delivery-policy.js';
import type { Delivery } from '../domain/execution/execution.js';

/** What the services need to send: the queue, pacing, the channel senders and the connection tester, implemented in src/delivery/ and src/channels/. */

/**
 * Runs the network part of a connection test: the read-only check of the type (auth.test, GET
 * webhook, SMTP verify, getMe) or, with `sendMessage`, a marked test message — through the
 * outbound guard, so a name resolving to a non-public address answers `blocked_by_policy`.
 * Implemented by the delivery layer; the service has already done 404, config validity, the
 * literal-address policy and `needs_send_message`.
 */
export interface ConnectionTester {
  test(connection: DeliveryConnection, opts: { sendMessage: boolean }): Promise<ConnectionTestResult>;
}

// ── delivery ──
export interface QueuedJob {
  deliveryId: string;
  /** Queue-unique id: the delivery id, plus the redeliver round. */
  jobId: string;
  delayMs?: number;
  /** What the worker may read beside the delivery itself (see DeliveryHint). */
  hint?: DeliveryHint;
}

/**
 * Where a delivery belongs, carried by its job so the worker reads the delivery, its connection,
 * its incident and its conversation's first message in one round trip instead of two. Only a
 * hint: the worker checks it against the delivery record, and reads by the record when they
 * differ (or a job from an older version carries none).
 */
export interface DeliveryHint {
  incidentId: string;
  connectionId: string;
  /** It continues a conversation (sequence > 1, an update): its first message will be read. */
  follows: boolean;
}

/**
 * One dispatch job: up to DISPATCH_CHUNK new deliveries of one execute, sent by the worker that
 * takes the job, each after taking it from the outbox (ExecutionRepo.claimOutbox). A delivery the
 * job could not take, and any that must wait (a retry, a pacing slot), gets a job of its own.
 */
export interface DispatchBatch {
  /** Queue-unique: `dsp-` and the first delivery's id. */
  jobId: string;
  incidentId: string;
  /** The outbox score the deliveries were committed with (their execution's `created_at`, ms). */
  claim: number;
  deliveries: { deliveryId: string; connectionId: string; follows: boolean }[];
}

/** What a dispatch job sends itself, and what it puts on the queue as a job per delivery. */
export interface DispatchClaim {
  /** Taken from the outbox: this worker's alone to send (with `process`), in this order. */
  mine: QueuedJob[];
  /** Not taken (the sweep took them, or an earlier run of the same job did) and not final yet. */
  theirs: QueuedJob[];
}

export interface DeliveryQueue {
  enqueue(jobs: QueuedJob[]): Promise<void>;
  /** Best effort: a job that is running is left alone (the worker re-checks the delivery). */
  remove(jobIds: string[]): Promise<void>;
}

/**
 * Per-connection pacing, in two steps. `reserve` always takes the next free slot of the
 * connection's schedule and answers how many ms away it is (0 = now): a waiting delivery sleeps
 * until then, so a backlog drains first come, first served, with one question each. `take`, right
 * before sending, takes a token of the send bucket only if one is free now (0), else answers the
 * ms to wait (nothing taken): it holds the sends to the rate when several slots fall due at once.
 */
export interface Pacer {
  reserve(connectionId: string, rule: PacingRule): Promise<number>;
  take(connectionId: string, rule: PacingRule): Promise<number>;
  /** Forgets reserved slots (their deliveries were cancelled), so new ones need not wait for them. */
  reset(connectionId: string): Promise<void>;
}

/** A connection as a sender needs it: config with its secrets opened. Never presented. */
export type DeliveryTarget = DeliveryConnection;

export type { MessageAction, MessageKind, MessageRef } from '../contracts/channel.js';

/**
 * A sender per channel type, `send` taking that type's connection. The message, the result and
 * the sender itself are the channel contract's (src/contracts/channel.ts).
 */
export type ChannelSenders = {
  [T in ChannelType]: ChannelSender<Extract<DeliveryConnection, { type: T }>['config']>;
};

export type {
  ChannelSender,
  ConversationContext,
  FailureCause,
  OutboundMessage,
  SendResult,
} from '../contracts/channel.js';

/**
 * What the queue adapter should do with a job: finish it, or run it again after a delay (for
 * pacing, a retry, or to look again whether its conversation's first message is settled).
 */
export type ProcessOutcome =
  { kind: 'done'; status: Delivery['status'] } | { kind: 'delay'; ms: number; reason: 'pacing' | 'retry' | 'thread' };
