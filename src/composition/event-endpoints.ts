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
  /** Starts the dispatcher loop (the worker role). Once. */
  start(): void;
  close(): Promise<void>;
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
  const http = createOutboundHttp(o.allow, {
    resolver: createBoundedResolver({ servers: o.config.HERALD_DNS_SERVERS }),
    maxResponseBytes: 64 * 1024,
  });
  // No port reaches the Slack admins outside a conversation yet: a disabled endpoint is logged
  // (warn) and shows `disabled_reason` in the API.
  const notifier: EndpointNotifier = {
    endpointDisabled: (e, reason) =>
      o.log.warn({ endpoint: e.id, reason }, 'event endpoint disabled by Herald (docs/events.md)'),
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
    start() {
      loop ??= startEventDispatcher(dispatcher, EVENT_IDLE_MS, o.log);
    },
    async close() {
      await loop?.close();
    },
  };
}
