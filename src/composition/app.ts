/**
 * The composition root: Redis adapters → services → edges. Nothing else constructs adapters, and
 * nothing here decides a business rule: start-up checks are in ./startup-checks.ts, the delivery
 * engine's wiring in ./delivery.ts, the Slack edge's in ./slack.ts, and the parts tell each other
 * what happened through the topics of ./events.ts.
 */
import type { Express } from 'express';
import type { Router } from 'express';
import type { Logger } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import type { Config } from '../config.js';
import { CORE_CONNECT_TIMEOUT_MS, withDeadline } from './cli.js';
import type { OutboundAllow } from '../domain/connection/address-policy.js';
import { systemClock, type Clock } from '../domain/common/clock.js';
import type { Delivery } from '../domain/execution/execution.js';
import type { Incident } from '../domain/incident/incident.js';
import { createIdGenerator } from '../domain/common/ids.js';
import type { EdgeDeps } from '../http/endpoint.js';
import { connectionRoutes } from '../http/routes/connections.js';
import { executionRoutes } from '../http/routes/executions.js';
import { incidentRoutes } from '../http/routes/incidents.js';
import { openApiRoutes } from '../http/routes/openapi.js';
import { templateRoutes } from '../http/routes/templates.js';
import { createHttpApp, type Readiness } from '../http/server.js';
import type { ChannelSenders, ConnectionTester, SecretBox } from '../ports/index.js';
import { AnnouncementService } from '../services/announcements.js';
import { ApiKeyService } from '../services/api-keys.js';
import { ConnectionService } from '../services/connections.js';
import type { ExecutionService } from '../services/executions.js';
import { IncidentService } from '../services/incidents.js';
import { TemplateService } from '../services/templates.js';
import type { SlackEdge } from '../slack/app.js';
import { RedisAnnouncementRepo } from '../store/announcements.js';
import { RedisApiKeyRepo } from '../store/api-keys.js';
import { RedisConnectionRepo } from '../store/connections.js';
import { nodeTokenCrypto } from '../store/crypto.js';
import { keysExist } from '../store/exists.js';
import { RedisIdempotencyStore } from '../store/idempotency.js';
import { RedisIncidentRepo } from '../store/incidents.js';
import { createKeys, type Keys } from '../store/keys.js';
import { RedisPacer } from '../store/pacing.js';
import { RedisRateLimiter } from '../store/rate-limit.js';
import type { RedisClient as Redis, RedisTarget } from '../store/redis-connect.js';
import { createRedis, readRedisFacts, whenReady, type RedisFacts } from '../store/redis.js';
import { RedisTemplateRepo } from '../store/templates.js';
import { composeChannels, composeDelivery, type DeliveryWiring } from './delivery.js';
import { Topic } from './events.js';
import { slackEdge } from './slack.js';
import { checkRedis, openSecretBox, outboundAllow } from './startup-checks.js';

import type { IncidentChangeKind } from './events.js';

export { openCore, StartupError, type Core } from './cli.js';

export interface HeraldOptions {
  config: Config;
  /** A Redis URL or socket path, or a Cluster/Sentinel target (src/store/redis-connect.ts). */
  redisUrl: string | RedisTarget;
  log: Logger;
  clock?: Clock;
  /** Run the delivery worker in this process (default: HERALD_ROLE is worker or all). */
  worker?: boolean;
  /** Replaces the channel senders (tests that exercise the engine without a platform). */
  senders?: ChannelSenders;
}

export interface Services {
  apiKeys: ApiKeyService;
  incidents: IncidentService;
  templates: TemplateService;
  connections: ConnectionService;
  executions: ExecutionService;
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
  const redis = createRedis(opts.redisUrl, { name: 'herald-api', log });
  try {
    await whenReady(redis, CORE_CONNECT_TIMEOUT_MS);
    const redisFacts = await checkRedis(redis, log);
    const keys = createKeys(config.HERALD_KEY_PREFIX);
    const box = await openSecretBox(config, redis, keys, log);
    const events = {
      incidentChanged: new Topic<[Incident, IncidentChangeKind]>('incident change', log),
      // Deleting or disabling a connection cancels its queued deliveries before it answers.
      connectionGone: new Topic<[string, string]>('connection gone', log, 'throw'),
      deliveryChanged: new Topic<[Delivery]>('delivery change', log),
    };
    const allow = outboundAllow(config.HERALD_OUTBOUND_ALLOW);
    const channels = await composeChannels(config, allow, clock);
    const registry = new Registry();
    collectDefaultMetrics({ register: registry, prefix: 'herald_' });
    const { services, delivery } = composeServices({
      opts,
      redis,
      keys,
      box,
      clock,
      allow,
      events,
      channels,
      registry,
    });
    const edge: EdgeDeps = {
      keys: services.apiKeys,
      limiter: new RedisRateLimiter(redis, keys, {
        default: config.HERALD_RATE_LIMIT,
        execute: config.HERALD_EXECUTE_RATE_LIMIT,
      }),
      idempotency: new RedisIdempotencyStore(redis, keys, box),
    };
    const { app, finish } = createHttpApp({
      log,
      registry,
      metricsToken: config.HERALD_METRICS_TOKEN,
      readiness: readinessOf(redis),
      api: v1Routes(edge, services),
      trustProxy: config.HERALD_TRUST_PROXY,
    });
    const slack = await slackEdge(config, log, clock, app, {
      services: { ...services, announcements: new AnnouncementService(new RedisAnnouncementRepo(redis, keys)) },
      idempotency: edge.idempotency,
      pacer: new RedisPacer(redis, keys),
    });
    if (slack) {
      // The announcement follows its incident, and its receipts every delivery change, in whichever process made it.
      events.incidentChanged.on((incident, kind) => slack.announcer.incidentChanged(incident, kind));
      events.deliveryChanged.on((d) => slack.announcer.deliveryChanged(d));
    }
    finish();
    // The worker runs in role worker or all; an api-only process just enqueues.
    // Its reminders go to the Slack announcement's thread when Slack is on (a worker has the bot token).
    if (opts.worker ?? config.HERALD_ROLE !== 'api') delivery.startWorker(slack?.announcer ?? null);
    if (slack?.mode === 'socket' && config.HERALD_ROLE !== 'worker') {
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
        await slack?.stop();
        await delivery.close();
        await redis.quit().catch(() => undefined);
      },
    };
  } catch (e) {
    redis.disconnect();
    throw e;
  }
}

interface HeraldEvents {
  incidentChanged: Topic<[Incident, IncidentChangeKind]>;
  connectionGone: Topic<[string, string]>;
  deliveryChanged: Topic<[Delivery]>;
}

/** What the services are wired from. */
interface ServiceParts {
  opts: HeraldOptions;
  redis: Redis;
  keys: Keys;
  box: SecretBox;
  clock: Clock;
  allow: OutboundAllow;
  events: HeraldEvents;
  channels: { senders: ChannelSenders; tester: ConnectionTester };
  registry: Registry;
}

/** The services over their Redis adapters, and the delivery engine they share. */
function composeServices(w: ServiceParts): { services: Services; delivery: DeliveryWiring } {
  const { opts, redis, keys, box, clock, events } = w;
  const { config, log } = opts;
  const ids = createIdGenerator(() => clock.now().getTime());
  const exist = (key: (id: string) => string) => (list: string[]) => keysExist(redis, list.map(key));
  const templateStore = new RedisTemplateRepo(redis, keys);
  const incidentStore = new RedisIncidentRepo(redis, keys);
  const apiKeys = new ApiKeyService({ repo: new RedisApiKeyRepo(redis, keys), clock, ids, crypto: nodeTokenCrypto });
  const incidents = new IncidentService({
    incidents: incidentStore,
    templatesExist: exist(keys.template),
    templateVariables: (tids) =>
      Promise.all(tids.map(async (t) => (await templateStore.get(t))?.variables.map((v) => v.name) ?? null)),
    clock,
    ids,
    onChange: (incident, kind) => void events.incidentChanged.emit(incident, kind),
  });
  const connections = new ConnectionService({
    repo: new RedisConnectionRepo(redis, keys),
    box,
    clock,
    ids,
    crypto: nodeTokenCrypto,
    allow: w.allow,
    tester: w.channels.tester,
    onDeleted: (id) => events.connectionGone.emit(id, 'connection deleted'),
    onDisabled: (id) => events.connectionGone.emit(id, 'connection disabled'),
  });
  const templates = new TemplateService({
    templates: templateStore,
    clock,
    ids,
    getIncident: (id) => incidentStore.get(id),
    connectionsExist: exist(keys.connection),
    publicUrl: config.HERALD_PUBLIC_URL,
  });
  const delivery = composeDelivery({
    registry: w.registry,
    config,
    redisUrl: opts.redisUrl,
    redis,
    keys,
    log,
    clock,
    ids,
    incidents: incidentStore,
    templates,
    connections,
    senders: opts.senders ?? w.channels.senders,
    deliveryChanged: events.deliveryChanged,
    incidentChanged: events.incidentChanged,
  });
  events.connectionGone.on((id, reason) => delivery.deliveries.cancelForConnection(id, reason));
  return { services: { apiKeys, incidents, connections, templates, executions: delivery.executions }, delivery };
}

/** /v1: every resource's routes and the OpenAPI document, straight on the app (see mountRoutes). */
function v1Routes(edge: EdgeDeps, services: Services): (app: Router) => void {
  return (app) => {
    incidentRoutes({ ...edge, incidents: services.incidents }, app, '/v1');
    templateRoutes({ ...edge, templates: services.templates }, app, '/v1');
    connectionRoutes({ ...edge, connections: services.connections }, app, '/v1');
    executionRoutes({ ...edge, executions: services.executions }, app, '/v1');
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
