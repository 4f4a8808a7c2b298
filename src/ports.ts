/**
 * What services need from the world. Services import only this file and the domain; src/composition/ wires
 * the Redis adapters (store/) and the delivery machinery (delivery/) in behind these interfaces.
 */
import type { ApiKey } from './domain/api-key.js';
import type { ChannelType } from './channels/index.js';
import type { Clock } from './domain/clock.js';
import type { ConnectionRecord, ConnectionTestResult, DeliveryConnection } from './domain/connection.js';
import type { PacingRule } from './domain/delivery-policy.js';
import type { Delivery, DeliveryStatus, Execution, ExecutionStatus, RenderedContent } from './domain/execution.js';
import type { IdGenerator } from './domain/ids.js';
import type { Incident, IncidentStatus, Severity } from './domain/incident.js';
import type { IncidentEvent } from './domain/incident-event.js';
import type { Page, PageRequest } from './domain/pagination.js';
import type { Template } from './domain/template.js';

export type { Clock, IdGenerator };

// ── incidents ────────────────────────────────────────────────────────────────────────────────

export interface IncidentFilter {
  status?: IncidentStatus[];
  severity?: Severity[];
}

export interface IncidentRepo {
  get(id: string): Promise<Incident | null>;
  getMany(ids: string[]): Promise<(Incident | null)[]>;
  /**
   * Stores a new incident, its first events and its template links in one step. False when one of
   * its templates no longer exists (the caller re-checks and reports it).
   */
  create(incident: Incident, events: IncidentEvent[]): Promise<boolean>;
  /**
   * Replaces `prev` with `next` if the stored incident is still exactly `prev` (compare-and-set),
   * appending `events` and keeping the status indexes and template links in step. False on a
   * concurrent change or when a newly attached template no longer exists.
   */
  update(prev: Incident, next: Incident, events: IncidentEvent[]): Promise<boolean>;
  list(filter: IncidentFilter, page: PageRequest): Promise<Page<Incident>>;
  appendEvents(incidentId: string, events: IncidentEvent[]): Promise<void>;
  listEvents(incidentId: string, page: PageRequest): Promise<Page<IncidentEvent>>;
}

// ── templates ────────────────────────────────────────────────────────────────────────────────

/** Why a template write did not happen. */
export type TemplateWriteOutcome =
  | { ok: true }
  /** Names already used by another template (indexes into the batch; [0] for a single write). */
  | { ok: false; reason: 'name_taken'; indexes: number[] }
  /** Delete only: a non-closed incident attaches the template. */
  | { ok: false; reason: 'in_use' }
  /** The template changed or went away concurrently: read again and retry. */
  | { ok: false; reason: 'conflict' };

export interface TemplateRepo {
  get(id: string): Promise<Template | null>;
  /** Stores new templates (version 1), all or none; names must be free (case-insensitively). */
  create(templates: Template[]): Promise<TemplateWriteOutcome>;
  /** Replaces `prev` with `next` (compare-and-set) and keeps `next` as a readable version. */
  update(prev: Template, next: Template): Promise<TemplateWriteOutcome>;
  /** Deletes with every version, unless a non-closed incident attaches it (compare-and-set). */
  delete(t: Template): Promise<TemplateWriteOutcome>;
  list(page: PageRequest): Promise<Page<Template>>;
  getVersion(id: string, version: number): Promise<Template | null>;
  /** Versions `latest` down to 1, newest first. */
  listVersions(id: string, latest: number, page: PageRequest): Promise<Page<Template>>;
}

// ── API keys ─────────────────────────────────────────────────────────────────────────────────

export interface ApiKeyRepo {
  create(key: ApiKey, tokenSha256: string): Promise<void>;
  get(id: string): Promise<ApiKey | null>;
  findByTokenHash(tokenSha256: string): Promise<ApiKey | null>;
  list(page: PageRequest): Promise<Page<ApiKey>>;
  /** Compare-and-set like IncidentRepo.update. */
  update(prev: ApiKey, next: ApiKey): Promise<boolean>;
  /** Records use; cheap and last-writer-wins (it is a hint, not an audit trail). */
  touch(id: string, at: string): Promise<void>;
}

// ── connections ──────────────────────────────────────────────────────────────────────────────

export interface ConnectionFilter {
  type?: ChannelType[];
  enabled?: boolean;
}

export interface ConnectionRepo {
  get(id: string): Promise<ConnectionRecord | null>;
  getMany(ids: string[]): Promise<(ConnectionRecord | null)[]>;
  /**
   * Stores a new connection (secrets already sealed) and indexes it. `signingSecret` is what its
   * create answer shows once (stored sealed with an Idempotency-Key replay, never in the record).
   */
  create(connection: ConnectionRecord, signingSecret?: string | null): Promise<boolean>;
  /** Compare-and-set: replaces `prev` with `next` if the stored record is still exactly `prev`. */
  update(prev: ConnectionRecord, next: ConnectionRecord): Promise<boolean>;
  /** Compare-and-set delete: false when the record changed (or is gone) since `prev` was read. */
  delete(prev: ConnectionRecord): Promise<boolean>;
  list(filter: ConnectionFilter, page: PageRequest): Promise<Page<ConnectionRecord>>;
}

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

// ── crypto and secrets ───────────────────────────────────────────────────────────────────────

export interface TokenCrypto {
  randomBytes(n: number): Buffer;
  sha256Hex(input: string): string;
}

/** AES-256-GCM envelope for secrets at rest; the key never leaves the adapter. */
export interface SecretBox {
  seal(plaintext: string): string;
  /** Opens with the current key or a previous one (key rotation); throws when none fits. */
  open(sealed: string): string;
  /** The value sealed with the current key, or null when it already is; throws when no key opens it. */
  reseal(sealed: string): string | null;
}

// ── HTTP conventions (implemented on Redis, used by the http edge) ───────────────────────────

/** A response kept for an Idempotency-Key replay. */
export interface StoredResponse {
  status: number;
  body: string;
  headers: Record<string, string>;
}

/** A request's hold on an Idempotency-Key: a short lease, kept alive while the request runs. */
export interface IdempotencyClaim {
  scope: string;
  key: string;
  fingerprint: string;
  /** Unique to this holder: a claim taken over after a crash is someone else's. */
  token: string;
}

export type IdempotencyBegin =
  | { state: 'new'; claim: IdempotencyClaim }
  | { state: 'in_flight' }
  | { state: 'mismatch' }
  | { state: 'done'; response: StoredResponse };

/** What an idempotent request committed: its response is stored in the same atomic step. */
export type CommittedEffect =
  | { kind: 'incident'; incident: Incident }
  | { kind: 'execution'; execution: Execution; deliveries: Delivery[] }
  | { kind: 'connection'; connection: ConnectionRecord; signingSecret: string | null }
  | { kind: 'templates'; templates: Template[] };

/**
 * An idempotent request in progress. The route says how a committed effect answers (`respond`),
 * and the store writes that answer with the effect itself, so a crash between the commit and the
 * response can never run the request twice; `stored` is then true and nothing more is written.
 */
export interface IdempotentRequest {
  claim: IdempotencyClaim;
  respond: ((effect: CommittedEffect) => StoredResponse | null) | null;
  stored: boolean;
}

export interface IdempotencyStore {
  /** Claims (scope, key) for a request with this fingerprint, or reports what holds it. */
  begin(scope: string, key: string, fingerprint: string): Promise<IdempotencyBegin>;
  /** Extends the claim's lease; false when it is no longer this holder's (taken over or done). */
  renew(claim: IdempotencyClaim): Promise<boolean>;
  /** Stores the response, if the claim still holds (a no-op once stored with the effect). */
  complete(claim: IdempotencyClaim, response: StoredResponse): Promise<void>;
  /** Frees a claim whose request failed in a way worth retrying (5xx). */
  release(claim: IdempotencyClaim): Promise<void>;
  /** Runs `work` with `request` as the current idempotent request of the commits it makes. */
  within<T>(request: IdempotentRequest, work: () => T): T;
}

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the window resets. */
  resetSeconds: number;
}

export interface RateLimiter {
  consume(policy: 'default' | 'execute', subject: string): Promise<RateDecision>;
}

// ── executions and delivery ──────────────────────────────────────────────────────────────────

export interface ExecutionRepo {
  /**
   * Stores an execution with all its deliveries and the incident's execute bookkeeping (CAS on the
   * incident, so a concurrent close wins cleanly), and marks the deliveries as awaiting enqueue
   * (the outbox that makes "202 = durably queued" survive a crash between commit and enqueue).
   */
  create(execution: Execution, deliveries: Delivery[], incidentPrev: Incident, incidentNext: Incident, events: IncidentEvent[]): Promise<boolean>;
  get(id: string): Promise<Execution | null>;
  listForIncident(incidentId: string, page: PageRequest): Promise<Page<Execution>>;
  getDeliveries(ids: string[]): Promise<(Delivery | null)[]>;
  getDelivery(id: string): Promise<Delivery | null>;
  /**
   * Compare-and-set on the delivery; keeps the per-connection active index in step. `outbox`
   * also records it as awaiting enqueue (redeliver), and `events` are appended to the incident's
   * timeline (`delivery.failed`), in the same atomic step.
   */
  updateDelivery(prev: Delivery, next: Delivery, opts?: { outbox?: boolean; events?: IncidentEvent[] }): Promise<boolean>;
  /** Deliveries of a connection that are not terminal yet. */
  activeForConnection(connectionId: string): Promise<string[]>;
  /** Outbox: deliveries committed but maybe not enqueued (older than `olderThanMs`). */
  pendingEnqueue(olderThanMs: number): Promise<string[]>;
  markEnqueued(ids: string[]): Promise<void>;
}

export interface QueuedJob {
  deliveryId: string;
  /** Queue-unique id: the delivery id, plus the redeliver round. */
  jobId: string;
  delayMs?: number;
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

export interface OutboundMessage {
  deliveryId: string;
  executionId: string;
  incident: { id: string; title: string; severity: string; status: string; url: string | null };
  content: RenderedContent;
  /** Marked test messages (connection test with send_message) say so to the reader. */
  test?: boolean;
}

export type SendResult =
  | { outcome: 'delivered'; httpStatus: number | null; providerCode: string | null; latencyMs: number }
  | {
      outcome: 'retryable';
      httpStatus: number | null;
      providerCode: string | null;
      latencyMs: number | null;
      retryAfterMs: number | null;
      error: string;
      /** The platform may have received it (time-out after sending): a retry may duplicate. */
      ambiguous: boolean;
    }
  | {
      outcome: 'permanent';
      httpStatus: number | null;
      providerCode: string | null;
      latencyMs: number | null;
      error: string;
      /** Why the destination is gone for good (404/410 on a webhook URL): disable the connection. */
      disable: string | null;
    };

/** One sender per channel type; `T` narrows the connection's config to that type's. */
export interface ChannelSender<T extends ChannelType = ChannelType> {
  send(target: Extract<DeliveryConnection, { type: T }>, message: OutboundMessage): Promise<SendResult>;
}

export type ChannelSenders = { [T in ChannelType]: ChannelSender<T> };

/** What the queue adapter should do with a job: finish it, or run it again after a delay. */
export type ProcessOutcome = { kind: 'done'; status: Delivery['status'] } | { kind: 'delay'; ms: number; reason: 'pacing' | 'retry' };

// ── Slack announcements ──────────────────────────────────────────────────────────────────────

/** Where an incident's Slack announcement lives, and which execute its receipts follow. */
export interface Announcement {
  channel: string;
  ts: string;
  execution_id: string | null;
}

export interface AnnouncementRepo {
  get(incidentId: string): Promise<Announcement | null>;
  /** Records the announcement; false when the incident already has one (the first one stays). */
  create(incidentId: string, announcement: Announcement): Promise<boolean>;
  /**
   * Makes the receipts follow `executionId` when it is newer than the one they follow (ids sort
   * by creation), atomically. Returns the record after the change, null when there is none.
   */
  trackExecution(incidentId: string, executionId: string): Promise<Announcement | null>;
  /**
   * One refresher of an announcement at a time, across processes. true: `token` now holds the
   * claim (for `ttlMs`). false: another process holds it, and this call marked the announcement
   * as changed, so the holder renders it again before letting go.
   */
  claimRefresh(incidentId: string, token: string, ttlMs: number): Promise<boolean>;
  /**
   * Ends a refresh. true: a change was marked meanwhile and the claim is kept, so the caller
   * renders again (from the newest state) and calls this again; false: the claim is released.
   */
  finishRefresh(incidentId: string, token: string, ttlMs: number): Promise<boolean>;
}

/** One delivery of the execute an announcement follows, as its receipts show it. */
export interface AnnouncementReceiptLine {
  connectionName: string;
  connectionType: string;
  status: DeliveryStatus;
  attempts: number;
  /** The last attempt's error, when it failed. */
  error: string | null;
}

/** The receipts under an announcement: the deliveries of the newest execute. */
export interface AnnouncementReceipts {
  executionId: string;
  status: ExecutionStatus;
  lines: AnnouncementReceiptLine[];
}

/** What an announcement shows; the chat adapter turns it into the platform's message. */
export interface AnnouncementContent {
  incident: Incident;
  receipts: AnnouncementReceipts | null;
}

/** Where a posted chat message lives. */
export interface PostedMessage {
  channel: string;
  ts: string;
}

/**
 * Posts and updates an incident's announcement in a chat platform (implemented by the Slack edge
 * over its Web API client). Both throw the platform's error when it refuses (a channel the bot
 * cannot post in, a rate limit): the caller decides what to try next.
 */
export interface ChatPoster {
  /** Posts a new message; null when the platform did not say where it landed. */
  post(channel: string, content: AnnouncementContent): Promise<PostedMessage | null>;
  /** Replaces a posted message's content. */
  update(message: PostedMessage, content: AnnouncementContent): Promise<void>;
}
