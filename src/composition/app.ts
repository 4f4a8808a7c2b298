/**
 * The composition root: Redis adapters → services → edges. Nothing else constructs adapters, and
 * nothing here decides a business rule: the services are built by ./services.ts (the same wiring
 * the service-tier tests use), start-up checks are in ./startup-checks.ts, the delivery engine's
 * I/O and worker in ./delivery.ts, the Slack edge's wiring in ./slack.ts, what each role runs in
 * ./role.ts, and the parts tell each other what happened through the topics of ./events.ts.
 */
import type { Express } from 'express';
import type { Router } from 'express';
import type { Logger } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import type { Config } from '../config.js';
import { CORE_CONNECT_TIMEOUT_MS, withDeadline } from './cli.js';
import { systemClock, type Clock } from '../domain/common/clock.js';
import type { Delivery } from '../domain/execution/execution.js';
import type { Incident } from '../domain/incident/incident.js';
import { createIdGenerator } from '../domain/common/ids.js';
import type { EdgeDeps } from '../http/endpoint.js';
import { audienceRoutes } from '../http/routes/audiences.js';
import { componentRoutes } from '../http/routes/components.js';
import { maintenanceRoutes } from '../http/routes/maintenances.js';
import { connectionRoutes } from '../http/routes/connections.js';
import { executionRoutes } from '../http/routes/executions.js';
import { incidentRoutes } from '../http/routes/incidents.js';
import { openApiRoutes } from '../http/routes/openapi.js';
import { templateRoutes } from '../http/routes/templates.js';
import { createHttpApp, type Readiness, type ServerDeps } from '../http/server.js';
import type { ChannelSenders, SecretBox } from '../ports/index.js';
import type { SlackEdge } from '../slack/app.js';
import { RedisAnnouncementRepo } from '../store/announcements.js';
import { RedisApiKeyRepo } from '../store/api-keys.js';
import { RedisAudienceRepo } from '../store/audiences.js';
import { RedisComponentRepo } from '../store/components.js';
import { RedisMaintenanceRepo } from '../store/maintenances.js';
import { RedisConnectionRepo } from '../store/connections.js';
import { RedisConversationRepo } from '../store/conversations.js';
import { nodeTokenCrypto } from '../store/crypto.js';
import { replicaWaitFromConfig } from '../store/durability.js';
import { keysExist } from '../store/exists.js';
import { RedisIdempotencyStore } from '../store/idempotency.js';
import { RedisIncidentRepo } from '../store/incidents.js';
import { createKeys, type Keys } from '../store/keys.js';
import { RedisPacer } from '../store/pacing.js';
import { RedisRateLimiter } from '../store/rate-limit.js';
import { RedisReminderSchedule } from '../store/reminders.js';
import { RedisApprovalRepo } from '../store/approvals.js';
import { LateApprovalNotifier } from '../services/approvals.js';
import type { RedisClient as Redis, RedisTarget } from '../store/redis-connect.js';
import { createRedis, readRedisFacts, whenReady, type RedisFacts } from '../store/redis.js';
import { RedisTemplateRepo } from '../store/templates.js';
import {
  composeChannels,
  statusPageStore,
  deliveryWorker,
  openDeliveryStore,
  REMINDER_LEASE_MS,
  APPROVAL_LEASE_MS,
  type DeliveryWorker,
  type RedisParts,
} from './delivery.js';
import { Topic, type IncidentChangeKind } from './events.js';
import { rolePlan } from './role.js';
import { startIndexMove } from '../store/incident-indexes.js';
import { buildServices, LateReminderNotifier, type ServicePorts, type Services } from './services.js';
import { slackEdge } from './slack.js';
import { RedisApprovalMessageLog } from '../store/approval-messages.js';
import { composeEvents, type EventParts } from './event-endpoints.js';
import { eventEndpointRoutes } from '../http/routes/event-endpoints.js';
import type { EventEndpointService } from '../services/events.js';
import { checkRedis, openSecretBox, outboundAllow } from './startup-checks.js';
import { composeStatusSite } from '../status/compose.js';
import { composeSubscribers, type SubscriberParts } from './subscribers.js';
import { subscriberRoutes } from '../http/routes/subscribers.js';

export { openCore, StartupError, type Core } from './cli.js';
export type { Services } from './services.js';

export interface HeraldOptions {
  config: Config;
  /** A Redis URL or socket path, or a Cluster/Sentinel target (src/store/redis-connect.ts). */
  redisUrl: string | RedisTarget;
  log: Logger;
  clock?: Clock;
  /** Run the delivery worker in this process (default: what HERALD_ROLE runs, src/composition/role.ts). */
  worker?: boolean;
  /** Replaces the channel senders (tests that exercise the engine without a platform). */
  senders?: ChannelSenders;
}

export interface Herald {
  config: Config;
  redis: Redis;
  /** What start-up read of Redis (its persistence, for the start-up line). */
  redisFacts: RedisFacts;
  keys: Keys;
  services: Services;
  /** The Express app (routes, probes, metrics); `listen` it, or hand it to a test. */
  app: Express;
  /** The Slack app, when configured (SLACK_BOT_TOKEN with a signing secret or an app token). */
  slack: SlackEdge | null;
  /** Stops background work and closes connections. */
  close(): Promise<void>;
}

/** Connects, checks Redis, and wires everything. Throws StartupError on a refusal to start. */
export async function createHerald(opts: HeraldOptions): Promise<Herald> {
  const { config, log } = opts;
  const clock = opts.clock ?? systemClock;
  const plan = rolePlan(config.HERALD_ROLE);
  const redis = createRedis(opts.redisUrl, { name: 'herald-api', log, replicaWait: replicaWaitFromConfig(config) });
  // What start-up has opened, closed in reverse order by close() and by a refusal to start alike: a
  // refused Herald must not leave its queue's connection open to write its keys after the refusal.
  const opened: Closers = [];
  try {
    await whenReady(redis, CORE_CONNECT_TIMEOUT_MS);
    const redisFacts = await checkRedis(redis, log);
    const keys = createKeys(config.HERALD_KEY_PREFIX);
    const parts: RedisParts = { config, redisUrl: opts.redisUrl, redis, keys, log, clock };
    const composed = await composeServices(opts, parts, opened);
    const { services, worker, registry, box, integratorEvents, subscribers } = composed;
    const edge: EdgeDeps = {
      keys: services.apiKeys,
      limiter: new RedisRateLimiter(redis, keys, {
        default: config.HERALD_RATE_LIMIT,
        execute: config.HERALD_EXECUTE_RATE_LIMIT,
      }),
      idempotency: new RedisIdempotencyStore(redis, keys, box),
    };
    // The public status page, in processes that serve HTTP (its snapshot polls Redis while read).
    const status = plan.serveHttp ? composeStatusSite(parts) : null;
    if (status) opened.push(() => status.close());
    const { app, finish } = createHttpApp({
      log,
      registry,
      metricsToken: config.HERALD_METRICS_TOKEN,
      readiness: readinessOf(redis),
      api: v1Routes(edge, services, integratorEvents.service, subscribers),
      trustProxy: config.HERALD_TRUST_PROXY,
      ...(status ? { statusPage: statusPageMount(status, config, subscribers) } : {}),
    });
    const slack = await slackEdge(config, plan, log, clock, app, {
      services,
      access: services.access,
      idempotency: edge.idempotency,
      pacer: new RedisPacer(redis, keys),
      approvalMessages: new RedisApprovalMessageLog(redis, keys),
    });
    if (slack) opened.push(() => slack.stop());
    attachSlack(slack, composed);
    finish();
    if (opts.worker ?? plan.runWorker) {
      worker.start({ reminders: plan.runReminders });
      integratorEvents.start();
      subscribers.start();
      // Incidents from before the status-and-severity indexes move into them (store/incident-indexes.ts).
      const move = startIndexMove(redis, keys, log);
      opened.push(() => move.stop());
    }
    if (slack?.mode === 'socket' && plan.receiveSlack) {
      slack.start().catch((err: unknown) => log.error({ err }, 'Slack Socket Mode could not connect'));
    }
    return {
      config,
      redis,
      redisFacts,
      keys,
      services,
      app,
      slack,
      async close() {
        try {
          await closeAll(opened);
        } finally {
          await redis.quit().catch(() => undefined);
        }
      },
    };
  } catch (e) {
    // The refusal is what the caller needs to hear; a close failing behind it changes nothing.
    await closeAll(opened).catch(() => undefined);
    redis.disconnect();
    throw e;
  }
}

/** What tells people through Slack, once the Slack edge exists (or null: Slack is off, the log only). */
function attachSlack(slack: SlackEdge | null, c: Composed): void {
  // Its reminders go to the Slack announcement's thread when Slack is on (a worker has the bot token).
  c.reminderNotifier.attach(slack?.announcer ?? null);
  // Approvers hear of approvals in Slack (DMs and the announcement's thread) when Slack is on.
  c.approvalNotifier.attach(slack?.approvals ?? null);
  // The Slack admins hear of an event endpoint Herald disabled (a worker has the bot token).
  c.integratorEvents.attachAdmins(slack?.admins ?? null);
  if (slack) {
    // The announcement follows its incident, and its receipts every delivery change, in whichever process made it.
    c.events.incidentChanged.on((incident, kind) => slack.announcer.incidentChanged(incident, kind));
    c.events.deliveryChanged.on((d) => slack.announcer.deliveryChanged(d));
  }
}

/** The public page and its subscriptions, at /status or on HERALD_STATUS_HOST. */
function statusPageMount(
  status: ReturnType<typeof composeStatusSite>,
  config: Config,
  subscribers: SubscriberParts,
): NonNullable<ServerDeps['statusPage']> {
  return {
    handler: (base: string) => status.handler(base),
    host: config.HERALD_STATUS_HOST,
    subscriptions: subscribers.router,
  };
}

/** Closes of what start-up opened, in the order it opened them. */
type Closers = (() => Promise<void>)[];

/**
 * Last opened, first closed, each awaited. One that fails does not keep the rest open: they are
 * closed all the same, and the first failure is rethrown at the end.
 */
async function closeAll(opened: Closers): Promise<void> {
  const failures: unknown[] = [];
  for (const close of opened.splice(0).reverse()) await close().catch((err: unknown) => void failures.push(err));
  if (failures.length > 0) throw failures[0];
}

interface HeraldEvents {
  incidentChanged: Topic<[Incident, IncidentChangeKind]>;
  deliveryChanged: Topic<[Delivery]>;
}

/** What composeServices builds. */
interface Composed {
  services: Services;
  worker: DeliveryWorker;
  events: HeraldEvents;
  registry: Registry;
  box: SecretBox;
  /** Attach the Slack announcer (or null) once it exists: the worker's reminders post through it. */
  reminderNotifier: LateReminderNotifier;
  /** Attach the Slack approval notifier (or null) once it exists: approvers are told through it. */
  approvalNotifier: LateApprovalNotifier;
  /** Events for integrators: the endpoint service and the worker's dispatcher. */
  integratorEvents: EventParts;
  /** The status page's subscribers: their pages, admin service and the worker's sending loops. */
  subscribers: SubscriberParts;
}

/**
 * The services over their Redis adapters and the delivery machinery (buildServices), the worker
 * that may run them, and the topics the edges subscribe to.
 */
async function composeServices(opts: HeraldOptions, parts: RedisParts, opened: Closers): Promise<Composed> {
  const { config, log, redis, keys, clock } = parts;
  const box = await openSecretBox(config, redis, keys, log);
  const events: HeraldEvents = {
    incidentChanged: new Topic<[Incident, IncidentChangeKind]>('incident change', log),
    deliveryChanged: new Topic<[Delivery]>('delivery change', log),
  };
  const allow = outboundAllow(config.HERALD_OUTBOUND_ALLOW);
  // Before the channels: the status page's writes open the notices its subscribers are sent.
  const subscribers = await composeSubscribers({
    config,
    redis,
    redisUrl: parts.redisUrl,
    keys,
    log,
    clock,
    box,
    allow,
  });
  opened.push(() => subscribers.close());
  const channels = await composeChannels(config, allow, clock, subscribers.wrapStatusPage(statusPageStore(parts)));
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'herald_' });
  const store = openDeliveryStore(parts, registry);
  opened.push(() => store.close());
  events.deliveryChanged.on(store.metrics.changed);
  const ids = createIdGenerator(() => clock.now().getTime());
  const exist = (key: (id: string) => string) => (list: string[]) => keysExist(redis, list.map(key));
  const reminderNotifier = new LateReminderNotifier();
  const approvalNotifier = new LateApprovalNotifier();
  const services = buildServices({
    clock,
    ids,
    random: Math.random,
    repos: redisRepos(parts, store.executions),
    exist: { templates: exist(keys.template), connections: exist(keys.connection) },
    box,
    crypto: nodeTokenCrypto,
    allow,
    tester: channels.tester,
    senders: opts.senders ?? channels.senders,
    pacer: new RedisPacer(redis, keys),
    queue: store.queue,
    publicUrl: config.HERALD_PUBLIC_URL,
    threadWaitMs: config.HERALD_THREAD_WAIT_MS,
    slackAdmins: config.HERALD_SLACK_ADMINS,
    approvals: { leaseMs: APPROVAL_LEASE_MS, notifier: approvalNotifier },
    defaultAudiences: config.HERALD_DEFAULT_AUDIENCES,
    subscriberNotices: subscribers.notices,
    reminders: {
      schedule: new RedisReminderSchedule(redis, keys),
      repeatMs: config.HERALD_REMINDER_REPEAT,
      leaseMs: REMINDER_LEASE_MS,
      notifier: reminderNotifier,
    },
    notices: serviceNotices(events, store.metrics.attempt, log),
  });
  const worker = deliveryWorker({
    ...parts,
    deliveries: services.deliveries,
    reminders: services.reminders,
    approvals: services.approvals,
    maintenances: services.maintenances,
  });
  opened.push(() => worker.close());
  const integratorEvents = composeEvents({ ...parts, box, allow });
  opened.push(() => integratorEvents.close());
  const composed = { services, worker, events, registry, box, reminderNotifier, approvalNotifier };
  return { ...composed, integratorEvents, subscribers };
}

/** What the services tell the rest of the process: the topics, the metrics, the log. */
function serviceNotices(
  events: HeraldEvents,
  attempt: ServicePorts['notices']['attempt'],
  log: Logger,
): ServicePorts['notices'] {
  const message = (err: unknown) => (err instanceof Error ? err.message : String(err));
  return {
    incidentChanged: (incident, kind) => void events.incidentChanged.emit(incident, kind),
    deliveryChanged: (d) => void events.deliveryChanged.emit(d),
    attempt,
    deliveryTrouble: (what, err) => log.warn({ err: message(err) }, `delivery bookkeeping failed: ${what}`),
    executeTrouble: (what, err) => log.error({ err: message(err) }, `execute: ${what}`),
    reminderTrouble: (what, err) => log.warn({ err: message(err) }, `update reminder failed: ${what}`),
  };
}

/** The Redis repositories the services are built over (the executions' come with the delivery store). */
function redisRepos(parts: RedisParts, executions: ServicePorts['repos']['executions']): ServicePorts['repos'] {
  const { redis, keys } = parts;
  return {
    incidents: new RedisIncidentRepo(redis, keys),
    templates: new RedisTemplateRepo(redis, keys),
    connections: new RedisConnectionRepo(redis, keys),
    apiKeys: new RedisApiKeyRepo(redis, keys),
    executions,
    conversations: new RedisConversationRepo(redis, keys),
    announcements: new RedisAnnouncementRepo(redis, keys),
    audiences: new RedisAudienceRepo(redis, keys),
    components: new RedisComponentRepo(redis, keys),
    maintenances: new RedisMaintenanceRepo(redis, keys),
    approvals: new RedisApprovalRepo(redis, keys),
  };
}

/**
 * /v1: every resource's routes and the OpenAPI document, straight on the app (see mountRoutes).
 * Express tries them in this order, one path test per route a request passes: incidents and their
 * executions first, what responders and integrations read and write most, the rest after.
 */
function v1Routes(
  edge: EdgeDeps,
  services: Services,
  events: EventEndpointService,
  subscribers: SubscriberParts,
): (app: Router) => void {
  return (app) => {
    incidentRoutes({ ...edge, incidents: services.incidents }, app, '/v1');
    executionRoutes(
      { ...edge, executions: services.executions, approvals: services.approvals, subscribers: subscribers.admin },
      app,
      '/v1',
    );
    templateRoutes({ ...edge, templates: services.templates }, app, '/v1');
    connectionRoutes({ ...edge, connections: services.connections }, app, '/v1');
    audienceRoutes({ ...edge, audiences: services.audiences }, app, '/v1');
    componentRoutes({ ...edge, components: services.components }, app, '/v1');
    maintenanceRoutes({ ...edge, maintenances: services.maintenances }, app, '/v1');
    subscriberRoutes({ ...edge, subscribers: subscribers.admin }, app, '/v1');
    eventEndpointRoutes({ ...edge, events, nowMs: Date.now }, app, '/v1');
    openApiRoutes(edge, app, '/v1');
  };
}

const READINESS_TIMEOUT_MS = 1500;

/** /readyz: a Redis that hangs (stopped, black-holed) must not hang the probe: 503 within 2 s. */
function readinessOf(redis: Redis): () => Promise<Readiness> {
  return async () => {
    try {
      const f = await withDeadline(readRedisFacts(redis), READINESS_TIMEOUT_MS);
      return { redis: 'ok', persistence: f.persistence };
    } catch {
      return { redis: 'unreachable', persistence: 'unknown' };
    }
  };
}
