/**
 * Every service, built from its ports: the one place services are constructed. The composition
 * root (./app.ts) calls it with the Redis adapters and the delivery machinery; the service-tier
 * tests (test/service/world.ts) call it with in-memory fakes. Both therefore run the same wiring:
 * which service reads what of which other, and what happens when a connection goes away.
 */
import type { OutboundAllow } from '../domain/connection/address-policy.js';
import type { Attempt, Delivery } from '../domain/execution/execution.js';
import type { Incident } from '../domain/incident/incident.js';
import type {
  AnnouncementReminderLog,
  AnnouncementRepo,
  ApiKeyRepo,
  ApprovalNotifier,
  ApprovalRepo,
  AudienceRepo,
  ComponentRepo,
  ChannelSenders,
  Clock,
  ConnectionRepo,
  ConnectionTester,
  ConversationRepo,
  DeliveryQueue,
  DispatchBatch,
  ExecutionRepo,
  IdGenerator,
  IncidentRepo,
  MaintenanceRepo,
  ReminderNotifier,
  ReminderSchedule,
  SecretBox,
  TemplateRepo,
  TokenCrypto,
} from '../ports/index.js';
import type { AccessPolicy } from '../services/access.js';
import { AdminViewService } from '../services/admin-view.js';
import { AnnouncementService } from '../services/announcement-service.js';
import type { ApiKeyService } from '../services/api-keys.js';
import { AudienceService } from '../services/audiences.js';
import { ComponentService, maintenancesNaming } from '../services/components.js';
import { ApprovalService, LateApprovalNotifier } from '../services/approvals.js';
import { ConnectionService } from '../services/connections.js';
import { DeliveryService, type SendPacer } from '../services/deliveries.js';
import { ExecutionService } from '../services/executions.js';
import { IncidentService } from '../services/incidents.js';
import { MaintenanceService } from '../services/maintenances.js';
import type { SubscriberNotices } from '../ports/subscribers.js';
import { ReminderService } from '../services/reminders.js';
import { TemplateService } from '../services/templates.js';
import type { IncidentChangeKind } from './events.js';
import { buildKeyServices } from './key-services.js';

/** What the services are built from: storage, the delivery machinery, and the settings they read. */
export interface ServicePorts {
  clock: Clock;
  ids: IdGenerator;
  /** Retry jitter of the delivery engine. */
  random: () => number;
  repos: {
    incidents: IncidentRepo;
    templates: TemplateRepo;
    connections: ConnectionRepo;
    apiKeys: ApiKeyRepo;
    executions: ExecutionRepo;
    conversations: ConversationRepo;
    announcements: AnnouncementRepo & AnnouncementReminderLog;
    audiences: AudienceRepo;
    /** Components of the status page (absent: none exist here, e.g. service tests of other things). */
    components?: ComponentRepo;
    /** Maintenance windows (absent: none exist here, e.g. service tests of other things). */
    maintenances?: MaintenanceRepo;
    /** Approval records and their schedules (absent: no execute holds anything for approval here). */
    approvals?: ApprovalRepo;
  };
  /** Which of these ids name a stored template / connection (one round trip for many). */
  exist: {
    templates(ids: string[]): Promise<boolean[]>;
    connections(ids: string[]): Promise<boolean[]>;
  };
  /** Seals connection secrets at rest. */
  box: SecretBox;
  crypto: TokenCrypto;
  /** HERALD_OUTBOUND_ALLOW, parsed. */
  allow: OutboundAllow;
  tester: ConnectionTester;
  senders: ChannelSenders;
  pacer: SendPacer;
  /** The delivery queue: a job per delivery, or an execute's deliveries as dispatch jobs. */
  queue: DeliveryQueue & { dispatch(batches: DispatchBatch[]): Promise<void> };
  /** HERALD_PUBLIC_URL, the base of `{{incident.url}}`. */
  publicUrl: string | undefined;
  /** HERALD_THREAD_WAIT_MS: how long an update waits for its conversation's first message. */
  threadWaitMs: number;
  /** HERALD_SLACK_ADMINS: who may do admin work from Slack (AccessPolicy). */
  slackAdmins: readonly string[];
  /** The update cadence's reminders. */
  reminders: {
    /** When each incident's next update reminder is due. */
    schedule: ReminderSchedule;
    /** HERALD_REMINDER_REPEAT: how often an overdue update is asked for again. */
    repeatMs: number;
    /** How long a worker holds a due reminder before another may take it over. */
    leaseMs: number;
    /** Tells people (the Slack thread): a LateReminderNotifier when that exists only after the services. */
    notifier: ReminderNotifier;
  };
  notices: ServiceNotices;
  /** Approvals: how long a worker holds an expiry or a notice, and who tells approvers. */
  approvals?: {
    leaseMs: number;
    /** A LateApprovalNotifier when the Slack edge exists only after the services. */
    notifier: ApprovalNotifier;
  };
  /** HERALD_DEFAULT_AUDIENCES. */
  defaultAudiences?: readonly string[];
  /** Opens the subscribers' notices of published maintenance updates (absent: no subscribers here). */
  subscriberNotices?: SubscriberNotices;
}

/**
 * The reminders' notifier is the Slack announcer, and the announcer is built over the services:
 * so buildServices gets this stand-in, and the composition root attaches the announcer (or null,
 * Slack off) once it exists, before the worker that sends reminders starts. Attached to nothing, a
 * reminder tells nobody and is still recorded on the incident's timeline.
 */
export class LateReminderNotifier implements ReminderNotifier {
  private target: ReminderNotifier | null = null;
  private attached = false;

  /** Once: a second attach is a wiring error (two announcers would each post the reminder). */
  attach(target: ReminderNotifier | null): void {
    if (this.attached) throw new Error('the reminder notifier is already attached');
    this.attached = true;
    this.target = target;
  }

  async remind(incident: Incident, reminder: number, overdueMs: number): Promise<void> {
    await this.target?.remind(incident, reminder, overdueMs);
  }
}

/**
 * What the services tell the rest of Herald. Notifications only: what a service does never
 * depends on who listens (a listener's failure is the listener's).
 */
export interface ServiceNotices {
  /** An incident was created or changed (the Slack announcement follows it). */
  incidentChanged?(incident: Incident, kind: IncidentChangeKind): void;
  /** A connection was deleted or disabled; its queued deliveries are already cancelled. */
  connectionGone?(connectionId: string, reason: string): void;
  /** A delivery changed (metrics, the announcement's receipts). */
  deliveryChanged?(d: Delivery): void;
  /** An attempt was recorded (metrics). */
  attempt?(d: Delivery, a: Attempt): void;
  /** Bookkeeping after a recorded attempt failed; the delivery's own record stands (logged). */
  deliveryTrouble?(what: string, err: unknown): void;
  /** Queueing an execution failed after its commit; the outbox sweep queues it (logged). */
  executeTrouble?(what: string, err: unknown): void;
  /** A due reminder failed; it is tried again when its lease lapses (logged). */
  reminderTrouble?(what: string, err: unknown): void;
}

export interface Services {
  access: AccessPolicy;
  admin: AdminViewService;
  apiKeys: ApiKeyService;
  incidents: IncidentService;
  templates: TemplateService;
  connections: ConnectionService;
  executions: ExecutionService;
  deliveries: DeliveryService;
  announcements: AnnouncementService;
  /** The update cadence's reminders: the worker runs the due ones. */
  reminders: ReminderService;
  audiences: AudienceService;
  /** Approve / reject held audiences; the worker expires them and tells approvers. */
  approvals: ApprovalService;
  components: ComponentService;
  /** Maintenance windows; the worker takes their due automatic steps. */
  maintenances: MaintenanceService;
}

export function buildServices(p: ServicePorts): Services {
  const { clock, ids, repos, notices: n } = p;
  const { access, apiKeys } = buildKeyServices({ ...p, apiKeys: repos.apiKeys });
  // Deleting or disabling a connection cancels its queued deliveries before it answers.
  const gone = (reason: string) => async (id: string) => {
    await deliveries.cancelForConnection(id, reason);
    n.connectionGone?.(id, reason);
  };
  const connections = new ConnectionService({
    repo: repos.connections,
    box: p.box,
    clock,
    ids,
    crypto: p.crypto,
    allow: p.allow,
    tester: p.tester,
    access,
    onDeleted: gone('connection deleted'),
    onDisabled: gone('connection disabled'),
  });
  const { incidents, templates } = buildIncidentsAndTemplates(p);
  const deliveries = new DeliveryService({
    repo: repos.executions,
    targets: {
      get: (id) => connections.getForDelivery(id),
      disable: async (id, reason) => {
        await connections.disable(id, reason);
      },
      recordOutcome: async (id, ok, error) => {
        await connections.recordHealth(id, ok ? { ok: true } : { ok: false, error: error ?? 'failed' });
      },
    },
    senders: p.senders,
    pacer: p.pacer,
    queue: p.queue,
    clock,
    ids,
    random: p.random,
    getIncident: (id) => repos.incidents.get(id),
    conversations: repos.conversations,
    publicUrl: p.publicUrl ?? null,
    threadWaitMs: p.threadWaitMs,
    onAttempt: (d, a) => n.attempt?.(d, a),
    onError: (what, err) => n.deliveryTrouble?.(what, err),
    onDeliveryChanged: (d) => n.deliveryChanged?.(d),
  });
  const approvals = buildApprovals(p);
  const executions = new ExecutionService({
    incidents: repos.incidents,
    repo: repos.executions,
    deliveries,
    getTemplates: (tids) => templates.getMany(tids),
    getTemplateVersion: (id, version) => templates.getVersionOrNull(id, version),
    conversations: repos.conversations,
    listConnections: () => connections.listAll(),
    dispatch: (batches) => p.queue.dispatch(batches),
    clock,
    ids,
    publicUrl: p.publicUrl,
    onError: (what, err) => n.executeTrouble?.(what, err),
    audiences: repos.audiences,
    defaultAudiences: p.defaultAudiences ?? [],
    approvals,
  });
  const admin = new AdminViewService({ access, connections, apiKeys });
  return {
    ...{ access, admin, apiKeys, incidents, templates, connections, executions, deliveries, approvals },
    announcements: new AnnouncementService(repos.announcements),
    reminders: buildReminders(p),
    audiences: buildAudiences(p),
    components: buildComponents(p),
    maintenances: new MaintenanceService({
      repo: p.repos.maintenances ?? NO_MAINTENANCES,
      components: p.repos.components ?? NO_COMPONENTS,
      clock,
      ids,
      onError: (what, err) => n.reminderTrouble?.(what, err),
      ...(p.subscriberNotices ? { notices: p.subscriberNotices } : {}),
    }),
  };
}

/** Components over their store; a delete asks the maintenances which name the component. */
function buildComponents(p: ServicePorts): ComponentService {
  return new ComponentService({
    repo: p.repos.components ?? NO_COMPONENTS,
    clock: p.clock,
    ids: p.ids,
    maintenancesNaming: (cid) => maintenancesNaming(p.repos.maintenances ?? NO_MAINTENANCES, cid),
  });
}

/** Where no component store is given (service tests of other things): there are none, and none can be made. */
const NO_COMPONENTS: ComponentRepo = {
  get: () => Promise.resolve(null),
  getMany: (cids) => Promise.resolve(cids.map(() => null)),
  listAll: () => Promise.resolve([]),
  list: () => Promise.resolve({ data: [], nextCursor: null }),
  events: () => Promise.resolve({ data: [], nextCursor: null }),
  create: () => Promise.reject(new Error('no component store is wired')),
  update: () => Promise.reject(new Error('no component store is wired')),
  delete: () => Promise.reject(new Error('no component store is wired')),
};

/** Where no maintenance store is given (service tests of other things): there are none, and none can be made. */
const NO_MAINTENANCES: MaintenanceRepo = {
  get: () => Promise.resolve(null),
  list: () => Promise.resolve({ data: [], nextCursor: null }),
  due: () => Promise.resolve([]),
  create: () => Promise.reject(new Error('no maintenance store is wired')),
  update: () => Promise.reject(new Error('no maintenance store is wired')),
  delete: () => Promise.reject(new Error('no maintenance store is wired')),
};

/** Approvals over their store: decided by people, expired and told by the worker. */
function buildApprovals(p: ServicePorts): ApprovalService {
  const { repos, notices: n } = p;
  return new ApprovalService({
    incidents: repos.incidents,
    repo: repos.executions,
    approvals: repos.approvals ?? NO_APPROVALS,
    conversations: repos.conversations,
    dispatch: (batches) => p.queue.dispatch(batches),
    clock: p.clock,
    ids: p.ids,
    notifier: p.approvals?.notifier ?? new LateApprovalNotifier(),
    leaseMs: p.approvals?.leaseMs ?? 30_000,
    onDeliveryChanged: (d) => n.deliveryChanged?.(d),
    onError: (what, err) => n.executeTrouble?.(what, err),
  });
}

/** Where no approval store is given (service tests of other things): nothing is ever pending. */
const NO_APPROVALS: ApprovalRepo = {
  get: () => Promise.resolve(null),
  getMany: (ids) => Promise.resolve(ids.map(() => null)),
  tally: () => Promise.resolve({}),
  commit: () => Promise.reject(new Error('no approval store is wired')),
  markNotified: () => Promise.resolve(true),
  claimDue: () => Promise.resolve([]),
  claimToNotify: () => Promise.resolve([]),
  settle: () => Promise.resolve(),
};

/** Incidents and templates: each reads the other's store, neither any other service. */
function buildIncidentsAndTemplates(p: ServicePorts): { incidents: IncidentService; templates: TemplateService } {
  const { clock, ids, repos, notices: n } = p;
  const incidents = new IncidentService({
    incidents: repos.incidents,
    templatesExist: (tids) => p.exist.templates(tids),
    templateVariables: (tids) =>
      Promise.all(tids.map(async (t) => (await repos.templates.get(t))?.variables.map((v) => v.name) ?? null)),
    components: repos.components,
    clock,
    ids,
    onChange: (incident, kind) => n.incidentChanged?.(incident, kind),
  });
  const templates = new TemplateService({
    templates: repos.templates,
    clock,
    ids,
    getIncident: (id) => repos.incidents.get(id),
    connectionsExist: (cids) => p.exist.connections(cids),
    ...(p.publicUrl !== undefined ? { publicUrl: p.publicUrl } : {}),
  });
  return { incidents, templates };
}

/** The update cadence's reminders over the incidents' store. */
function buildReminders(p: ServicePorts): ReminderService {
  const n = p.notices;
  return new ReminderService({
    ...p.reminders,
    incidents: p.repos.incidents,
    clock: p.clock,
    ids: p.ids,
    // A reminder changes the incident: the announcement then shows "overdue".
    onReminded: (incident) => n.incidentChanged?.(incident, 'updated'),
    onError: (what, err) => n.reminderTrouble?.(what, err),
  });
}

/** Audiences over their store; they check the connections and templates they name exist. */
function buildAudiences(p: ServicePorts): AudienceService {
  return new AudienceService({
    repo: p.repos.audiences,
    clock: p.clock,
    ids: p.ids,
    connectionsExist: (cids) => p.exist.connections(cids),
    templatesExist: (tids) => p.exist.templates(tids),
  });
}
