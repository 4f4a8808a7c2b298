import type { Announcement, AnnouncementRepo } from '../ports.js';

/**
 * Where each incident was announced in Slack, so the announcement can be kept current
 * (chat.update) from any Herald process: the API that changed the incident, or the worker whose
 * delivery just finished.
 */
export class AnnouncementService {
  constructor(private readonly repo: AnnouncementRepo) {}

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
}
