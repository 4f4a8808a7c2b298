import { z } from 'zod';
import { SCOPES, type Scope } from '../common/api-key.js';
import { DomainError, emptyPatch, type ErrorCode, type FieldError } from '../common/errors.js';
import { LIMITS } from '../common/limits.js';
import { noRepeats, safeParseInput, toFieldErrors } from '../common/validation.js';

/**
 * Audiences (docs/api.md, Audiences): who hears what. An audience names where it is reached
 * (`connection_ids`), which of an incident's templates it receives (`template_ids`, empty = all
 * of them) and whether a second person must approve a send to it first (`approval`). The
 * request schemas, the stored record and the pure rules live here; existence of the connections
 * and templates is the service's check, atomicity the store's.
 */

/** A key: lower-case slug, what an execute names (`"audiences": ["customers"]`). */
export const AUDIENCE_KEY = /^[a-z0-9][a-z0-9_-]{0,62}$/;
/** A Slack user id as Slack issues them: U… for users, W… for Enterprise Grid users. */
export const SLACK_USER_ID = /^[UW][A-Z0-9]{2,20}$/;

export const VISIBILITIES = ['internal', 'external'] as const;
export type Visibility = (typeof VISIBILITIES)[number];

/** Bounds of `approval.expires_in`: long enough to find someone, short enough not to send stale words. */
export const APPROVAL_EXPIRY_MIN_MS = 5 * 60_000;
export const APPROVAL_EXPIRY_MAX_MS = 7 * 86_400_000;

const DURATION = /^(\d{1,5})([mhd])$/;
const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** Milliseconds of an `expires_in` (`30m`, `2h`, `1d`); NaN when it is not one. */
export function approvalExpiryMs(v: string): number {
  const m = DURATION.exec(v);
  if (!m) return Number.NaN;
  return Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
}

// ── request shapes ───────────────────────────────────────────────────────────────────────────

const key = z
  .string()
  .regex(
    AUDIENCE_KEY,
    'key is a lower-case slug: a letter or digit, then letters, digits, "-" or "_" (at most 63 characters).',
  )
  .meta({ description: 'Unique, immutable: what an execute names.', example: 'customers' });
const name = z
  .string()
  .trim()
  .min(1, 'name is required.')
  .max(LIMITS.audienceName, `name is at most ${LIMITS.audienceName} characters.`);
const description = z.string().max(LIMITS.longText, `description is at most ${LIMITS.longText} characters.`);
const visibility = z.enum(VISIBILITIES).meta({
  description: '`external` audiences are outside the company (customers, the status page); `internal` ones are not.',
});

/** Ids of a kind, no repeats (`connection_ids.3` names a repeat). Existence is the service's check. */
const idList = (field: string, max: number) =>
  z
    .array(z.string().min(1).max(64))
    .max(max, `At most ${max} ${field}.`)
    .superRefine(noRepeats((id: string) => id));

const ConnectionIdsSchema = idList('connections', LIMITS.audienceConnections).meta({
  description: 'Where the audience is reached: connection ids. A connection may belong to several audiences.',
});
const TemplateIdsSchema = idList('templates', LIMITS.audienceTemplates).meta({
  description:
    "The templates this audience receives: an execute sends it the incident's attached templates that are also listed here. Empty: every attached template (and the built-in message when the incident has none).",
});

const SlackUserIdSchema = z.string().superRefine((v, ctx) => {
  if (!SLACK_USER_ID.test(v))
    ctx.addIssue({
      code: 'custom',
      input: v,
      message: 'A Slack user id looks like U024BE7LH (U or W, then capital letters and digits).',
      params: { code: 'invalid_approver' },
    });
});

export const AudienceApproversSchema = z
  .strictObject({
    slack_user_ids: z
      .array(SlackUserIdSchema.meta({ example: 'U024BE7LH', pattern: SLACK_USER_ID.source }))
      .max(LIMITS.audienceApprovers, `At most ${LIMITS.audienceApprovers} approvers.`)
      .refine((ids) => new Set(ids).size === ids.length, 'slack_user_ids must not repeat.')
      .default([])
      .meta({ description: 'Slack users who may approve or reject (in Slack, or through the API as themselves).' }),
    api_key_scopes: z
      .array(z.enum(SCOPES))
      .min(1, 'List at least one scope, or leave api_key_scopes out.')
      .max(SCOPES.length)
      .refine((s) => new Set(s).size === s.length, 'api_key_scopes must not repeat.')
      .optional()
      .meta({
        description:
          'API keys may approve when they hold `approvals:write` and at least one of these scopes (`*` holds all). Left out: only the Slack users above may approve.',
      }),
  })
  .meta({ id: 'AudienceApprovers' });

const expiresIn = z
  .string()
  .regex(DURATION, 'expires_in is a duration like 30m, 2h or 1d.')
  .refine(
    (v) => {
      const ms = approvalExpiryMs(v);
      return ms >= APPROVAL_EXPIRY_MIN_MS && ms <= APPROVAL_EXPIRY_MAX_MS;
    },
    {
      message: 'expires_in is between 5m and 7d.',
      // Only a well-formed duration is judged by its range: one error per bad value.
      when: (payload) => typeof payload.value === 'string' && DURATION.test(payload.value),
    },
  )
  .meta({ description: 'How long a pending approval waits before it expires (5m to 7d): nothing is sent then.' });

export const DEFAULT_APPROVAL: AudienceApproval = {
  required: false,
  approvers: { slack_user_ids: [] },
  four_eyes: true,
  expires_in: '2h',
};

/** The approval on create: every field optional, with the defaults of DEFAULT_APPROVAL. */
export const AudienceApprovalInputSchema = z
  .strictObject({
    required: z.boolean().default(false).meta({ description: 'A send to this audience waits for an approver.' }),
    approvers: AudienceApproversSchema.default({ slack_user_ids: [] }),
    four_eyes: z
      .boolean()
      .default(true)
      .meta({ description: 'The person who asked for the send may not approve it themselves.' }),
    expires_in: expiresIn.default('2h'),
  })
  .meta({ id: 'AudienceApprovalInput' });

/** The approval on PATCH: fields sent replace (approvers as a whole), fields left out are kept. */
const AudienceApprovalPatchSchema = z
  .strictObject({
    required: z.boolean().optional(),
    approvers: AudienceApproversSchema.optional(),
    four_eyes: z.boolean().optional(),
    expires_in: expiresIn.optional(),
  })
  .meta({
    id: 'AudienceApprovalPatch',
    example: { required: true, approvers: { slack_user_ids: ['U024BE7LH', 'W0123ABCD'] } },
    description: 'Fields sent replace, fields left out are kept; approvers is replaced as a whole.',
  });

/** The OpenAPI example of an audience: its create body, and (with id and times) the audience answered. */
const AUDIENCE_EXAMPLE = {
  key: 'customers',
  name: 'Customers',
  description: 'The status page and the customer mailing list.',
  visibility: 'external',
  connection_ids: ['con_01JH3ZK6X2B8V4N0Q7R5T9W1YC'],
  template_ids: ['tpl_01JH3ZK6X2B8V4N0Q7R5T9W1YD'],
  approval: {
    required: true,
    approvers: { slack_user_ids: ['U024BE7LH'], api_key_scopes: ['incidents:execute'] },
    four_eyes: true,
    expires_in: '2h',
  },
};

export const AudienceCreateSchema = z
  .strictObject({
    key,
    name,
    description: description.default(''),
    visibility: visibility.default('internal'),
    connection_ids: ConnectionIdsSchema.default([]),
    template_ids: TemplateIdsSchema.default([]),
    approval: AudienceApprovalInputSchema.default({ ...DEFAULT_APPROVAL }),
  })
  .meta({
    id: 'AudienceCreate',
    example: AUDIENCE_EXAMPLE,
  });
export type AudienceCreate = z.output<typeof AudienceCreateSchema>;

export const AudiencePatchSchema = z
  .strictObject({
    key: z.unknown().optional().meta({ description: 'Immutable: any value is refused (422).' }),
    name: name.optional(),
    description: description.optional(),
    visibility: visibility.optional(),
    connection_ids: ConnectionIdsSchema.optional(),
    template_ids: TemplateIdsSchema.optional(),
    approval: AudienceApprovalPatchSchema.optional(),
  })
  .meta({ id: 'AudiencePatch' });
export type AudiencePatch = z.output<typeof AudiencePatchSchema>;

// ── the wire shape and the stored record ─────────────────────────────────────────────────────

export const AudienceApprovalSchema = z
  .object({
    required: z.boolean(),
    approvers: z.object({
      slack_user_ids: z.array(z.string()),
      api_key_scopes: z.array(z.enum(SCOPES)).optional(),
    }),
    four_eyes: z.boolean(),
    expires_in: z.string(),
  })
  .meta({ id: 'AudienceApproval' });

export interface AudienceApproval {
  required: boolean;
  approvers: { slack_user_ids: string[]; api_key_scopes?: Scope[] };
  four_eyes: boolean;
  expires_in: string;
}

export const AudienceSchema = z
  .object({
    id: z.string().meta({ example: 'aud_01JH3ZK6X2B8V4N0Q7R5T9W1YC' }),
    key: z.string().meta({ example: 'customers' }),
    name: z.string().meta({ example: 'Customers' }),
    description: z.string(),
    visibility: z.enum(VISIBILITIES),
    connection_ids: z.array(z.string()),
    template_ids: z.array(z.string()),
    approval: AudienceApprovalSchema,
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({
    id: 'Audience',
    example: {
      id: 'aud_01JH3ZK6X2B8V4N0Q7R5T9W1YE',
      ...AUDIENCE_EXAMPLE,
      created_at: '2026-11-22T10:00:00.000Z',
      updated_at: '2026-11-22T10:00:00.000Z',
    },
  });
export type AudienceWire = z.infer<typeof AudienceSchema>;

/**
 * The stored audience: the wire shape plus `rev`, its ETag and compare-and-set revision.
 *
 * Where an audience is reached is one id list per kind of target: `connection_ids` today. The
 * status page and subscriber lists join as lists of their own beside it (`status_page_ids`, …),
 * optional in the record and read as `[]` when absent, with a membership index per target like
 * `con:<id>:auds` (store/audiences.ts) so deleting a target leaves its audiences the same way.
 * A stored audience then needs no rewriting.
 */
export type Audience = AudienceWire & { approval: AudienceApproval; rev: number };

// ── rules ────────────────────────────────────────────────────────────────────────────────────

/**
 * Parses an audience body. A refusal whose every problem is an approver that is not a Slack
 * user id answers `invalid_approver` (the code the issue names); anything else is
 * `validation_failed`, with every field named either way.
 */
export function parseAudienceInput<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const r = safeParseInput(schema, input);
  if (r.success) return r.data;
  const errors = toFieldErrors(r.error.issues);
  const code: ErrorCode =
    errors.length > 0 && errors.every((e) => e.code === 'invalid_approver') ? 'invalid_approver' : 'validation_failed';
  throw new DomainError(
    code,
    code === 'invalid_approver'
      ? 'Some approvers are not Slack user ids; see errors.'
      : 'The request has invalid fields; see errors.',
    errors,
  );
}

/** The approval as stored: api_key_scopes only when some are listed. */
function normalizeApproval(a: AudienceApproval): AudienceApproval {
  const approvers: AudienceApproval['approvers'] = { slack_user_ids: [...a.approvers.slack_user_ids] };
  if (a.approvers.api_key_scopes !== undefined && a.approvers.api_key_scopes.length > 0)
    approvers.api_key_scopes = [...a.approvers.api_key_scopes];
  return { required: a.required, approvers, four_eyes: a.four_eyes, expires_in: a.expires_in };
}

/** `required: true` with nobody who could approve would hold every send until it expires: refused. */
export function checkApproval(a: AudienceApproval): void {
  if (!a.required) return;
  if (a.approvers.slack_user_ids.length > 0 || (a.approvers.api_key_scopes?.length ?? 0) > 0) return;
  const message =
    'An audience that requires approval needs approvers: list approval.approvers.slack_user_ids or api_key_scopes.';
  throw new DomainError('no_approvers', message, [
    { field: 'approval.approvers', code: 'no_approvers', message } satisfies FieldError,
  ]);
}

export function newAudience(id: string, input: AudienceCreate, now: string): Audience {
  const approval = normalizeApproval(input.approval);
  checkApproval(approval);
  return {
    id,
    key: input.key,
    name: input.name,
    description: input.description,
    visibility: input.visibility,
    connection_ids: input.connection_ids,
    template_ids: input.template_ids,
    approval,
    created_at: now,
    updated_at: now,
    rev: 1,
  };
}

/**
 * Applies a PATCH: a new revision when anything changes, the audience itself when nothing does.
 * `key` is immutable (an execute, a Slack modal or a script may name it): any value is refused,
 * its current one included, so a client learns the rule rather than relying on a no-op.
 */
export function applyAudiencePatch(current: Audience, patch: AudiencePatch, now: string): Audience {
  if (Object.keys(patch).length === 0) throw emptyPatch();
  if ('key' in patch) {
    const message = `key is immutable once the audience exists (it is "${current.key}"); create a new audience for a new key.`;
    throw new DomainError('validation_failed', message, [{ field: 'key', code: 'immutable', message }]);
  }
  const approval = patch.approval
    ? normalizeApproval({
        required: patch.approval.required ?? current.approval.required,
        approvers: patch.approval.approvers ?? current.approval.approvers,
        four_eyes: patch.approval.four_eyes ?? current.approval.four_eyes,
        expires_in: patch.approval.expires_in ?? current.approval.expires_in,
      })
    : current.approval;
  checkApproval(approval);
  const content: Audience = {
    ...current,
    name: patch.name ?? current.name,
    description: patch.description ?? current.description,
    visibility: patch.visibility ?? current.visibility,
    connection_ids: patch.connection_ids ?? current.connection_ids,
    template_ids: patch.template_ids ?? current.template_ids,
    approval,
  };
  if (JSON.stringify(content) === JSON.stringify(current)) return current;
  return { ...content, rev: current.rev + 1, updated_at: now };
}

/** The audience once a deleted connection has left it: a new revision (its ETag changes). */
export function withoutConnection(a: Audience, connectionId: string, now: string): Audience {
  if (!a.connection_ids.includes(connectionId)) return a;
  return {
    ...a,
    connection_ids: a.connection_ids.filter((c) => c !== connectionId),
    rev: a.rev + 1,
    updated_at: now,
  };
}

/**
 * Whether an API key may decide an approval of this audience: only when the audience lists
 * `api_key_scopes`, and the key holds `approvals:write` and one of them (`*` holds every scope).
 */
export function apiKeyMayApprove(a: Pick<Audience, 'approval'>, keyScopes: readonly string[]): boolean {
  const listed = a.approval.approvers.api_key_scopes;
  if (listed === undefined || listed.length === 0) return false;
  const holds = (s: string) => keyScopes.includes('*') || keyScopes.includes(s);
  return holds('approvals:write') && listed.some(holds);
}

/** Whether a Slack user is one of the audience's named approvers. */
export function slackUserMayApprove(a: Pick<Audience, 'approval'>, slackUserId: string): boolean {
  return a.approval.approvers.slack_user_ids.includes(slackUserId);
}
