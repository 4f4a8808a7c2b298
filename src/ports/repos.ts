import type { ChannelType } from '../contracts/channel.js';
import type { Audience } from '../domain/audience/audience.js';
import type { ApiKey } from '../domain/common/api-key.js';
import type { Clock } from '../domain/common/clock.js';
import type { IdGenerator } from '../domain/common/ids.js';
import type { ConnectionRecord } from '../domain/connection/connection.js';
import type { Delivery, Execution } from '../domain/execution/execution.js';
import type { ExecutionApprovals } from '../domain/execution/approval.js';
import type { CommittedEffect } from './edge.js';
import type { MessageRef } from '../domain/execution/conversation.js';
import type { ComponentStatus, StoredComponent } from '../domain/component/component.js';
import type { MaintenanceState, StoredMaintenance } from '../domain/maintenance/maintenance.js';
import type { IncidentEvent } from '../domain/incident/incident-event.js';
import type { Incident, IncidentStatus, Severity } from '../domain/incident/incident.js';
import type { Page, PageRequest } from '../domain/common/pagination.js';
import type { Template } from '../domain/template/template.js';

/** What the services store and read: one repository per resource, implemented on Redis in src/store/. */

export type { Clock, IdGenerator };

// ── incidents ────────────────────────────────────────────────────────────────────────────────

export interface IncidentFilter {
  status?: IncidentStatus[];
  severity?: Severity[];
}

/** The component impacts an incident write stages in the same step (store/components.ts, stageImpacts). */
export interface ComponentImpactWrite {
  /** The components as read: each one is compare-and-set. */
  current: StoredComponent[];
  /** What the incident makes each show after the write (null: no impact). */
  status: (c: StoredComponent) => ComponentStatus | null;
  at: string;
}

export interface IncidentRepo {
  get(id: string): Promise<Incident | null>;
  getMany(ids: string[]): Promise<(Incident | null)[]>;
  /**
   * Stores a new incident, its first events and its template links in one step. False when one of
   * its templates no longer exists (the caller re-checks and reports it).
   */
  create(incident: Incident, events: IncidentEvent[], impacts?: ComponentImpactWrite): Promise<boolean>;
  /**
   * Replaces `prev` with `next` if the stored incident is still exactly `prev` (compare-and-set),
   * appending `events` and keeping the status indexes and template links in step. False on a
   * concurrent change or when a newly attached template no longer exists. `impacts`: the
   * components whose impact by this incident the write changes, each compare-and-set too.
   */
  update(prev: Incident, next: Incident, events: IncidentEvent[], impacts?: ComponentImpactWrite): Promise<boolean>;
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
  /**
   * Compare-and-set delete: false when the record changed (or is gone) since `prev` was read.
   * Takes the connection out of every audience in the same atomic step (each a new revision,
   * `updated_at` = `at`, default now), so no reader sees an audience naming a deleted connection.
   */
  delete(prev: ConnectionRecord, at?: string): Promise<boolean>;
  list(filter: ConnectionFilter, page: PageRequest): Promise<Page<ConnectionRecord>>;
}

// ── audiences ────────────────────────────────────────────────────────────────────────────────

/** Why an audience write did not happen. */
export type AudienceWriteOutcome =
  | { ok: true }
  /** Create only: another audience has this key. */
  | { ok: false; reason: 'key_taken' }
  /** Create only: there are LIMITS.audiences audiences already. */
  | { ok: false; reason: 'too_many' }
  /** Delete only: approvals of these executions are still pending for the audience. */
  | { ok: false; reason: 'in_use'; executionIds: string[] }
  /**
   * The audience changed or went away concurrently, or one of its connections or templates no
   * longer exists: read again (and check the references again) and retry.
   */
  | { ok: false; reason: 'conflict' };

export interface AudienceRepo {
  get(id: string): Promise<Audience | null>;
  /** By key, in order; null for an unknown key. */
  getByKeys(keys: string[]): Promise<(Audience | null)[]>;
  /** Every audience (a Herald has at most LIMITS.audiences = 100), ordered by key. */
  all(): Promise<Audience[]>;
  /** Newest first, cursor pages over the ids like the other lists. */
  list(page: PageRequest): Promise<Page<Audience>>;
  /** Stores a new audience; its key must be free and its connections and templates must exist. */
  create(a: Audience): Promise<AudienceWriteOutcome>;
  /** Compare-and-set: replaces `prev` with `next`; `next`'s connections and templates must exist. */
  update(prev: Audience, next: Audience): Promise<AudienceWriteOutcome>;
  /** Compare-and-set delete, refused ('in_use') while an approval for the audience is pending. */
  delete(prev: Audience): Promise<AudienceWriteOutcome>;
}

// ── components ───────────────────────────────────────────────────────────────────────────────

export type ComponentWriteOutcome =
  | { ok: true }
  /** A compare-and-set lost: read again. */
  | { ok: false; reason: 'conflict' }
  /** Create and rename: another component has this name (ignoring case). */
  | { ok: false; reason: 'name_taken' }
  /** Create only: there are LIMITS.components components already. */
  | { ok: false; reason: 'too_many' }
  /** Delete only: these open incidents / active maintenances impact it. */
  | { ok: false; reason: 'in_use'; sourceIds: string[] };

/** Components (store/components.ts); their impacts are written by their sources' Changes. */
export interface ComponentRepo {
  get(id: string): Promise<StoredComponent | null>;
  getMany(ids: string[]): Promise<(StoredComponent | null)[]>;
  /** Every component (at most LIMITS.components), in page order. */
  listAll(): Promise<StoredComponent[]>;
  /** Newest first, cursor pages over the ids like the other lists. */
  list(page: PageRequest): Promise<Page<StoredComponent>>;
  /** The component's own timeline, oldest first, paged by offset. */
  events(id: string, page: PageRequest): Promise<Page<IncidentEvent>>;
  /** Stores a new component; its name must be free. */
  create(c: StoredComponent): Promise<ComponentWriteOutcome>;
  /** Compare-and-set: replaces `prev` with `next`, appending `events` to its timeline in the same step. */
  update(prev: StoredComponent, next: StoredComponent, events: IncidentEvent[]): Promise<ComponentWriteOutcome>;
  /** Compare-and-set delete, refused ('in_use') while anything impacts it. */
  delete(prev: StoredComponent): Promise<ComponentWriteOutcome>;
}

// ── maintenances ──────────────────────────────────────────────────────────────────────────────

/** Builds the `component.status_changed` event of one effective change a maintenance caused. */
export type ImpactEventOf = (change: {
  component_id: string;
  from: ComponentStatus;
  to: ComponentStatus;
}) => IncidentEvent;

export interface MaintenanceRepo {
  get(id: string): Promise<StoredMaintenance | null>;
  /** Newest first, cursor pages over the ids; `status` keeps those in one of these states. */
  list(filter: { status?: MaintenanceState[] }, page: PageRequest): Promise<Page<StoredMaintenance>>;
  /** Ids whose next automatic step is due at or before `nowMs` (the schedule), at most `limit`. */
  due(nowMs: number, limit: number): Promise<string[]>;
  /** Stores a new maintenance with its events; false when the id is taken. */
  create(m: StoredMaintenance, events: IncidentEvent[]): Promise<boolean>;
  /**
   * Compare-and-set: replaces `prev` with `next` with its schedule entry, its components' impacts
   * and `events`, in one step; false when the record or a touched component changed meanwhile.
   */
  update(
    prev: StoredMaintenance,
    next: StoredMaintenance,
    events: IncidentEvent[],
    impactEvent: ImpactEventOf,
  ): Promise<boolean>;
  /** Compare-and-set delete with its events. */
  delete(prev: StoredMaintenance, events: IncidentEvent[]): Promise<boolean>;
}

// ── executions and delivery ──────────────────────────────────────────────────────────────────

export interface ExecutionRepo {
  /**
   * Stores an execution with all its deliveries and the incident's execute bookkeeping (CAS on the
   * incident, so a concurrent close wins cleanly), and marks the deliveries as awaiting enqueue
   * (the outbox that makes "202 = durably queued" survive a crash between commit and enqueue).
   *
   * `threads` is each targeted connection's conversation as read (ConversationRepo.threads): the
   * commit fails when the incident's conversations moved meanwhile, and moves each on to its last
   * new delivery.
   */
  create(
    execution: Execution,
    deliveries: Delivery[],
    incidentPrev: Incident,
    incidentNext: Incident,
    events: IncidentEvent[],
    threads?: Threads,
    /** Its approvals when some audience is held: stored, indexed and scheduled in the same step. */
    approvals?: ExecutionApprovals | null,
  ): Promise<boolean>;
  get(id: string): Promise<Execution | null>;
  listForIncident(incidentId: string, page: PageRequest): Promise<Page<Execution>>;
  getDeliveries(ids: string[]): Promise<(Delivery | null)[]>;
  getDelivery(id: string): Promise<Delivery | null>;
  /**
   * Compare-and-set on the delivery; keeps the per-connection active index in step. `outbox`
   * also records it as awaiting enqueue (redeliver), and `events` are appended to the incident's
   * timeline (`delivery.failed`), in the same atomic step.
   */
  updateDelivery(
    prev: Delivery,
    next: Delivery,
    opts?: { outbox?: boolean; events?: IncidentEvent[] },
  ): Promise<boolean>;
  /** Deliveries of a connection that are not terminal yet. */
  activeForConnection(connectionId: string): Promise<string[]>;
  /**
   * Outbox: deliveries committed but maybe not enqueued (older than `olderThanMs`), taken by the
   * sweep: each is stamped with the time it was taken, so a dispatch job can no longer claim it
   * (claimOutbox) and the next sweep looks at it again only if it is still there then.
   */
  takeOutbox(olderThanMs: number): Promise<string[]>;
  markEnqueued(ids: string[]): Promise<void>;
  /**
   * An execute's deliveries are on the queue as dispatch jobs: the sweep leaves them alone until
   * DISPATCH_LEASE_MS has passed (a worker takes them long before), where it would otherwise take
   * them after its own period whenever the queue has a backlog. Only entries still scored `claim`.
   */
  markDispatched(ids: string[], claim: number): Promise<void>;
  /**
   * A dispatch job takes its deliveries from the outbox: those still there with the score they
   * were committed with (or that markDispatched gave them) are removed and returned, and are the
   * caller's alone to send. One the sweep took, or an earlier run of the same job, is not.
   */
  claimOutbox(ids: string[], claim: number): Promise<string[]>;
}

// ── approvals ────────────────────────────────────────────────────────────────────────────────

/** One decision (approve, reject, expire, withdraw) as one atomic step. */
export interface ApprovalCommit {
  /** The record as read (compared) and as it becomes. */
  prev: ExecutionApprovals;
  next: ExecutionApprovals;
  /** Held deliveries as read (compared) and as they become: queued (released) or cancelled. */
  deliveries: { prev: Delivery; next: Delivery }[];
  /** The released deliveries' conversations as read (compared, then moved on to them). */
  threads: Threads;
  /** The outbox score (the dispatch jobs' claim) of released deliveries. */
  claim?: number;
  events: IncidentEvent[];
  /** Audience ids whose pending approval on this execution ends here. */
  ended: string[];
  /** The execution's tally as read (ExecutionRepo's execution.completed counts); {} when it has none. */
  tally?: Record<string, string>;
  /** Now, ISO (execution.completed's time) and ms (the notification schedule). */
  at: string;
  nowMs: number;
  /** The idempotent request's effect, stored with the commit. */
  effect?: CommittedEffect;
}

export interface ApprovalRepo {
  get(executionId: string): Promise<ExecutionApprovals | null>;
  getMany(executionIds: string[]): Promise<(ExecutionApprovals | null)[]>;
  /** The execution's tally (see ApprovalCommit.tally). */
  tally(executionId: string): Promise<Record<string, string>>;
  /** Compare-and-set over everything the decision touches; false when any of it changed. */
  commit(c: ApprovalCommit): Promise<boolean>;
  /** Records that approvers were told (compare-and-set); leaves the notification schedule once all are. */
  markNotified(prev: ExecutionApprovals, next: ExecutionApprovals): Promise<boolean>;
  /** Leases the executions with an approval due to expire at `nowMs`. */
  claimDue(nowMs: number, leaseMs: number, limit: number): Promise<string[]>;
  /** Leases the executions whose approvers were not told of a state yet. */
  claimToNotify(nowMs: number, leaseMs: number, limit: number): Promise<string[]>;
  /** Puts the execution back on the expiry schedule as its record asks (after a lease found nothing due). */
  settle(approvals: ExecutionApprovals): Promise<void>;
}

// ── conversations and the update cadence ───────────────────────────────────────────────────

/** An incident's conversation with one connection so far (sequence 0: none yet). */
export interface ThreadState {
  sequence: number;
  lastDeliveryId: string | null;
  /** The stored value as read, for the commit's check. */
  raw: string | null;
}

/**
 * An incident's conversations as one commit read them: each asked connection's, and the revision
 * of all of them (every commit that moves one moves it), which is what the commit checks.
 */
export type Threads = Map<string, ThreadState> & { readonly revision: string | null };

/** The conversation's first delivered message. */
export interface ThreadRoot {
  ref: MessageRef;
  deliveryId: string;
}

export interface ConversationRepo {
  /** Each connection's conversation with the incident so far. */
  threads(incidentId: string, connectionIds: string[]): Promise<Threads>;
  /** The message later ones reply under (or edit, in `edit` mode); null before one was delivered. */
  root(incidentId: string, connectionId: string): Promise<ThreadRoot | null>;
  /** Records the first delivered message of the conversation; the first recorded stays. */
  startIfNone(incidentId: string, connectionId: string, root: ThreadRoot): Promise<void>;
  /** Forgets the conversation's first message if it is `deliveryId` (it was retracted). */
  forget(incidentId: string, connectionId: string, deliveryId: string): Promise<void>;
}

/** Incidents whose overdue reminder is due (mirrors `next_reminder_at`; see domain/incident/update-cadence.ts). */
export interface ReminderSchedule {
  /**
   * Leases up to `limit` incidents whose reminder is due at `nowMs`: each is pushed `leaseMs`
   * ahead, so another worker leaves it alone while this one works, and picks it up should this
   * one die. Returns each with the lease's score, for `release`.
   */
  claimDue(nowMs: number, leaseMs: number, limit: number): Promise<{ incidentId: string; lease: number }[]>;
  /** Ends a lease still held: reschedules at `atMs`, or drops the incident (null). A lease already replaced (a new execute) is left alone. */
  release(incidentId: string, lease: number, atMs: number | null): Promise<void>;
}

/**
 * Tells people that an update is overdue (the Slack announcement's thread). Called by the
 * reminder worker before it records reminder `reminder` on the incident, and again should the
 * worker die in between: it must do nothing for a reminder it already sent.
 */
export interface ReminderNotifier {
  remind(incident: Incident, reminder: number, overdueMs: number): Promise<void>;
}

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

/**
 * The overdue reminders posted under an announcement, kept on its record so that one reminder
 * number is posted once whichever process is asked.
 */
export interface AnnouncementReminderLog {
  /** The announcement and the highest reminder number posted under it (0: none); null without one. */
  reminders(incidentId: string): Promise<{ announcement: Announcement; lastReminder: number } | null>;
  /** Records reminder `reminder` as posted, atomically, unless a higher one is recorded already. */
  recordReminder(incidentId: string, reminder: number): Promise<void>;
}

/** One delivery of the execute an announcement follows, as its receipts show it. */
