/**
 * The composition root: Redis adapters → services → edges. Nothing else constructs adapters, and
 * nothing here decides a business rule.
 */
import type { Express } from 'express';
import { Router } from 'express';
import type { RedisClient as Redis } from './store/redis-connect.js';
import type { Logger } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import type { Config } from './config.js';
import type { ChannelSenders } from './ports.js';
import { OutboundAllowError, parseOutboundAllow, type OutboundAllow } from './domain/address-policy.js';
import { systemClock, type Clock } from './domain/clock.js';
import { createIdGenerator } from './domain/ids.js';
import type { EdgeDeps } from './http/endpoint.js';
import { connectionRoutes } from './http/routes/connections.js';
import { executionRoutes } from './http/routes/executions.js';
import { openApiRoutes } from './http/routes/openapi.js';
import { composeDelivery, type DeliveryWiring } from './compose-delivery.js';
import { createSmtpClient } from './channels/email/send.js';
import { createChannelSenders, loadChannelAdapters } from './delivery/senders.js';
import { createConnectionTester } from './delivery/connection-tester.js';
import { createBoundedResolver } from './delivery/outbound-guard.js';
import { createOutboundHttp } from './delivery/outbound-http.js';
import { incidentRoutes } from './http/routes/incidents.js';
import { templateRoutes } from './http/routes/templates.js';
import { createHttpApp, type Readiness } from './http/server.js';
import { AnnouncementService } from './services/announcements.js';
import { ApiKeyService } from './services/api-keys.js';
import { ConnectionService } from './services/connections.js';
import { IncidentService } from './services/incidents.js';
import type { ExecutionService } from './services/executions.js';
import { TemplateService } from './services/templates.js';
import { createSlackEdge, type SlackEdge } from './slack/app.js';
import { RedisAnnouncementRepo } from './store/announcements.js';
import { RedisApiKeyRepo } from './store/api-keys.js';
import { RedisConnectionRepo } from './store/connections.js';
import { createSecretBox, nodeTokenCrypto } from './store/crypto.js';
import { keysExist } from './store/exists.js';
import { RedisIdempotencyStore } from './store/idempotency.js';
import { RedisIncidentRepo } from './store/incidents.js';
import { createKeys, type Keys } from './store/keys.js';
import { RedisTemplateRepo } from './store/templates.js';
import { RedisPacer } from './store/pacing.js';
import { RedisRateLimiter } from './store/rate-limit.js';
import { createRedis, readRedisFacts, whenReady } from './store/redis.js';
import { loadOrCreateSecretKey, previousSecretKeys, verifySecretKey } from './store/secret-key.js';
import type { RedisTarget } from './store/redis-connect.js';
import { CORE_CONNECT_TIMEOUT_MS, StartupError, withDeadline } from './core.js';

export { openCore, StartupError, type Core } from './core.js';

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
    const facts = await readRedisFacts(redis);
    if (facts.maxmemoryPolicy !== 'noeviction') {
      throw new StartupError(
        `Redis maxmemory-policy is "${facts.maxmemoryPolicy}"; Herald needs "noeviction" (an evicting Redis silently drops queued deliveries). ` +
          'Run: CONFIG SET maxmemory-policy noeviction (and put it in redis.conf).',
      );
    }
    if (facts.persistence === 'none') {
      log.warn('REDIS KEEPS NOTHING ON DISK (appendonly no, no save points): a Redis restart loses every incident, key and queued delivery. Enable AOF: appendonly yes, appendfsync everysec.');
    }
    const keys = createKeys(config.HERALD_KEY_PREFIX);
    const secret = loadOrCreateSecretKey(config.HERALD_SECRET_KEY, config.HERALD_DATA_DIR);
    if (secret.generated) {
      log.warn({ path: secret.path }, 'HERALD_SECRET_KEY is not set: using a generated key from the data directory. Every instance sharing this Redis must be given the same key.');
    }
    const box = createSecretBox(secret.key, previousSecretKeys(config));
    try {
      if ((await verifySecretKey(redis, keys, box)) === 'previous') {
        log.warn('Secrets in this Redis are still sealed with HERALD_SECRET_KEY_PREVIOUS: run `herald secrets reseal`, then remove HERALD_SECRET_KEY_PREVIOUS.');
      }
    } catch (e) {
      throw new StartupError((e as Error).message);
    }

    const ids = createIdGenerator(() => clock.now().getTime());
    const apiKeys = new ApiKeyService({ repo: new RedisApiKeyRepo(redis, keys), clock, ids, crypto: nodeTokenCrypto });
    // The Slack edge is built after the services it reads; their hooks reach it late-bound.
    let slack: SlackEdge | null = null;
    const templateStore = new RedisTemplateRepo(redis, keys);
    const incidents = new IncidentService({
      incidents: new RedisIncidentRepo(redis, keys),
      templatesExist: (tids) => keysExist(redis, tids.map((t) => keys.template(t))),
      templateVariables: (tids) => Promise.all(tids.map(async (t) => (await templateStore.get(t))?.variables.map((v) => v.name) ?? null)),
      clock,
      ids,
      onChange: (incident, kind) => slack?.announcer.incidentChanged(incident, kind),
    });
    const allow = outboundAllow(config.HERALD_OUTBOUND_ALLOW);
    // Every request to a user-supplied destination goes through this guarded client (README "Delivery semantics", Outbound safety);
    // the operator's platform API bases are trusted.
    // Names are resolved by bounded c-ares (HERALD_DNS_SERVERS or the system's servers).
    const outbound = createOutboundHttp(allow, { trustedBaseUrls: [config.SLACK_API_URL, config.TELEGRAM_API_URL], resolver: createBoundedResolver({ servers: config.HERALD_DNS_SERVERS }) });
    const channelDeps = { http: outbound, slackApiUrl: config.SLACK_API_URL, telegramApiUrl: config.TELEGRAM_API_URL, now: () => clock.now().getTime() };
    const smtp = createSmtpClient({ guard: outbound.guard });
    const adapters = await loadChannelAdapters();
    const senders = createChannelSenders(adapters, { ...channelDeps, smtp });
    const tester = createConnectionTester({ ...channelDeps, adapters, senders, smtp, clock });
    // Deleting or disabling a connection cancels its queued deliveries (bound once delivery exists).
    let cancelQueued: (connectionId: string, reason: string) => Promise<unknown> = () => Promise.resolve();
    const connections = new ConnectionService({
      repo: new RedisConnectionRepo(redis, keys),
      box,
      clock,
      ids,
      crypto: nodeTokenCrypto,
      allow,
      tester,
      onDeleted: (id) => cancelQueued(id, 'connection deleted').then(() => undefined),
      onDisabled: (id) => cancelQueued(id, 'connection disabled').then(() => undefined),
    });
    const incidentReader = new RedisIncidentRepo(redis, keys);
    const templates = new TemplateService({
      templates: templateStore,
      clock,
      ids,
      getIncident: (id) => incidentReader.get(id),
      connectionsExist: (cids) => keysExist(redis, cids.map((c) => keys.connection(c))),
      publicUrl: config.HERALD_PUBLIC_URL,
    });
    const registry = new Registry();
    collectDefaultMetrics({ register: registry, prefix: 'herald_' });
    const delivery: DeliveryWiring = composeDelivery({
      registry,
      config,
      redisUrl: opts.redisUrl,
      redis,
      keys,
      log,
      clock,
      ids,
      incidents: incidentReader,
      templates,
      connections,
      senders: opts.senders ?? senders,
    });
    cancelQueued = (id, reason) => delivery.deliveries.cancelForConnection(id, reason);
    const services: Services = { apiKeys, incidents, connections, templates, executions: delivery.executions };

    const edge: EdgeDeps = {
      keys: apiKeys,
      limiter: new RedisRateLimiter(redis, keys, { default: config.HERALD_RATE_LIMIT, execute: config.HERALD_EXECUTE_RATE_LIMIT }),
      idempotency: new RedisIdempotencyStore(redis, keys, box),
    };
    const v1 = Router();
    v1.use(openApiRoutes(edge));
    v1.use(incidentRoutes({ ...edge, incidents }));
    v1.use(templateRoutes({ ...edge, templates }));
    v1.use(connectionRoutes({ ...edge, connections }));
    v1.use(executionRoutes({ ...edge, executions: delivery.executions }));

    const readiness = async (): Promise<Readiness> => {
      try {
        // A Redis that hangs (stopped, black-holed) must not hang the probe: 503 within 2 s.
        const f = await withDeadline(readRedisFacts(redis), READINESS_TIMEOUT_MS);
        return { redis: 'ok', persistence: f.persistence };
      } catch {
        return { redis: 'unreachable', persistence: 'unknown' };
      }
    };
    const { app, finish } = createHttpApp({ log, registry, metricsToken: config.HERALD_METRICS_TOKEN, readiness, v1, trustProxy: config.HERALD_TRUST_PROXY });
    slack = slackEdge(config, log, clock, app, {
      services: { ...services, announcements: new AnnouncementService(new RedisAnnouncementRepo(redis, keys)) },
      idempotency: edge.idempotency,
      pacer: new RedisPacer(redis, keys),
    });
    if (slack) {
      // Receipts on the announcement follow every delivery change, in whichever process made it.
      const { announcer } = slack;
      delivery.onDeliveryChanged.push((d) => announcer.deliveryChanged(d));
    }
    finish();
    // The worker runs in role worker or all; an api-only process just enqueues.
    if (opts.worker ?? config.HERALD_ROLE !== 'api') delivery.startWorker();
    if (slack?.mode === 'socket' && config.HERALD_ROLE !== 'worker') {
      slack.start().catch((err: unknown) => log.error({ err }, 'Slack Socket Mode could not connect'));
    }

    return {
      config,
      redis,
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

/**
 * The Slack app when Slack is configured: SLACK_BOT_TOKEN plus SLACK_SIGNING_SECRET (HTTP mode,
 * mounted on `app` at /slack/events) or SLACK_APP_TOKEN (Socket Mode). Without any Slack setting
 * Herald runs the API alone and says so; a half-done setup is refused, naming what is missing.
 */
function slackEdge(
  config: Config,
  log: Logger,
  clock: Clock,
  app: Express,
  wiring: Pick<Parameters<typeof createSlackEdge>[0], 'services' | 'idempotency' | 'pacer'>,
): SlackEdge | null {
  const { SLACK_BOT_TOKEN: botToken, SLACK_SIGNING_SECRET: signingSecret, SLACK_APP_TOKEN: appToken } = config;
  // A worker receives no Slack requests; with the bot token it keeps announcements current
  // (the delivery receipts happen here), so the bot token alone is its whole Slack setup.
  const worker = config.HERALD_ROLE === 'worker';
  if (botToken === undefined && signingSecret === undefined && appToken === undefined) {
    log.info(
      worker
        ? 'Slack is not configured (no SLACK_BOT_TOKEN): this worker will not update Slack announcements with delivery receipts.'
        : 'Slack is not configured (no SLACK_BOT_TOKEN): running the API alone.',
    );
    return null;
  }
  if (botToken === undefined) throw new StartupError('Slack is half configured: SLACK_BOT_TOKEN (xoxb-…) is missing. Set it, or unset SLACK_SIGNING_SECRET and SLACK_APP_TOKEN to run the API alone.');
  if (worker) {
    const edge = createSlackEdge({ botToken, apiUrl: config.SLACK_API_URL, settings: { admins: [], defaultChannel: config.HERALD_SLACK_CHANNEL ?? null }, log, now: () => clock.now(), ...wiring }, app);
    log.info({ mode: edge.mode }, 'Slack: this worker keeps announcements current (delivery receipts); it receives no Slack requests');
    return edge;
  }
  if (signingSecret === undefined && appToken === undefined) {
    throw new StartupError('Slack is half configured: set SLACK_SIGNING_SECRET (HTTP mode, /slack/events) or SLACK_APP_TOKEN (Socket Mode), or unset SLACK_BOT_TOKEN to run the API alone.');
  }
  const edge = createSlackEdge(
    {
      botToken,
      ...(signingSecret !== undefined ? { signingSecret } : {}),
      ...(appToken !== undefined ? { appToken } : {}),
      apiUrl: config.SLACK_API_URL,
      settings: { admins: config.HERALD_SLACK_ADMINS, defaultChannel: config.HERALD_SLACK_CHANNEL ?? null },
      log,
      now: () => clock.now(),
      ...wiring,
    },
    app,
  );
  log.info({ mode: edge.mode, admins: config.HERALD_SLACK_ADMINS.length, channel: config.HERALD_SLACK_CHANNEL ?? null }, edge.mode === 'http' ? 'Slack app on /slack/events (HTTP mode)' : 'Slack app over Socket Mode');
  return edge;
}

const READINESS_TIMEOUT_MS = 1500;
/** HERALD_OUTBOUND_ALLOW, parsed once; a bad entry stops start-up naming it. */
function outboundAllow(entries: string[]): OutboundAllow {
  try {
    return parseOutboundAllow(entries);
  } catch (e) {
    throw e instanceof OutboundAllowError ? new StartupError(e.message) : e;
  }
}
