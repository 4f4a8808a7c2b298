/**
 * Events for integrators (docs/events.md): the event store, the endpoint service the API uses and
 * the dispatcher the worker role runs, over their own guarded HTTP client. Pure wiring.
 */
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { OutboundAllow } from '../domain/connection/address-policy.js';
import type { Clock } from '../domain/common/clock.js';
import { startEventDispatcher } from '../delivery/event-dispatcher.js';
import { createBoundedResolver } from '../delivery/outbound/guard.js';
import { createOutboundHttp } from '../delivery/outbound/http.js';
import type { SecretBox } from '../ports/index.js';
import { EventDispatcher, EventEndpointService } from '../services/events.js';
import type { EndpointNotifier } from '../services/events-ports.js';
import { nodeTokenCrypto } from '../store/crypto.js';
import { RedisEventStore } from '../store/event-store.js';
import type { Keys } from '../store/keys.js';
import type { RedisClient as Redis } from '../store/redis-connect.js';

/** How long an idle dispatcher waits before looking again: an event is sent within about this. */
const EVENT_IDLE_MS = 100;

export interface EventParts {
  service: EventEndpointService;
  dispatcher: EventDispatcher;
  /** Who tells the Slack admins of a disabled endpoint (null: Slack is off, the log only). Once, before start. */
  attachAdmins(target: EndpointNotifier | null): void;
  /** Starts the dispatcher loop (the worker role). Once. */
  start(): void;
  close(): Promise<void>;
}

/**
 * The guarded HTTP client of Herald's own signed webhooks (event endpoints, webhook subscribers):
 * user-supplied destinations, resolved through HERALD_DNS_SERVERS, answers read up to 64 KiB.
 */
export function webhookHttp(config: Config, allow: OutboundAllow) {
  return createOutboundHttp(allow, {
    resolver: createBoundedResolver({ servers: config.HERALD_DNS_SERVERS }),
    maxResponseBytes: 64 * 1024,
  });
}

export function composeEvents(o: {
  config: Config;
  redis: Redis;
  keys: Keys;
  log: Logger;
  clock: Clock;
  box: SecretBox;
  allow: OutboundAllow;
}): EventParts {
  const http = webhookHttp(o.config, o.allow);
  // A disabled endpoint is always logged (warn) and shows `disabled_reason` in the API; the Slack
  // admins are told too once the Slack edge is attached (it is built after these parts).
  let admins: EndpointNotifier | null = null;
  let attached = false;
  const notifier: EndpointNotifier = {
    async endpointDisabled(e, reason) {
      o.log.warn({ endpoint: e.id, reason }, 'event endpoint disabled by Herald (docs/events.md)');
      await admins?.endpointDisabled(e, reason);
    },
  };
  const deps = {
    store: new RedisEventStore(o.redis, o.keys),
    box: o.box,
    crypto: nodeTokenCrypto,
    clock: o.clock,
    allow: o.allow,
    http,
    random: Math.random,
    retentionMs: o.config.HERALD_EVENT_RETENTION,
    notifier,
    onError: (what: string, err: unknown) =>
      o.log.warn({ err: err instanceof Error ? err.message : String(err) }, `${what} failed`),
  };
  const dispatcher = new EventDispatcher(deps);
  let loop: { close(): Promise<void> } | null = null;
  return {
    service: new EventEndpointService(deps),
    dispatcher,
    attachAdmins(target) {
      if (attached) throw new Error('the admins of event endpoints are already attached');
      attached = true;
      admins = target;
    },
    start() {
      loop ??= startEventDispatcher(dispatcher, EVENT_IDLE_MS, o.log);
    },
    async close() {
      await loop?.close();
    },
  };
}
