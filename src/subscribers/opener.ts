import type { Clock } from '../domain/common/clock.js';
import type { PublicIncident, PublicPageConfig, PublicUpdate } from '../domain/status/public.js';
import type { NoticeComponent, NoticeRepo, SubscriberNotice, SubscriberNotices } from '../ports/subscribers.js';
import { loadPageConfig } from '../status/loaders.js';
import { loadPublicComponents } from '../store/components.js';
import type { Keys } from '../store/keys.js';
import { RedisMaintenanceRepo } from '../store/maintenances.js';
import { getPublicIncident } from '../store/public-incidents.js';
import type { RedisClient as Redis } from '../store/redis-connect.js';

/**
 * The notifier's front door (SubscriberNotices): turns a status page write or a published
 * maintenance update into a SubscriberNotice and opens it (NoticeRepo.open: the record, its tally
 * and its work, once). Its words are read from the public stores at that moment — the page shows
 * the same — so every retry and every subscriber's mail says the same thing.
 *
 * Ids follow what made the notice: `ntc_<delivery id>` for a status page write, so a retried
 * delivery opens the same one; `ntc_<maintenance id>_<update id>` for a maintenance update. Nothing
 * to tell (no page claimed, the incident or update gone) opens nothing: that is not a failure.
 * A store failure is thrown, so the caller's own retry opens it later.
 */

/** What a status page write was, as the wrapper (notifying-status-page.ts) reports it. */
export interface IncidentWrite {
  kind: 'incident_update' | 'incident_correction' | 'incident_retraction';
  deliveryId: string;
  executionId: string;
  incidentId: string;
  updateId: string;
}

/** The incident and update as they were before a retraction removed them (the store no longer has them). */
export interface RetractedUpdate {
  incident: PublicIncident;
  update: PublicUpdate;
}

export class SubscriberNoticeOpener implements SubscriberNotices {
  private readonly maintenances: RedisMaintenanceRepo;

  constructor(private readonly d: { redis: Redis; keys: Keys; notices: NoticeRepo; clock: Clock }) {
    this.maintenances = new RedisMaintenanceRepo(d.redis, d.keys);
  }

  /** Reads a published incident and one of its updates, as the page shows them (null: not public). */
  async readUpdate(incidentId: string, updateId: string): Promise<RetractedUpdate | null> {
    const incident = await getPublicIncident(this.d.redis, this.d.keys, incidentId);
    const update = incident?.updates.find((u) => u.id === updateId);
    return incident && update ? { incident, update } : null;
  }

  /**
   * A status page write. A retraction's update is gone from the store once removed: its caller
   * passes what it read before (`before`); without it, the store is read now.
   */
  async incidentWritten(w: IncidentWrite, before?: RetractedUpdate | null): Promise<void> {
    const found = before ?? (await this.readUpdate(w.incidentId, w.updateId));
    if (found === null) return;
    const page = await loadPageConfig(this.d.redis, this.d.keys);
    if (page === null) return;
    const { incident, update } = found;
    await this.d.notices.open({
      id: `ntc_${w.deliveryId}`,
      kind: w.kind,
      created_at: this.d.clock.now().toISOString(),
      execution_id: w.executionId,
      page: pageOf(page),
      component_ids: [...incident.component_ids],
      components: await this.components(incident.component_ids),
      incident: {
        id: incident.id,
        name: incident.name,
        impact: incident.impact,
        // The state this update gave it: a correction of an old update does not announce a later state.
        status: update.status,
        url: `${page.public_url}/incidents/${encodeURIComponent(incident.id)}`,
        created_at: incident.created_at,
      },
      maintenance: null,
      update: {
        id: update.id,
        status: update.status,
        body: update.body,
        created_at: update.created_at,
        updated_at: update.updated_at,
      },
    });
  }

  /** A maintenance update was published (`updateId` = the maintenance id: its creation, its own description). */
  async maintenanceNotice(w: { maintenanceId: string; updateId: string }): Promise<void> {
    const m = await this.maintenances.get(w.maintenanceId);
    if (m === null) return;
    const update =
      w.updateId === m.id
        ? { id: m.id, status: 'scheduled' as const, body: m.body, created_at: m.created_at }
        : m.updates.find((u) => u.id === w.updateId);
    if (update === undefined) return;
    const page = await loadPageConfig(this.d.redis, this.d.keys);
    if (page === null) return;
    const notice: SubscriberNotice = {
      id: `ntc_${m.id}_${update.id}`,
      kind: 'maintenance',
      created_at: this.d.clock.now().toISOString(),
      execution_id: null,
      page: pageOf(page),
      component_ids: [...m.components],
      components: await this.components(m.components),
      incident: null,
      maintenance: {
        id: m.id,
        name: m.title,
        status: update.status,
        scheduled_for: m.scheduled_for,
        scheduled_until: m.scheduled_until,
        url: `${page.public_url}/maintenances/${encodeURIComponent(m.id)}`,
      },
      update: {
        id: update.id,
        status: update.status,
        body: update.body,
        created_at: update.created_at,
        updated_at: null,
      },
    };
    await this.d.notices.open(notice);
  }

  /** The named components as the page shows them now (those not on the page are left out). */
  private async components(ids: string[]): Promise<NoticeComponent[]> {
    if (ids.length === 0) return [];
    const shown = await loadPublicComponents(this.d.redis, this.d.keys, this.d.clock.now().getTime());
    const byId = new Map(shown.map((c) => [c.id, c]));
    return ids.flatMap((id) => {
      const c = byId.get(id);
      return c ? [{ id: c.id, name: c.name, status: c.status }] : [];
    });
  }
}

const pageOf = (p: PublicPageConfig): SubscriberNotice['page'] => ({ title: p.title, public_url: p.public_url });
