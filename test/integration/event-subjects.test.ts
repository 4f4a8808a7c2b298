import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SYSTEM_ACTOR } from '../../src/domain/common/actor.js';
import { createIdGenerator } from '../../src/domain/common/ids.js';
import { parseOutboundAllow } from '../../src/domain/connection/address-policy.js';
import { newEvent, type IncidentEvent } from '../../src/domain/incident/incident-event.js';
import { createOutboundHttp } from '../../src/delivery/outbound/http.js';
import { EventDispatcher, EventEndpointService } from '../../src/services/events.js';
import type { EventServiceDeps } from '../../src/services/events-ports.js';
import { Change } from '../../src/store/commit.js';
import { createSecretBox, nodeTokenCrypto } from '../../src/store/crypto.js';
import { RedisEventStore } from '../../src/store/event-store.js';
import { createKeys, type Keys } from '../../src/store/keys.js';
import { appendSubjectEvents } from '../../src/store/timeline.js';
import { startEventSink } from '../support/event-sink.js';
import { dropPrefix, uniquePrefix, useTestRedis } from '../support/redis.js';

/**
 * Events about components and maintenances (store/timeline.ts, appendSubjectEvents): the same
 * outbox as incidents' events, `sequence` per subject, `incident_id` only when the data names one.
 */
const t = useTestRedis('evsubjects');
const ids = createIdGenerator();
let sink: Awaited<ReturnType<typeof startEventSink>>;
const prefixes: string[] = [];
beforeEach(async () => {
  sink = await startEventSink();
});
afterEach(async () => {
  await sink.close();
});
afterAll(async () => {
  for (const p of prefixes) await dropPrefix(t.redis, p);
});

function world() {
  const prefix = uniquePrefix('evsubjects');
  prefixes.push(prefix);
  const keys = createKeys(prefix);
  const allow = parseOutboundAllow(['127.0.0.1']);
  const deps: EventServiceDeps = {
    store: new RedisEventStore(t.redis, keys),
    box: createSecretBox(Buffer.alloc(32, 7)),
    crypto: nodeTokenCrypto,
    clock: { now: () => new Date() },
    allow,
    http: createOutboundHttp(allow),
    random: () => 0.5,
    retentionMs: 7 * 86_400_000,
    notifier: { endpointDisabled: () => undefined },
  };
  return { keys, service: new EventEndpointService(deps), dispatcher: new EventDispatcher(deps) };
}

async function until(w: ReturnType<typeof world>, n: number, deadlineMs = 15_000): Promise<void> {
  const end = Date.now() + deadlineMs;
  while (sink.received.length < n) {
    if (Date.now() > end) throw new Error(`the sink has ${sink.received.length} of ${n} requests`);
    const s = await w.dispatcher.step();
    if (s.ingested + s.fannedOut + s.attempted === 0) await new Promise((r) => setTimeout(r, 20));
  }
}

async function stage(
  keys: Keys,
  subjectId: string,
  events: IncidentEvent[],
  opts?: { list?: string; resource?: unknown },
) {
  const change = new Change(t.redis);
  appendSubjectEvents(change, keys, subjectId, events, opts);
  expect(await change.commit()).toBe(true);
}

const at = () => new Date().toISOString();

describe('events of components and maintenances', () => {
  it('go through the outbox with their own sequence and no incident unless their data names one', async () => {
    const w = world();
    await w.service.create({ url: sink.url, event_types: ['*'] });
    const cmp = ids.next('component');
    const mnt = ids.next('maintenance');
    const inc = ids.next('incident');
    const manual = newEvent(ids.next('event'), 'component.status_changed', at(), SYSTEM_ACTOR, {
      component_id: cmp,
      from: 'operational',
      to: 'degraded_performance',
      cause: { kind: 'manual', id: null },
    });
    await stage(w.keys, cmp, [manual], { list: w.keys.componentEvents(cmp) });
    await stage(w.keys, mnt, [
      newEvent(ids.next('event'), 'maintenance.created', at(), SYSTEM_ACTOR, { maintenance_id: mnt }),
      newEvent(ids.next('event'), 'maintenance.status_changed', at(), SYSTEM_ACTOR, {
        maintenance_id: mnt,
        from: 'scheduled',
        to: 'in_progress',
      }),
    ]);
    await stage(w.keys, cmp, [
      newEvent(ids.next('event'), 'component.status_changed', at(), SYSTEM_ACTOR, {
        component_id: cmp,
        from: 'degraded_performance',
        to: 'major_outage',
        cause: { kind: 'incident', id: inc },
      }),
    ]);
    // The component's own timeline holds what was listed there.
    expect((await t.redis.lrange(w.keys.componentEvents(cmp), 0, -1)).map((j) => JSON.parse(j) as unknown)).toEqual([
      manual,
    ]);
    await until(w, 4);
    const got = sink.received.map((r) => [r.json.type, r.json.sequence, r.json.incident_id]);
    expect(got).toEqual([
      ['component.status_changed', 1, null],
      ['maintenance.created', 1, null],
      ['maintenance.status_changed', 2, null],
      ['component.status_changed', 2, inc],
    ]);
  });
});
