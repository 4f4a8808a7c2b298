import { afterAll, afterEach, beforeEach } from 'vitest';
import { parseOutboundAllow } from '../../src/domain/connection/address-policy.js';
import { createOutboundHttp } from '../../src/delivery/outbound/http.js';
import { EventDispatcher, EventEndpointService } from '../../src/services/events.js';
import type { EndpointNotifier, EventServiceDeps } from '../../src/services/events-ports.js';
import { createSecretBox, nodeTokenCrypto } from '../../src/store/crypto.js';
import { RedisEventStore } from '../../src/store/event-store.js';
import { RedisIncidentRepo } from '../../src/store/incidents.js';
import { createKeys } from '../../src/store/keys.js';
import { startEventSink } from './event-sink.js';
import { dropPrefix, uniquePrefix, useTestRedis } from './redis.js';

/**
 * Events for integrators below the API, for integration tests: each test has its own local
 * receiver (`sink`) and makes worlds, each with its own keys (its events are its own), the event
 * services over them and a clock the test moves; the dispatcher's steps are run by hand.
 */
export function useEventWorlds(name: string) {
  const t = useTestRedis(name);
  let sink: Awaited<ReturnType<typeof startEventSink>> | undefined;
  const prefixes: string[] = [];
  beforeEach(async () => {
    sink = await startEventSink();
  });
  afterEach(async () => {
    await sink?.close();
  });
  afterAll(async () => {
    for (const p of prefixes) await dropPrefix(t.redis, p);
  });

  function world() {
    const prefix = uniquePrefix(name);
    prefixes.push(prefix);
    const keys = createKeys(prefix);
    let nowMs = Date.now();
    const disabled: string[] = [];
    const notifier: EndpointNotifier = { endpointDisabled: (e, reason) => void disabled.push(`${e.id}:${reason}`) };
    const allow = parseOutboundAllow(['127.0.0.1']);
    const deps: EventServiceDeps = {
      store: new RedisEventStore(t.redis, keys),
      box: createSecretBox(Buffer.alloc(32, 7)),
      crypto: nodeTokenCrypto,
      clock: { now: () => new Date(nowMs) },
      allow,
      http: createOutboundHttp(allow),
      random: () => 0.5,
      retentionMs: 7 * 86_400_000,
      notifier,
    };
    return {
      service: new EventEndpointService(deps),
      dispatcher: new EventDispatcher(deps),
      deps,
      incidents: new RedisIncidentRepo(t.redis, keys),
      keys,
      disabled,
      advance: (ms: number) => (nowMs += ms),
      now: () => nowMs,
    };
  }

  return {
    t,
    world,
    /** This test's receiver. */
    get sink() {
      if (sink === undefined) throw new Error('the event sink exists only inside a test');
      return sink;
    },
    /** Runs dispatcher steps until the sink has `n` requests (or the deadline passes). */
    async until(w: Pick<ReturnType<typeof world>, 'dispatcher'>, n: number, deadlineMs = 15_000): Promise<void> {
      const end = Date.now() + deadlineMs;
      while (this.sink.received.length < n) {
        if (Date.now() > end) throw new Error(`the sink has ${this.sink.received.length} of ${n} requests`);
        const s = await w.dispatcher.step();
        if (s.ingested + s.fannedOut + s.attempted === 0) await new Promise((r) => setTimeout(r, 20));
      }
    },
  };
}
