import type { Announcement, AnnouncementReminderLog, AnnouncementRepo } from '../ports/index.js';

/**
 * Where each incident was announced in Slack, so the announcement can be kept current
 * (chat.update) from any Herald process: the API that changed the incident, or the worker whose
 * delivery just finished.
 */
export class AnnouncementService {
  constructor(private readonly repo: AnnouncementRepo & AnnouncementReminderLog) {}

  find(incidentId: string): Promise<Announcement | null> {
    return this.repo.get(incidentId);
  }

  /** Remembers the message; the first announcement of an incident wins (false for a later one). */
  remember(incidentId: string, channel: string, ts: string): Promise<boolean> {
    return this.repo.create(incidentId, { channel, ts, execution_id: null });
  }

  /** The receipts follow the newest execution: an older one finishing late never takes over. */
  trackExecution(incidentId: string, executionId: string): Promise<Announcement | null> {
    return this.repo.trackExecution(incidentId, executionId);
  }

  /** The announcement with the last reminder posted under it; null when there is none. */
  reminders(incidentId: string): Promise<{ announcement: Announcement; lastReminder: number } | null> {
    return this.repo.reminders(incidentId);
  }

  /** Records a posted reminder (never lowers the recorded number). */
  recordReminder(incidentId: string, reminder: number): Promise<void> {
    return this.repo.recordReminder(incidentId, reminder);
  }

  /**
   * Runs `render` as the only refresher of the announcement across all processes, again for as
   * long as changes arrive meanwhile. When another process is refreshing, this only tells it to
   * go again and returns: two processes' chat.update calls can then never cross, so the last
   * one always shows the newest state.
   */
  async refreshExclusively(incidentId: string, token: string, render: () => Promise<void>): Promise<void> {
    if (!(await this.repo.claimRefresh(incidentId, token, REFRESH_CLAIM_TTL_MS))) return;
    // A failed render still ends the claim (a change marked meanwhile gets its render); the
    // failure of the last render is reported.
    let failure: { error: unknown } | null;
    do {
      failure = null;
      try {
        await render();
      } catch (error) {
        failure = { error };
      }
    } while (await this.repo.finishRefresh(incidentId, token, REFRESH_CLAIM_TTL_MS));
    if (failure) throw failure.error;
  }
}

/**
 * How long a refresh claim lasts: longer than one render (a few reads and a chat.update with a
 * 10 s timeout and two quick retries). A process that dies holding it delays the next refresh of
 * that announcement by at most this much.
 */
const REFRESH_CLAIM_TTL_MS = 45_000;
