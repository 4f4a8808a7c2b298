import { randomUUID } from 'node:crypto';
import { isDomainError } from '../domain/common/errors.js';
import { formatDueTime, formatOverdue } from '../domain/execution/conversation.js';
import { executionStatus, type Delivery, type Execution } from '../domain/execution/execution.js';
import type { Incident } from '../domain/incident/incident.js';
import type {
  AnnouncementReceiptLine,
  AnnouncementReceipts,
  ChatPoster,
  NextUpdateDue,
  Pacer,
  ReminderNotifier,
} from '../ports/index.js';
import type { AnnouncementService } from './announcement-service.js';

/*
 * Routing announcements: which channel, when to post, when to update. Where each announcement
 * was posted is AnnouncementService's (./announcement-service.ts).
 */

/** How the router paces the chat platform. */
export interface AnnouncementPacing {
  /** Slots shared by every process (store/pacing.ts); the per-process intervals hold as well. */
  pacer: Pacer;
  /** Least time between two posts to one channel (default 1,000 ms). */
  postIntervalMs?: number;
  /** Least time between two updates of one announcement (default 2,000 ms). */
  updateIntervalMs?: number;
}

export interface AnnouncementRouterDeps {
  /** Where announcements are remembered (AnnouncementService). */
  store: Pick<
    AnnouncementService,
    'find' | 'remember' | 'trackExecution' | 'refreshExclusively' | 'reminders' | 'recordReminder'
  >;
  incidents: { get(id: string): Promise<Incident> };
  executions: {
    get(incidentId: string, executionId: string): Promise<{ execution: Execution; deliveries: Delivery[] }>;
  };
  connections: { get(id: string): Promise<{ name: string }> };
  /** The chat platform (the Slack edge's Web API adapter). */
  chat: ChatPoster;
  /** HERALD_SLACK_CHANNEL: where incidents created outside the chat platform are announced. */
  defaultChannel: string | null;
  pacing: AnnouncementPacing;
  log: { warn(obj: object, msg: string): void };
  /** What of a platform error is logged (its code and message, never the request). */
  describeError?: (err: unknown) => unknown;
  /** The clock "overdue" is measured by (default: the system clock). */
  now?: () => Date;
}

const POST_INTERVAL_MS = 1000;
const UPDATE_INTERVAL_MS = 2000;

/**
 * The announcement message of each incident: posted once, then kept current whenever the
 * incident changes or a delivery of its newest execute moves (receipts).
 *
 * Every refresh rebuilds the whole message from the stored state, so refreshes are idempotent and
 * the last one wins. Within a process they are coalesced per incident: while one runs, further
 * requests collapse into a single re-run after it, so a burst of delivery updates costs at most
 * two updates. Across processes (an API and several workers) a claim in Redis lets one render at
 * a time and makes it render again when another process saw a change meanwhile, so an older
 * state can never overwrite a newer one.
 *
 * Paced as Slack asks (about one message per second per channel; chat.update is rate limited):
 * posts to one channel go one at a time, each at least a second after the previous one was
 * answered (queued, never dropped), and one announcement is updated at most once every two
 * seconds — a burst of receipts becomes one update showing the latest state. The shared pacer
 * spreads the same slots over every process; while it is unreachable the pacing is per process.
 */
export class AnnouncementRouter implements ReminderNotifier {
  private readonly running = new Map<string, { again: boolean; done: Promise<void> }>();
  /** Names this process's refresh claims (unique enough: a claim only needs to know its holder). */
  private readonly instance = randomUUID();
  private refreshes = 0;
  /** Per channel: the tail of the queue of posts (each waits for the one before). */
  private readonly channelQueues = new Map<string, Promise<void>>();
  /** Per announcement: when its last update was answered (ms). */
  private readonly lastUpdate = new Map<string, number>();
  private readonly postIntervalMs: number;
  private readonly updateIntervalMs: number;
  private readonly describe: (err: unknown) => unknown;
  private readonly now: () => Date;

  constructor(private readonly r: AnnouncementRouterDeps) {
    this.postIntervalMs = r.pacing.postIntervalMs ?? POST_INTERVAL_MS;
    this.updateIntervalMs = r.pacing.updateIntervalMs ?? UPDATE_INTERVAL_MS;
    this.describe = r.describeError ?? ((err) => err);
    this.now = r.now ?? (() => new Date());
  }

  /**
   * Announces a new incident in the first channel that takes the message, in the order given.
   * Empty and repeated channels are skipped.
   */
  async announce(incidentId: string, channels: (string | null | undefined)[]): Promise<void> {
    const tried = new Set<string>();
    for (const channel of channels) {
      if (!channel || tried.has(channel)) continue;
      tried.add(channel);
      try {
        const posted = await this.postPaced(channel, async () => {
          // Read at post time: an update made meanwhile is already in the first version.
          const incident = await this.r.incidents.get(incidentId);
          return this.r.chat.post(channel, { incident, receipts: null, nextUpdate: this.nextUpdate(incident) });
        });
        if (posted) {
          await this.r.store.remember(incidentId, posted.channel, posted.ts);
          // The incident may have changed between the read and the remember: show the latest.
          this.refresh(incidentId);
        }
        return;
      } catch (err) {
        this.r.log.warn(
          { err: this.describe(err), channel, incident_id: incidentId },
          'could not post the incident announcement; trying the next channel',
        );
      }
    }
    this.r.log.warn({ incident_id: incidentId }, 'incident not announced in Slack: no channel took the message');
  }

  /**
   * Announces an incident declared in the chat: in the channel it was declared in, else the
   * default channel (HERALD_SLACK_CHANNEL), else a direct message to the person who declared it.
   */
  announceDeclared(incidentId: string, from: { channel?: string | null; user?: string | null }): Promise<void> {
    return this.announce(incidentId, [from.channel, this.r.defaultChannel, from.user]);
  }

  /**
   * IncidentService hook. An incident created outside Slack is announced in the default channel
   * (when one is set); a Slack-made one is announced by the Slack listener, which knows where the
   * command ran. Any other change refreshes the announcement.
   */
  incidentChanged(incident: Incident, kind: 'created' | 'updated' | 'closed'): void {
    if (kind === 'created') {
      if (incident.created_by.type !== 'slack_user' && this.r.defaultChannel) {
        this.background(this.announce(incident.id, [this.r.defaultChannel]), incident.id);
      }
      return;
    }
    this.refresh(incident.id);
  }

  /** DeliveryService hook: the receipts follow the newest execution of the incident. */
  deliveryChanged(d: Pick<Delivery, 'incident_id' | 'execution_id'>): void {
    this.background(
      this.r.store.trackExecution(d.incident_id, d.execution_id).then((a) => {
        if (a) this.refresh(d.incident_id);
      }),
      d.incident_id,
    );
  }

  /** After an execute: show its receipts (queued) right away. */
  executed(incidentId: string, executionId: string): void {
    this.deliveryChanged({ incident_id: incidentId, execution_id: executionId });
  }

  /**
   * ReminderNotifier: posts reminder `reminder` of an overdue update in the announcement's thread,
   * naming who made the last execute, then refreshes the announcement so it shows "overdue".
   * Once per reminder number across processes: posted only while the announcement records a lower
   * number, recorded after posting. A crash in between repeats this one post when the worker asks
   * again; recording first could skip it. Two calls for one number at the same moment would both
   * post, but the reminder worker's lease on the incident keeps calls apart. Nothing without an
   * announcement. A failed post throws, so the worker asks again.
   */
  async remind(incident: Incident, reminder: number, overdueMs: number): Promise<void> {
    const state = await this.r.store.reminders(incident.id);
    if (state === null || state.lastReminder >= reminder || incident.next_update_due_at === null) return;
    const { announcement } = state;
    const content = {
      incident,
      reminder,
      due: formatDueTime(incident.next_update_due_at, this.now()),
      overdue: formatOverdue(overdueMs),
      executor: incident.last_executed_by ?? null,
    };
    // A reply is a post in the channel: it waits its turn with the channel's other posts.
    await this.postPaced(announcement.channel, () =>
      this.r.chat.postReminder({ channel: announcement.channel, ts: announcement.ts }, content),
    );
    await this.r.store.recordReminder(incident.id, reminder);
    this.refresh(incident.id);
  }

  /** Re-renders the announcement from the stored state (fire and forget; errors are logged). */
  refresh(incidentId: string): void {
    const current = this.running.get(incidentId);
    if (current) {
      current.again = true;
      return;
    }
    const state = { again: false, done: Promise.resolve() };
    state.done = (async () => {
      try {
        do {
          // Wait for the slot first, before the cross-process claim (so no claim is held while
          // waiting): requests arriving meanwhile are covered by this run.
          await this.paceUpdate(incidentId);
          state.again = false;
          await this.update(incidentId).catch((err: unknown) =>
            this.r.log.warn(
              { err: this.describe(err), incident_id: incidentId },
              'could not update the incident announcement',
            ),
          );
        } while (state.again);
      } finally {
        this.running.delete(incidentId);
      }
    })();
    this.running.set(incidentId, state);
  }

  /** Resolves once no refresh is running (shutdown; tests). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running.values()].map((s) => s.done));
  }

  /** One process at a time renders an announcement (see AnnouncementService.refreshExclusively). */
  private update(incidentId: string): Promise<void> {
    return this.r.store.refreshExclusively(incidentId, `${this.instance}:${++this.refreshes}`, () =>
      this.render(incidentId),
    );
  }

  /**
   * Runs `post` in this channel's queue: after the previous post to the channel was answered and
   * its interval passed, and (with a shared pacer) in the channel's next free slot.
   */
  private postPaced<T>(channel: string, post: () => Promise<T>): Promise<T> {
    const previous = this.channelQueues.get(channel) ?? Promise.resolve();
    const run = previous.then(async () => {
      await this.sharedSlot(`slack-channel.${channel}`, this.postIntervalMs);
      return post();
    });
    // The next post waits for this one's answer plus the interval, whatever the outcome.
    const tail = run.then(
      () => delay(this.postIntervalMs),
      () => delay(this.postIntervalMs),
    );
    this.channelQueues.set(channel, tail);
    void tail.then(() => {
      if (this.channelQueues.get(channel) === tail) this.channelQueues.delete(channel);
    });
    return run;
  }

  /** Waits for the next slot of `key` in the shared pacer. */
  private async sharedSlot(key: string, intervalMs: number): Promise<void> {
    try {
      const wait = await this.r.pacing.pacer.reserve(key, { perSecond: 1000 / intervalMs, burst: 1 });
      if (wait > 0) await delay(wait);
    } catch (err) {
      // Redis trouble must not stop announcements: the per-process pacing still holds.
      this.r.log.warn({ err, key }, 'shared Slack pacing unavailable; pacing this process only');
    }
  }

  /** Waits until this announcement's last update (in this process) is at least the interval old. */
  private async waitInterval(incidentId: string): Promise<void> {
    const last = this.lastUpdate.get(incidentId);
    const wait = last === undefined ? 0 : last + this.updateIntervalMs - Date.now();
    if (wait > 0) await delay(wait);
  }

  /** The interval in this process, then the announcement's next slot shared by every process. */
  private async paceUpdate(incidentId: string): Promise<void> {
    await this.waitInterval(incidentId);
    await this.sharedSlot(`slack-update.${incidentId}`, this.updateIntervalMs);
  }

  private noteUpdate(incidentId: string): void {
    const now = Date.now();
    this.lastUpdate.set(incidentId, now);
    // Forget announcements not updated for a while (bounded memory in a long-lived process).
    if (this.lastUpdate.size > 1000) {
      for (const [id, at] of this.lastUpdate) if (now - at > this.updateIntervalMs) this.lastUpdate.delete(id);
    }
  }

  /**
   * Renders under the claim. Pacing happened before the claim was taken; a re-render asked for by
   * another process (a change it saw meanwhile) follows at once, and that process paced its ask.
   */
  private async render(incidentId: string): Promise<void> {
    const announcement = await this.r.store.find(incidentId);
    if (!announcement) return;
    const incident = await this.r.incidents.get(incidentId);
    const receipts = announcement.execution_id ? await this.receipts(incidentId, announcement.execution_id) : null;
    try {
      await this.r.chat.update(
        { channel: announcement.channel, ts: announcement.ts },
        { incident, receipts, nextUpdate: this.nextUpdate(incident) },
      );
    } finally {
      this.noteUpdate(incidentId);
    }
  }

  private async receipts(incidentId: string, executionId: string): Promise<AnnouncementReceipts | null> {
    let found: { execution: Execution; deliveries: Delivery[] };
    try {
      found = await this.r.executions.get(incidentId, executionId);
    } catch (e) {
      if (isDomainError(e) && e.code === 'not_found') return null;
      throw e;
    }
    const { execution, deliveries } = found;
    const names = await this.connectionNames(deliveries.map((d) => d.connection_id));
    const lines: AnnouncementReceiptLine[] = deliveries.map((d) => ({
      connectionName: names.get(d.connection_id) ?? d.connection_id,
      connectionType: d.connection_type,
      status: d.status,
      attempts: d.attempts.length,
      error: d.attempts.at(-1)?.error ?? null,
      // A deleted message has no page to open any more.
      permalink: d.status === 'delivered' && d.action !== 'delete' ? (d.message?.permalink ?? null) : null,
      ...(d.action !== undefined ? { action: d.action } : {}),
    }));
    const kind = execution.kind ?? 'announcement';
    const target = execution.target_execution_id ?? null;
    return {
      executionId: execution.id,
      status: executionStatus(deliveries),
      lines,
      kind,
      targetExecutionId: target,
      correctableExecutionId: correctable(execution, deliveries),
    };
  }

  /** "Next update due 14:30 UTC", and how overdue it is, as of now (each render recomputes it). */
  private nextUpdate(incident: Incident): NextUpdateDue | null {
    const dueAt = incident.next_update_due_at;
    if (dueAt === null) return null;
    const now = this.now();
    const late = now.getTime() - Date.parse(dueAt);
    return { due: formatDueTime(dueAt, now), overdue: late > 0 ? formatOverdue(late) : null };
  }

  private async connectionNames(ids: string[]): Promise<Map<string, string>> {
    const names = new Map<string, string>();
    await Promise.all(
      [...new Set(ids)].map(async (id) => {
        // A deleted connection keeps its receipt line, named by id.
        const c = await this.r.connections.get(id).catch(() => null);
        if (c) names.set(id, c.name);
      }),
    );
    return names;
  }

  private background(p: Promise<unknown>, incidentId: string): void {
    p.catch((err: unknown) =>
      this.r.log.warn({ err: this.describe(err), incident_id: incidentId }, 'announcement work failed'),
    );
  }
}

/**
 * What ExecutionService.correct/retract accept, seen from receipts: an execute's messages once one
 * is delivered. Receipts that follow a correction still offer its execute (corrected messages can
 * be corrected again or withdrawn); after a retraction there is nothing left to act on.
 */
function correctable(execution: Execution, deliveries: Delivery[]): string | null {
  const kind = execution.kind ?? 'announcement';
  if (kind === 'announcement') return deliveries.some((d) => d.status === 'delivered') ? execution.id : null;
  return kind === 'correction' ? (execution.target_execution_id ?? null) : null;
}

const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
