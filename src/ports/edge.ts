import type { EndpointRecord } from '../domain/event/endpoint.js';
import type { Audience } from '../domain/audience/audience.js';
import type { StoredComponent } from '../domain/component/component.js';
import type { StoredMaintenance } from '../domain/maintenance/maintenance.js';
import type { ConnectionRecord } from '../domain/connection/connection.js';
import type { ExecutionApprovals, ExecutionAudience } from '../domain/execution/approval.js';
import type { Actor } from '../domain/common/actor.js';
import type { MessageAction, MessageKind } from '../domain/execution/conversation.js';
import type { Delivery, DeliveryStatus, Execution, ExecutionStatus } from '../domain/execution/execution.js';
import type { Incident } from '../domain/incident/incident.js';
import type { Template } from '../domain/template/template.js';

/** What the edges share with the services: the HTTP conventions (idempotency, rate limits), implemented on Redis, and the chat poster announcements go through (the Slack edge implements it). */

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
  | { kind: 'execution'; execution: Execution; deliveries: Delivery[]; approvals?: ExecutionApprovals | null }
  | { kind: 'connection'; connection: ConnectionRecord; signingSecret: string | null }
  | { kind: 'templates'; templates: Template[] }
  | { kind: 'audience'; audience: Audience }
  | { kind: 'component'; component: StoredComponent }
  | { kind: 'maintenance'; maintenance: StoredMaintenance }
  | { kind: 'event_endpoint'; endpoint: EndpointRecord; signingSecret: string };

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
  /** A decision at once when the process can give one without Redis (src/store/rate-limit.ts). */
  consume(policy: 'default' | 'execute', subject: string): RateDecision | Promise<RateDecision>;
}

export interface AnnouncementReceiptLine {
  connectionName: string;
  connectionType: string;
  status: DeliveryStatus;
  attempts: number;
  /** The last attempt's error, when it failed. */
  error: string | null;
  /** A link to the delivered message, where the platform gave one (none for a deleted one). */
  permalink?: string | null;
  /** What the delivery did on its platform (`edit` in place, `delete`), once decided. */
  action?: MessageAction;
}

/** The receipts under an announcement: the deliveries of the newest execute. */
export interface AnnouncementReceipts {
  executionId: string;
  status: ExecutionStatus;
  lines: AnnouncementReceiptLine[];
  /** An execute (absent), or a correction or retraction of `targetExecutionId`. */
  kind?: MessageKind;
  targetExecutionId?: string | null;
  /**
   * The execute whose messages Correct / Retract act on: this one once one of its messages is
   * delivered, or, for a correction, the execute it corrects (its messages are still out there);
   * null or absent: none (a retraction, or nothing delivered yet).
   */
  correctableExecutionId?: string | null;
}

/** When the incident's next update is due, as people read it (computed when rendered). */
export interface NextUpdateDue {
  /** `14:30 UTC` (with the date when not today). */
  due: string;
  /** `5 min` once the time has passed; null before. */
  overdue: string | null;
}

/** What an announcement shows; the chat adapter turns it into the platform's message. */
export interface AnnouncementContent {
  incident: Incident;
  receipts: AnnouncementReceipts | null;
  /** Absent or null: no update is due. */
  nextUpdate?: NextUpdateDue | null;
}

/** An overdue-update reminder, posted under the announcement. */
export interface ReminderContent {
  incident: Incident;
  /** 1 for the first reminder of a due time, then 2, 3, … */
  reminder: number;
  /** `14:30 UTC`, `5 min`. */
  due: string;
  overdue: string;
  /** Who made the last execute (the person asked to post the update); null: nobody to name. */
  executor: Actor | null;
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
  /** Posts a reminder as a reply in the thread of `thread` (the announcement). */
  postReminder(thread: PostedMessage, content: ReminderContent): Promise<void>;
}

// ── approvals ────────────────────────────────────────────────────────────────────────────────

/** What the approvers of one audience of an execution are told (its approval's current state). */
export interface ApprovalNotice {
  incident: Incident;
  execution: Execution;
  /** The audience, with its approval set. */
  audience: ExecutionAudience;
  approvers: { slack_user_ids: string[] };
  /** The held deliveries (their rendered content inside). */
  deliveries: Delivery[];
}

export interface ApprovalNotifier {
  /** Must be idempotent per (execution, audience, approval.state): called again after a crash. */
  notify(notice: ApprovalNotice): Promise<void>;
}
