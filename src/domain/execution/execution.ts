import { z } from 'zod';
import {
  ChannelTypeSchema,
  PUBLIC_STATUSES,
  type ChannelType,
  type PublicStatus,
  type RenderedContent,
} from '../../contracts/channel.js';
import { VariablesSchema } from '../template/variables.js';
import {
  MessageRefSchema,
  NextUpdateInSchema,
  WaitedForSchema,
  type MessageAction,
  type MessageKind,
  type MessageRef,
  type ThreadWait,
} from './conversation.js';

export const DELIVERY_STATUSES = [
  'pending_approval',
  'queued',
  'sending',
  'delivered',
  'retrying',
  'failed',
  'cancelled',
] as const;
export const EXECUTION_STATUSES = [
  'pending_approval',
  'queued',
  'in_progress',
  'delivered',
  'partially_failed',
  'failed',
  'cancelled',
] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];
export type ExecutionStatus = (typeof EXECUTION_STATUSES)[number];

/** The public state of an update on the status page (Statuspage's incident statuses). */
export const PublicStatusSchema = z.enum(PUBLIC_STATUSES).meta({ id: 'PublicStatus' });

export { publicStatusOf } from '../../contracts/channel.js';

export const ExecuteRequestSchema = z
  .strictObject({
    variables: VariablesSchema.default({}),
    connection_ids: z.array(z.string().min(1).max(64)).min(1).max(200).optional(),
    audiences: z.array(z.string().min(1).max(63)).min(1).max(20).optional().meta({
      description:
        'Audience keys to execute to (not with `connection_ids`). Each audience gets its own templates on its own connections; an audience whose approval is required is held as `pending_approval` until approved. Without both: `HERALD_DEFAULT_AUDIENCES` when set, else every enabled connection.',
    }),
    next_update_in: NextUpdateInSchema.optional(),
    public_status: PublicStatusSchema.optional().meta({
      description:
        'The state a status page shows with this update (`investigating`, `identified`, `monitoring`, `resolved`). Default: from the incident status at execute time (`closed` shows `resolved`). Only a `status_page` connection uses it.',
    }),
  })
  .meta({ id: 'ExecuteRequest' });
export type ExecuteRequest = z.infer<typeof ExecuteRequestSchema>;

/** `?dry_run=`: true/false (booleans from in-process callers such as the Slack edge pass as they are). */
export const DryRunSchema = z.union([z.boolean(), z.enum(['true', 'false']).transform((v) => v === 'true')]).optional();

/** Redeliver takes no options today; a strict empty object keeps typos from passing silently. */
export const RedeliverRequestSchema = z.strictObject({}).meta({ id: 'RedeliverRequest' });

export const ATTEMPT_OUTCOMES = [
  'delivered',
  'retryable_failure',
  'permanent_failure',
  'interrupted',
  'cancelled',
] as const;

export const AttemptSchema = z
  .object({
    at: z.string(),
    outcome: z.enum(ATTEMPT_OUTCOMES),
    http_status: z.number().int().nullable(),
    provider_code: z.string().nullable(),
    latency_ms: z.number().int().nullable(),
    retry_after_ms: z.number().int().nullable(),
    error: z.string().nullable(),
  })
  .meta({ id: 'DeliveryAttempt' });
export type Attempt = z.infer<typeof AttemptSchema>;

export const DeliverySchema = z
  .object({
    id: z.string(),
    connection_id: z.string(),
    connection_type: ChannelTypeSchema,
    template_id: z.string().nullable(),
    template_version: z.number().int().nullable(),
    audience: z
      .string()
      .nullable()
      .meta({ description: 'The key of the audience it was sent to; null for an execute without audiences.' }),
    status: z.enum(DELIVERY_STATUSES).meta({
      description:
        '`pending_approval`: held until its audience is approved (then `queued`, with its place in the conversation), cancelled when rejected or expired.',
    }),
    attempts: z.array(AttemptSchema),
    possible_duplicate: z.boolean(),
    delivered_at: z.string().nullable(),
    action: z.enum(['post', 'edit', 'delete']).meta({
      description:
        'What the delivery does on its platform: post a message, edit one in place (a correction, or the `edit` update mode), delete one (a retraction). Decided when it is sent.',
    }),
    sequence: z.number().int().min(1).meta({
      description:
        "Its place in the incident's conversation with this connection: 1 for the first message, then 2, 3, …",
    }),
    previous_delivery_id: z
      .string()
      .nullable()
      .meta({ description: 'The delivery before it in the same conversation; null for the first.' }),
    target_delivery_id: z
      .string()
      .nullable()
      .meta({ description: 'For a correction or retraction: the delivery it corrects or retracts.' }),
    message: MessageRefSchema.nullable().meta({
      description:
        'The message on the platform once delivered (posted, or edited), where the platform says which; null otherwise.',
    }),
    reply_to: MessageRefSchema.nullable().meta({
      description:
        "The conversation's first message it was posted under (a thread reply, a mail reply); null when it was posted on its own.",
    }),
    waited_for: WaitedForSchema.nullable().meta({
      description:
        "An update due while its conversation's first message was still being sent waits for it, so that it can reply under it: which message, how long, and how the wait ended. Null when it did not wait.",
    }),
  })
  .meta({ id: 'Delivery' });

/** What a delivery sends: rendered once at execute, so every retry sends the same words. */
export type { RenderedContent } from '../../contracts/channel.js';

/** The conversation fields of the wire shape: optional when stored, since records written before them lack them. */
type ConversationFields =
  | 'action'
  | 'sequence'
  | 'previous_delivery_id'
  | 'target_delivery_id'
  | 'message'
  | 'reply_to'
  | 'waited_for'
  | 'audience';

/** The stored delivery: the wire shape plus what the worker needs. */
export interface Delivery
  extends
    Omit<z.infer<typeof DeliverySchema>, ConversationFields>,
    Partial<Pick<z.infer<typeof DeliverySchema>, ConversationFields>> {
  /** Absent = announcement (records from before corrections). */
  execution_kind?: MessageKind;
  /**
   * For a correction or retraction: what to do to the corrected message, decided when the
   * correction was made (edit or delete it in place where the platform can, else post a note in
   * the conversation), and that message as its delivery recorded it.
   */
  planned_action?: MessageAction;
  target?: MessageRef | null;
  execution_id: string;
  incident_id: string;
  content: RenderedContent;
  /** When the delivery reached a terminal state (for the execution's completed_at). */
  finished_at: string | null;
  /** Set while an attempt is in flight: finding it set on pick-up means the last attempt was cut off. */
  sending_since: string | null;
  /** Bumped by redeliver so the re-queued job gets a fresh queue id. */
  round: number;
  /** A status_page delivery of an execute: the public state it publishes (its execution's `public_status`). */
  public_status?: PublicStatus;
  /**
   * Index into `attempts` where the current round began: its attempt budget (MAX_ATTEMPTS) and
   * retry window count from there, so a redeliver gets a fresh budget.
   */
  round_start: number;
  /**
   * The next attempt may not start before this time: a retry's backoff or Retry-After, or the
   * pacing slot reserved for it. Kept on the record (not only in the queue's delay) so a job run
   * early — after a crash between recording an attempt and re-queueing, or a duplicate job —
   * still waits.
   */
  not_before: string | null;
  /** A pacing slot was reserved for `not_before`: the attempt then goes without asking again. */
  paced: boolean;
  /** Set while it waits for its conversation's first message to be settled (see WaitedForSchema). */
  thread_wait?: ThreadWait | null;
  rev: number;
}

export interface Execution {
  id: string;
  incident_id: string;
  variables: Record<string, string>;
  created_at: string;
  template_versions: Record<string, number>;
  delivery_ids: string[];
  /** Absent = announcement (records from before corrections). */
  kind?: MessageKind;
  /** For a correction or retraction: the execution it corrects or retracts. */
  target_execution_id?: string | null;
  /** A correction's note, a retraction's reason. */
  note?: string | null;
  /**
   * The audiences it went to, when it named some (absent: an execute without audiences). Their
   * approvals are stored apart (they change; this record does not) and merged when presented.
   */
  audiences?: StoredExecutionAudience[];
  /**
   * An execute's public state (the body's `public_status`, else mapped from the incident's status
   * at execute time): what its status_page deliveries publish. Absent on corrections, retractions
   * and records from before the status page.
   */
  public_status?: PublicStatus;
}

/** One audience of an execution as recorded at execute (see ExecutionAudienceSchema for the wire shape). */
export interface StoredExecutionAudience {
  key: string;
  name: string;
  visibility: 'internal' | 'external';
  delivery_ids: string[];
  skipped: { reason: 'no_templates' | 'no_connections'; message: string } | null;
  /** Whether its part waited for an approval (the approval record holds its state). */
  approval_required: boolean;
}

export const isTerminal = (s: DeliveryStatus): boolean => s === 'delivered' || s === 'failed' || s === 'cancelled';

/**
 * Held for an approval: not terminal, but not to be sent either. Nothing queues it, sends it or
 * counts it as lost; only the approval's decision moves it (to queued or cancelled).
 */
export const isHeld = (s: DeliveryStatus): boolean => s === 'pending_approval';

/** Not terminal and not held: what a worker may pick up and send. */
export const isSendable = (s: DeliveryStatus): boolean => !isTerminal(s) && !isHeld(s);

/** The execution's status is derived from its deliveries, never stored (no write contention). */
export function executionStatus(deliveries: Pick<Delivery, 'status'>[]): ExecutionStatus {
  const s = deliveries.map((d) => d.status);
  if (s.length === 0) return 'cancelled';
  // Whatever is still to do waits for an approval: the execution waits with it.
  const open = s.filter((x) => !isTerminal(x));
  if (open.length > 0 && open.every(isHeld)) return 'pending_approval';
  if (s.every((x) => x === 'queued')) return 'queued';
  if (!s.every(isTerminal)) return 'in_progress';
  if (s.every((x) => x === 'delivered')) return 'delivered';
  if (s.every((x) => x === 'cancelled')) return 'cancelled';
  if (s.some((x) => x === 'delivered')) return 'partially_failed';
  return 'failed';
}

export function newDelivery(p: {
  id: string;
  executionId: string;
  incidentId: string;
  connectionId: string;
  connectionType: ChannelType;
  templateId: string | null;
  templateVersion: number | null;
  content: RenderedContent;
  /** Its place in the conversation with this connection (see DeliverySchema); default 1 and null. */
  sequence?: number;
  previousDeliveryId?: string | null;
  kind?: MessageKind;
  /** Corrections and retractions: the delivery they act on, what to do and its message. */
  targets?: { deliveryId: string; action: MessageAction; message: MessageRef | null };
  /** The audience it goes to (its key); absent for an execute without audiences. */
  audience?: string | null;
  /** Held for its audience's approval: no place in the conversation until approved. */
  held?: boolean;
  /** The public state a status_page delivery publishes. */
  publicStatus?: PublicStatus;
}): Delivery {
  return {
    id: p.id,
    execution_id: p.executionId,
    incident_id: p.incidentId,
    connection_id: p.connectionId,
    connection_type: p.connectionType,
    template_id: p.templateId,
    template_version: p.templateVersion,
    status: p.held ? 'pending_approval' : 'queued',
    attempts: [],
    possible_duplicate: false,
    delivered_at: null,
    content: p.content,
    finished_at: null,
    sending_since: null,
    round: 0,
    round_start: 0,
    not_before: null,
    paced: false,
    rev: 1,
    sequence: p.sequence ?? 1,
    previous_delivery_id: p.previousDeliveryId ?? null,
    ...(p.audience !== undefined && p.audience !== null ? { audience: p.audience } : {}),
    ...(p.publicStatus !== undefined ? { public_status: p.publicStatus } : {}),
    ...(p.kind !== undefined && p.kind !== 'announcement' ? { execution_kind: p.kind } : {}),
    ...(p.targets
      ? { target_delivery_id: p.targets.deliveryId, planned_action: p.targets.action, target: p.targets.message }
      : {}),
  };
}
