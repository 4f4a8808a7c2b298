import type { Actor } from '../common/actor.js';
import { iso } from '../common/clock.js';
import { durationMs } from '../execution/conversation.js';
import { isOpen, type Incident } from './incident.js';

/**
 * The update cadence (docs/explanation/living-updates.md): an execute may say when the next update is due
 * (`next_update_in`); when that time passes without another execute, Herald reminds the people
 * who can act, then again every repeat interval until an execute comes, the incident is resolved
 * or closed. Pure: the reminder worker (services/reminders.ts) asks `reminderStep` what to do.
 *
 * Reminder k (1, 2, …) is due at `due + (k-1) × repeat`. The incident counts the reminders sent
 * (`update_reminders`) and the time of the next one (`next_reminder_at`, which the store mirrors
 * into a schedule), both written with compare-and-set, so a reminder is recorded once however
 * many workers look at it, and a worker that was down for several intervals sends one reminder,
 * not a burst.
 */

/** The cadence fields an execute sets: a new due time (or none), reminders counted afresh. */
export function cadenceAfterExecute(
  nextUpdateIn: string | undefined,
  now: Date,
  actor: Actor,
): Pick<Incident, 'next_update_due_at' | 'next_reminder_at' | 'update_reminders' | 'last_executed_by'> {
  const due = nextUpdateIn === undefined ? null : iso(new Date(now.getTime() + durationMs(nextUpdateIn)));
  return { next_update_due_at: due, next_reminder_at: due, update_reminders: 0, last_executed_by: actor };
}

export type ReminderStep =
  /** Nothing is owed (no due time, resolved, closed): drop it from the schedule. */
  | { kind: 'stop' }
  /** Not yet: the next reminder is at `atMs`. */
  | { kind: 'wait'; atMs: number }
  /** Send reminder number `reminder`; `next` is the incident that records it. */
  | { kind: 'remind'; reminder: number; dueAt: string; overdueMs: number; next: Incident };

/** What the reminder worker should do for `incident` at `now`, reminding every `repeatMs`. */
export function reminderStep(incident: Incident, now: Date, repeatMs: number): ReminderStep {
  const dueAt = incident.next_update_due_at;
  if (!isOpen(incident.status) || dueAt === null) return { kind: 'stop' };
  const dueMs = Date.parse(dueAt);
  const sent = incident.update_reminders ?? 0;
  const nextMs = dueMs + sent * repeatMs;
  const nowMs = now.getTime();
  if (nowMs < nextMs) return { kind: 'wait', atMs: nextMs };
  const reminder = Math.floor((nowMs - dueMs) / repeatMs) + 1;
  const next: Incident = {
    ...incident,
    update_reminders: reminder,
    next_reminder_at: iso(new Date(dueMs + reminder * repeatMs)),
    rev: incident.rev + 1,
  };
  return { kind: 'remind', reminder, dueAt, overdueMs: nowMs - dueMs, next };
}
