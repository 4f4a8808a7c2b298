import { iso } from '../domain/common/clock.js';
import { signWebhook, webhookSecretOf } from '../domain/common/webhook-signature.js';
import { checkRevision, DomainError, emptyPatch, fieldError, keptChanging, notFound } from '../domain/common/errors.js';
import { expectCursorKind, type Page, type PageRequest } from '../domain/common/pagination.js';
import { parseInput } from '../domain/common/validation.js';
import { refuseLiteralHost } from '../domain/connection/address-policy.js';
import { payloadOf, pingPayload, type StoredEvent } from '../domain/event/catalog.js';
import {
  EndpointCreateSchema,
  EndpointPatchSchema,
  fanoutDeliveryId,
  FAILING_DISABLE_MS,
  isEndpointId,
  isEventDeliveryId,
  liveSecrets,
  matches,
  MAX_ENDPOINTS,
  newEndpointId,
  newEventDeliveryId,
  nextRetryDelay,
  ReplaySchema,
  RESPONSE_KEPT,
  RotateSecretSchema,
  subscribes,
  type EndpointRecord,
  type EndpointTestResult,
  type EventAttempt,
  type EventDeliveryRecord,
  type EventFacts,
} from '../domain/event/endpoint.js';
import {
  eventData,
  factsOf,
  lookupsNeeded,
  type EventLookups,
  type FactsWanted,
  type LookupsNeeded,
} from '../domain/event/facts.js';
import type { EventServiceDeps } from './events-ports.js';
import { LOST_RACE, retryOnConflict } from './retry.js';

/** Most events one replay queues again (the answer says when the range held more). */
export const REPLAY_MAX = 10_000;

/**
 * Event endpoints (docs/events.md): CRUD with a sealed `whsec_` secret shown once, rotation with
 * an overlap, the delivery log, retry, replay and the test ping.
 */
export class EventEndpointService {
  private readonly sender: EventSender;

  constructor(private readonly d: EventServiceDeps) {
    this.sender = new EventSender(d);
  }

  async create(input: unknown): Promise<{ endpoint: EndpointRecord; signingSecret: string }> {
    const body = parseInput(EndpointCreateSchema, input);
    this.checkUrl(body.url);
    if ((await this.d.store.countEndpoints()) >= MAX_ENDPOINTS)
      throw new DomainError('validation_failed', `A Herald keeps at most ${MAX_ENDPOINTS} event endpoints.`, [
        { field: 'url', code: 'too_many_endpoints', message: `At most ${MAX_ENDPOINTS} event endpoints.` },
      ]);
    const now = this.d.clock.now();
    const signingSecret = this.newSecret();
    const endpoint: EndpointRecord = {
      id: newEndpointId(now.getTime()),
      url: body.url,
      description: body.description,
      event_types: body.event_types,
      filter: body.filter,
      payload: body.payload,
      enabled: body.enabled,
      disabled_reason: null,
      secrets: [{ sealed: this.d.box.seal(signingSecret), created_at: iso(now), expires_at: null }],
      created_at: iso(now),
      updated_at: iso(now),
      rev: 1,
    };
    if (!(await this.d.store.createEndpoint(endpoint, signingSecret))) throw keptChanging('event endpoint');
    return { endpoint, signingSecret };
  }

  async get(id: string): Promise<EndpointRecord> {
    const e = isEndpointId(id) ? await this.d.store.getEndpoint(id) : null;
    if (!e) throw notFound('Event endpoint', id);
    return e;
  }

  list(page: PageRequest): Promise<Page<EndpointRecord>> {
    return this.d.store.listEndpoints(expectCursorKind(page, 'after'));
  }

  async update(id: string, input: unknown, ifMatch: number | null = null): Promise<EndpointRecord> {
    return retryOnConflict(
      async () => {
        const current = await this.get(id);
        checkRevision('event endpoint', current.rev, ifMatch);
        const patch = parseInput(EndpointPatchSchema, input);
        if (Object.keys(patch).length === 0) throw emptyPatch();
        if (patch.url !== undefined) this.checkUrl(patch.url);
        const next: EndpointRecord = {
          ...current,
          ...(patch.url !== undefined ? { url: patch.url } : {}),
          ...(patch.description !== undefined ? { description: patch.description } : {}),
          ...(patch.event_types !== undefined ? { event_types: patch.event_types } : {}),
          ...(patch.filter !== undefined ? { filter: patch.filter } : {}),
          ...(patch.payload !== undefined ? { payload: patch.payload } : {}),
          ...(patch.enabled !== undefined ? { enabled: patch.enabled } : {}),
          updated_at: iso(this.d.clock.now()),
          rev: current.rev + 1,
        };
        // Turned on again by a person: Herald's reason for turning it off no longer holds.
        if (patch.enabled === true) next.disabled_reason = null;
        return (await this.d.store.updateEndpoint(current, next)) ? next : LOST_RACE;
      },
      () => keptChanging('event endpoint'),
    );
  }

  async delete(id: string, ifMatch: number | null = null): Promise<void> {
    await retryOnConflict(
      async () => {
        const current = await this.get(id);
        checkRevision('event endpoint', current.rev, ifMatch);
        return (await this.d.store.deleteEndpoint(current)) ? true : LOST_RACE;
      },
      () => keptChanging('event endpoint'),
    );
  }

  /**
   * A new current secret; the previous one keeps signing (both signatures on every request) for
   * `overlap_seconds`, so receivers can switch without dropping a request.
   */
  async rotateSecret(id: string, input: unknown): Promise<{ endpoint: EndpointRecord; signingSecret: string }> {
    const { overlap_seconds } = parseInput(RotateSecretSchema, input ?? {});
    const signingSecret = this.newSecret();
    const endpoint = await retryOnConflict(
      async () => {
        const current = await this.get(id);
        const now = this.d.clock.now();
        const until = iso(new Date(now.getTime() + overlap_seconds * 1000));
        const kept = liveSecrets(current, now.getTime()).map((s) =>
          s.expires_at === null || s.expires_at > until ? { ...s, expires_at: until } : s,
        );
        const next: EndpointRecord = {
          ...current,
          secrets: [
            { sealed: this.d.box.seal(signingSecret), created_at: iso(now), expires_at: null },
            ...(overlap_seconds > 0 ? kept : []),
          ],
          updated_at: iso(now),
          rev: current.rev + 1,
        };
        return (await this.d.store.updateEndpoint(current, next, signingSecret)) ? next : LOST_RACE;
      },
      () => keptChanging('event endpoint'),
    );
    return { endpoint, signingSecret };
  }

  async deliveries(id: string, page: PageRequest): Promise<Page<EventDeliveryRecord>> {
    await this.get(id);
    return this.d.store.listDeliveries(id, expectCursorKind(page, 'after'));
  }

  /**
   * Sends a delivery again now: a pending one is moved up; a finished one gets a new delivery of
   * the same event (same webhook-id), so its own log stays as it was.
   */
  async retryDelivery(endpointId: string, deliveryId: string): Promise<EventDeliveryRecord> {
    await this.get(endpointId);
    const d = isEventDeliveryId(deliveryId) ? await this.d.store.getDelivery(deliveryId) : null;
    if (!d || d.endpoint_id !== endpointId) throw notFound('Event delivery', deliveryId);
    const now = this.d.clock.now();
    if (d.status === 'pending') {
      const next = { ...d, next_attempt_at: iso(now), rev: d.rev + 1 };
      if (!(await this.d.store.saveDelivery(d, next, now.getTime()))) throw keptChanging('event delivery');
      return next;
    }
    const again = newDelivery(newEventDeliveryId(now.getTime()), endpointId, d, now, true);
    await this.d.store.addDeliveries([again], now.getTime(), this.d.retentionMs);
    return again;
  }

  /** Queues again every kept event of [since, until] the endpoint subscribes to, with their own ids. */
  async replay(id: string, input: unknown): Promise<{ replayed: number; truncated: boolean }> {
    const endpoint = await this.get(id);
    const body = parseInput(ReplaySchema, input);
    const now = this.d.clock.now();
    const since = Date.parse(body.since);
    const until = body.until === undefined ? now.getTime() : Date.parse(body.until);
    if (until < since) throw fieldError('validation_failed', 'until', 'until must not be before since.');
    const found = await this.d.store.eventsBetween(since, until, REPLAY_MAX + 1);
    const types = body.event_types;
    const wanted = found
      .slice(0, REPLAY_MAX)
      .filter((e) => (types ? subscribes({ event_types: types }, e.type) : subscribes(endpoint, e.type)));
    const made = wanted.map((e) => newDelivery(newEventDeliveryId(now.getTime()), id, eventFacts(e), now, true));
    for (let i = 0; i < made.length; i += 500)
      await this.d.store.addDeliveries(made.slice(i, i + 500), now.getTime(), this.d.retentionMs);
    return { replayed: made.length, truncated: found.length > REPLAY_MAX };
  }

  /** Sends a signed `ping` now and answers what the receiver said (nothing is stored). */
  async test(id: string): Promise<EndpointTestResult> {
    const endpoint = await this.get(id);
    const now = this.d.clock.now();
    const eventId = `evt_ping_${newEventDeliveryId(now.getTime()).slice(4)}`;
    const body = JSON.stringify(pingPayload(eventId, iso(now), endpoint.id));
    const attempt = await this.sender.send(endpoint, eventId, body);
    return {
      ok: attempt.status !== null && attempt.status >= 200 && attempt.status < 300,
      status: attempt.status,
      latency_ms: attempt.latency_ms,
      response: attempt.response,
      error: attempt.error,
      event_id: eventId,
    };
  }

  private newSecret(): string {
    return webhookSecretOf(this.d.crypto.randomBytes(32));
  }

  /** The write-time address policy, as connections apply it (the guard checks again at send). */
  private checkUrl(raw: string): void {
    const url = new URL(raw);
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (url.protocol !== 'https:' && !this.d.allow.allows(host))
      throw new DomainError(
        'destination_not_allowed',
        'url must use https (only hosts in HERALD_OUTBOUND_ALLOW may use http).',
        [{ field: 'url', code: 'https_required', message: 'url must use https.' }],
      );
    const refusal = refuseLiteralHost(host, this.d.allow);
    if (refusal)
      throw new DomainError('destination_not_allowed', `url is not allowed: ${refusal.detail}.`, [
        { field: 'url', code: 'destination_not_allowed', message: `url is not allowed: ${refusal.detail}.` },
      ]);
  }
}

type DeliveryFacts = Pick<EventDeliveryRecord, 'event_id' | 'event_type' | 'incident_id'>;

const eventFacts = (e: StoredEvent): DeliveryFacts => ({
  event_id: e.id,
  event_type: e.type,
  incident_id: e.incident_id,
});

function newDelivery(
  id: string,
  endpointId: string,
  f: DeliveryFacts,
  now: Date,
  replay: boolean,
): EventDeliveryRecord {
  return {
    id,
    endpoint_id: endpointId,
    event_id: f.event_id,
    event_type: f.event_type,
    incident_id: f.incident_id,
    status: 'pending',
    attempts: [],
    next_attempt_at: iso(now),
    replay,
    created_at: iso(now),
    rev: 1,
  };
}

/** Signs and sends one request: the Standard Webhooks headers, one signature per live secret. */
export class EventSender {
  constructor(private readonly d: Pick<EventServiceDeps, 'box' | 'clock' | 'http' | 'timeoutMs'>) {}

  headers(endpoint: EndpointRecord, eventId: string, body: string, at: Date): Record<string, string> {
    const signatures = liveSecrets(endpoint, at.getTime()).map((s) =>
      signWebhook(this.d.box.open(s.sealed), eventId, Math.floor(at.getTime() / 1000), body),
    );
    return {
      'content-type': 'application/json',
      'webhook-id': eventId,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': signatures.join(' '),
    };
  }

  async send(
    endpoint: EndpointRecord,
    eventId: string,
    body: string,
  ): Promise<EventAttempt & { retryAfterMs: number | null; retryable: boolean }> {
    const at = this.d.clock.now();
    const started = performance.now();
    try {
      const res = await this.d.http.request({
        method: 'POST',
        url: endpoint.url,
        headers: this.headers(endpoint, eventId, body, at),
        body,
        timeoutMs: this.d.timeoutMs ?? 10_000,
      });
      const ok = res.status >= 200 && res.status < 300;
      return {
        at: iso(at),
        status: res.status,
        latency_ms: Math.round(res.latencyMs),
        response: res.body.slice(0, RESPONSE_KEPT),
        error: ok ? null : `the endpoint answered ${res.status}`,
        retryAfterMs: retryAfterMs(res.headers['retry-after'], at.getTime()),
        retryable: true,
      };
    } catch (err) {
      // The guarded client's errors name the host at most, never the URL (outbound/error.ts).
      const retryable = (err as { retryable?: unknown }).retryable !== false;
      return {
        at: iso(at),
        status: null,
        latency_ms: Math.round(performance.now() - started),
        response: '',
        error: err instanceof Error ? err.message : String(err),
        retryAfterMs: null,
        retryable,
      };
    }
  }
}

/** Retry-After as seconds or an HTTP date, in ms from `nowMs`; null when absent or unreadable. */
export function retryAfterMs(value: string | undefined, nowMs: number): number | null {
  if (value === undefined) return null;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, at - nowMs) : null;
}

/** Event requests one worker has in flight at once. */
const SEND_CONCURRENCY = 64;
/** Windows of SEND_CONCURRENCY one step sends at most before it takes in new events again (about a second's worth). */
const SEND_PER_STEP = 16;
/**
 * How long a claimed delivery is this worker's: two rounds of sends at their 10 s time-out, with
 * room to spare. A worker that dies leaves its claims to others after this.
 */
const CLAIM_LEASE_MS = 30_000;

/** A claimed delivery with what its send needs (null: gone meanwhile). */
interface Claimed {
  id: string;
  record: EventDeliveryRecord | null;
  endpoint: EndpointRecord | null;
  event: StoredEvent | null;
}

/** How one dispatcher step went (for the loop's pacing and the tests). */
export interface DispatchStep {
  ingested: number;
  fannedOut: number;
  attempted: number;
}

/**
 * The worker's side (src/delivery/event-dispatcher.ts runs it in a loop): moves committed events
 * into the log, makes one delivery per (event, matching endpoint), and sends what is due with
 * retries, disabling endpoints that answer 410 or keep failing for 3 days.
 */
export class EventDispatcher {
  private readonly sender: EventSender;
  private lastTrim = 0;

  constructor(
    private readonly d: EventServiceDeps,
    private readonly opts: { batch?: number; leaseMs?: number; concurrency?: number } = {},
  ) {
    this.sender = new EventSender(d);
  }

  async step(): Promise<DispatchStep> {
    const batch = this.opts.batch ?? 500;
    const ingested = await this.d.store.ingest(batch);
    const fannedOut = await this.fanout(batch);
    // A backlog is sent SEND_PER_STEP windows at a time: new events are taken in between.
    const attempted = await this.sendDue(SEND_PER_STEP * (this.opts.concurrency ?? SEND_CONCURRENCY));
    await this.trim();
    return { ingested, fannedOut, attempted };
  }

  /** Matches waiting events to endpoints and creates their deliveries (idempotent: see FANOUT_LUA). */
  async fanout(max: number): Promise<number> {
    const events = await this.d.store.pendingFanout(max);
    if (events.length === 0) return 0;
    const endpoints = await this.d.store.allEndpoints();
    const facts = await this.factsOf(events, endpoints);
    const now = this.d.clock.now();
    const deliveries: EventDeliveryRecord[] = [];
    for (const [i, e] of events.entries()) {
      for (const ep of endpoints) {
        if (!matches(ep, facts[i]!)) continue;
        const digest = Buffer.from(this.d.crypto.sha256Hex(`${e.id}|${ep.id}`), 'hex');
        deliveries.push(newDelivery(fanoutDeliveryId(e.at_ms, digest), ep.id, eventFacts(e), now, false));
      }
    }
    await this.d.store.fanout(
      deliveries,
      events.map((e) => e.id),
      now.getTime(),
      this.d.retentionMs,
    );
    return events.length;
  }

  /**
   * What each event tells the filters, working out (and reading) only what some endpoint's filter
   * asks for: most Heralds filter on nothing, and then an event is not even parsed.
   */
  private async factsOf(events: StoredEvent[], endpoints: EndpointRecord[]): Promise<EventFacts[]> {
    const wanted: FactsWanted = {
      severity: endpoints.some((ep) => ep.filter?.severities !== undefined),
      components: endpoints.some((ep) => ep.filter?.component_ids !== undefined),
      audiences: endpoints.some((ep) => ep.filter?.audience_keys !== undefined),
    };
    if (!wanted.severity && !wanted.components && !wanted.audiences)
      return events.map((e) => ({ type: e.type, severity: null, component_ids: [], audience_keys: [] }));
    const data = events.map(eventData);
    const needed = events.map((e, i) => lookupsNeeded(e, data[i]!, wanted));
    const pick = (f: keyof LookupsNeeded) => needed.flatMap((n) => (n[f] === null ? [] : [n[f]]));
    const lookups: EventLookups = {
      incidents: await this.d.store.incidentFacts(pick('incident')),
      audiences:
        wanted.audiences && needed.some((n) => n.execution !== null || n.delivery !== null)
          ? await this.d.store.audiences(pick('execution'), pick('delivery'))
          : new Map(),
    };
    return events.map((e, i) => factsOf(e, data[i]!, lookups));
  }

  /**
   * Sends due deliveries, at most `max` of them, `concurrency` at a time; how many were attempted.
   * They are claimed a window at a time, the next window as soon as the sends waiting to start
   * fall under half a window: a backlog keeps every lane busy instead of draining to the last
   * send of a claim before the next claim (and the step's other work) begins. A claim's lease
   * outlasts its sends: only what is about to be sent is claimed.
   */
  async sendDue(max: number): Promise<number> {
    const width = this.opts.concurrency ?? SEND_CONCURRENCY;
    const queue: Claimed[] = [];
    let claimed = 0;
    let more = true;
    let refill: Promise<void> | null = null;
    const claim = async (): Promise<void> => {
      const want = Math.min(width, max - claimed);
      const got = want > 0 ? await this.claimWindow(want) : [];
      claimed += got.length;
      more = got.length === want && claimed < max;
      queue.push(...got);
    };
    const next = async (): Promise<Claimed | undefined> => {
      for (;;) {
        if (queue.length <= width / 2 && more) refill ??= claim().finally(() => (refill = null));
        const item = queue.shift();
        if (item !== undefined || refill === null) return item;
        await refill;
      }
    };
    const lane = async (): Promise<void> => {
      for (let c = await next(); c !== undefined; c = await next()) {
        try {
          if (!c.record || c.record.status !== 'pending') await this.d.store.forgetDue(c.id);
          else await this.attempt(c.record, c.endpoint, c.event);
        } catch (err) {
          // Left due under its lease: the next claim after the lease tries it again.
          this.d.onError?.('event delivery attempt', err);
        }
      }
    };
    await claim();
    if (queue.length === 0) return 0;
    await Promise.all(Array.from({ length: width }, lane));
    return claimed;
  }

  /** Claims up to `limit` due deliveries with what their sends need, read once for all of them. */
  private async claimWindow(limit: number): Promise<Claimed[]> {
    const now = this.d.clock.now().getTime();
    const ids = await this.d.store.claimDue(now, this.opts.leaseMs ?? CLAIM_LEASE_MS, limit);
    if (ids.length === 0) return [];
    const records = await this.d.store.getDeliveries(ids);
    const endpoints = new Map((await this.d.store.allEndpoints()).map((e) => [e.id, e]));
    const eventIds = [...new Set(records.flatMap((r) => (r ? [r.event_id] : [])))];
    const events = new Map((await this.d.store.getEvents(eventIds)).map((e) => [e.id, e]));
    return ids.map((id, i) => {
      const record = records[i] ?? null;
      return {
        id,
        record,
        endpoint: record ? (endpoints.get(record.endpoint_id) ?? null) : null,
        event: record ? (events.get(record.event_id) ?? null) : null,
      };
    });
  }

  /** One attempt of a pending delivery, its endpoint and event as read for this claim. */
  async attempt(d: EventDeliveryRecord, endpoint: EndpointRecord | null, event: StoredEvent | null): Promise<void> {
    const stop = !endpoint
      ? 'the endpoint was deleted'
      : !endpoint.enabled
        ? 'the endpoint is disabled'
        : !event
          ? 'the event is no longer kept (HERALD_EVENT_RETENTION)'
          : null;
    if (stop !== null || !endpoint || !event) {
      await this.d.store.saveDelivery(d, { ...d, status: 'failed', next_attempt_at: null, rev: d.rev + 1 }, null);
      return;
    }
    const body = JSON.stringify(payloadOf(event, endpoint.payload));
    const result = await this.sender.send(endpoint, event.id, body);
    const { retryAfterMs: wait, retryable, ...attempt } = result;
    const attempts = [...d.attempts, attempt];
    const nowMs = this.d.clock.now().getTime();
    const ok = attempt.status !== null && attempt.status >= 200 && attempt.status < 300;
    if (ok) {
      await this.d.store.saveDelivery(
        d,
        { ...d, status: 'delivered', attempts, next_attempt_at: null, rev: d.rev + 1 },
        null,
        endpoint.id,
      );
      return;
    }
    if (attempt.status === 410) {
      await this.d.store.saveDelivery(
        d,
        { ...d, status: 'failed', attempts, next_attempt_at: null, rev: d.rev + 1 },
        null,
      );
      await this.disable(endpoint.id, 'gone');
      return;
    }
    const delay = retryable ? nextRetryDelay(attempts.length, wait, this.d.random) : null;
    const due = delay === null ? null : nowMs + delay;
    await this.d.store.saveDelivery(
      d,
      {
        ...d,
        status: due === null ? 'failed' : 'pending',
        attempts,
        next_attempt_at: due === null ? null : iso(new Date(due)),
        rev: d.rev + 1,
      },
      due,
    );
    const since = await this.d.store.markFailing(endpoint.id, nowMs);
    if (nowMs - since >= FAILING_DISABLE_MS) await this.disable(endpoint.id, 'failing');
  }

  private async disable(endpointId: string, reason: 'gone' | 'failing'): Promise<void> {
    let disabled: EndpointRecord | null = null;
    await retryOnConflict(
      async () => {
        const current = await this.d.store.getEndpoint(endpointId);
        if (!current?.enabled) return true;
        const next = {
          ...current,
          enabled: false,
          disabled_reason: reason,
          updated_at: iso(this.d.clock.now()),
          rev: current.rev + 1,
        };
        if (!(await this.d.store.updateEndpoint(current, next))) return LOST_RACE;
        disabled = next;
        return true;
      },
      () => keptChanging('event endpoint'),
    );
    // One notice per disable, whichever worker (or retry) gets here: the CAS above makes one
    // writer; the claim keeps a notice from being given twice all the same.
    const off = disabled as EndpointRecord | null; // set in the closure above
    if (off !== null && (await this.d.store.claimDisableNotice(off.id, off.rev)))
      await this.d.notifier.endpointDisabled(off, reason);
  }

  /** The retention job: a bounded step at most once a minute. */
  private async trim(): Promise<void> {
    const now = this.d.clock.now().getTime();
    if (now - this.lastTrim < 60_000) return;
    this.lastTrim = now;
    const cutoff = now - this.d.retentionMs;
    await this.d.store.trim(cutoff, 1000);
    // Delivery records expire by their TTL; their ids leave the endpoints' logs here. Ids sort by
    // time (ULIDs), so the smallest id of the cut-off time bounds them.
    const before = fanoutDeliveryId(cutoff, new Uint8Array(16));
    for (const e of await this.d.store.allEndpoints()) await this.d.store.trimDeliveryLog(e.id, before);
  }
}
