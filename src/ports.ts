/**
 * What services need from the world. Services import only this file and the domain; app.ts wires
 * the Redis adapters (store/) and the delivery machinery (delivery/) in behind these interfaces.
 */
import type { ApiKey } from './domain/api-key.js';
import type { Clock } from './domain/clock.js';
import type { IdGenerator } from './domain/ids.js';
import type { Incident, IncidentStatus, Severity } from './domain/incident.js';
import type { IncidentEvent } from './domain/incident-event.js';
import type { Page, PageRequest } from './domain/pagination.js';

export type { Clock, IdGenerator };

// ── incidents ────────────────────────────────────────────────────────────────────────────────

export interface IncidentFilter {
  status?: IncidentStatus[];
  severity?: Severity[];
}

export interface IncidentRepo {
  get(id: string): Promise<Incident | null>;
  getMany(ids: string[]): Promise<(Incident | null)[]>;
  /**
   * Stores a new incident, its first events and its template links in one step. False when one of
   * its templates no longer exists (the caller re-checks and reports it).
   */
  create(incident: Incident, events: IncidentEvent[]): Promise<boolean>;
  /**
   * Replaces `prev` with `next` if the stored incident is still exactly `prev` (compare-and-set),
   * appending `events` and keeping the status indexes and template links in step. False on a
   * concurrent change or when a newly attached template no longer exists.
   */
  update(prev: Incident, next: Incident, events: IncidentEvent[]): Promise<boolean>;
  list(filter: IncidentFilter, page: PageRequest): Promise<Page<Incident>>;
  appendEvents(incidentId: string, events: IncidentEvent[]): Promise<void>;
  listEvents(incidentId: string, page: PageRequest): Promise<Page<IncidentEvent>>;
}

// ── API keys ─────────────────────────────────────────────────────────────────────────────────

export interface ApiKeyRepo {
  create(key: ApiKey, tokenSha256: string): Promise<void>;
  get(id: string): Promise<ApiKey | null>;
  findByTokenHash(tokenSha256: string): Promise<ApiKey | null>;
  list(page: PageRequest): Promise<Page<ApiKey>>;
  /** Compare-and-set like IncidentRepo.update. */
  update(prev: ApiKey, next: ApiKey): Promise<boolean>;
  /** Records use; cheap and last-writer-wins (it is a hint, not an audit trail). */
  touch(id: string, at: string): Promise<void>;
}

// ── crypto and secrets ───────────────────────────────────────────────────────────────────────

export interface TokenCrypto {
  randomBytes(n: number): Buffer;
  sha256Hex(input: string): string;
}

/** AES-256-GCM envelope for secrets at rest; the key never leaves the adapter. */
export interface SecretBox {
  seal(plaintext: string): string;
  open(sealed: string): string;
}

// ── HTTP conventions (implemented on Redis, used by the http edge) ───────────────────────────

/** A response kept for an Idempotency-Key replay. */
export interface StoredResponse {
  status: number;
  body: string;
  headers: Record<string, string>;
}

export type IdempotencyBegin =
  | { state: 'new' }
  | { state: 'in_flight' }
  | { state: 'mismatch' }
  | { state: 'done'; response: StoredResponse };

export interface IdempotencyStore {
  /** Claims (scope, key) for a request with this fingerprint, or reports what holds it. */
  begin(scope: string, key: string, fingerprint: string): Promise<IdempotencyBegin>;
  complete(scope: string, key: string, fingerprint: string, response: StoredResponse): Promise<void>;
  /** Frees a claim whose request failed in a way worth retrying (5xx). */
  release(scope: string, key: string): Promise<void>;
}

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the window resets. */
  resetSeconds: number;
}

export interface RateLimiter {
  consume(policy: 'default' | 'execute', subject: string): Promise<RateDecision>;
}
