import type { ComponentStatus, MaintenanceState, PublicImpact, PublicState } from '../domain/status/public.js';

/**
 * Subscribers of the public status page (docs/subscribers.md): the ports between their store
 * (src/store/subscribers.ts), the services (src/services/subscriptions.ts, subscriber-admin.ts),
 * the notifier that sends (src/subscribers/) and the status page's writes that open notices.
 *
 * Personal data: a subscriber's address (and a webhook's secret) exist in plain text only in
 * memory; the store seals them with the secret box. The id is derived from the address with a
 * keyed hash, so finding a subscriber by address needs no index of addresses, and no token is
 * stored: link tokens are signed and checked against the record (`token_version`).
 */

export const SUBSCRIBER_KINDS = ['email', 'webhook'] as const;
export type SubscriberKind = (typeof SUBSCRIBER_KINDS)[number];

/**
 * - pending: asked to subscribe, not confirmed (only the confirmation reaches it);
 * - confirmed: told of every matching notice;
 * - unsubscribed: left; erased after the retention (HERALD_SUBSCRIBER_RETENTION);
 * - bounced: a permanent failure (SMTP 5xx on RCPT, webhook 410): nothing more is sent.
 */
export const SUBSCRIBER_STATES = ['pending', 'confirmed', 'unsubscribed', 'bounced'] as const;
export type SubscriberState = (typeof SUBSCRIBER_STATES)[number];

/** The page's locales (src/status/locales/). */
export type SubscriberLocale = 'en' | 'de';

export interface Subscriber {
  /** `sub_` + 26 characters derived from (kind, address) with the subscriber key: stable per address. */
  id: string;
  kind: SubscriberKind;
  /** E-mail: as given, domain lower-cased. Webhook: the URL as given. Plain text in memory only. */
  address: string;
  state: SubscriberState;
  /** Component ids it wants to hear about; empty: all of them. */
  components: string[];
  locale: SubscriberLocale;
  /** `page` (the form or POST /status/subscriptions), or `import:<source>` (the admin import). */
  source: string;
  created_at: string;
  confirmed_at: string | null;
  unsubscribed_at: string | null;
  bounced_at: string | null;
  /** Why it bounced (the SMTP reply or the HTTP status); never the address. */
  bounce_reason: string | null;
  /** Bumped to invalidate every manage and unsubscribe link sent so far. */
  token_version: number;
  /** While pending: the confirmation link's nonce (single use) and expiry. */
  confirm: { nonce: string; expires_at: string } | null;
  /** Webhook only: the `whsec_…` secret its payloads are signed with (Standard Webhooks). */
  webhook_secret: string | null;
  /** Compare-and-set revision: 1 on create, +1 per write. */
  rev: number;
}

/** The store of subscribers (src/store/subscribers.ts). */
export interface SubscriberRepo {
  /** How many buckets the set is spread over: notices and listings walk them 0..n-1. */
  readonly buckets: number;
  /** The id an address has (the same for the same kind and address, whatever its state). */
  idOf(kind: SubscriberKind, address: string): string;
  /** The bucket an id lives in. */
  bucketOf(id: string): number;
  get(id: string): Promise<Subscriber | null>;
  /**
   * Writes `next` if the stored record's rev is `expectRev` (null: none may exist). Keeps the
   * per-state counts and the erase schedule (unsubscribed and pending records expire) in step.
   * False: someone else wrote first (read again and decide again).
   */
  put(next: Subscriber, expectRev: number | null): Promise<boolean>;
  /** Erases it at once (GDPR art. 17); false when there was nothing. */
  erase(id: string): Promise<boolean>;
  /** Every subscriber of one bucket, in id order. */
  bucket(bucket: number): Promise<Subscriber[]>;
  /** The ids of one bucket, in id order: a notice reads the records a page at a time (`many`). */
  bucketIds(bucket: number): Promise<string[]>;
  /** The subscribers with these ids, in their order; null where one is gone. */
  many(ids: readonly string[]): Promise<(Subscriber | null)[]>;
  /** Subscribers per state. */
  counts(): Promise<Record<SubscriberState, number>>;
  /** Erases what the retention let go (unsubscribed, expired pending) up to `nowMs`; how many. */
  eraseExpired(nowMs: number, limit: number): Promise<number>;
}

/** Signed, expiring link tokens and the keyed hash of addresses (src/store/subscribers.ts). */
export interface SubscriberTokens {
  /** `confirm` expires (`expiresMs`) and is single use (its nonce); `manage` and `unsubscribe` last until `token_version` moves. */
  sign(t: LinkToken): string;
  /** The token's content when its signature holds and it has not expired; null otherwise. */
  verify(token: string, nowMs: number): LinkToken | null;
}

export interface LinkToken {
  purpose: 'confirm' | 'manage' | 'unsubscribe';
  subscriberId: string;
  /** The record's token_version when signed. */
  version: number;
  /** confirm: the nonce the record holds. */
  nonce?: string;
  /** confirm: when it stops working (ms). */
  expiresMs?: number;
}

// ---------------------------------------------------------------------------------------------
// Notices: what subscribers are told, and the outbox that tells them.

export const NOTICE_KINDS = ['incident_update', 'incident_correction', 'incident_retraction', 'maintenance'] as const;
export type NoticeKind = (typeof NOTICE_KINDS)[number];

/** A component as a notice names it (what the page showed when the notice was opened). */
export interface NoticeComponent {
  id: string;
  name: string;
  status: ComponentStatus;
}

/**
 * One thing the page published that subscribers hear about: its words are fixed when it is
 * opened, so every retry and every subscriber's mail says the same.
 */
export interface SubscriberNotice {
  /** Keyed by what made it: `ntc_<delivery id>` for a status page write, `ntc_<maintenance id>_<n>` for a maintenance notice. */
  id: string;
  kind: NoticeKind;
  created_at: string;
  /** The execution whose status page delivery opened it (its receipts show the tally); null for maintenance. */
  execution_id: string | null;
  page: { title: string; public_url: string };
  /** Who it concerns: subscribers of any of these components, and those of all; empty: everyone. */
  component_ids: string[];
  /** The components it names, as shown then (a webhook's `component_update`, the mail's list). */
  components: NoticeComponent[];
  incident: {
    id: string;
    name: string;
    impact: PublicImpact;
    status: PublicState;
    url: string;
    created_at: string;
  } | null;
  maintenance: {
    id: string;
    name: string;
    status: MaintenanceState;
    scheduled_for: string;
    scheduled_until: string;
    url: string;
  } | null;
  /** The update it is about (for a retraction: the one removed, with its words as they were). */
  update: { id: string; status: string; body: string; created_at: string; updated_at: string | null };
}

/** The tally of a notice, as an execution's receipts show it. */
export interface NoticeTally {
  /** Recipients matched so far (grows while batches run). */
  total: number;
  delivered: number;
  failed: number;
  /** Matched, not settled yet (being sent, or waiting for a retry). */
  pending: number;
  bounced: number;
  /** Resent after a crash cut off the first attempt: the receiving server may hold it twice (same Message-ID). */
  possible_duplicates: number;
  /** Every batch has run and nothing is pending. */
  complete: boolean;
}

export const RECIPIENT_STATES = ['sending', 'retrying', 'delivered', 'failed', 'bounced'] as const;
export type RecipientState = (typeof RECIPIENT_STATES)[number];

/** One subscriber's part of one notice (its per-subscriber receipt). */
export interface Recipient {
  subscriber_id: string;
  state: RecipientState;
  attempts: number;
  /** The last attempt's time. */
  at: string;
  /** The last failure (SMTP reply or HTTP status), never an address. */
  error: string | null;
  /** A crash cut off an attempt, so this one may have been received twice. */
  possible_duplicate: boolean;
}

/** A unit of notice work: a bucket of subscribers, or one subscriber's retry. */
export type NoticeWork =
  { noticeId: string; bucket: number; lease: number } | { noticeId: string; subscriberId: string; lease: number };

/** The notices and their outbox (src/store/subscribers.ts). */
export interface NoticeRepo {
  /**
   * Opens the notice once: the record, a zero tally and one work item per bucket, in one atomic
   * step. Opening it again (a retried delivery) changes nothing; false then.
   */
  open(n: SubscriberNotice): Promise<boolean>;
  get(id: string): Promise<SubscriberNotice | null>;
  /** Leases up to `limit` due work items (each pushed `leaseMs` ahead; another worker takes it should this one die). */
  claim(nowMs: number, leaseMs: number, limit: number): Promise<NoticeWork[]>;
  /** Done with a work item still leased as `lease` (a replaced lease is left alone). */
  finish(w: NoticeWork): Promise<void>;
  /**
   * Moves a work item still leased as `w.lease` to a new lease ending at `untilMs` (a long batch
   * keeps its item); null when the lease was lost (it ran out and another worker took the item).
   */
  extend(w: NoticeWork, untilMs: number): Promise<NoticeWork | null>;
  /** Schedules a subscriber's retry of the notice at `atMs`. */
  retryAt(noticeId: string, subscriberId: string, atMs: number): Promise<void>;
  /** The recipients' states, in the order asked (null: not tried yet). */
  recipients(noticeId: string, subscriberIds: string[]): Promise<(Recipient | null)[]>;
  /**
   * Records recipients' new states and moves the tally with them, in one atomic step (several at
   * once: a worker's sends settle many at a time, and each is one round trip less).
   */
  record(noticeId: string, r: Recipient | readonly Recipient[]): Promise<void>;
  tally(noticeId: string): Promise<NoticeTally>;
  /** A page of a notice's recipients (optionally one state), by subscriber id; cursor = last id. */
  listRecipients(
    noticeId: string,
    o: { state?: RecipientState; cursor: string | null; limit: number },
  ): Promise<{ items: Recipient[]; next: string | null }>;
  /** Notices opened by an execution's status page deliveries. */
  ofExecution(executionId: string): Promise<string[]>;
}

/** Mail and challenges of the subscription itself (confirm, "already subscribed", a webhook's challenge). */
export interface SubscriptionMailQueue {
  enqueue(item: SubscriptionMail, atMs: number): Promise<void>;
  claim(nowMs: number, leaseMs: number, limit: number): Promise<(SubscriptionMail & { lease: number })[]>;
  finish(item: SubscriptionMail & { lease: number }): Promise<void>;
}

export interface SubscriptionMail {
  kind: 'confirm' | 'already_subscribed' | 'webhook_challenge';
  subscriberId: string;
  /** The confirm nonce it carries (confirm, webhook_challenge): stale once the record's moved on. */
  nonce: string | null;
}

/**
 * What the status page's writes and the maintenance service call (the notifier's front door):
 * opens a notice; idempotent by the notice id. Never throws into the caller's write path for a
 * reason the caller cannot retry: a store failure is thrown (the delivery retries).
 */
export interface SubscriberNotices {
  incidentWritten(w: {
    kind: 'incident_update' | 'incident_correction' | 'incident_retraction';
    deliveryId: string;
    executionId: string;
    incidentId: string;
    updateId: string;
  }): Promise<void>;
  maintenanceNotice(w: { maintenanceId: string; updateId: string }): Promise<void>;
}
