/**
 * The delivery half of the composition root: the channels' I/O, the queue, the execution and
 * delivery services, and (for the worker role) the worker runtime. Pure wiring: the worker's
 * sweep and drain live in src/delivery/worker.ts, every rule in the services.
 */
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { createSmtpClient } from '../channels/email/send.js';
import type { Config } from '../config.js';
import type { OutboundAllow } from '../domain/connection/address-policy.js';
import type { Clock } from '../domain/common/clock.js';
import type { Delivery } from '../domain/execution/execution.js';
import type { IdGenerator } from '../domain/common/ids.js';
import { createConnectionTester } from '../delivery/connection-tester.js';
import { deliveryMetrics, type DeliveryMetrics } from '../delivery/metrics.js';
import { createBoundedResolver } from '../delivery/outbound/guard.js';
import { createOutboundHttp } from '../delivery/outbound/http.js';
import { BullDeliveryQueue } from '../delivery/queue.js';
import { createChannelSenders, loadChannelAdapters, type HeraldChannelSenders } from '../delivery/senders.js';
import { startDeliveryRuntime, type DeliveryRuntime } from '../delivery/worker.js';
import type { ChannelSenders, ConnectionTester, IncidentRepo, ReminderNotifier } from '../ports/index.js';
import type { Incident } from '../domain/incident/incident.js';
import type { IncidentChangeKind } from './events.js';
import type { ConnectionService } from '../services/connections.js';
import { DeliveryService } from '../services/deliveries.js';
import { ExecutionService } from '../services/executions.js';
import type { TemplateService } from '../services/templates.js';
import { RedisConversationRepo } from '../store/conversations.js';
import { RedisReminderSchedule } from '../store/reminders.js';
import { ReminderService } from '../services/reminders.js';
import { startReminderLoop } from '../delivery/reminder-loop.js';
import { RedisExecutionRepo } from '../store/executions.js';
import type { Keys } from '../store/keys.js';
import { RedisPacer } from '../store/pacing.js';
import type { RedisClient as Redis, RedisTarget } from '../store/redis-connect.js';
import { BULK_COMMAND_TIMEOUT_MS, createRedis, isRedisUnavailable, redisErrorLogger } from '../store/redis.js';
import type { Topic } from './events.js';

/**
 * The channels' I/O: one guarded HTTP client for every user-supplied destination (README
 * "Delivery semantics", Outbound safety; the operator's platform API bases are trusted, names are
 * resolved by bounded c-ares), SMTP through the same guard, every channel's sender and the
 * connection tester.
 */
export async function composeChannels(
  config: Config,
  allow: OutboundAllow,
  clock: Clock,
): Promise<{ senders: HeraldChannelSenders; tester: ConnectionTester }> {
  const http = createOutboundHttp(allow, {
    trustedBaseUrls: [config.SLACK_API_URL, config.TELEGRAM_API_URL],
    resolver: createBoundedResolver({ servers: config.HERALD_DNS_SERVERS }),
  });
  const deps = {
    http,
    slackApiUrl: config.SLACK_API_URL,
    telegramApiUrl: config.TELEGRAM_API_URL,
    now: () => clock.now().getTime(),
    smtp: createSmtpClient({ guard: http.guard }),
  };
  const adapters = await loadChannelAdapters();
  const senders = createChannelSenders(adapters, deps);
  return { senders, tester: createConnectionTester({ ...deps, adapters, senders, clock }) };
}

export interface DeliveryWiring {
  executions: ExecutionService;
  deliveries: DeliveryService;
  /** Starts the worker and the outbox sweep (role worker/all). */
  /** Starts the delivery worker and the update cadence's reminders (`notifier`: the Slack thread, when Slack is on). */
  startWorker(notifier?: ReminderNotifier | null): void;
  /** Stops taking jobs, waits for the running ones (up to the drain deadline), closes connections. */
  close(): Promise<void>;
}

/** What the delivery engine is wired from. */
export interface DeliveryParts {
  config: Config;
  redisUrl: string | RedisTarget;
  redis: Redis;
  keys: Keys;
  log: Logger;
  clock: Clock;
  ids: IdGenerator;
  incidents: IncidentRepo;
  templates: TemplateService;
  connections: ConnectionService;
  senders: ChannelSenders;
  registry: Registry;
  /** Told after every delivery change (metrics here; Slack receipts subscribe). */
  deliveryChanged: Topic<[Delivery]>;
  /** Told when a reminder changed an incident (the Slack announcement shows "overdue"). */
  incidentChanged?: Topic<[Incident, IncidentChangeKind]>;
}

export function composeDelivery(o: DeliveryParts): DeliveryWiring {
  const { queue, queueConnection } = composeQueue(o);
  const bulkConnection = createRedis(o.redisUrl, {
    name: 'herald-bulk',
    log: o.log,
    commandTimeoutMs: BULK_COMMAND_TIMEOUT_MS,
  });
  const repo = new RedisExecutionRepo(o.redis, o.keys, () => o.clock.now().getTime(), bulkConnection);
  const metrics = deliveryMetrics(o.registry);
  o.deliveryChanged.on(metrics.changed);
  const deliveries = composeDeliveryService(o, repo, queue, metrics.attempt);
  const executions = composeExecutionService(o, repo, deliveries, queue);

  let runtime: DeliveryRuntime | null = null;
  let reminderLoop: { close(): Promise<void> } | null = null;
  let workerConnection: Redis | null = null;

  return {
    executions,
    deliveries,
    startWorker(notifier: ReminderNotifier | null = null) {
      if (runtime) return;
      workerConnection = createRedis(o.redisUrl, { worker: true, name: 'herald-worker', log: o.log });
      runtime = startWorkerRuntime(o, workerConnection, deliveries);
      reminderLoop = startReminderLoop(composeReminders(o, notifier), REMINDER_POLL_MS, o.log);
    },
    async close() {
      await reminderLoop?.close();
      await runtime?.close();
      await queue.close().catch(() => undefined);
      await queueConnection.quit().catch(() => undefined);
      await bulkConnection.quit().catch(() => undefined);
      await workerConnection?.quit().catch(() => undefined);
    },
  };
}

/** The BullMQ queue the services enqueue on, over a connection of its own. */
function composeQueue(o: DeliveryParts): { queue: BullDeliveryQueue; queueConnection: Redis } {
  const { log } = o;
  // BullMQ gets connections of its own. The queue (adding, removing jobs) serves requests, so its
  // commands are bounded like any request's (BullMQ's "failing fast when Redis is down"): what
  // it fails to add, the outbox sweep adds later. Workers block and get unbounded ones (startWorker).
  const queueConnection = createRedis(o.redisUrl, { name: 'herald-queue', log });
  // BullMQ re-emits its connections' errors on the queue: logged once per outage, like the clients.
  const queueTrouble = redisErrorLogger(log, 'herald-queue (BullMQ)');
  queueConnection.on('ready', queueTrouble.ready);
  const queue = new BullDeliveryQueue(queueConnection, o.keys.bullPrefix, (err) =>
    isRedisUnavailable(err) ? queueTrouble.error(err) : log.warn({ err: err.message }, 'delivery queue error'),
  );
  return { queue, queueConnection };
}

function composeDeliveryService(
  o: DeliveryParts,
  repo: RedisExecutionRepo,
  queue: BullDeliveryQueue,
  onAttempt: DeliveryMetrics['attempt'],
): DeliveryService {
  return new DeliveryService({
    repo,
    targets: {
      get: (id) => o.connections.getForDelivery(id),
      disable: async (id, reason) => {
        await o.connections.disable(id, reason);
      },
      recordOutcome: async (id, ok, error) => {
        await o.connections.recordHealth(id, ok ? { ok: true } : { ok: false, error: error ?? 'failed' });
      },
    },
    senders: o.senders,
    pacer: new RedisPacer(o.redis, o.keys),
    queue,
    clock: o.clock,
    ids: o.ids,
    random: Math.random,
    getIncident: (id) => o.incidents.get(id),
    conversations: new RedisConversationRepo(o.redis, o.keys),
    publicUrl: o.config.HERALD_PUBLIC_URL ?? null,
    onAttempt,
    onError: (what, err) =>
      o.log.warn({ err: err instanceof Error ? err.message : String(err) }, `delivery bookkeeping failed: ${what}`),
    onDeliveryChanged: (d) => void o.deliveryChanged.emit(d),
  });
}

function composeExecutionService(
  o: DeliveryParts,
  repo: RedisExecutionRepo,
  deliveries: DeliveryService,
  queue: BullDeliveryQueue,
): ExecutionService {
  return new ExecutionService({
    incidents: o.incidents,
    repo,
    deliveries,
    getTemplates: (ids) => o.templates.getMany(ids),
    getTemplateVersion: (id, version) => o.templates.getVersionOrNull(id, version),
    conversations: new RedisConversationRepo(o.redis, o.keys),
    listConnections: () => o.connections.listAll(),
    enqueue: (jobs) => queue.enqueue(jobs),
    dispatch: (batches) => queue.dispatch(batches),
    clock: o.clock,
    ids: o.ids,
    publicUrl: o.config.HERALD_PUBLIC_URL,
    onError: (what, err) => o.log.error({ err: err instanceof Error ? err.message : String(err) }, `execute: ${what}`),
  });
}

/** How often the worker looks for due reminders: a reminder is at most this late (plus a lease after a crash). */
const REMINDER_POLL_MS = 1000;
/** How long a worker holds a due reminder before another may take it over. */
const REMINDER_LEASE_MS = 10_000;

function composeReminders(o: DeliveryParts, notifier: ReminderNotifier | null): ReminderService {
  return new ReminderService({
    incidents: o.incidents,
    schedule: new RedisReminderSchedule(o.redis, o.keys),
    notifier,
    clock: o.clock,
    ids: o.ids,
    repeatMs: o.config.HERALD_REMINDER_REPEAT,
    leaseMs: REMINDER_LEASE_MS,
    onReminded: (incident) => void o.incidentChanged?.emit(incident, 'updated'),
    onError: (what, err) =>
      o.log.warn({ err: err instanceof Error ? err.message : String(err) }, `update reminder failed: ${what}`),
  });
}

function startWorkerRuntime(o: DeliveryParts, connection: Redis, deliveries: DeliveryService): DeliveryRuntime {
  const { config } = o;
  return startDeliveryRuntime({
    connection,
    prefix: o.keys.bullPrefix,
    concurrency: config.HERALD_WORKER_CONCURRENCY,
    lockDurationMs: config.HERALD_JOB_LOCK_MS,
    sweepMs: config.HERALD_OUTBOX_SWEEP_MS,
    shutdownMs: config.HERALD_SHUTDOWN_MS,
    deliveries,
    now: () => o.clock.now().getTime(),
    log: o.log,
  });
}
