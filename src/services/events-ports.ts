import type { OutboundHttp } from '../contracts/channel.js';
import type { StoredEvent } from '../domain/event/catalog.js';
import type { IncidentFacts } from '../domain/event/facts.js';
import type { EndpointRecord, EventDeliveryRecord } from '../domain/event/endpoint.js';
import type { Page, PageRequest } from '../domain/common/pagination.js';
import type { OutboundAllow } from '../domain/connection/address-policy.js';
import type { Clock, SecretBox, TokenCrypto } from '../ports/index.js';

/** What the event services need from the store (implemented by src/store/event-store.ts). */
export interface EventStore {
  getEndpoint(id: string): Promise<EndpointRecord | null>;
  listEndpoints(page: PageRequest): Promise<Page<EndpointRecord>>;
  allEndpoints(): Promise<EndpointRecord[]>;
  countEndpoints(): Promise<number>;
  createEndpoint(e: EndpointRecord, signingSecret: string): Promise<boolean>;
  updateEndpoint(prev: EndpointRecord, next: EndpointRecord, signingSecret?: string | null): Promise<boolean>;
  deleteEndpoint(prev: EndpointRecord): Promise<boolean>;
  markFailing(endpointId: string, nowMs: number): Promise<number>;
  markHealthy(endpointId: string): Promise<void>;
  claimDisableNotice(endpointId: string, rev: number): Promise<boolean>;
  ingest(max: number): Promise<number>;
  pendingFanout(max: number): Promise<StoredEvent[]>;
  getEvents(ids: string[]): Promise<StoredEvent[]>;
  eventsBetween(sinceMs: number, untilMs: number, max: number): Promise<StoredEvent[]>;
  incidentFacts(incidentIds: string[]): Promise<Map<string, IncidentFacts>>;
  audiences(executionIds: string[], deliveryIds: string[]): Promise<Map<string, string[]>>;
  fanout(deliveries: EventDeliveryRecord[], doneEventIds: string[], dueMs: number, ttlMs: number): Promise<void>;
  trim(beforeMs: number, max: number): Promise<number>;
  trimDeliveryLog(endpointId: string, beforeId: string): Promise<void>;
  claimDue(nowMs: number, leaseMs: number, max: number): Promise<string[]>;
  getDelivery(id: string): Promise<EventDeliveryRecord | null>;
  getDeliveries(ids: string[]): Promise<(EventDeliveryRecord | null)[]>;
  listDeliveries(endpointId: string, page: PageRequest): Promise<Page<EventDeliveryRecord>>;
  addDeliveries(deliveries: EventDeliveryRecord[], dueMs: number, ttlMs: number): Promise<void>;
  /** `healthyEndpoint`: the endpoint's failing streak ends in the same write (a success). */
  saveDelivery(
    prev: EventDeliveryRecord,
    next: EventDeliveryRecord,
    dueMs: number | null,
    healthyEndpoint?: string,
  ): Promise<boolean>;
  forgetDue(id: string): Promise<void>;
}

/**
 * Told when Herald disables an endpoint (410 Gone, or failing for 3 days), once per disable (the
 * dispatcher claims it). The composition root logs it and tells the Slack admins when Slack is on.
 */
export interface EndpointNotifier {
  endpointDisabled(endpoint: EndpointRecord, reason: 'gone' | 'failing'): Promise<void> | void;
}

export interface EventServiceDeps {
  store: EventStore;
  box: SecretBox;
  crypto: Pick<TokenCrypto, 'randomBytes' | 'sha256Hex'>;
  clock: Clock;
  /** HERALD_OUTBOUND_ALLOW: the write-time address policy (the guarded client applies it again at send). */
  allow: OutboundAllow;
  /** The guarded outbound client (src/delivery/outbound). */
  http: OutboundHttp;
  random: () => number;
  /** HERALD_EVENT_RETENTION in ms: how long events (and their deliveries) are kept for replay. */
  retentionMs: number;
  notifier: EndpointNotifier;
  /** Per-attempt budget (default 10 s). */
  timeoutMs?: number;
  onError?: (what: string, err: unknown) => void;
}
