import { monotonicFactory } from 'ulid';
import { z } from 'zod';
import { SEVERITIES } from '../incident/incident.js';
import { EVENT_CATALOG_TYPES } from './catalog.js';

/**
 * Event endpoints (docs/events.md): where integrator events are sent, which ones, in which form,
 * and the signing secrets. Pure: the store keeps records, the service applies these rules.
 */

export const ENDPOINT_PREFIX = 'evp';
export const EVENT_DELIVERY_PREFIX = 'evd';

const ulid = monotonicFactory();
/** Prefixed ULIDs for endpoints and their event deliveries (their own kinds, not resource ids). */
export const newEndpointId = (now: number): string => `${ENDPOINT_PREFIX}_${ulid(now)}`;
export const newEventDeliveryId = (now: number): string => `${EVENT_DELIVERY_PREFIX}_${ulid(now)}`;
export const isEndpointId = (s: string): boolean => /^evp_[0-9A-HJKMNP-TV-Z]{26}$/.test(s);
export const isEventDeliveryId = (s: string): boolean => /^evd_[0-9A-HJKMNP-TV-Z]{26}$/.test(s);

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
/**
 * The delivery of an event to an endpoint made by the fan-out: a ULID whose time is the event's
 * commit time and whose rest comes from a digest of the pair, so a fan-out run again (after a
 * crash) names the same delivery and cannot make a second one.
 */
export function fanoutDeliveryId(eventAtMs: number, digest: Uint8Array): string {
  let time = '';
  let ms = Math.max(0, Math.floor(eventAtMs));
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[ms % 32]! + time;
    ms = Math.floor(ms / 32);
  }
  let rest = '';
  for (let i = 0; i < 16; i++) rest += CROCKFORD[digest[i]! % 32]!;
  return `${EVENT_DELIVERY_PREFIX}_${time}${rest}`;
}

/** How many endpoints one Herald keeps (each event is matched against all of them). */
export const MAX_ENDPOINTS = 50;

/** The event types one can subscribe to: the catalog, `<group>.*`, or `*` for every one. */
const EventTypeSelector = z
  .string()
  .refine(
    (s) =>
      s === '*' ||
      (EVENT_CATALOG_TYPES as readonly string[]).includes(s) ||
      (s.endsWith('.*') && EVENT_CATALOG_TYPES.some((t) => t.startsWith(s.slice(0, -1)))),
    { message: `Use "*", a group such as "incident.*", or one of: ${EVENT_CATALOG_TYPES.join(', ')}.` },
  );

export const EndpointFilterSchema = z
  .strictObject({
    severities: z.array(z.enum(SEVERITIES)).min(1).max(4).optional().meta({
      description: 'Only events of incidents with one of these severities (at the time of the change).',
    }),
    component_ids: z.array(z.string().min(1).max(64)).min(1).max(100).optional().meta({
      description:
        "Only events touching one of these components: an incident's events while it names one of them, a component's own events, a maintenance's events while it covers one.",
    }),
    audience_keys: z.array(z.string().min(1).max(63)).min(1).max(100).optional().meta({
      description: 'Only events of executions to one of these audiences (execution, approval and delivery events).',
    }),
  })
  .meta({ id: 'EventEndpointFilter', description: 'Every given list must match (an AND of ORs).' });
export type EndpointFilter = z.infer<typeof EndpointFilterSchema>;

export const PAYLOAD_MODES = ['full', 'thin'] as const;
export type PayloadMode = (typeof PAYLOAD_MODES)[number];

const UrlSchema = z
  .string()
  .max(2048)
  .refine((s) => URL.canParse(s) && ['http:', 'https:'].includes(new URL(s).protocol), {
    message: 'url must be an absolute http(s) URL.',
  });

export const EndpointCreateSchema = z
  .strictObject({
    url: UrlSchema.meta({ description: 'Where events are POSTed (https; http only for HERALD_OUTBOUND_ALLOW hosts).' }),
    description: z.string().max(500).default(''),
    event_types: z.array(EventTypeSelector).min(1).max(50).default(['*']).meta({
      description: 'Event types, groups (`incident.*`) or `["*"]` for all.',
    }),
    filter: EndpointFilterSchema.nullable().default(null),
    payload: z.enum(PAYLOAD_MODES).default('full').meta({
      description: '`full`: the resource as the API returns it, as of the change; `thin`: ids and type only.',
    }),
    enabled: z.boolean().default(true),
  })
  .meta({ id: 'EventEndpointCreate' });
export type EndpointCreate = z.infer<typeof EndpointCreateSchema>;

export const EndpointPatchSchema = z
  .strictObject({
    url: UrlSchema.optional(),
    description: z.string().max(500).optional(),
    event_types: z.array(EventTypeSelector).min(1).max(50).optional(),
    filter: EndpointFilterSchema.nullable().optional(),
    payload: z.enum(PAYLOAD_MODES).optional(),
    enabled: z.boolean().optional(),
  })
  .meta({ id: 'EventEndpointPatch' });
export type EndpointPatch = z.infer<typeof EndpointPatchSchema>;

export const RotateSecretSchema = z
  .strictObject({
    overlap_seconds: z
      .number()
      .int()
      .min(0)
      .max(7 * 86_400)
      .default(86_400)
      .meta({
        description: 'How long the previous secret keeps signing too (default 24 h; 0 ends it now).',
      }),
  })
  .meta({ id: 'EventEndpointRotateSecret' });

/** A signing secret as stored: sealed, and (a previous one) until when it still signs. */
export interface StoredSecret {
  sealed: string;
  created_at: string;
  /** null for the current secret; a previous one signs until then. */
  expires_at: string | null;
}

export interface EndpointRecord {
  id: string;
  url: string;
  description: string;
  event_types: string[];
  filter: EndpointFilter | null;
  payload: PayloadMode;
  enabled: boolean;
  /** Why Herald turned it off (410 Gone, failing for 3 days); null when on or turned off by a user. */
  disabled_reason: string | null;
  /** The current secret first, then previous ones still in their overlap. */
  secrets: StoredSecret[];
  created_at: string;
  updated_at: string;
  rev: number;
}

export const EndpointSchema = z
  .object({
    id: z.string(),
    url: z.string(),
    description: z.string(),
    event_types: z.array(z.string()),
    filter: EndpointFilterSchema.nullable(),
    payload: z.enum(PAYLOAD_MODES),
    enabled: z.boolean(),
    disabled_reason: z.string().nullable().meta({
      description: 'Why Herald disabled it (`gone`: the receiver answered 410; `failing`: failing for 3 days).',
    }),
    previous_secret_expires_at: z.string().nullable().meta({
      description: 'While a rotated-out secret still signs (both signatures are sent), until when.',
    }),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'EventEndpoint' });
export type EndpointView = z.infer<typeof EndpointSchema>;

export const EndpointWithSecretSchema = EndpointSchema.extend({
  signing_secret: z.string().meta({ description: 'The `whsec_…` signing secret: shown only in this answer.' }),
}).meta({ id: 'EventEndpointWithSecret' });

export function presentEndpoint(e: EndpointRecord, nowMs: number): EndpointView {
  const previous = liveSecrets(e, nowMs).slice(1);
  return {
    id: e.id,
    url: e.url,
    description: e.description,
    event_types: e.event_types,
    filter: e.filter,
    payload: e.payload,
    enabled: e.enabled,
    disabled_reason: e.disabled_reason,
    previous_secret_expires_at:
      previous
        .map((s) => s.expires_at!)
        .sort()
        .at(-1) ?? null,
    created_at: e.created_at,
    updated_at: e.updated_at,
  };
}

/** The secrets that still sign at `nowMs`: the current one, and previous ones in their overlap. */
export function liveSecrets(e: Pick<EndpointRecord, 'secrets'>, nowMs: number): StoredSecret[] {
  return e.secrets.filter((s) => s.expires_at === null || Date.parse(s.expires_at) > nowMs);
}

/** What an event tells the filter about itself. */
export interface EventFacts {
  type: string;
  severity: string | null;
  component_ids: readonly string[];
  audience_keys: readonly string[];
}

export function subscribes(e: Pick<EndpointRecord, 'event_types'>, type: string): boolean {
  return e.event_types.some((s) => s === '*' || s === type || (s.endsWith('.*') && type.startsWith(s.slice(0, -1))));
}

/** Whether the endpoint wants this event: its type, then every list of its filter. */
export function matches(e: Pick<EndpointRecord, 'event_types' | 'filter' | 'enabled'>, f: EventFacts): boolean {
  if (!e.enabled || !subscribes(e, f.type)) return false;
  const filter = e.filter;
  if (filter === null) return true;
  if (filter.severities && (f.severity === null || !(filter.severities as string[]).includes(f.severity))) return false;
  if (filter.component_ids && !filter.component_ids.some((c) => f.component_ids.includes(c))) return false;
  if (filter.audience_keys && !filter.audience_keys.some((a) => f.audience_keys.includes(a))) return false;
  return true;
}

/**
 * The retry schedule (docs/events.md): after a failed attempt, the next waits this long (± 20 %
 * jitter), so 9 attempts over about 37 hours (at least 30 h with the jitter); then the delivery
 * fails. A Retry-After longer than the step is honoured (up to a day).
 */
export const RETRY_DELAYS_MS = [
  5_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3_600_000,
  5 * 3_600_000,
  10 * 3_600_000,
  10 * 3_600_000,
  10 * 3_600_000,
] as const;
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;
const MAX_RETRY_AFTER_MS = 86_400_000;

/** When attempt number `attempts + 1` goes, or null when `attempts` were the last. */
export function nextRetryDelay(attempts: number, retryAfterMs: number | null, random: () => number): number | null {
  const base = RETRY_DELAYS_MS[attempts - 1];
  if (base === undefined) return null;
  const jittered = Math.round(base * (0.8 + 0.4 * random()));
  return retryAfterMs === null ? jittered : Math.max(jittered, Math.min(retryAfterMs, MAX_RETRY_AFTER_MS));
}

/** An endpoint failing (every attempt, no success) for this long is disabled and the admins are told. */
export const FAILING_DISABLE_MS = 3 * 86_400_000;

// ── event deliveries: one per (event, endpoint), and one per replay ─────────────────────────

export const EVENT_DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;
export type EventDeliveryStatus = (typeof EVENT_DELIVERY_STATUSES)[number];

export const EventAttemptSchema = z
  .object({
    at: z.string(),
    status: z.number().int().nullable().meta({ description: "The receiver's HTTP status; null when none came." }),
    latency_ms: z.number().int(),
    response: z.string().meta({ description: 'The start of the answer body (at most 500 characters).' }),
    error: z
      .string()
      .nullable()
      .meta({ description: 'Why it failed, when it did (timeout, refused address, status).' }),
  })
  .meta({ id: 'EventDeliveryAttempt' });
export type EventAttempt = z.infer<typeof EventAttemptSchema>;

export const EventDeliverySchema = z
  .object({
    id: z.string(),
    endpoint_id: z.string(),
    event_id: z.string().meta({ description: 'The event, and the `webhook-id` every attempt carried.' }),
    event_type: z.string(),
    incident_id: z.string().nullable(),
    status: z.enum(EVENT_DELIVERY_STATUSES),
    attempts: z.array(EventAttemptSchema),
    next_attempt_at: z.string().nullable().meta({ description: 'When the next attempt goes (pending only).' }),
    replay: z.boolean().meta({ description: 'Made by a replay or a retry of a finished delivery.' }),
    created_at: z.string(),
  })
  .meta({ id: 'EventEndpointDelivery' });
export type EventDeliveryView = z.infer<typeof EventDeliverySchema>;

export interface EventDeliveryRecord extends EventDeliveryView {
  rev: number;
}

export const presentEventDelivery = (d: EventDeliveryRecord): EventDeliveryView => {
  const { rev: _rev, ...view } = d;
  return view;
};

export const ReplaySchema = z
  .strictObject({
    since: z.iso.datetime({ offset: true }).meta({ description: 'From this time (events committed at or after it).' }),
    until: z.iso.datetime({ offset: true }).optional().meta({ description: 'Up to this time (default: now).' }),
    event_types: z.array(EventTypeSelector).min(1).max(50).optional().meta({
      description: 'Only these types (default: those the endpoint subscribes to).',
    }),
  })
  .meta({ id: 'EventReplay' });

export const ReplayResultSchema = z
  .object({
    replayed: z.number().int().meta({ description: 'How many events were queued again (at most 10,000 per call).' }),
    truncated: z.boolean().meta({ description: 'True when the range held more: replay again from the last one.' }),
  })
  .meta({ id: 'EventReplayResult' });

export const EndpointTestResultSchema = z
  .object({
    ok: z.boolean(),
    status: z.number().int().nullable(),
    latency_ms: z.number().int(),
    response: z.string().meta({ description: 'The start of the answer body (at most 500 characters).' }),
    error: z.string().nullable(),
    event_id: z.string().meta({ description: "The ping's id (its webhook-id)." }),
  })
  .meta({ id: 'EventEndpointTestResult' });
export type EndpointTestResult = z.infer<typeof EndpointTestResultSchema>;

/** How much of a receiver's answer a delivery log keeps. */
export const RESPONSE_KEPT = 500;
