/**
 * The delivery half of the composition root: the channels' I/O, the queue and the execution store
 * the services are built over (./services.ts builds the services), and, for the roles that run
 * it, the worker runtime. Pure wiring: the worker's sweep and drain live in src/delivery/worker.ts,
 * every rule in the services.
 */
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { createSmtpClient } from '../channels/email/send.js';
import type { Config } from '../config.js';
import type { StatusPagePort } from '../contracts/channel.js';
import type { OutboundAllow } from '../domain/connection/address-policy.js';
import type { Clock } from '../domain/common/clock.js';
import { createConnectionTester } from '../delivery/connection-tester.js';
import { deliveryMetrics, type DeliveryMetrics } from '../delivery/metrics.js';
import { createBoundedResolver } from '../delivery/outbound/guard.js';
import { createOutboundHttp } from '../delivery/outbound/http.js';
import { BullDeliveryQueue } from '../delivery/queue.js';
import { startSweepLoop, type DueSweep } from '../delivery/sweep-loop.js';
import { createChannelSenders, loadChannelAdapters } from '../delivery/senders.js';
import { startDeliveryRuntime, type DeliveryRuntime } from '../delivery/worker.js';
import type { ChannelSenders, ConnectionTester } from '../ports/index.js';
import type { DeliveryService } from '../services/deliveries.js';
import type { ReminderService } from '../services/reminders.js';
import { replicaWaitFromConfig } from '../store/durability.js';
import { RedisExecutionRepo } from '../store/executions.js';
import { RedisPublicIncidentStore } from '../store/public-incidents.js';
import type { Keys } from '../store/keys.js';
import type { RedisClient as Redis, RedisTarget } from '../store/redis-connect.js';
import { BULK_COMMAND_TIMEOUT_MS, createRedis, isRedisUnavailable, redisErrorLogger } from '../store/redis.js';

/**
 * The channels' I/O: one guarded HTTP client for every user-supplied destination (docs/explanation/
 * delivery-semantics.md, "Outbound safety"; the operator's platform API bases are trusted, names are
 * resolved by bounded c-ares), SMTP through the same guard, every channel's sender and the
 * connection tester.
 */
export async function composeChannels(
  config: Config,
  allow: OutboundAllow,
  clock: Clock,
  /** Herald's own status page store, which the status_page channel publishes into. */
  statusPage?: StatusPagePort,
): Promise<{ senders: ChannelSenders; tester: ConnectionTester }> {
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
    ...(statusPage ? { statusPage } : {}),
  };
  const adapters = await loadChannelAdapters();
  const senders = createChannelSenders(adapters, deps);
  return { senders, tester: createConnectionTester({ ...deps, adapters, senders, clock }) };
}

/** The status page's published incidents, in Redis: what the status_page channel publishes into. */
export function statusPageStore(o: Pick<RedisParts, 'redis' | 'keys' | 'clock'>): StatusPagePort {
  return new RedisPublicIncidentStore(o.redis, o.keys, () => o.clock.now().getTime());
}

/** Where Redis is and how this process talks to it (shared by the delivery store and the worker). */
export interface RedisParts {
  config: Config;
  redisUrl: string | RedisTarget;
  redis: Redis;
  keys: Keys;
  log: Logger;
  clock: Clock;
}

/** The queue and the execution store the execution and delivery services are built over. */
export interface DeliveryStore {
  queue: BullDeliveryQueue;
  executions: RedisExecutionRepo;
  /** Delivery metrics on the registry (changes and attempts). */
  metrics: DeliveryMetrics;
  close(): Promise<void>;
}

export function openDeliveryStore(o: RedisParts, registry: Registry): DeliveryStore {
  const { queue, queueConnection } = composeQueue(o);
  const bulkConnection = createRedis(o.redisUrl, {
    name: 'herald-bulk',
    log: o.log,
    commandTimeoutMs: BULK_COMMAND_TIMEOUT_MS,
    replicaWait: replicaWaitFromConfig(o.config),
  });
  const executions = new RedisExecutionRepo(o.redis, o.keys, () => o.clock.now().getTime(), bulkConnection);
  return {
    queue,
    executions,
    metrics: deliveryMetrics(registry),
    async close() {
      await queue.close().catch(() => undefined);
      await closeConnection(queueConnection);
      await closeConnection(bulkConnection);
    },
  };
}

/**
 * QUIT, or, on a connection not ready yet (start-up refused early), a plain disconnect: without
 * an offline queue, QUIT is refused there, and the connection would stay open and finish its
 * connecting (BullMQ then writes its queue's keys).
 */
async function closeConnection(c: Redis): Promise<void> {
  await c.quit().catch(() => c.disconnect());
}

/** The BullMQ queue the services enqueue on, over a connection of its own. */
function composeQueue(o: RedisParts): { queue: BullDeliveryQueue; queueConnection: Redis } {
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

/** What the worker runtime is wired from, besides Redis. */
export interface WorkerParts extends RedisParts {
  deliveries: DeliveryService;
  /** The update cadence's reminders (built by buildServices, its notifier attached before start). */
  reminders: ReminderService;
  /** The approvals' expiry and notification sweep (runs with the reminders). */
  approvals?: DueSweep;
  /** The maintenances' automatic steps (reminder, start, end; runs with the reminders). */
  maintenances?: DueSweep;
}

export interface DeliveryWorker {
  /**
   * Starts the delivery worker and its outbox sweep, and (`reminders`) the loop that runs the
   * update cadence's due reminders. Once; later calls do nothing.
   */
  start(opts: { reminders: boolean }): void;
  /** Stops taking jobs, waits for the running ones (up to the drain deadline), closes its connection. */
  close(): Promise<void>;
}

export function deliveryWorker(o: WorkerParts): DeliveryWorker {
  let runtime: DeliveryRuntime | null = null;
  let reminderLoop: { close(): Promise<void> } | null = null;
  let approvalLoop: { close(): Promise<void> } | null = null;
  let maintenanceLoop: { close(): Promise<void> } | null = null;
  let workerConnection: Redis | null = null;
  return {
    start(opts) {
      if (runtime) return;
      workerConnection = createRedis(o.redisUrl, { worker: true, name: 'herald-worker', log: o.log });
      runtime = startWorkerRuntime(o, workerConnection);
      if (opts.reminders)
        reminderLoop = startSweepLoop(o.reminders, REMINDER_POLL_MS, o.log, {
          done: 'update cadence: reminded about overdue updates',
          failed: 'update reminders failed',
          level: 'info',
        });
      if (opts.reminders && o.approvals)
        approvalLoop = startSweepLoop(o.approvals, REMINDER_POLL_MS, o.log, {
          done: 'approvals: expired or notified',
          failed: 'approval sweep failed',
          level: 'debug',
        });
      if (opts.reminders && o.maintenances)
        maintenanceLoop = startSweepLoop(o.maintenances, REMINDER_POLL_MS, o.log, {
          done: 'maintenances: took their due steps',
          failed: 'maintenance sweep failed',
          level: 'info',
        });
    },
    async close() {
      await reminderLoop?.close();
      await approvalLoop?.close();
      await maintenanceLoop?.close();
      await runtime?.close();
      if (workerConnection) await closeConnection(workerConnection);
    },
  };
}

/** How often the worker looks for due reminders: a reminder is at most this late (plus a lease after a crash). */
const REMINDER_POLL_MS = 1000;
/** How long a worker holds a due reminder before another may take it over. */
export const REMINDER_LEASE_MS = 10_000;
/** How long a worker holds a due approval expiry or notice before another may take it over. */
export const APPROVAL_LEASE_MS = 30_000;

function startWorkerRuntime(o: WorkerParts, connection: Redis): DeliveryRuntime {
  const { config } = o;
  return startDeliveryRuntime({
    connection,
    prefix: o.keys.bullPrefix,
    concurrency: config.HERALD_WORKER_CONCURRENCY,
    lockDurationMs: config.HERALD_JOB_LOCK_MS,
    sweepMs: config.HERALD_OUTBOX_SWEEP_MS,
    shutdownMs: config.HERALD_SHUTDOWN_MS,
    deliveries: o.deliveries,
    now: () => o.clock.now().getTime(),
    log: o.log,
  });
}
