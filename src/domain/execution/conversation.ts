import { z } from 'zod';
import type { MessageKind, MessageRef } from '../../contracts/channel.js';
import { DomainError, fieldError } from '../common/errors.js';

/**
 * Living updates (docs/explanation/living-updates.md): one conversation per incident per connection. The
 * first message an incident sends to a connection starts it; later executes continue it (a
 * thread, a reply chain, a mail thread), or keep one message current (`edit`), or post on their
 * own (`new_message`). Corrections edit delivered messages in place where the platform can, and
 * retractions delete them; elsewhere each posts a short note in the conversation.
 */

// What a delivery does on its platform, and the kinds of execution: the channel contract's.
export { MESSAGE_ACTIONS, MESSAGE_KINDS, type MessageAction, type MessageKind } from '../../contracts/channel.js';

/** How a connection carries an incident's later messages. */
export const UPDATE_MODES = ['thread', 'new_message', 'edit'] as const;
export type UpdateMode = (typeof UPDATE_MODES)[number];

export const UpdateModeSchema = z.enum(UPDATE_MODES).meta({
  id: 'UpdateMode',
  description:
    "How later executes of an incident reach this connection: `thread` (default) continues the incident's first message where the platform can (a thread, a reply, a mail thread) and posts normally where it cannot; `new_message` posts each update on its own; `edit` keeps one message current by editing the first post (only for connections that can edit).",
});

/** Where a posted message lives on its platform (see ports/delivery.ts). */
export const MessageRefSchema = z
  .object({
    id: z.string().meta({
      description:
        'The platform’s id: Slack ts, Discord message id, Telegram message_id, Google Chat message name, e-mail Message-ID, webhook: the delivery id.',
    }),
    channel: z.string().nullable().meta({
      description:
        'Where it is when the id alone does not say: Slack channel, Discord channel or thread, Telegram chat, Google Chat thread.',
    }),
    permalink: z.string().nullable().meta({
      description: 'A link to the message where the platform gives one (Slack permalink, Discord jump URL, t.me link).',
    }),
  })
  .meta({ id: 'MessageRef' }) satisfies z.ZodType<MessageRef>;
export type { MessageRef } from '../../contracts/channel.js';

// ── waiting for the first message ────────────────────────────────────────────────────────────

/**
 * How a wait for the conversation's first message ended: it was delivered (the update continued
 * it), it was not (failed for good or cancelled: the update started the conversation itself), or
 * the wait's bound passed first (the update was posted on its own).
 */
export const THREAD_WAIT_OUTCOMES = ['delivered', 'failed', 'timed_out'] as const;
export type ThreadWaitOutcome = (typeof THREAD_WAIT_OUTCOMES)[number];

export const WaitedForSchema = z
  .object({
    delivery_id: z.string().meta({
      description:
        "The delivery of the conversation's first message it waited for (when it was delivered: the one it continued).",
    }),
    ms: z
      .number()
      .int()
      .min(0)
      .meta({ description: 'How long it waited, in milliseconds: from when it was due until its send started.' }),
    outcome: z.enum(THREAD_WAIT_OUTCOMES).meta({
      description:
        '`delivered`: the first message was delivered, and this one continued it (a reply under it, or an edit of it); `failed`: it was not delivered (failed for good, or cancelled), so this one was posted as the first message; `timed_out`: the bound (HERALD_THREAD_WAIT_MS) passed first, so this one was posted on its own.',
    }),
  })
  .meta({ id: 'ThreadWait' });
export type WaitedFor = z.infer<typeof WaitedForSchema>;

/** Kept on a delivery while it waits for its conversation's first message (see WaitedForSchema). */
export interface ThreadWait {
  /** The delivery it waits for. */
  delivery_id: string;
  /** When the wait began: its bound counts from here, across worker restarts. */
  since: string;
}

// ── update cadence ───────────────────────────────────────────────────────────────────────────

export const NEXT_UPDATE_MIN_MS = 60_000;
export const NEXT_UPDATE_MAX_MS = 24 * 60 * 60_000;
const DURATION = /^([1-9]\d{0,3})(m|h)$/;

/** `15m`, `1h`: a duration from 1 minute to 24 hours, in minutes or hours. */
export const NextUpdateInSchema = z
  .string()
  .regex(DURATION, 'next_update_in is a duration like 15m or 1h.')
  .refine(
    (v) => {
      const ms = durationMs(v);
      return ms >= NEXT_UPDATE_MIN_MS && ms <= NEXT_UPDATE_MAX_MS;
    },
    // Only a well-formed duration is judged by its range: one error per bad value.
    {
      message: 'next_update_in is between 1m and 24h.',
      when: (payload) => typeof payload.value === 'string' && DURATION.test(payload.value),
    },
  )
  .meta({
    description:
      'When the next update is due (`15m`, `1h`; 1m to 24h). The incident shows it as `next_update_due_at`, templates as `{{incident.next_update_at}}`; if no execute follows in time, Herald reminds (timeline event, Slack thread) and repeats until one does. An execute without it clears the due time.',
  });

/** Milliseconds of a `NextUpdateInSchema` value. */
export function durationMs(v: string): number {
  const m = DURATION.exec(v);
  if (!m) return Number.NaN;
  return Number(m[1]) * (m[2] === 'h' ? 3_600_000 : 60_000);
}

/** `14:30 UTC` (with the date when it is not the day of `now`): how messages and Slack show a due time. */
export function formatDueTime(dueIso: string, now: Date): string {
  const due = new Date(dueIso);
  const hhmm = `${String(due.getUTCHours()).padStart(2, '0')}:${String(due.getUTCMinutes()).padStart(2, '0')} UTC`;
  return due.toISOString().slice(0, 10) === now.toISOString().slice(0, 10)
    ? hhmm
    : `${due.toISOString().slice(0, 10)} ${hhmm}`;
}

/** `5 min`, `1 h 20 min`: how long overdue, for people. */
export function formatOverdue(ms: number): string {
  const min = Math.max(0, Math.floor(ms / 60_000));
  if (min < 60) return `${min} min`;
  return min % 60 === 0 ? `${min / 60} h` : `${Math.floor(min / 60)} h ${min % 60} min`;
}

// ── corrections and retractions ──────────────────────────────────────────────────────────────

export const NOTE_MAX = 1_000;

export const CorrectRequestSchema = z
  .strictObject({
    variables: z.record(z.string(), z.string()).optional().meta({
      description:
        "Corrected variable values, merged over the execution's own; the messages are rendered again with them (same template versions).",
    }),
    note: z
      .string()
      .trim()
      .min(1, 'note must not be blank.')
      .max(NOTE_MAX, `note is at most ${NOTE_MAX} characters.`)
      .optional()
      .meta({ description: 'What was wrong, shown with the correction.' }),
  })
  .meta({ id: 'CorrectRequest' });
export type CorrectRequest = z.infer<typeof CorrectRequestSchema>;

export const RetractRequestSchema = z
  .strictObject({
    reason: z
      .string()
      .trim()
      .min(1, 'reason is required.')
      .max(NOTE_MAX, `reason is at most ${NOTE_MAX} characters.`)
      .meta({ description: 'Why the messages are withdrawn; shown where a message cannot be deleted.' }),
  })
  .meta({ id: 'RetractRequest' });
export type RetractRequest = z.infer<typeof RetractRequestSchema>;

/** A correction must change something: variables or a note. */
export function assertCorrectsSomething(body: CorrectRequest): void {
  if (body.note === undefined && (body.variables === undefined || Object.keys(body.variables).length === 0)) {
    throw fieldError('validation_failed', 'variables', 'Send the corrected variables, a note, or both.', 'required');
  }
}

/** Only an execute's messages are corrected or retracted, not a correction's or a retraction's. */
export function assertCorrectable(kind: MessageKind | undefined, what: 'correct' | 'retract'): void {
  if (kind !== undefined && kind !== 'announcement') {
    throw new DomainError(
      'not_correctable',
      `This execution is a ${kind}; ${what} the execution it ${kind === 'correction' ? 'corrects' : 'retracts'} instead.`,
    );
  }
}
