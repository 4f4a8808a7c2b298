import { z } from 'zod';
import { refuseLiteralHost, type OutboundAllow } from './address-policy.js';
import {
  ChannelTypeSchema,
  CHANNEL_TYPES,
  type ChannelType,
  type ConversationSupport,
  type Destination,
  type MessageFormat,
} from '../../contracts/channel.js';
// The registry's pure half: each type's config schema, destinations and conversation rules.
import { CHANNELS, channelOf, type ConfigOf } from '../../channels/index.js';
import { UpdateModeSchema, type UpdateMode } from '../execution/conversation.js';
import { DomainError, fieldError, type FieldError } from '../common/errors.js';
import { LIMITS } from '../common/limits.js';
import { dedupeFieldErrors, safeParseInput, toFieldErrors } from '../common/validation.js';

/**
 * Connections (docs/explanation/delivery-semantics.md, Outbound safety): the request schemas, the stored record, and
 * the pure rules — config validation per type, merge-PATCH, the secret_required rule, the address policy at write time,
 * health bookkeeping. Secrets are plaintext here; sealing them is the service's job (through the
 * SecretBox port), so the rules stay pure and testable. What a client sees of a record is the
 * HTTP edge's business (src/http/presenters/connection.ts).
 */

const RATE_LIMIT_MAX = 60_000;

// ── health and test results ──────────────────────────────────────────────────────────────────

export const HEALTH_STATES = ['ok', 'degraded', 'disabled'] as const;

export const ConnectionHealthSchema = z
  .object({
    state: z.enum(HEALTH_STATES),
    consecutive_failures: z.number().int().min(0),
    last_error: z.string().nullable(),
    disabled_reason: z.string().nullable(),
  })
  .meta({ id: 'ConnectionHealth' });
export type ConnectionHealth = z.infer<typeof ConnectionHealthSchema>;

export const HEALTHY: ConnectionHealth = {
  state: 'ok',
  consecutive_failures: 0,
  last_error: null,
  disabled_reason: null,
};

export const TEST_STATUSES = [
  'ok',
  'auth_failed',
  'not_found',
  'rate_limited',
  'unreachable',
  'blocked_by_policy',
  'invalid_config',
  'accepted_unverified',
  'needs_send_message',
] as const;
export type TestStatus = (typeof TEST_STATUSES)[number];

export const ConnectionTestResultSchema = z
  .object({
    ok: z.boolean(),
    status: z.enum(TEST_STATUSES),
    method: z.string().nullable().meta({
      description: 'What was tried: auth.test, get_webhook, smtp_verify, getMe, send_message; null when nothing was.',
    }),
    sent_message: z.boolean(),
    http_status: z.number().int().nullable(),
    provider_code: z.string().nullable(),
    latency_ms: z.number().int().min(0).nullable(),
    checked_at: z.string(),
    detail: z.string(),
  })
  .meta({ id: 'ConnectionTestResult' });
export type ConnectionTestResult = z.infer<typeof ConnectionTestResultSchema>;

export const ConnectionTestRequestSchema = z
  .strictObject({
    send_message: z
      .boolean()
      .optional()
      .meta({ description: 'Deliver a marked test message (default false: read-only check).' }),
  })
  .meta({ id: 'ConnectionTestRequest' });

// ── request shapes ───────────────────────────────────────────────────────────────────────────

const name = z
  .string()
  .trim()
  .min(1, 'name is required.')
  .max(LIMITS.connectionName, `name is at most ${LIMITS.connectionName} characters.`);
const rateLimit = z
  .number()
  .int()
  .min(1)
  .max(RATE_LIMIT_MAX)
  .nullable()
  .meta({ description: 'Messages per minute to this connection; null = the platform default.' });

/** The create body with `config` left open: the type's own schema judges it (see parseConnectionCreate). */
const CreateEnvelopeSchema = z.strictObject({
  name,
  type: ChannelTypeSchema,
  enabled: z.boolean().default(true),
  rate_limit_per_minute: rateLimit.default(null),
  update_mode: UpdateModeSchema.default('thread'),
  config: z.record(z.string(), z.unknown()),
});

/** The create body as documented: one shape per type (OpenAPI). Built from the same pieces. */
export const ConnectionCreateSchema = z
  .discriminatedUnion(
    'type',
    CHANNEL_TYPES.map((t) =>
      CreateEnvelopeSchema.extend({ type: z.literal(t), config: CHANNELS[t].createConfigSchema }),
    ) as unknown as [z.ZodObject, ...z.ZodObject[]],
  )
  .meta({ id: 'ConnectionCreate' });

export const ConnectionPatchSchema = z
  .strictObject({
    name: name.optional(),
    enabled: z.boolean().optional(),
    rate_limit_per_minute: rateLimit.optional(),
    update_mode: UpdateModeSchema.optional(),
    config: z.record(z.string(), z.unknown()).optional().meta({
      description:
        'Merged into the config: fields sent replace, fields left out are kept, null removes an optional field. Secrets stay unless a new value is sent.',
    }),
  })
  .meta({ id: 'ConnectionPatch' });
export type ConnectionPatch = z.infer<typeof ConnectionPatchSchema>;

// ── the stored record ────────────────────────────────────────────────────────────────────────

/** A secret at rest: the SecretBox envelope and the hint the presenter shows. */
export interface SealedSecret {
  sealed: string;
  last4: string | null;
}

/** The stored connection: config without secrets, sealed secrets, and a revision for ETag/CAS. */
export interface ConnectionRecord {
  id: string;
  name: string;
  type: ChannelType;
  enabled: boolean;
  /** Non-secret config fields only. */
  config: Record<string, unknown>;
  /** Secret key (`webhook_url`, `headers.X-Token`) → sealed value. */
  secrets: Record<string, SealedSecret>;
  rate_limit_per_minute: number | null;
  /** Absent on records from before living updates: `thread`. */
  update_mode?: UpdateMode;
  health: ConnectionHealth;
  last_test: ConnectionTestResult | null;
  created_at: string;
  updated_at: string;
  rev: number;
}

/**
 * A connection with its secrets opened, typed per channel type: what senders and the tester get.
 * `config` is the full config (secrets included, `switch (c.type)` narrows it); `secrets` holds
 * the same secret values by key (`webhook_url`, `headers.X-Token`). Never presented.
 */
export type DeliveryConnection = {
  [T in ChannelType]: {
    id: string;
    name: string;
    type: T;
    enabled: boolean;
    config: ConfigOf<T>;
    secrets: Record<string, string>;
    rateLimitPerMinute: number | null;
    health: ConnectionHealth;
    /** How later messages of an incident reach it (absent: `thread`). */
    updateMode?: UpdateMode;
  };
}[ChannelType];

/**
 * `edit` keeps one message current by editing it: refused (field `update_mode`) for a connection
 * that cannot edit what it posted, where it could only ever fall back to posting.
 */
export function checkUpdateMode(
  mode: UpdateMode | undefined,
  c: { type: ChannelType; config: Record<string, unknown>; secrets?: Record<string, unknown> },
): void {
  if (mode !== 'edit' || conversationOf(c).edit) return;
  throw fieldError(
    'unsupported_update_mode',
    'update_mode',
    `${channelOf(c.type).label} ${c.type === 'slack' ? 'incoming webhooks cannot' : 'cannot'} edit a message it posted, so update_mode edit is not possible here; use thread or new_message.`,
  );
}

/**
 * What the connection can do with an incident's conversation (thread, edit, delete). Secret
 * fields are not in a stored record's `config`; the rules only ask whether one is set, so each
 * set secret stands in by name.
 */
export function conversationOf(c: {
  type: ChannelType;
  config: Record<string, unknown>;
  secrets?: Record<string, unknown>;
}): ConversationSupport {
  const withSecrets: Record<string, unknown> = { ...c.config };
  for (const k of Object.keys(c.secrets ?? {})) if (!(k in withSecrets)) withSecrets[k] = '(set)';
  return channelOf(c.type).conversation(withSecrets);
}

/**
 * Calls the handler of the connection's type in a map with one per type (the channel senders).
 * TypeScript cannot correlate `handlers[c.type]` with `c` across the union; the mapped type
 * guarantees they match.
 */
export function sendVia<M, R>(
  handlers: { [T in ChannelType]: { send(target: Extract<DeliveryConnection, { type: T }>, message: M): Promise<R> } },
  connection: DeliveryConnection,
  message: M,
): Promise<R> {
  // Methods compare bivariantly, so the union of the per-type senders widens to one that takes any connection.
  const handler: { send(target: DeliveryConnection, message: M): Promise<R> } = handlers[connection.type];
  return handler.send(connection, message);
}

/** The format a connection's messages are rendered in (its channel module's, with its config). */
export function formatOf(connection: { type: ChannelType; config: unknown }): MessageFormat {
  return channelOf(connection.type).format(connection.config);
}

export type PlainConfig = Record<string, unknown>;

// ── create ───────────────────────────────────────────────────────────────────────────────────

export interface ConnectionDraft {
  name: string;
  type: ChannelType;
  enabled: boolean;
  rate_limit_per_minute: number | null;
  update_mode: UpdateMode;
  /** Full config, secrets in plaintext (generated ones not yet filled: see completeConfig). */
  config: PlainConfig;
}

/**
 * Validates a create body: the envelope, then the config against its type's schema (errors at
 * `config.<field>`), reporting every bad field at once. Type rules and the address policy come
 * after (checkConfigRules), once the shape is right.
 */
export function parseConnectionCreate(input: unknown): ConnectionDraft {
  const envelope = safeParseInput(CreateEnvelopeSchema, input);
  const errors: FieldError[] = envelope.success ? [] : toFieldErrors(envelope.error.issues);
  const raw =
    typeof input === 'object' && input !== null && !Array.isArray(input) ? (input as Record<string, unknown>) : {};
  const type = ChannelTypeSchema.safeParse(raw.type);
  let config: PlainConfig | null = null;
  if (type.success && isPlainObject(raw.config)) {
    const parsed = safeParseInput(channelOf(type.data).createConfigSchema, raw.config);
    if (parsed.success) config = parsed.data as PlainConfig;
    else errors.push(...toFieldErrors(parsed.error.issues, ['config']));
  }
  if (!envelope.success || config === null || errors.length > 0) {
    throw new DomainError(
      'validation_failed',
      'The request has invalid fields; see errors.',
      dedupeFieldErrors(errors),
    );
  }
  return { ...envelope.data, config };
}

/** Fills generated config values (a webhook's signing secret) with injected randomness. */
export function completeConfig(
  type: ChannelType,
  config: PlainConfig,
  randomBytes: (n: number) => Buffer,
): PlainConfig {
  const def = channelOf(type);
  return def.complete ? (def.complete(config, randomBytes) as PlainConfig) : config;
}

/** The value returned once as `signing_secret` on create, for types that have one. */
export function signingSecretOf(type: ChannelType, config: PlainConfig): string | null {
  const field = channelOf(type).signingSecretField;
  const value = field === undefined ? undefined : config[field];
  return typeof value === 'string' ? value : null;
}

// ── validation against the rules that need the allow list ────────────────────────────────────

/** Re-validates a full config against its type's schema; errors at `config.<field>`. */
export function configShapeErrors(type: ChannelType, config: PlainConfig): FieldError[] {
  const r = safeParseInput(channelOf(type).configSchema, config);
  return r.success ? [] : toFieldErrors(r.error.issues, ['config']);
}

/**
 * The write-time rules after the shape: the type's own (legacy Teams URL, Discord URL form), then
 * the address policy on every destination (or only the ones in `changed`, on PATCH): a
 * non-allowed URL must be https, and a literal non-public address is refused. Host names are not
 * resolved here; the connect-time guard judges them.
 */
export function checkConfigRules(
  type: ChannelType,
  config: PlainConfig,
  allow: OutboundAllow,
  changed: ((d: Destination) => boolean) | null = null,
): void {
  const def = channelOf(type);
  const ruleError = def.rules?.(config, allow) ?? null;
  if (ruleError) throw ruleError;
  const errors = destinationErrors(type, config, allow, changed);
  if (errors.length > 0) {
    throw new DomainError('destination_not_allowed', errors.map((e) => e.message).join(' '), errors);
  }
}

/** The address policy alone, as field errors (also used by the test endpoint's `blocked_by_policy`). */
export function destinationErrors(
  type: ChannelType,
  config: PlainConfig,
  allow: OutboundAllow,
  changed: ((d: Destination) => boolean) | null = null,
): FieldError[] {
  const errors: FieldError[] = [];
  for (const d of channelOf(type).destinations(config)) {
    if (changed && !changed(d)) continue;
    const allowed = allow.allows(d.host);
    if (d.kind === 'url' && !allowed && !d.value.trim().toLowerCase().startsWith('https:')) {
      errors.push({
        field: d.field,
        code: 'https_required',
        message: `${d.field} must use https (only hosts in HERALD_OUTBOUND_ALLOW may use http).`,
      });
      continue;
    }
    const refusal = refuseLiteralHost(d.host, allow);
    if (refusal) {
      errors.push({
        field: d.field,
        code: 'destination_not_allowed',
        message: `${d.field} is not allowed: ${refusal.detail}. Herald only sends to public addresses (an operator can allow it in HERALD_OUTBOUND_ALLOW).`,
      });
    }
  }
  return errors;
}

// ── PATCH ────────────────────────────────────────────────────────────────────────────────────

/**
 * Merge-patch of a config (RFC 7396 style): fields sent replace, fields left out are kept, null
 * removes. Secret maps (webhook `headers`) merge per key, names compared case-insensitively.
 */
export function mergeConfig(type: ChannelType, current: PlainConfig, patch: PlainConfig): PlainConfig {
  const maps = new Set(channelOf(type).secretMaps);
  const next: PlainConfig = { ...current };
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) {
      delete next[key];
    } else if (maps.has(key) && isPlainObject(value) && isPlainObject(current[key])) {
      next[key] = mergeMap(current[key], value);
    } else {
      next[key] = value;
    }
  }
  return next;
}

function mergeMap(current: Record<string, unknown>, patch: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...current };
  for (const [key, value] of Object.entries(patch)) {
    for (const existing of Object.keys(out)) if (existing.toLowerCase() === key.toLowerCase()) delete out[existing];
    if (value !== null) out[key] = value;
  }
  return out;
}

/**
 * docs/explanation/delivery-semantics.md, Outbound safety: moving a destination to another host without re-sending
 * every secret that goes there would hand those secrets to the new host. One `secret_required` entry per secret not
 * sent. (A webhook's signing secret never travels, so it is kept.)
 */
export function missingSecrets(
  type: ChannelType,
  before: PlainConfig,
  after: PlainConfig,
  patch: PlainConfig,
): FieldError[] {
  const def = channelOf(type);
  const old = new Map(def.destinations(before).map((d) => [d.field, d.host]));
  const errors: FieldError[] = [];
  for (const d of def.destinations(after)) {
    const previous = old.get(d.field);
    if (previous === undefined || previous === d.host) continue;
    for (const key of d.secrets) {
      if (wasSent(patch, key)) continue;
      errors.push({
        field: `config.${key}`,
        code: 'secret_required',
        message: `${d.field} moves to another host (${d.host}); send ${key} again so it is not handed to the new host unasked.`,
      });
    }
  }
  return errors;
}

function wasSent(patch: PlainConfig, key: string): boolean {
  const dot = key.indexOf('.');
  if (dot < 0) return typeof patch[key] === 'string';
  const map = patch[key.slice(0, dot)];
  const name = key.slice(dot + 1).toLowerCase();
  return isPlainObject(map) && Object.entries(map).some(([k, v]) => k.toLowerCase() === name && typeof v === 'string');
}

/** Destinations of `after` whose host differs from (or is absent in) `before`. */
export function changedDestinations(type: ChannelType, before: PlainConfig): (d: Destination) => boolean {
  const old = new Map(
    channelOf(type)
      .destinations(before)
      .map((d) => [d.field, d.value]),
  );
  return (d) => old.get(d.field) !== d.value;
}

// ── secrets: split and join ──────────────────────────────────────────────────────────────────

/** Splits a full config into its non-secret fields and its secrets (`headers.X-Token` for maps). */
export function splitSecrets(
  type: ChannelType,
  config: PlainConfig,
): { plain: PlainConfig; secrets: Record<string, string> } {
  const def = channelOf(type);
  const plain: PlainConfig = {};
  const secrets: Record<string, string> = {};
  for (const [key, value] of Object.entries(config)) {
    if (def.secretFields.includes(key) && typeof value === 'string') {
      secrets[key] = value;
    } else if (def.secretMaps.includes(key) && isPlainObject(value)) {
      for (const [k, v] of Object.entries(value)) if (typeof v === 'string') secrets[`${key}.${k}`] = v;
    } else {
      plain[key] = value;
    }
  }
  return { plain, secrets };
}

/** The inverse of splitSecrets. */
export function joinSecrets(type: ChannelType, plain: PlainConfig, secrets: Record<string, string>): PlainConfig {
  const def = channelOf(type);
  const config: PlainConfig = { ...plain };
  for (const [key, value] of Object.entries(secrets)) {
    const dot = key.indexOf('.');
    const map = dot < 0 ? '' : key.slice(0, dot);
    if (dot >= 0 && def.secretMaps.includes(map)) {
      const into = isPlainObject(config[map]) ? config[map] : {};
      config[map] = { ...into, [key.slice(dot + 1)]: value };
    } else {
      config[key] = value;
    }
  }
  return config;
}

/** The last four characters, or null when the secret is too short to show any of it safely. */
export function lastFour(secret: string): string | null {
  return secret.length >= 12 ? secret.slice(-4) : null;
}

// ── records ──────────────────────────────────────────────────────────────────────────────────

export function newConnectionRecord(
  id: string,
  draft: Omit<ConnectionDraft, 'config'>,
  plain: PlainConfig,
  secrets: Record<string, SealedSecret>,
  now: string,
): ConnectionRecord {
  return {
    id,
    name: draft.name,
    type: draft.type,
    enabled: draft.enabled,
    config: plain,
    secrets,
    rate_limit_per_minute: draft.rate_limit_per_minute,
    ...(draft.update_mode !== 'thread' ? { update_mode: draft.update_mode } : {}),
    health: HEALTHY,
    last_test: null,
    created_at: now,
    updated_at: now,
    rev: 1,
  };
}

/**
 * The health after one delivery outcome: a success clears the failure streak (and `degraded`); a
 * failure counts and degrades. A disabled connection stays disabled until re-enabled.
 */
export function nextHealth(
  health: ConnectionHealth,
  outcome: { ok: true } | { ok: false; error: string },
): ConnectionHealth {
  if (outcome.ok) {
    return health.state === 'disabled'
      ? { ...health, consecutive_failures: 0 }
      : { ...health, state: 'ok', consecutive_failures: 0 };
  }
  return {
    ...health,
    state: health.state === 'disabled' ? 'disabled' : 'degraded',
    consecutive_failures: health.consecutive_failures + 1,
    last_error: outcome.error,
  };
}

/** Disables a connection the system found dead (a 404/410 from its webhook), saying why. */
export function disabledHealth(health: ConnectionHealth, reason: string): ConnectionHealth {
  return { ...health, state: 'disabled', disabled_reason: reason, last_error: health.last_error ?? reason };
}

/** A test outcome decided without contacting anyone (invalid config, policy, no read-only check). */
export function localTestResult(
  status: TestStatus,
  method: string | null,
  detail: string,
  checkedAt: string,
): ConnectionTestResult {
  return {
    ok: false,
    status,
    method,
    sent_message: false,
    http_status: null,
    provider_code: null,
    latency_ms: null,
    checked_at: checkedAt,
    detail,
  };
}

/** Name of the read-only check of this config, or null when its type has none. */
export function readOnlyCheckOf(type: ChannelType, config: PlainConfig): string | null {
  return channelOf(type).readOnlyCheck(config);
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
