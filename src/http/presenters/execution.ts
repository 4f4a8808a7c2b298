import { z } from 'zod';
import { ChannelTypeSchema } from '../../channels/index.js';
import { MESSAGE_KINDS } from '../../domain/execution/conversation.js';
import {
  DeliverySchema,
  EXECUTION_STATUSES,
  PublicStatusSchema,
  executionStatus,
  isTerminal,
  type Delivery,
  type Execution,
} from '../../domain/execution/execution.js';
import type { PlannedAudience, PlannedDelivery } from '../../services/executions.js';
import {
  ExecutionAudienceSchema,
  viewOf,
  type ExecutionApprovals,
  type ExecutionAudience,
} from '../../domain/execution/approval.js';
import type { NoticeTally } from '../../ports/subscribers.js';

/** How far telling the status page's subscribers of a notice (or an execution's notices) got. */
export const NoticeTallySchema = z
  .object({
    total: z.number().int().meta({ description: 'Recipients matched so far (grows while batches run).' }),
    delivered: z.number().int(),
    failed: z.number().int(),
    pending: z.number().int().meta({ description: 'Matched, not settled yet (being sent or waiting for a retry).' }),
    bounced: z.number().int(),
    possible_duplicates: z.number().int().meta({
      description: 'Resent after a crash cut off the first attempt (same Message-ID: receivers drop the repeat).',
    }),
    complete: z.boolean().meta({ description: 'Every batch has run and nothing is pending.' }),
  })
  .meta({ id: 'SubscriberTally' });

export const presentTally = (t: NoticeTally): z.infer<typeof NoticeTallySchema> => ({
  total: t.total,
  delivered: t.delivered,
  failed: t.failed,
  pending: t.pending,
  bounced: t.bounced,
  possible_duplicates: t.possible_duplicates,
  complete: t.complete,
});

export const ExecutionSchema = z
  .object({
    id: z.string(),
    incident_id: z.string(),
    kind: z.enum(MESSAGE_KINDS).meta({ description: '`announcement` (an execute), `correction` or `retraction`.' }),
    target_execution_id: z
      .string()
      .nullable()
      .meta({ description: 'For a correction or retraction: the execution it corrects or retracts.' }),
    note: z.string().nullable().meta({ description: "A correction's note or a retraction's reason." }),
    status: z.enum(EXECUTION_STATUSES),
    variables: z.record(z.string(), z.string()),
    created_at: z.string(),
    completed_at: z.string().nullable(),
    audiences: z.array(ExecutionAudienceSchema).meta({
      description:
        'The audiences it went to (empty for an execute without audiences): which deliveries each got, why one got none, and the approval of each held one.',
    }),
    public_status: PublicStatusSchema.nullable().meta({
      description:
        'The state a status page shows with this execute’s updates: the execute’s `public_status`, else mapped from the incident status at execute time. Null for corrections and retractions (they keep the state of what they correct).',
    }),
    deliveries: z.array(DeliverySchema),
    subscribers: NoticeTallySchema.optional().meta({
      description:
        "The status page's subscribers told of it (summed over the notices its status page deliveries opened; receipts at GET /executions/{executionId}/subscribers). Absent when it opened none.",
    }),
  })
  .meta({ id: 'Execution' });
export type ExecutionView = z.infer<typeof ExecutionSchema>;

/** What `?dry_run=true` answers: the deliveries as they would be sent, nothing queued. */
const DryRunDeliverySchema = z.object({
  connection_id: z.string(),
  connection_type: ChannelTypeSchema,
  template_id: z.string().nullable(),
  template_version: z.number().int().nullable(),
  subject: z.string(),
  body: z.string(),
});

/** What `?dry_run=true` answers: the deliveries as they would be sent, nothing queued. */
export const ExecuteDryRunSchema = z
  .object({
    dry_run: z.literal(true),
    deliveries: z.array(DryRunDeliverySchema),
    audiences: z
      .array(
        z.object({
          key: z.string(),
          name: z.string(),
          visibility: z.enum(['internal', 'external']),
          approval_required: z.boolean(),
          deliveries: z.array(DryRunDeliverySchema),
          skipped: ExecutionAudienceSchema.shape.skipped,
        }),
      )
      .meta({ description: 'Per audience (empty without audiences): what each of its connections would get.' }),
  })
  .meta({ id: 'ExecuteDryRun' });

export function presentExecution(
  e: Execution,
  deliveries: Delivery[],
  approvals: ExecutionApprovals | null = null,
  /** The tally of the subscriber notices it opened; null or absent: none. */
  subscribers: NoticeTally | null = null,
): ExecutionView {
  // Finished when the last delivery finished; a delivery without its own time counts from the start.
  const done = deliveries.length > 0 && deliveries.every((d) => isTerminal(d.status));
  const completed = done
    ? (deliveries
        .map((d) => d.finished_at ?? e.created_at)
        .sort()
        .at(-1) ?? null)
    : null;
  return {
    id: e.id,
    incident_id: e.incident_id,
    kind: e.kind ?? 'announcement',
    target_execution_id: e.target_execution_id ?? null,
    note: e.note ?? null,
    status: executionStatus(deliveries),
    variables: e.variables,
    created_at: e.created_at,
    completed_at: completed,
    audiences: presentAudiences(e, approvals),
    public_status: e.public_status ?? null,
    deliveries: deliveries.map(presentDelivery),
    ...(subscribers ? { subscribers: presentTally(subscribers) } : {}),
  };
}

/** The receipt of one delivery: its content and worker bookkeeping stay inside. */
export function presentDelivery(d: Delivery): z.infer<typeof DeliverySchema> {
  return {
    id: d.id,
    connection_id: d.connection_id,
    connection_type: d.connection_type,
    template_id: d.template_id,
    template_version: d.template_version,
    audience: d.audience ?? null,
    status: d.status,
    attempts: d.attempts,
    possible_duplicate: d.possible_duplicate,
    delivered_at: d.delivered_at,
    // Records from before living updates lack these: each was a post, first in its conversation.
    action: d.action ?? 'post',
    sequence: d.sequence ?? 1,
    previous_delivery_id: d.previous_delivery_id ?? null,
    target_delivery_id: d.target_delivery_id ?? null,
    message: d.message ?? null,
    reply_to: d.reply_to ?? null,
    waited_for: d.waited_for ?? null,
  };
}

export const presentDryRun = (deliveries: PlannedDelivery[], audiences: PlannedAudience[] | null) => ({
  dry_run: true as const,
  deliveries,
  audiences: audiences ?? [],
});

/** The execution's audiences with each held one's approval as it is now (stored apart, merged here). */
function presentAudiences(e: Execution, approvals: ExecutionApprovals | null): ExecutionAudience[] {
  const byKey = new Map((approvals?.audiences ?? []).map((r) => [r.audience_key, r]));
  return (e.audiences ?? []).map((a) => {
    const r = byKey.get(a.key);
    return {
      key: a.key,
      name: a.name,
      visibility: a.visibility,
      delivery_ids: a.delivery_ids,
      skipped: a.skipped,
      approval: r ? viewOf(r) : null,
    };
  });
}
