import { z } from 'zod';
import { maskAddress } from '../../domain/subscriber/address.js';
import {
  NOTICE_KINDS,
  RECIPIENT_STATES,
  SUBSCRIBER_KINDS,
  SUBSCRIBER_STATES,
  type NoticeTally,
  type Subscriber,
  type SubscriberNotice,
} from '../../ports/subscribers.js';
import { exportRecord, type ImportResult, type NoticeRecipient } from '../../services/subscriber-admin.js';
import { NoticeTallySchema, presentTally } from './execution.js';

const fields = {
  id: z.string().meta({ example: 'sub_7K3Q9M2X4B8V1N6P0R5T2W9Y3C' }),
  kind: z.enum(SUBSCRIBER_KINDS),
  address_masked: z
    .string()
    .meta({ description: 'The address with most of it hidden (`j•••@example.com`).', example: 'j•••@example.com' }),
  state: z.enum(SUBSCRIBER_STATES),
  components: z.array(z.string()).meta({ description: 'Component ids it hears of; empty: all of them.' }),
  locale: z.enum(['en', 'de']),
  source: z.string().meta({ description: '`page` (the status page form), or `import:<source>`.' }),
  created_at: z.string(),
  confirmed_at: z.string().nullable(),
  unsubscribed_at: z.string().nullable(),
  bounced_at: z.string().nullable(),
  bounce_reason: z.string().nullable().meta({ description: 'The SMTP reply or HTTP status that bounced it.' }),
};

/** A subscriber in a list: its address masked (a list is read more often, by more people). */
export const SubscriberSummarySchema = z.object(fields).meta({ id: 'SubscriberSummary' });

/** One subscriber, with the address in full (GDPR art. 15: what is held about a person). */
export const SubscriberSchema = z
  .object({ ...fields, address: z.string().meta({ description: 'The e-mail address or webhook URL in full.' }) })
  .meta({ id: 'Subscriber' });

/** Never the webhook secret, the confirmation nonce or the token version: those are credentials. */
export function presentSubscriberSummary(s: Subscriber): z.infer<typeof SubscriberSummarySchema> {
  const { address, ...rest } = exportRecord(s);
  return { ...rest, address_masked: maskAddress(address) };
}

export function presentSubscriber(s: Subscriber): z.infer<typeof SubscriberSchema> {
  return { ...exportRecord(s), address_masked: maskAddress(s.address) };
}

export const SubscriberImportResultSchema = z
  .object({
    created: z.number().int().meta({ description: 'New addresses, now confirmed.' }),
    confirmed: z.number().int().meta({ description: 'Pending addresses, now confirmed.' }),
    unchanged: z.number().int().meta({ description: 'Already confirmed (or repeated in this import).' }),
    skipped: z.number().int().meta({ description: 'Unsubscribed or bounced: an import never subscribes them again.' }),
    errors: z
      .array(z.object({ index: z.number().int(), detail: z.string() }))
      .meta({ description: 'Rows not imported: their index in `subscribers` and why (never the address).' }),
  })
  .meta({ id: 'SubscriberImportResult' });

export const presentImportResult = (r: ImportResult): z.infer<typeof SubscriberImportResultSchema> => r;

export const SubscriberReceiptSchema = z
  .object({
    notice_id: z.string(),
    subscriber_id: z.string(),
    state: z.enum(RECIPIENT_STATES),
    attempts: z.number().int(),
    at: z.string().meta({ description: 'The last attempt.' }),
    error: z.string().nullable().meta({ description: 'The last failure (SMTP reply or HTTP status).' }),
    possible_duplicate: z.boolean(),
  })
  .meta({ id: 'SubscriberReceipt' });

export const presentReceipt = (r: NoticeRecipient): z.infer<typeof SubscriberReceiptSchema> => ({
  notice_id: r.notice_id,
  subscriber_id: r.subscriber_id,
  state: r.state,
  attempts: r.attempts,
  at: r.at,
  error: r.error,
  possible_duplicate: r.possible_duplicate,
});

export const SubscriberNoticeSchema = z
  .object({
    id: z.string().meta({ example: 'ntc_dlv_01JH3ZK6X2B8V4N0Q7R5T9W1YC' }),
    kind: z.enum(NOTICE_KINDS),
    created_at: z.string(),
    execution_id: z
      .string()
      .nullable()
      .meta({ description: 'The execution whose status page delivery opened it; null for a maintenance.' }),
    page: z.object({ title: z.string(), public_url: z.string() }),
    component_ids: z.array(z.string()).meta({ description: 'Who it concerns; empty: every subscriber.' }),
    components: z.array(z.object({ id: z.string(), name: z.string(), status: z.string() })),
    incident: z
      .object({
        id: z.string(),
        name: z.string(),
        impact: z.string(),
        status: z.string(),
        url: z.string(),
        created_at: z.string(),
      })
      .nullable(),
    maintenance: z
      .object({
        id: z.string(),
        name: z.string(),
        status: z.string(),
        scheduled_for: z.string(),
        scheduled_until: z.string(),
        url: z.string(),
      })
      .nullable(),
    update: z.object({
      id: z.string(),
      status: z.string(),
      body: z.string(),
      created_at: z.string(),
      updated_at: z.string().nullable(),
    }),
    tally: NoticeTallySchema,
  })
  .meta({ id: 'SubscriberNotice' });

export function presentNotice(n: SubscriberNotice, tally: NoticeTally): z.infer<typeof SubscriberNoticeSchema> {
  return {
    id: n.id,
    kind: n.kind,
    created_at: n.created_at,
    execution_id: n.execution_id,
    page: { title: n.page.title, public_url: n.page.public_url },
    component_ids: n.component_ids,
    components: n.components.map((c) => ({ id: c.id, name: c.name, status: c.status })),
    incident: n.incident && { ...n.incident },
    maintenance: n.maintenance && { ...n.maintenance },
    update: { ...n.update },
    tally: presentTally(tally),
  };
}
