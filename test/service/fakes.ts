/**
 * In-memory fakes of the ports (src/ports/), for service tests that run in milliseconds: no
 * Redis, no HTTP, no network. Each keeps the contract its port documents (compare-and-set on the
 * exact stored value, newest-first id pages with an `after` cursor, offset pages for timelines,
 * case-insensitive unique template names) and records what was asked of it, so a test can check
 * that a refused request wrote nothing. `interfere` hooks let a test lose a compare-and-set race.
 */
import { createHash, randomBytes } from 'node:crypto';
import { withoutConnection, type Audience } from '../../src/domain/audience/audience.js';
import { OutboundAllow } from '../../src/domain/connection/address-policy.js';
import type { Actor } from '../../src/domain/common/actor.js';
import type { ApiKey } from '../../src/domain/common/api-key.js';
import type {
  ConnectionRecord,
  ConnectionTestResult,
  DeliveryConnection,
} from '../../src/domain/connection/connection.js';
import { DomainError } from '../../src/domain/common/errors.js';
import type { Delivery, Execution } from '../../src/domain/execution/execution.js';
import { ID_PREFIX, type IdKind } from '../../src/domain/common/ids.js';
import type { Incident } from '../../src/domain/incident/incident.js';
import type { IncidentEvent } from '../../src/domain/incident/incident-event.js';
import type { Page, PageRequest } from '../../src/domain/common/pagination.js';
import { templateNameKey, type Template } from '../../src/domain/template/template.js';
import type {
  Announcement,
  AnnouncementContent,
  AnnouncementReminderLog,
  AnnouncementRepo,
  ApiKeyRepo,
  AudienceRepo,
  AudienceWriteOutcome,
  ChatPoster,
  Clock,
  ConnectionFilter,
  ConnectionRepo,
  ConnectionTester,
  ConversationRepo,
  DeliveryQueue,
  DispatchBatch,
  ExecutionRepo,
  IdGenerator,
  IdempotencyBegin,
  IdempotencyClaim,
  IdempotencyStore,
  IdempotentRequest,
  IncidentFilter,
  IncidentRepo,
  Pacer,
  PostedMessage,
  QueuedJob,
  ReminderContent,
  ReminderSchedule,
  SecretBox,
  StoredResponse,
  TemplateRepo,
  TemplateWriteOutcome,
  ThreadRoot,
  ThreadState,
  Threads,
  TokenCrypto,
} from '../../src/ports/index.js';
import type { PaceStep, PacingRule } from '../../src/domain/execution/delivery-policy.js';
import type { SendPacer } from '../../src/services/deliveries.js';
import { LIMITS } from '../../src/domain/common/limits.js';
import { IDEMPOTENCY_LEASE_MS } from '../../src/store/idempotency.js';

// ── time and ids ─────────────────────────────────────────────────────────────────────────────

export class FakeClock implements Clock {
  constructor(private t = new Date('2026-11-22T10:00:00.000Z').getTime()) {}
  now(): Date {
    return new Date(this.t);
  }
  advance(ms: number): void {
    this.t += ms;
  }
}

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/** Well-formed prefixed ULID-shaped ids (they pass isId), increasing, so ids sort by creation. */
export class SeqIds implements IdGenerator {
  private n = 0;
  next(kind: IdKind): string {
    return idOf(kind, ++this.n);
  }
}

/** The id of kind `kind` numbered `n` (SeqIds' n-th id; handy for ids that never existed). */
export function idOf(kind: IdKind, n: number): string {
  let s = '';
  let v = n;
  for (let i = 0; i < 26; i++) {
    s = CROCKFORD[v % 32] + s;
    v = Math.floor(v / 32);
  }
  return `${ID_PREFIX[kind]}_${s}`;
}

// ── paging helpers ───────────────────────────────────────────────────────────────────────────

const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);
const copy = <T>(v: T): T => structuredClone(v);

/** Newest first (ids sort by creation), after the cursor's id. */
function pageById<T extends { id: string }>(items: T[], page: PageRequest): Page<T> {
  const sorted = [...items].sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
  const cursor = page.cursor;
  const start = cursor && 'after' in cursor ? sorted.filter((x) => x.id < cursor.after) : sorted;
  const data = start.slice(0, page.limit);
  const more = start.length > page.limit;
  const last = data.at(-1);
  return { data: data.map(copy), nextCursor: more && last ? { after: last.id } : null };
}

function pageByOffset<T>(items: T[], page: PageRequest): Page<T> {
  const from = page.cursor && 'offset' in page.cursor ? page.cursor.offset : 0;
  const data = items.slice(from, from + page.limit);
  const next = from + data.length;
  return { data: data.map(copy), nextCursor: next < items.length ? { offset: next } : null };
}

// ── incidents ────────────────────────────────────────────────────────────────────────────────

export class InMemoryIncidentRepo implements IncidentRepo {
  readonly incidents = new Map<string, Incident>();
  readonly events = new Map<string, IncidentEvent[]>();
  /** Template ids that exist (create/update refuse an incident that attaches another). */
  templateExists: (id: string) => boolean = () => true;
  /** Runs before a compare-and-set (once per call): a test changes the stored incident here to lose the race. */
  interfere: ((id: string) => void) | null = null;
  writes = 0;

  put(incident: Incident): Incident {
    this.incidents.set(incident.id, copy(incident));
    return incident;
  }
  get(id: string): Promise<Incident | null> {
    const i = this.incidents.get(id);
    return Promise.resolve(i ? copy(i) : null);
  }
  getMany(ids: string[]): Promise<(Incident | null)[]> {
    return Promise.all(ids.map((id) => this.get(id)));
  }
  create(incident: Incident, events: IncidentEvent[]): Promise<boolean> {
    if (!incident.template_ids.every((t) => this.templateExists(t))) return Promise.resolve(false);
    this.writes++;
    this.incidents.set(incident.id, copy(incident));
    this.events.set(incident.id, copy(events));
    return Promise.resolve(true);
  }
  update(prev: Incident, next: Incident, events: IncidentEvent[]): Promise<boolean> {
    this.interfere?.(prev.id);
    const stored = this.incidents.get(prev.id);
    if (!stored || !same(stored, prev)) return Promise.resolve(false);
    if (!next.template_ids.every((t) => this.templateExists(t))) return Promise.resolve(false);
    this.writes++;
    this.incidents.set(next.id, copy(next));
    this.events.set(next.id, [...(this.events.get(next.id) ?? []), ...copy(events)]);
    return Promise.resolve(true);
  }
  list(filter: IncidentFilter, page: PageRequest): Promise<Page<Incident>> {
    // As the Redis store: an empty list filters nothing.
    const all = [...this.incidents.values()].filter(
      (i) =>
        (!filter.status?.length || filter.status.includes(i.status)) &&
        (!filter.severity?.length || filter.severity.includes(i.severity)),
    );
    return Promise.resolve(pageById(all, page));
  }
  appendEvents(incidentId: string, events: IncidentEvent[]): Promise<void> {
    this.events.set(incidentId, [...(this.events.get(incidentId) ?? []), ...copy(events)]);
    return Promise.resolve();
  }
  listEvents(incidentId: string, page: PageRequest): Promise<Page<IncidentEvent>> {
    return Promise.resolve(pageByOffset(this.events.get(incidentId) ?? [], page));
  }
}

// ── templates ────────────────────────────────────────────────────────────────────────────────

export class InMemoryTemplateRepo implements TemplateRepo {
  readonly templates = new Map<string, Template>();
  readonly versions = new Map<string, Template[]>();
  /** Ids a non-closed incident attaches (delete answers in_use). */
  readonly inUse = new Set<string>();
  interfere: ((id: string) => void) | null = null;
  writes = 0;

  get(id: string): Promise<Template | null> {
    const t = this.templates.get(id);
    return Promise.resolve(t ? copy(t) : null);
  }
  private nameTakenBy(name: string, except: string | null): boolean {
    return [...this.templates.values()].some(
      (t) => t.id !== except && templateNameKey(t.name) === templateNameKey(name),
    );
  }
  create(templates: Template[]): Promise<TemplateWriteOutcome> {
    const taken = templates.flatMap((t, i) => (this.nameTakenBy(t.name, null) ? [i] : []));
    if (taken.length > 0) return Promise.resolve({ ok: false, reason: 'name_taken', indexes: taken });
    this.writes++;
    for (const t of templates) {
      this.templates.set(t.id, copy(t));
      this.versions.set(t.id, [copy(t)]);
    }
    return Promise.resolve({ ok: true });
  }
  update(prev: Template, next: Template): Promise<TemplateWriteOutcome> {
    this.interfere?.(prev.id);
    const stored = this.templates.get(prev.id);
    if (!stored || !same(stored, prev)) return Promise.resolve({ ok: false, reason: 'conflict' });
    if (this.nameTakenBy(next.name, next.id)) return Promise.resolve({ ok: false, reason: 'name_taken', indexes: [0] });
    this.writes++;
    this.templates.set(next.id, copy(next));
    this.versions.get(next.id)?.push(copy(next));
    return Promise.resolve({ ok: true });
  }
  delete(t: Template): Promise<TemplateWriteOutcome> {
    this.interfere?.(t.id);
    const stored = this.templates.get(t.id);
    if (!stored || !same(stored, t)) return Promise.resolve({ ok: false, reason: 'conflict' });
    if (this.inUse.has(t.id)) return Promise.resolve({ ok: false, reason: 'in_use' });
    this.writes++;
    this.templates.delete(t.id);
    this.versions.delete(t.id);
    return Promise.resolve({ ok: true });
  }
  list(page: PageRequest): Promise<Page<Template>> {
    return Promise.resolve(pageById([...this.templates.values()], page));
  }
  getVersion(id: string, version: number): Promise<Template | null> {
    const v = this.versions.get(id)?.find((t) => t.version === version);
    return Promise.resolve(v ? copy(v) : null);
  }
  listVersions(id: string, latest: number, page: PageRequest): Promise<Page<Template>> {
    // As the Redis store: the cursor is the last version served and the next page starts below
    // it, so a version written between two pages does not shift the second.
    const below = page.cursor && 'offset' in page.cursor ? page.cursor.offset : latest + 1;
    const all = (this.versions.get(id) ?? [])
      .filter((t) => t.version <= latest && t.version < below)
      .sort((a, b) => b.version - a.version);
    const data = all.slice(0, page.limit);
    const last = data.at(-1);
    return Promise.resolve({
      data: data.map(copy),
      nextCursor: last !== undefined && last.version > 1 ? { offset: last.version } : null,
    });
  }
}

// ── connections ──────────────────────────────────────────────────────────────────────────────

export class InMemoryConnectionRepo implements ConnectionRepo {
  readonly connections = new Map<string, ConnectionRecord>();
  readonly signingSecrets = new Map<string, string | null>();
  interfere: ((id: string) => void) | null = null;
  writes = 0;

  get(id: string): Promise<ConnectionRecord | null> {
    const c = this.connections.get(id);
    return Promise.resolve(c ? copy(c) : null);
  }
  getMany(ids: string[]): Promise<(ConnectionRecord | null)[]> {
    return Promise.all(ids.map((id) => this.get(id)));
  }
  create(connection: ConnectionRecord, signingSecret?: string | null): Promise<boolean> {
    if (this.connections.has(connection.id)) return Promise.resolve(false);
    this.writes++;
    this.connections.set(connection.id, copy(connection));
    this.signingSecrets.set(connection.id, signingSecret ?? null);
    return Promise.resolve(true);
  }
  update(prev: ConnectionRecord, next: ConnectionRecord): Promise<boolean> {
    this.interfere?.(prev.id);
    const stored = this.connections.get(prev.id);
    if (!stored || !same(stored, prev)) return Promise.resolve(false);
    this.writes++;
    this.connections.set(next.id, copy(next));
    return Promise.resolve(true);
  }
  /** The audiences a delete takes the connection out of (as the Redis store does, in the same step). */
  audiences: InMemoryAudienceRepo | null = null;

  delete(prev: ConnectionRecord, at: string = new Date().toISOString()): Promise<boolean> {
    this.interfere?.(prev.id);
    const stored = this.connections.get(prev.id);
    if (!stored || !same(stored, prev)) return Promise.resolve(false);
    this.writes++;
    this.connections.delete(prev.id);
    this.audiences?.dropConnection(prev.id, at);
    return Promise.resolve(true);
  }
  list(filter: ConnectionFilter, page: PageRequest): Promise<Page<ConnectionRecord>> {
    // As the Redis store: an empty list of types filters nothing.
    const all = [...this.connections.values()].filter(
      (c) =>
        (!filter.type?.length || filter.type.includes(c.type)) &&
        (filter.enabled === undefined || c.enabled === filter.enabled),
    );
    return Promise.resolve(pageById(all, page));
  }
}

/** A tester that answers `result` and records what it was asked (the network half of POST /test). */
export class FakeTester implements ConnectionTester {
  readonly calls: { id: string; sendMessage: boolean; config: Record<string, unknown> }[] = [];
  constructor(private readonly result: (c: DeliveryConnection) => ConnectionTestResult) {}
  test(connection: DeliveryConnection, opts: { sendMessage: boolean }): Promise<ConnectionTestResult> {
    this.calls.push({ id: connection.id, sendMessage: opts.sendMessage, config: connection.config });
    return Promise.resolve(this.result(connection));
  }
}

// ── crypto ───────────────────────────────────────────────────────────────────────────────────

/** Reversible and visibly sealed (never the plaintext); `open` refuses what it did not seal. */
export class FakeSecretBox implements SecretBox {
  sealed = 0;
  seal(plaintext: string): string {
    this.sealed++;
    return `sealed:${Buffer.from(plaintext).toString('base64')}`;
  }
  open(sealed: string): string {
    if (!sealed.startsWith('sealed:')) throw new Error('no key opens this');
    return Buffer.from(sealed.slice('sealed:'.length), 'base64').toString();
  }
  reseal(): string | null {
    return null;
  }
}

/** Deterministic random bytes (each call differs), real SHA-256. */
export class FakeTokenCrypto implements TokenCrypto {
  private n = 0;
  randomBytes(size: number): Buffer {
    this.n++;
    return Buffer.from(Array.from({ length: size }, (_, i) => (this.n * 31 + i * 7) % 256));
  }
  sha256Hex(input: string): string {
    return createHash('sha256').update(input).digest('hex');
  }
}

export const allowNone = OutboundAllow.none;

// ── API keys ─────────────────────────────────────────────────────────────────────────────────

export class InMemoryApiKeyRepo implements ApiKeyRepo {
  readonly keys = new Map<string, ApiKey>();
  readonly byHash = new Map<string, string>();
  readonly touched: { id: string; at: string }[] = [];
  interfere: ((id: string) => void) | null = null;

  create(key: ApiKey, tokenSha256: string): Promise<void> {
    // As the Redis store: a token hash names one key, the first.
    if (this.byHash.has(tokenSha256)) return Promise.reject(new Error('token hash collision'));
    this.keys.set(key.id, copy(key));
    this.byHash.set(tokenSha256, key.id);
    return Promise.resolve();
  }
  get(id: string): Promise<ApiKey | null> {
    const k = this.keys.get(id);
    return Promise.resolve(k ? copy(k) : null);
  }
  findByTokenHash(tokenSha256: string): Promise<ApiKey | null> {
    const id = this.byHash.get(tokenSha256);
    return id === undefined ? Promise.resolve(null) : this.get(id);
  }
  list(page: PageRequest): Promise<Page<ApiKey>> {
    return Promise.resolve(pageById([...this.keys.values()], page));
  }
  update(prev: ApiKey, next: ApiKey): Promise<boolean> {
    this.interfere?.(prev.id);
    const stored = this.keys.get(prev.id);
    // As the Redis store: use (touch) is kept apart from the record, so it neither makes the
    // compare fail nor is overwritten by the update.
    const unused = (k: ApiKey) => ({ ...k, last_used_at: null });
    if (!stored || !same(unused(stored), unused(prev))) return Promise.resolve(false);
    this.keys.set(next.id, { ...copy(next), last_used_at: stored.last_used_at });
    return Promise.resolve(true);
  }
  touch(id: string, at: string): Promise<void> {
    this.touched.push({ id, at });
    const k = this.keys.get(id);
    if (k) k.last_used_at = at;
    return Promise.resolve();
  }
}

// ── executions and delivery ──────────────────────────────────────────────────────────────────

export class InMemoryExecutionRepo implements ExecutionRepo {
  readonly executions = new Map<string, Execution>();
  readonly deliveries = new Map<string, Delivery>();
  /** Delivery ids committed but not yet confirmed on the queue. */
  readonly outbox = new Set<string>();
  creates = 0;

  constructor(
    private readonly incidents: InMemoryIncidentRepo,
    private readonly conversations?: InMemoryConversationRepo,
  ) {}

  async create(
    execution: Execution,
    deliveries: Delivery[],
    incidentPrev: Incident,
    incidentNext: Incident,
    events: IncidentEvent[],
    threads?: Threads,
  ): Promise<boolean> {
    // As the Redis store: the incident's conversations must still be as read, or nothing is written.
    if (threads && this.conversations && !this.conversations.stillAsRead(incidentPrev.id, threads)) return false;
    if (!(await this.incidents.update(incidentPrev, incidentNext, events))) return false;
    this.conversations?.advance(deliveries);
    this.creates++;
    this.executions.set(execution.id, copy(execution));
    for (const d of deliveries) {
      this.deliveries.set(d.id, copy(d));
      this.outbox.add(d.id);
    }
    return true;
  }
  get(id: string): Promise<Execution | null> {
    const e = this.executions.get(id);
    return Promise.resolve(e ? copy(e) : null);
  }
  listForIncident(incidentId: string, page: PageRequest): Promise<Page<Execution>> {
    return Promise.resolve(
      pageById(
        [...this.executions.values()].filter((e) => e.incident_id === incidentId),
        page,
      ),
    );
  }
  getDeliveries(ids: string[]): Promise<(Delivery | null)[]> {
    return Promise.all(ids.map((id) => this.getDelivery(id)));
  }
  getDelivery(id: string): Promise<Delivery | null> {
    const d = this.deliveries.get(id);
    return Promise.resolve(d ? copy(d) : null);
  }
  updateDelivery(
    prev: Delivery,
    next: Delivery,
    opts?: { outbox?: boolean; events?: IncidentEvent[] },
  ): Promise<boolean> {
    const stored = this.deliveries.get(prev.id);
    if (!stored || !same(stored, prev)) return Promise.resolve(false);
    this.deliveries.set(next.id, copy(next));
    if (opts?.outbox) this.outbox.add(next.id);
    // The timeline events go with the write (the Redis repo appends them in the same step).
    if (opts?.events?.length) void this.incidents.appendEvents(next.incident_id, opts.events);
    return Promise.resolve(true);
  }
  activeForConnection(connectionId: string): Promise<string[]> {
    return Promise.resolve(
      [...this.deliveries.values()]
        .filter((d) => d.connection_id === connectionId && !['delivered', 'failed', 'cancelled'].includes(d.status))
        .map((d) => d.id),
    );
  }
  takeOutbox(): Promise<string[]> {
    return Promise.resolve([...this.outbox]);
  }
  /** Delivery ids an execute put on the queue as dispatch jobs (still in the outbox, for their job to claim). */
  readonly dispatched = new Set<string>();
  markDispatched(ids: string[]): Promise<void> {
    for (const id of ids) if (this.outbox.has(id)) this.dispatched.add(id);
    return Promise.resolve();
  }
  claimOutbox(ids: string[]): Promise<string[]> {
    const taken = ids.filter((id) => this.outbox.delete(id));
    return Promise.resolve(taken);
  }
  markEnqueued(ids: string[]): Promise<void> {
    for (const id of ids) this.outbox.delete(id);
    return Promise.resolve();
  }
}

export class FakeQueue implements DeliveryQueue {
  readonly jobs: QueuedJob[] = [];
  /** Dispatch jobs (an execute's deliveries, DISPATCH_CHUNK each), as BullDeliveryQueue.dispatch adds them. */
  readonly batches: DispatchBatch[] = [];
  failWith: Error | null = null;
  /** As BullMQ: a job id already on the queue is not added again (the first one stays). */
  enqueue(jobs: QueuedJob[]): Promise<void> {
    if (this.failWith) return Promise.reject(this.failWith);
    for (const j of jobs) if (!this.holds(j.jobId)) this.jobs.push(j);
    return Promise.resolve();
  }
  dispatch(batches: DispatchBatch[]): Promise<void> {
    if (this.failWith) return Promise.reject(this.failWith);
    for (const b of batches) if (!this.holds(b.jobId)) this.batches.push(b);
    return Promise.resolve();
  }
  /** Takes the jobs back (nothing runs them here, so every one is still waiting). */
  remove(jobIds: string[]): Promise<void> {
    const gone = new Set(jobIds);
    this.jobs.splice(0, this.jobs.length, ...this.jobs.filter((j) => !gone.has(j.jobId)));
    this.batches.splice(0, this.batches.length, ...this.batches.filter((b) => !gone.has(b.jobId)));
    return Promise.resolve();
  }
  private holds(jobId: string): boolean {
    return this.jobs.some((j) => j.jobId === jobId) || this.batches.some((b) => b.jobId === jobId);
  }
}

export const noPacing: Pacer = {
  reserve: () => Promise.resolve(0),
  take: () => Promise.resolve(0),
  reset: () => Promise.resolve(),
};

/**
 * The Redis pacer (src/store/pacing.ts) in memory, on the fake clock: the same GCRA per bucket
 * (a schedule that `reserve` always advances, a send bucket that `take` advances only when a token
 * is free now), `paceSend` as reserve-then-take in one step, and `paceAndStart` checking the
 * stored record first (a lost race takes nothing) and writing the `sending` one only on `send`.
 */
export class FakeSendPacer implements SendPacer {
  /** Bucket key → its theoretical arrival time (ms), as the Lua keeps it. */
  readonly tats = new Map<string, number>();
  readonly calls: { step: 'reserve' | 'take'; connectionId: string }[] = [];

  constructor(
    private readonly clock: Clock,
    private readonly repo: InMemoryExecutionRepo,
  ) {}

  private pace(key: string, rule: PacingRule, reserve: boolean): number {
    const now = this.clock.now().getTime();
    const interval = 1000 / rule.perSecond;
    const tolerance = (Math.max(1, Math.floor(rule.burst)) - 1) * interval;
    const tat = Math.max(this.tats.get(key) ?? now, now);
    const wait = Math.max(0, tat - tolerance - now);
    if (wait > 0 && !reserve) return Math.ceil(wait);
    this.tats.set(key, tat + interval);
    return Math.ceil(wait);
  }
  reserve(connectionId: string, rule: PacingRule): Promise<number> {
    this.calls.push({ step: 'reserve', connectionId });
    return Promise.resolve(this.pace(`schedule:${connectionId}`, rule, true));
  }
  take(connectionId: string, rule: PacingRule): Promise<number> {
    this.calls.push({ step: 'take', connectionId });
    return Promise.resolve(this.pace(`send:${connectionId}`, rule, false));
  }
  reset(connectionId: string): Promise<void> {
    this.tats.delete(`schedule:${connectionId}`);
    this.tats.delete(`send:${connectionId}`);
    return Promise.resolve();
  }
  async paceSend(connectionId: string, rule: PacingRule, reserveFirst: boolean): Promise<PaceStep> {
    if (reserveFirst) {
      const wait = await this.reserve(connectionId, rule);
      if (wait > 0) return { step: 'reserved', waitMs: wait };
    }
    const wait = await this.take(connectionId, rule);
    return wait > 0 ? { step: 'take', waitMs: wait } : { step: 'send' };
  }
  async paceAndStart(
    prev: Delivery,
    sending: Delivery,
    rule: PacingRule,
    reserveFirst: boolean,
  ): Promise<PaceStep | null> {
    const stored = this.repo.deliveries.get(prev.id);
    if (!stored || !same(stored, prev)) return null;
    const step = await this.paceSend(sending.connection_id, rule, reserveFirst);
    if (step.step === 'send') this.repo.deliveries.set(sending.id, copy(sending));
    return step;
  }
}

/**
 * A SendPacer over a scripted Pacer (its `reserve` and `take` answer what a test says), for tests
 * that count or script those two calls: `paceSend` is reserve-then-take, and `paceAndStart` paces,
 * then writes the `sending` record by compare-and-set (null when that write loses). Unlike the
 * Redis adapter's single step, a lost race has asked the pacer already; FakeSendPacer is exact.
 */
export function sendPacerOver(pacer: Pacer, repo: Pick<ExecutionRepo, 'updateDelivery'>): SendPacer {
  const paceSend = async (connectionId: string, rule: PacingRule, reserveFirst: boolean): Promise<PaceStep> => {
    if (reserveFirst) {
      const wait = await pacer.reserve(connectionId, rule);
      if (wait > 0) return { step: 'reserved', waitMs: wait };
    }
    const wait = await pacer.take(connectionId, rule);
    return wait > 0 ? { step: 'take', waitMs: wait } : { step: 'send' };
  };
  return {
    reserve: (id, rule) => pacer.reserve(id, rule),
    take: (id, rule) => pacer.take(id, rule),
    reset: (id) => pacer.reset(id),
    paceSend,
    async paceAndStart(prev, sending, rule, reserveFirst) {
      const step = await paceSend(sending.connection_id, rule, reserveFirst);
      if (step.step !== 'send') return step;
      return (await repo.updateDelivery(prev, sending)) ? step : null;
    },
  };
}

// ── announcements ────────────────────────────────────────────────────────────────────────────

export class InMemoryAnnouncementRepo implements AnnouncementRepo, AnnouncementReminderLog {
  readonly announcements = new Map<string, Announcement>();
  /** incident id → the highest reminder number recorded as posted. */
  readonly lastReminders = new Map<string, number>();
  /**
   * incident id → claim holder, whether a change was marked while held, and when the claim lapses
   * (wall-clock ms, as Redis's PX: a holder that died stops blocking the others).
   */
  readonly claims = new Map<string, { token: string; dirty: boolean; until: number }>();

  get(incidentId: string): Promise<Announcement | null> {
    const a = this.announcements.get(incidentId);
    return Promise.resolve(a ? copy(a) : null);
  }
  create(incidentId: string, announcement: Announcement): Promise<boolean> {
    if (this.announcements.has(incidentId)) return Promise.resolve(false);
    this.announcements.set(incidentId, copy(announcement));
    return Promise.resolve(true);
  }
  trackExecution(incidentId: string, executionId: string): Promise<Announcement | null> {
    const a = this.announcements.get(incidentId);
    if (!a) return Promise.resolve(null);
    if (a.execution_id === null || a.execution_id < executionId) a.execution_id = executionId;
    return Promise.resolve(copy(a));
  }
  reminders(incidentId: string): Promise<{ announcement: Announcement; lastReminder: number } | null> {
    const a = this.announcements.get(incidentId);
    return Promise.resolve(a ? { announcement: copy(a), lastReminder: this.lastReminders.get(incidentId) ?? 0 } : null);
  }
  recordReminder(incidentId: string, reminder: number): Promise<void> {
    if (this.announcements.has(incidentId) && (this.lastReminders.get(incidentId) ?? 0) < reminder)
      this.lastReminders.set(incidentId, reminder);
    return Promise.resolve();
  }
  private heldClaim(incidentId: string): { token: string; dirty: boolean; until: number } | undefined {
    const held = this.claims.get(incidentId);
    if (held && held.until <= Date.now()) {
      this.claims.delete(incidentId);
      return undefined;
    }
    return held;
  }
  claimRefresh(incidentId: string, token: string, ttlMs: number): Promise<boolean> {
    const held = this.heldClaim(incidentId);
    // As SET NX: a held claim refuses everyone, its holder too.
    if (held) {
      held.dirty = true;
      return Promise.resolve(false);
    }
    this.claims.set(incidentId, { token, dirty: false, until: Date.now() + ttlMs });
    return Promise.resolve(true);
  }
  finishRefresh(incidentId: string, token: string, ttlMs: number): Promise<boolean> {
    const held = this.heldClaim(incidentId);
    if (!held || held.token !== token) return Promise.resolve(false);
    if (held.dirty) {
      held.dirty = false;
      held.until = Date.now() + ttlMs;
      return Promise.resolve(true);
    }
    this.claims.delete(incidentId);
    return Promise.resolve(false);
  }
}

/** A chat platform that records posts and updates; channels in `refuse` answer an error. */
export class FakeChat implements ChatPoster {
  readonly posts: { channel: string; content: AnnouncementContent }[] = [];
  readonly updates: { message: PostedMessage; content: AnnouncementContent }[] = [];
  readonly refuse = new Set<string>();
  private n = 0;
  post(channel: string, content: AnnouncementContent): Promise<PostedMessage | null> {
    this.posts.push({ channel, content: copy(content) });
    if (this.refuse.has(channel)) return Promise.reject(new Error('channel_not_found'));
    return Promise.resolve({ channel, ts: `1.00000${++this.n}` });
  }
  update(message: PostedMessage, content: AnnouncementContent): Promise<void> {
    this.updates.push({ message, content: copy(content) });
    return Promise.resolve();
  }
  readonly reminders: { thread: PostedMessage; content: ReminderContent }[] = [];
  postReminder(thread: PostedMessage, content: ReminderContent): Promise<void> {
    this.reminders.push({ thread, content: copy(content) });
    if (this.refuse.has(thread.channel)) return Promise.reject(new Error('channel_not_found'));
    return Promise.resolve();
  }
}

// ── misc ─────────────────────────────────────────────────────────────────────────────────────

export const apiActor: Actor = { type: 'api_key', id: 'key_1', name: 'ci' };
export const slackActor: Actor = { type: 'slack_user', id: 'UALICE', name: 'alice' };

/**
 * Awaits `p` (or calls it: some methods refuse synchronously), expecting a DomainError, and
 * returns it (anything else fails the test).
 */
export async function refusal(p: Promise<unknown> | (() => unknown)): Promise<DomainError> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    if (e instanceof DomainError) return e;
    throw e;
  }
  throw new Error('expected a DomainError, but it resolved');
}

/** The same for a synchronous call. */
export function refusalOf(f: () => unknown): DomainError {
  try {
    f();
  } catch (e) {
    if (e instanceof DomainError) return e;
    throw e;
  }
  throw new Error('expected a DomainError, but it returned');
}

/** Field paths and codes of a refusal, for compact assertions. */
export const fieldsOf = (e: DomainError): string[] => e.errors.map((x) => `${x.field}:${x.code}`);

export const silentLog = { warn: () => undefined };

/** The incidents' conversations in memory (ConversationRepo), with the Redis store's rules. */
export class InMemoryConversationRepo implements ConversationRepo {
  readonly threadStates = new Map<string, string>();
  /** Per incident, the revision of its conversations (absent before the first commit moved one). */
  readonly revisions = new Map<string, number>();
  readonly roots = new Map<string, ThreadRoot>();

  threads(incidentId: string, connectionIds: string[]): Promise<Threads> {
    const out = new Map<string, ThreadState>();
    for (const c of connectionIds) {
      const raw = this.threadStates.get(`${incidentId}/${c}`) ?? null;
      const [seq, last] = raw === null ? ['0', ''] : raw.split('|');
      out.set(c, { sequence: Number(seq), lastDeliveryId: last || null, raw });
    }
    const revision = connectionIds.length === 0 ? null : this.revisionOf(incidentId);
    return Promise.resolve(Object.assign(out, { revision }));
  }
  private revisionOf(incidentId: string): string | null {
    const n = this.revisions.get(incidentId);
    return n === undefined ? null : String(n);
  }
  /** Whether the incident's conversations are still at the revision `read` (the execute commit's check). */
  stillAsRead(incidentId: string, read: Threads): boolean {
    return read.size === 0 || this.revisionOf(incidentId) === read.revision;
  }
  /** What the execute commit writes (the in-memory execution repo calls it). */
  advance(deliveries: Delivery[]): void {
    for (const d of deliveries) {
      this.threadStates.set(`${d.incident_id}/${d.connection_id}`, `${d.sequence ?? 1}|${d.id}`);
      this.revisions.set(d.incident_id, (this.revisions.get(d.incident_id) ?? 0) + 1);
    }
  }
  root(incidentId: string, connectionId: string): Promise<ThreadRoot | null> {
    return Promise.resolve(this.roots.get(`${incidentId}/${connectionId}`) ?? null);
  }
  startIfNone(incidentId: string, connectionId: string, root: ThreadRoot): Promise<void> {
    const k = `${incidentId}/${connectionId}`;
    if (!this.roots.has(k)) this.roots.set(k, root);
    return Promise.resolve();
  }
  forget(incidentId: string, connectionId: string, deliveryId: string): Promise<void> {
    const k = `${incidentId}/${connectionId}`;
    if (this.roots.get(k)?.deliveryId === deliveryId) this.roots.delete(k);
    return Promise.resolve();
  }
}

// ── idempotency and reminders ────────────────────────────────────────────────────────────────

/**
 * The Redis idempotency store (src/store/idempotency.ts) in memory, on a clock: a claim is a
 * lease of IDEMPOTENCY_LEASE_MS that only its holder (same fingerprint and token) renews,
 * completes or releases; a stored answer lives LIMITS.idempotencyTtlSeconds; the fingerprint is
 * compared before anything else, so a different body with the same key is refused while in
 * flight and once done. `within` only runs `work`: no in-memory repo writes the answer with its
 * effect (the Redis commit does), so `complete` is how a fake request stores it.
 */
export class InMemoryIdempotencyStore implements IdempotencyStore {
  /** `scope/key` → the claim or the answer, and when it lapses (ms on the clock). */
  readonly entries = new Map<
    string,
    { fingerprint: string; token: string | null; response: StoredResponse | null; expiresAt: number }
  >();

  constructor(private readonly clock: Clock) {}

  private live(scope: string, key: string) {
    const k = `${scope}/${key}`;
    const e = this.entries.get(k);
    if (e && e.expiresAt <= this.clock.now().getTime()) this.entries.delete(k);
    return this.entries.get(k) ?? null;
  }
  private held(claim: IdempotencyClaim) {
    const e = this.live(claim.scope, claim.key);
    return e && e.response === null && e.fingerprint === claim.fingerprint && e.token === claim.token ? e : null;
  }

  begin(scope: string, key: string, fingerprint: string): Promise<IdempotencyBegin> {
    const e = this.live(scope, key);
    if (!e) {
      const claim: IdempotencyClaim = { scope, key, fingerprint, token: randomBytes(12).toString('hex') };
      const expiresAt = this.clock.now().getTime() + IDEMPOTENCY_LEASE_MS;
      this.entries.set(`${scope}/${key}`, { fingerprint, token: claim.token, response: null, expiresAt });
      return Promise.resolve({ state: 'new', claim });
    }
    if (e.fingerprint !== fingerprint) return Promise.resolve({ state: 'mismatch' });
    if (e.response === null) return Promise.resolve({ state: 'in_flight' });
    return Promise.resolve({ state: 'done', response: copy(e.response) });
  }
  renew(claim: IdempotencyClaim): Promise<boolean> {
    const e = this.held(claim);
    if (e) e.expiresAt = this.clock.now().getTime() + IDEMPOTENCY_LEASE_MS;
    return Promise.resolve(e !== null);
  }
  complete(claim: IdempotencyClaim, response: StoredResponse): Promise<void> {
    const e = this.held(claim);
    if (e) {
      e.response = copy(response);
      e.token = null;
      e.expiresAt = this.clock.now().getTime() + LIMITS.idempotencyTtlSeconds * 1000;
    }
    return Promise.resolve();
  }
  release(claim: IdempotencyClaim): Promise<void> {
    if (this.held(claim)) this.entries.delete(`${claim.scope}/${claim.key}`);
    return Promise.resolve();
  }
  within<T>(_request: IdempotentRequest, work: () => T): T {
    return work();
  }
}

/**
 * The Redis reminder schedule (src/store/reminders.ts) in memory: incident id → due time (ms),
 * claimed in due order (ties by id, as a sorted set orders them) by pushing each a lease ahead.
 * `schedule` is what the incident commit mirrors from `next_reminder_at` (null drops it).
 */
export class InMemoryReminderSchedule implements ReminderSchedule {
  readonly due = new Map<string, number>();

  schedule(incidentId: string, atMs: number | null): void {
    if (atMs === null) this.due.delete(incidentId);
    else this.due.set(incidentId, atMs);
  }
  claimDue(nowMs: number, leaseMs: number, limit: number): Promise<{ incidentId: string; lease: number }[]> {
    const lease = nowMs + leaseMs;
    const claimed = [...this.due]
      .filter(([, at]) => at <= nowMs)
      .sort(([a, x], [b, y]) => x - y || (a < b ? -1 : a > b ? 1 : 0))
      .slice(0, limit)
      .map(([incidentId]) => ({ incidentId, lease }));
    for (const c of claimed) this.due.set(c.incidentId, lease);
    return Promise.resolve(claimed);
  }
  release(incidentId: string, lease: number, atMs: number | null): Promise<void> {
    if (this.due.get(incidentId) === lease) this.schedule(incidentId, atMs);
    return Promise.resolve();
  }
}

// ── audiences ────────────────────────────────────────────────────────────────────────────────

export class InMemoryAudienceRepo implements AudienceRepo {
  readonly audiences = new Map<string, Audience>();
  /** Per audience, executions with a pending approval for it (the approval engine's index). */
  readonly pending = new Map<string, Set<string>>();
  /** Whether a connection / template exists (writes refuse to add one that does not). */
  connectionExists: (id: string) => boolean = () => true;
  templateExists: (id: string) => boolean = () => true;
  interfere: ((id: string) => void) | null = null;
  writes = 0;

  get(id: string): Promise<Audience | null> {
    const a = this.audiences.get(id);
    return Promise.resolve(a ? copy(a) : null);
  }
  getByKeys(keys: string[]): Promise<(Audience | null)[]> {
    const byKey = new Map([...this.audiences.values()].map((a) => [a.key, a]));
    return Promise.resolve(keys.map((k) => (byKey.has(k) ? copy(byKey.get(k)!) : null)));
  }
  all(): Promise<Audience[]> {
    return Promise.resolve(
      [...this.audiences.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)).map(copy),
    );
  }
  list(page: PageRequest): Promise<Page<Audience>> {
    return Promise.resolve(pageById([...this.audiences.values()], page));
  }
  private refsExist(next: Audience, prev: Audience | null): boolean {
    return (
      next.connection_ids.every((c) => prev?.connection_ids.includes(c) || this.connectionExists(c)) &&
      next.template_ids.every((t) => prev?.template_ids.includes(t) || this.templateExists(t))
    );
  }
  create(a: Audience): Promise<AudienceWriteOutcome> {
    if (this.audiences.size >= LIMITS.audiences) return Promise.resolve({ ok: false, reason: 'too_many' });
    if ([...this.audiences.values()].some((x) => x.key === a.key))
      return Promise.resolve({ ok: false, reason: 'key_taken' });
    if (this.audiences.has(a.id) || !this.refsExist(a, null)) return Promise.resolve({ ok: false, reason: 'conflict' });
    this.writes++;
    this.audiences.set(a.id, copy(a));
    return Promise.resolve({ ok: true });
  }
  update(prev: Audience, next: Audience): Promise<AudienceWriteOutcome> {
    this.interfere?.(prev.id);
    const stored = this.audiences.get(prev.id);
    if (!stored || !same(stored, prev) || !this.refsExist(next, prev))
      return Promise.resolve({ ok: false, reason: 'conflict' });
    this.writes++;
    this.audiences.set(next.id, copy(next));
    return Promise.resolve({ ok: true });
  }
  delete(prev: Audience): Promise<AudienceWriteOutcome> {
    this.interfere?.(prev.id);
    const stored = this.audiences.get(prev.id);
    if (!stored || !same(stored, prev)) return Promise.resolve({ ok: false, reason: 'conflict' });
    const pending = [...(this.pending.get(prev.id) ?? [])].sort();
    if (pending.length > 0) return Promise.resolve({ ok: false, reason: 'in_use', executionIds: pending });
    this.writes++;
    this.audiences.delete(prev.id);
    return Promise.resolve({ ok: true });
  }
  /** A connection was deleted: it leaves every audience (InMemoryConnectionRepo.delete calls this). */
  dropConnection(connectionId: string, at: string): void {
    for (const [id, a] of this.audiences) this.audiences.set(id, withoutConnection(a, connectionId, at));
  }
}
