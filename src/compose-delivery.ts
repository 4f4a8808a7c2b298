/**
 * The delivery half of the composition root: the queue, the execution and delivery services, and
 * (for the worker role) the BullMQ worker and the outbox sweep. Kept apart from app.ts so each
 * file stays one job; nothing here decides a rule.
 */
import type { Worker } from 'bullmq';
import type { RedisClient as Redis } from './store/redis-connect.js';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Config } from './config.js';
import type { Clock } from './domain/clock.js';
import type { Delivery } from './domain/execution.js';
import type { IdGenerator } from './domain/ids.js';
import { deliveryMetrics } from './delivery/metrics.js';
import { BullDeliveryQueue, startDeliveryWorker } from './delivery/queue.js';
import type { ChannelSenders, IncidentRepo } from './ports.js';
import type { ConnectionService } from './services/connections.js';
import { DeliveryService } from './services/deliveries.js';
import { ExecutionService } from './services/executions.js';
import type { TemplateService } from './services/templates.js';
import { RedisExecutionRepo } from './store/executions.js';
import type { Keys } from './store/keys.js';
import { RedisPacer } from './store/pacing.js';
import { BULK_COMMAND_TIMEOUT_MS, createRedis, isRedisUnavailable, redisErrorLogger } from './store/redis.js';
import type { RedisTarget } from './store/redis-connect.js';

export interface DeliveryWiring {
  executions: ExecutionService;
  deliveries: DeliveryService;
  /** Subscribers told after every delivery change (Slack receipts). */
  onDeliveryChanged: ((d: Delivery) => void)[];
  /** Starts the worker and the outbox sweep (role worker/all). */
  startWorker(): void;
  /** Stops taking jobs, waits for the running ones (up to the drain deadline), closes connections. */
  close(): Promise<void>;
}

export function composeDelivery(o: {
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
}): DeliveryWiring {
  const { config, log, keys } = o;
  // BullMQ gets connections of its own. The queue (adding, removing jobs) serves requests, so its
  // commands are bounded like any request's (BullMQ's "failing fast when Redis is down"): what
  // it fails to add, the outbox sweep adds later. Workers block and get unbounded ones below.
  const queueConnection = createRedis(o.redisUrl, { name: 'herald-queue', log });
  // BullMQ re-emits its connections' errors on the queue: logged once per outage, like the clients.
  const queueTrouble = redisErrorLogger(log, 'herald-queue (BullMQ)');
  queueConnection.on('ready', queueTrouble.ready);
  const queue = new BullDeliveryQueue(queueConnection, keys.bullPrefix, (err) => (isRedisUnavailable(err) ? queueTrouble.error(err) : log.warn({ err: err.message }, 'delivery queue error')));
  const bulkConnection = createRedis(o.redisUrl, { name: 'herald-bulk', log, commandTimeoutMs: BULK_COMMAND_TIMEOUT_MS });
  const repo = new RedisExecutionRepo(o.redis, keys, () => o.clock.now().getTime(), bulkConnection);
  const metrics = deliveryMetrics(o.registry);
  const listeners: ((d: Delivery) => void)[] = [metrics.changed];

  const deliveries = new DeliveryService({
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
    pacer: new RedisPacer(o.redis, keys),
    queue,
    clock: o.clock,
    ids: o.ids,
    random: Math.random,
    getIncident: (id) => o.incidents.get(id),
    publicUrl: config.HERALD_PUBLIC_URL ?? null,
    onAttempt: metrics.attempt,
    onError: (what, err) => log.warn({ err: err instanceof Error ? err.message : String(err) }, `delivery bookkeeping failed: ${what}`),
    onDeliveryChanged: (d) => {
      for (const l of listeners) {
        try {
          l(d);
        } catch (err) {
          log.warn({ err: (err as Error).message }, 'delivery listener failed');
        }
      }
    },
  });

  const executions = new ExecutionService({
    incidents: o.incidents,
    repo,
    deliveries,
    getTemplates: (ids) => o.templates.getMany(ids),
    listConnections: () => o.connections.listAll(),
    enqueue: (jobs) => queue.enqueue(jobs),
    clock: o.clock,
    ids: o.ids,
    publicUrl: config.HERALD_PUBLIC_URL,
    onError: (what, err) => log.error({ err: err instanceof Error ? err.message : String(err) }, `execute: ${what}`),
  });

  let worker: Worker | null = null;
  let workerConnection: Redis | null = null;
  let sweep: NodeJS.Timeout | null = null;

  return {
    executions,
    deliveries,
    onDeliveryChanged: listeners,
    startWorker() {
      if (worker) return;
      workerConnection = createRedis(o.redisUrl, { worker: true, name: 'herald-worker', log });
      worker = startDeliveryWorker({
        connection: workerConnection,
        prefix: keys.bullPrefix,
        concurrency: config.HERALD_WORKER_CONCURRENCY,
        lockDurationMs: config.HERALD_JOB_LOCK_MS,
        process: (id) => deliveries.process(id),
        log,
      });
      const runSweep = () => {
        deliveries.sweepOutbox(config.HERALD_OUTBOX_SWEEP_MS).then(
          (n) => {
            if (n > 0) log.warn({ count: n }, 'outbox: re-queued deliveries that were committed but not queued');
          },
          // Redis being away is logged once by its connection; this runs every sweep period.
          (err: unknown) => {
            if (!isRedisUnavailable(err)) log.warn({ err: (err as Error).message }, 'outbox sweep failed');
          },
        );
      };
      runSweep();
      sweep = setInterval(runSweep, config.HERALD_OUTBOX_SWEEP_MS);
      sweep.unref();
    },
    async close() {
      if (sweep) clearInterval(sweep);
      if (worker) {
        // close() waits for running jobs; past the drain deadline they are abandoned to the
        // stalled-job check (another worker, or the restarted one, completes them).
        const w = worker;
        await Promise.race([w.close(), new Promise((r) => setTimeout(r, Math.max(1000, config.HERALD_SHUTDOWN_MS - 2000)).unref())]);
        if (w.isRunning()) await w.close(true).catch(() => undefined);
      }
      await queue.close().catch(() => undefined);
      await queueConnection.quit().catch(() => undefined);
      await bulkConnection.quit().catch(() => undefined);
      await workerConnection?.quit().catch(() => undefined);
    },
  };
}
