/**
 * Subscribers of the public status page (docs/subscribers.md): their store, the public pages'
 * service and router, the admin service, the notices' front door (for the status page's writes
 * and the maintenance service) and the worker's loops that send. Pure wiring.
 */
import { randomBytes } from 'node:crypto';
import type { Router } from 'express';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { StatusPagePort } from '../contracts/channel.js';
import type { OutboundAllow } from '../domain/connection/address-policy.js';
import type { Clock } from '../domain/common/clock.js';
import { webhookHttp } from './event-endpoints.js';
import type { SecretBox } from '../ports/index.js';
import type { SubscriberNotices, SubscriberTokens } from '../ports/subscribers.js';
import type { PublicPageConfig } from '../domain/status/public.js';
import { SubscriberAdminService } from '../services/subscriber-admin.js';
import { SubscriptionService } from '../services/subscriptions.js';
import { loadPageConfig } from '../status/loaders.js';
import { createSubscriptionThrottle, subscriptionRouter } from '../status/subscriptions/routes.js';
import { loadPublicComponents } from '../store/components.js';
import { RedisConnectionRepo } from '../store/connections.js';
import type { Keys } from '../store/keys.js';
import { RedisPacer } from '../store/pacing.js';
import type { RedisClient as Redis, RedisTarget } from '../store/redis-connect.js';
import { createRedis } from '../store/redis.js';
import { openSubscriberKey, type SubscriberIds } from '../store/subscriber-key.js';
import { RedisNoticeRepo, RedisSubscriberRepo, RedisSubscriptionMailQueue } from '../store/subscribers.js';
import { NoticeDispatcher, startSubscriberWorker } from '../subscribers/dispatcher.js';
import {
  renderAlreadySubscribedMail,
  renderConfirmMail,
  noticeMailRenderer,
  subscriberLinks,
} from '../subscribers/mail.js';
import { SubscriberNoticeOpener } from '../subscribers/opener.js';
import { wrapStatusPage } from '../subscribers/notifying-status-page.js';
import { challengePayload, webhookPayload } from '../subscribers/payload.js';
import { createRelay } from '../subscribers/relay.js';
import type { SubscriberTemplateOverrides } from '../subscribers/templates.js';
import { SubscriptionMailSender } from '../subscribers/tx-mail.js';
import { createSubscriberWebhook } from '../subscribers/webhook.js';

export interface SubscriberParts {
  /** For the maintenance service (buildServices' `subscriberNotices`). */
  notices: SubscriberNotices;
  /** For composeChannels: the status page store that also opens the subscribers' notices. */
  wrapStatusPage(port: StatusPagePort): StatusPagePort;
  /** Mount at /status/subscriptions (and /subscriptions on HERALD_STATUS_HOST). */
  router: Router;
  admin: SubscriberAdminService;
  /** The worker role: dispatcher, subscription mail and erase loops. Once. */
  start(): void;
  close(): Promise<void>;
}

export interface SubscriberOptions {
  config: Config;
  redis: Redis;
  keys: Keys;
  log: Logger;
  clock: Clock;
  box: SecretBox;
  allow: OutboundAllow;
  /** Extra CA certificates for the relay's TLS (tests: the SMTP peer's). */
  smtpCa?: string | string[];
  /** Where Redis is: the worker's sending loops get a connection of their own there. */
  redisUrl: string | RedisTarget;
}

export async function composeSubscribers(o: SubscriberOptions): Promise<SubscriberParts> {
  const { config, redis, keys, log, clock } = o;
  const { ids, tokens } = await openSubscriberKey(redis, keys, o.box);
  const retentionMs = config.HERALD_SUBSCRIBER_RETENTION;
  const subscribers = new RedisSubscriberRepo(redis, keys, o.box, ids, retentionMs);
  const notices = new RedisNoticeRepo(redis, keys, config.HERALD_EVENT_RETENTION);
  const mail = new RedisSubscriptionMailQueue(redis, keys);
  const page = () => loadPageConfig(redis, keys);
  const pageComponentIds = async () =>
    new Set((await loadPublicComponents(redis, keys, clock.now().getTime())).map((c) => c.id));

  const opener = new SubscriberNoticeOpener({ redis, keys, notices, clock });
  const service = new SubscriptionService({
    repo: subscribers,
    ids,
    tokens,
    mail,
    clock,
    throttle: createSubscriptionThrottle(redis, keys),
    emailEnabled: config.HERALD_SMTP_URL !== undefined,
    allow: o.allow,
    componentIds: pageComponentIds,
    randomBytes,
    retentionMs,
  });
  const router = subscriptionRouter({
    service,
    page,
    components: () => loadPublicComponents(redis, keys, clock.now().getTime()),
    log,
    trustProxy: config.HERALD_TRUST_PROXY,
  });
  const admin = new SubscriberAdminService({
    repo: subscribers,
    ids,
    notices,
    clock,
    // An import may name any component that exists (not only those shown on the page).
    componentIds: async () => new Set(await redis.zrange(keys.components(), '0', '-1')),
  });

  // The sending half exists only once the worker starts: an HTTP-only process opens no SMTP pool.
  let worker: { close(): Promise<void> } | null = null;
  return {
    notices: opener,
    wrapStatusPage: (port) => wrapStatusPage(port, opener),
    router,
    admin,
    start() {
      worker ??= startSending(o, { ids, mail, tokens, page });
    },
    async close() {
      await worker?.close();
    },
  };
}

/** The worker role's half: the relay, the webhook client, the dispatcher and the subscription mail. */
function startSending(
  o: SubscriberOptions,
  s: {
    ids: SubscriberIds;
    mail: RedisSubscriptionMailQueue;
    tokens: SubscriberTokens;
    page: () => Promise<PublicPageConfig | null>;
  },
): { close(): Promise<void> } {
  const { config, keys, log, clock } = o;
  // A connection of the worker's own for the sends: a notice to 100,000 subscribers is a few
  // hundred thousand commands, and the request connection's batching (auto-pipelining) and
  // per-command deadline cost more CPU than the commands themselves there. Like the queue
  // workers' connections, it waits out a Redis outage instead of failing: nobody is waiting for
  // an answer, and a lease that runs out meanwhile hands the work to another worker.
  const redis = createRedis(o.redisUrl, { worker: true, name: 'herald-subscribers', log });
  const subscribers = new RedisSubscriberRepo(redis, keys, o.box, s.ids, config.HERALD_SUBSCRIBER_RETENTION);
  const notices = new RedisNoticeRepo(redis, keys, config.HERALD_EVENT_RETENTION);
  const http = webhookHttp(config, o.allow);
  const webhook = createSubscriberWebhook({ http, now: () => clock.now().getTime() });
  const relay =
    config.HERALD_SMTP_URL === undefined
      ? null
      : createRelay({
          url: config.HERALD_SMTP_URL,
          pool: config.HERALD_SMTP_POOL,
          rate: config.HERALD_SMTP_RATE,
          pacer: new RedisPacer(redis, keys),
          ...(o.smtpCa !== undefined ? { ca: o.smtpCa } : {}),
        });
  const from = config.HERALD_SMTP_FROM ?? null;
  const common = { subscribers, tokens: s.tokens, relay, from, webhook, clock, log };
  const dispatcher = new NoticeDispatcher({
    ...common,
    notices,
    content: { links: subscriberLinks, noticeMail: noticeMailRenderer, webhookPayload },
    templates: () => templateOverrides(redis, keys),
    random: Math.random,
    inFlight: config.HERALD_SMTP_POOL * 2,
  });
  const txMail = new SubscriptionMailSender({
    ...common,
    queue: s.mail,
    content: {
      links: subscriberLinks,
      confirmMail: renderConfirmMail,
      alreadySubscribedMail: renderAlreadySubscribedMail,
      challengePayload,
    },
    page: s.page,
    randomBytes,
  });
  const loops = startSubscriberWorker({ dispatcher, txMail, subscribers, clock, log });
  return {
    async close() {
      await loops.close();
      relay?.close();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

/** The page's `subscriber_templates` (the claimed status_page connection's config); null: the defaults. */
async function templateOverrides(redis: Redis, keys: Keys): Promise<SubscriberTemplateOverrides | null> {
  const id = await redis.get(keys.statusPage());
  if (id === null) return null;
  const record = await new RedisConnectionRepo(redis, keys).get(id);
  if (record === null || record.type !== 'status_page') return null;
  const t = (record.config as { subscriber_templates?: SubscriberTemplateOverrides | null }).subscriber_templates;
  return t ?? null;
}
