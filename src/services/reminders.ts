import { SYSTEM_ACTOR } from '../domain/common/actor.js';
import { iso } from '../domain/common/clock.js';
import { DomainError } from '../domain/common/errors.js';
import { newEvent } from '../domain/incident/incident-event.js';
import type { Incident } from '../domain/incident/incident.js';
import { reminderStep } from '../domain/incident/update-cadence.js';
import type { Clock, IdGenerator, IncidentRepo, ReminderNotifier, ReminderSchedule } from '../ports/index.js';
import { LOST_RACE, retryOnConflict } from './retry.js';

export interface ReminderServiceDeps {
  incidents: IncidentRepo;
  schedule: ReminderSchedule;
  /** Tells people (the Slack thread); null when there is nobody to tell that way. */
  notifier: ReminderNotifier | null;
  clock: Clock;
  ids: IdGenerator;
  /** HERALD_REMINDER_REPEAT: how often an overdue update is asked for again. */
  repeatMs: number;
  /** How long a worker holds a due reminder before another may take it over (it died). */
  leaseMs: number;
  /** Told after a reminder was recorded (the announcement shows "overdue"). */
  onReminded?: (incident: Incident) => void;
  onError?: (what: string, err: unknown) => void;
}

/**
 * The update cadence's reminders (docs/explanation/living-updates.md): the worker calls `runDue` every
 * second or so. Each due incident is leased from the schedule, so one worker handles it at a time
 * and a killed worker's lease lapses to another. For each: people are told first (the notifier
 * does nothing for a reminder number it already sent), then the reminder is recorded on the
 * incident with its `incident.update_overdue` event, by compare-and-set, which also moves the
 * schedule on to the next one. A crash anywhere in between repeats the step after the lease,
 * never skips it, and never records a reminder twice.
 */
/** How many leases a failing notifier may hold a reminder back before it is recorded without. */
const NOTIFY_PATIENCE_LEASES = 3;

export class ReminderService {
  constructor(private readonly d: ReminderServiceDeps) {}

  /** Handles every reminder due now (up to `limit`); returns how many were recorded. */
  async runDue(limit = 50): Promise<number> {
    const claimed = await this.d.schedule.claimDue(this.d.clock.now().getTime(), this.d.leaseMs, limit);
    let recorded = 0;
    for (const { incidentId, lease } of claimed) {
      try {
        if (await this.remindOne(incidentId, lease)) recorded++;
      } catch (err) {
        // Left leased: it is tried again when the lease lapses.
        this.d.onError?.(`reminding about incident ${incidentId}`, err);
      }
    }
    return recorded;
  }

  /**
   * Tells people, before the reminder is recorded (recording first could lose the Slack post to a
   * crash). A notifier that fails holds the reminder back for a few leases (Slack may be back by
   * then); past that the reminder is recorded without it, so an outage of Slack never keeps the
   * `incident.update_overdue` event off the timeline.
   */
  private async notify(incident: Incident, reminder: number, overdueMs: number): Promise<void> {
    try {
      await this.d.notifier?.remind(incident, reminder, overdueMs);
    } catch (err) {
      const lateMs = overdueMs - (reminder - 1) * this.d.repeatMs;
      if (lateMs < NOTIFY_PATIENCE_LEASES * this.d.leaseMs) throw err;
      this.d.onError?.(
        `telling people about reminder ${reminder} of incident ${incident.id} (recorded without it)`,
        err,
      );
    }
  }

  private remindOne(incidentId: string, lease: number): Promise<boolean> {
    return retryOnConflict(
      async () => {
        const incident = await this.d.incidents.get(incidentId);
        const now = this.d.clock.now();
        const step = incident ? reminderStep(incident, now, this.d.repeatMs) : ({ kind: 'stop' } as const);
        if (step.kind === 'stop' || step.kind === 'wait' || !incident) {
          await this.d.schedule.release(incidentId, lease, step.kind === 'wait' ? step.atMs : null);
          return false;
        }
        await this.notify(incident, step.reminder, step.overdueMs);
        const event = newEvent(this.d.ids.next('event'), 'incident.update_overdue', iso(now), SYSTEM_ACTOR, {
          due_at: step.dueAt,
          overdue_ms: step.overdueMs,
          reminder: step.reminder,
          last_executed_by: incident.last_executed_by ?? null,
        });
        if (!(await this.d.incidents.update(incident, step.next, [event]))) return LOST_RACE;
        this.d.onReminded?.(step.next);
        return true;
      },
      () => new DomainError('conflict', `Incident ${incidentId} kept changing while its reminder was recorded.`),
    );
  }
}
