import { z } from 'zod';
import { ChannelTypeSchema, type ChannelType } from '../../channels/index.js';
import { VariablesSchema } from '../template/variables.js';

export const DELIVERY_STATUSES = ['queued', 'sending', 'delivered', 'retrying', 'failed', 'cancelled'] as const;
export const EXECUTION_STATUSES = ['queued', 'in_progress', 'delivered', 'partially_failed', 'failed', 'cancelled'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];
export type ExecutionStatus = (typeof EXECUTION_STATUSES)[number];

export const ExecuteRequestSchema = z
  .strictObject({
    variables: VariablesSchema.default({}),
    connection_ids: z.array(z.string().min(1).max(64)).min(1).max(200).optional(),
  })
  .meta({ id: 'ExecuteRequest' });
export type ExecuteRequest = z.infer<typeof ExecuteRequestSchema>;

/** `?dry_run=`: true/false (booleans from in-process callers such as the Slack edge pass as they are). */
export const DryRunSchema = z.union([z.boolean(), z.enum(['true', 'false']).transform((v) => v === 'true')]).optional();

/** Redeliver takes no options today; a strict empty object keeps typos from passing silently. */
export const RedeliverRequestSchema = z.strictObject({}).meta({ id: 'RedeliverRequest' });

export const ATTEMPT_OUTCOMES = ['delivered', 'retryable_failure', 'permanent_failure', 'interrupted', 'cancelled'] as const;

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
    status: z.enum(DELIVERY_STATUSES),
    attempts: z.array(AttemptSchema),
    possible_duplicate: z.boolean(),
    delivered_at: z.string().nullable(),
  })
  .meta({ id: 'Delivery' });

/** What a delivery sends: rendered once at execute, so every retry sends the same words. */
export interface RenderedContent {
  subject: string;
  body: string;
  /** E-mail only: the HTML part. */
  html?: string;
}

/** The stored delivery: the wire shape plus what the worker needs. */
export interface Delivery extends z.infer<typeof DeliverySchema> {
  execution_id: string;
  incident_id: string;
  content: RenderedContent;
  /** When the delivery reached a terminal state (for the execution's completed_at). */
  finished_at: string | null;
  /** Set while an attempt is in flight: finding it set on pick-up means the last attempt was cut off. */
  sending_since: string | null;
  /** Bumped by redeliver so the re-queued job gets a fresh queue id. */
  round: number;
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
  rev: number;
}

export interface Execution {
  id: string;
  incident_id: string;
  variables: Record<string, string>;
  created_at: string;
  template_versions: Record<string, number>;
  delivery_ids: string[];
}

export const isTerminal = (s: DeliveryStatus): boolean => s === 'delivered' || s === 'failed' || s === 'cancelled';

/** The execution's status is derived from its deliveries, never stored (no write contention). */
export function executionStatus(deliveries: Pick<Delivery, 'status'>[]): ExecutionStatus {
  const s = deliveries.map((d) => d.status);
  if (s.length === 0) return 'cancelled';
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
}): Delivery {
  return {
    id: p.id,
    execution_id: p.executionId,
    incident_id: p.incidentId,
    connection_id: p.connectionId,
    connection_type: p.connectionType,
    template_id: p.templateId,
    template_version: p.templateVersion,
    status: 'queued',
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
  };
}
