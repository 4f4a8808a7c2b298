import type { Actor } from '../domain/common/actor.js';
import type { OutboundAllow } from '../domain/connection/address-policy.js';
import { iso } from '../domain/common/clock.js';
import {
  checkUpdateMode,
  changedDestinations,
  checkConfigRules,
  completeConfig,
  ConnectionPatchSchema,
  ConnectionTestRequestSchema,
  configShapeErrors,
  destinationErrors,
  disabledHealth,
  HEALTHY,
  joinSecrets,
  lastFour,
  localTestResult,
  mergeConfig,
  missingSecrets,
  newConnectionRecord,
  nextHealth,
  parseConnectionCreate,
  readOnlyCheckOf,
  signingSecretOf,
  splitSecrets,
  type ConnectionPatch,
  type ConnectionRecord,
  type ConnectionTestResult,
  type DeliveryConnection,
  type PlainConfig,
  type SealedSecret,
} from '../domain/connection/connection.js';
import { channelOf } from '../channels/index.js';
import { checkRevision, DomainError, emptyPatch, fieldError, keptChanging, notFound } from '../domain/common/errors.js';
import { isId } from '../domain/common/ids.js';
import { expectCursorKind, type Page, type PageRequest } from '../domain/common/pagination.js';
import { parseInput, toFieldErrors } from '../domain/common/validation.js';
import { LOST_RACE, retryOnConflict } from './retry.js';
import type {
  Clock,
  ConnectionFilter,
  ConnectionRepo,
  ConnectionTester,
  IdGenerator,
  SecretBox,
  TokenCrypto,
} from '../ports/index.js';
import type { AccessPolicy } from './access.js';

export interface ConnectionServiceDeps {
  repo: ConnectionRepo;
  /** Seals secrets before they reach the store and opens them for delivery. */
  box: SecretBox;
  clock: Clock;
  ids: IdGenerator;
  /** Randomness for generated signing secrets. */
  crypto: Pick<TokenCrypto, 'randomBytes'>;
  /** HERALD_OUTBOUND_ALLOW, parsed. */
  allow: OutboundAllow;
  /** The network half of POST /test (delivery layer). */
  tester: ConnectionTester;
  /** Who may test connections (asked on every test). */
  access: AccessPolicy;
  /** Called after a connection is deleted: the delivery layer cancels its queued deliveries here. */
  onDeleted(connectionId: string): Promise<void> | void;
  /** Called after a connection is disabled (PATCH enabled=false, or found dead): cancel its queue. */
  onDisabled(connectionId: string): Promise<void> | void;
}

export type DeliveryOutcome = { ok: true } | { ok: false; error: string };

/**
 * System updates (health, last test) may race many deliveries of one connection at once. Every
 * compare-and-set round has a winner, so each writer gets through within (concurrent writers)
 * rounds; this bound only stops a pathological loop.
 */
const MAX_SYSTEM_ATTEMPTS = 100;

/**
 * Connections (docs/explanation/delivery-semantics.md, Outbound safety): CRUD with sealed secrets, merge-PATCH with the
 * secret_required rule, the write-time address policy, the non-network part of POST /test, and the seams the delivery
 * layer uses (getForDelivery, recordHealth, disable, setLastTest).
 */
export class ConnectionService {
  constructor(private readonly d: ConnectionServiceDeps) {}

  /** Creates a connection. `signingSecret` is the webhook secret, to be shown this once. */
  async create(input: unknown): Promise<{ connection: ConnectionRecord; signingSecret: string | null }> {
    const draft = parseConnectionCreate(input);
    const config = completeConfig(draft.type, draft.config, (n) => this.d.crypto.randomBytes(n));
    checkConfigRules(draft.type, config, this.d.allow);
    checkUpdateMode(draft.update_mode, { type: draft.type, config });
    const { plain, secrets } = splitSecrets(draft.type, config);
    const now = iso(this.d.clock.now());
    const record = newConnectionRecord(this.d.ids.next('connection'), draft, plain, this.seal(secrets, {}, {}), now);
    const signingSecret = signingSecretOf(draft.type, config);
    if (!(await this.d.repo.create(record, signingSecret))) throw keptChanging('connection');
    return { connection: record, signingSecret };
  }

  async get(id: string): Promise<ConnectionRecord> {
    const connection = isId('connection', id) ? await this.d.repo.get(id) : null;
    if (!connection) throw notFound('Connection', id);
    return connection;
  }

  list(filter: ConnectionFilter, page: PageRequest): Promise<Page<ConnectionRecord>> {
    return this.d.repo.list(filter, expectCursorKind(page, 'after'));
  }

  /** Every connection, page by page (execute fans out to all of them). */
  async listAll(): Promise<ConnectionRecord[]> {
    const all: ConnectionRecord[] = [];
    let cursor: PageRequest['cursor'] = null;
    do {
      const page = await this.d.repo.list({}, { limit: 100, cursor });
      all.push(...page.data);
      cursor = page.nextCursor;
    } while (cursor);
    return all;
  }

  /**
   * PATCH: `config` merges (null removes an optional field), secrets stay unless sent, and moving
   * a destination to another host needs every secret sent there again. Re-enabling resets health.
   */
  async update(id: string, input: unknown, ifMatch: number | null = null): Promise<ConnectionRecord> {
    return retryOnConflict(
      async () => {
        const current = await this.get(id);
        checkRevision('connection', current.rev, ifMatch);
        const patch = this.parsePatch(current, input);
        if (Object.keys(patch).length === 0) {
          throw emptyPatch();
        }
        const next: ConnectionRecord = { ...current };
        if (patch.name !== undefined) next.name = patch.name;
        if (patch.rate_limit_per_minute !== undefined) next.rate_limit_per_minute = patch.rate_limit_per_minute;
        if (patch.update_mode !== undefined) next.update_mode = patch.update_mode;
        if (patch.enabled !== undefined) {
          // Turning a connection back on is the operator saying "it is fixed": start healthy.
          if (patch.enabled && (!current.enabled || current.health.state === 'disabled')) next.health = HEALTHY;
          next.enabled = patch.enabled;
        }
        if (patch.config !== undefined) {
          const { config: before, secrets: openSecrets } = this.open(current);
          const after = mergeConfig(current.type, before, patch.config);
          const shape = configShapeErrors(current.type, after);
          if (shape.length > 0)
            throw new DomainError('validation_failed', 'The request has invalid fields; see errors.', shape);
          checkConfigRules(current.type, after, this.d.allow, changedDestinations(current.type, before));
          const missing = missingSecrets(current.type, before, after, patch.config);
          if (missing.length > 0) {
            throw new DomainError(
              'secret_required',
              'The destination moves to another host: send its secrets again.',
              missing,
            );
          }
          const { plain, secrets } = splitSecrets(current.type, after);
          next.config = plain;
          next.secrets = this.seal(secrets, current.secrets, openSecrets);
        }
        // Either change can make `edit` impossible (a Slack connection moving to a webhook).
        if (patch.update_mode !== undefined || patch.config !== undefined) checkUpdateMode(next.update_mode, next);
        if (sameContent(current, next)) return current;
        next.updated_at = iso(this.d.clock.now());
        next.rev = current.rev + 1;
        if (await this.d.repo.update(current, next)) {
          if (current.enabled && !next.enabled) await this.d.onDisabled(id);
          return next;
        }
        return LOST_RACE;
      },
      () => keptChanging('connection'),
    );
  }

  /** Deletes (If-Match honoured), then lets the delivery layer cancel what was queued for it. */
  async delete(id: string, ifMatch: number | null = null): Promise<void> {
    return retryOnConflict(
      async () => {
        const current = await this.get(id);
        checkRevision('connection', current.rev, ifMatch);
        if (await this.d.repo.delete(current, iso(this.d.clock.now()))) {
          await this.d.onDeleted(id);
          return;
        }
        return LOST_RACE;
      },
      () => keptChanging('connection'),
    );
  }

  /**
   * The connection with its secrets opened, for senders and the tester — never for presenting.
   * Null when it no longer exists (the caller cancels the delivery).
   */
  async getForDelivery(id: string): Promise<DeliveryConnection | null> {
    const record = isId('connection', id) ? await this.d.repo.get(id) : null;
    if (!record) return null;
    return this.forDelivery(record);
  }

  /** Records one delivery outcome in `health` (failure streak, degraded/ok). Null when gone. */
  recordHealth(id: string, outcome: DeliveryOutcome): Promise<ConnectionRecord | null> {
    return this.mutate(id, (c) => ({ ...c, health: nextHealth(c.health, outcome) }));
  }

  /** Disables a connection the delivery layer found dead (404/410 from its webhook URL). */
  disable(id: string, reason: string): Promise<ConnectionRecord | null> {
    return this.mutate(id, (c) => ({ ...c, enabled: false, health: disabledHealth(c.health, reason) }));
  }

  /** Stores a test outcome as `last_test`. Null when the connection is gone. */
  setLastTest(id: string, result: ConnectionTestResult): Promise<ConnectionRecord | null> {
    return this.mutate(id, (c) => ({ ...c, last_test: result }));
  }

  /**
   * POST /test: 200 with the outcome as data. Decided here without contacting anyone: an invalid
   * stored config, a literal non-public destination (`blocked_by_policy`) and a type with no
   * read-only check asked for none (`needs_send_message`). The rest is the injected tester's.
   * Only an actor AccessPolicy lets test connections may (insufficient_scope otherwise).
   */
  async test(id: string, input: unknown, actor: Actor): Promise<ConnectionTestResult> {
    this.d.access.authorize(actor, 'test_connections');
    const current = await this.get(id);
    const body = parseInput(ConnectionTestRequestSchema, input ?? {});
    const sendMessage = body.send_message ?? false;
    if (sendMessage && channelOf(current.type).publishesPublicly)
      throw fieldError(
        'status_page_test_refused',
        'send_message',
        `A test message to a ${current.type} connection would be published to customers; run the read-only test instead.`,
      );
    const conn = this.forDelivery(current);
    const config = conn.config as PlainConfig;
    const now = iso(this.d.clock.now());
    const check = readOnlyCheckOf(current.type, config);
    const method = sendMessage ? 'send_message' : check;
    let result: ConnectionTestResult;
    const invalid = configShapeErrors(current.type, config);
    const ruleError = invalid.length > 0 ? null : this.ruleError(current.type, config);
    const blocked = destinationErrors(current.type, config, this.d.allow);
    if (invalid.length > 0 || ruleError) {
      const detail =
        (ruleError?.errors ?? invalid).map((e) => `${e.field}: ${e.message}`).join(' ') || (ruleError?.message ?? '');
      result = localTestResult('invalid_config', method, detail, now);
    } else if (blocked.length > 0) {
      result = localTestResult('blocked_by_policy', method, blocked.map((e) => e.message).join(' '), now);
    } else if (!sendMessage && check === null && channelOf(current.type).publishesPublicly) {
      // Herald's own page: nothing outside to reach, nothing that could be wrong.
      result = {
        ...localTestResult(
          'ok',
          null,
          'Nothing to check: the status page is served by Herald itself; its config was validated.',
          now,
        ),
        ok: true,
      };
    } else if (!sendMessage && check === null) {
      result = localTestResult(
        'needs_send_message',
        null,
        `A ${current.type} connection has no read-only check; send {"send_message": true} to deliver a marked test message.`,
        now,
      );
    } else {
      result = await this.d.tester.test(conn, { sendMessage });
    }
    await this.setLastTest(id, result);
    return result;
  }

  // ── internals ──────────────────────────────────────────────────────────────────────────────

  private ruleError(type: ConnectionRecord['type'], config: PlainConfig): DomainError | null {
    try {
      // Only the type's own rules here; the address policy is reported as blocked_by_policy.
      checkConfigRules(type, config, this.d.allow, () => false);
      return null;
    } catch (e) {
      if (e instanceof DomainError) return e;
      throw e;
    }
  }

  private forDelivery(record: ConnectionRecord): DeliveryConnection {
    const { config, secrets } = this.open(record);
    return {
      id: record.id,
      name: record.name,
      type: record.type,
      enabled: record.enabled,
      config,
      secrets,
      rateLimitPerMinute: record.rate_limit_per_minute,
      health: record.health,
      updateMode: record.update_mode ?? 'thread',
      // The stored config was validated against its type's schema when written, so the pairing
      // of `type` and `config` holds; TypeScript cannot see that through the JSON round trip.
    } as DeliveryConnection;
  }

  /** Opens every sealed secret and joins them back into the full config. */
  private open(record: ConnectionRecord): { config: PlainConfig; secrets: Record<string, string> } {
    const secrets = Object.fromEntries(Object.entries(record.secrets).map(([k, s]) => [k, this.d.box.open(s.sealed)]));
    return { config: joinSecrets(record.type, record.config, secrets), secrets };
  }

  /** Seals secrets; one whose value did not change keeps its sealed form (no churn, stable CAS). */
  private seal(
    secrets: Record<string, string>,
    previous: Record<string, SealedSecret>,
    previousPlain: Record<string, string>,
  ): Record<string, SealedSecret> {
    const out: Record<string, SealedSecret> = {};
    for (const [key, value] of Object.entries(secrets)) {
      const kept = previous[key];
      out[key] =
        kept !== undefined && previousPlain[key] === value
          ? kept
          : { sealed: this.d.box.seal(value), last4: lastFour(value) };
    }
    return out;
  }

  /**
   * Parses a PATCH body, naming every bad field in one answer: when the envelope is wrong, the
   * config it carries is judged too (merged onto the current one, as it would be applied).
   */
  private parsePatch(current: ConnectionRecord, input: unknown): ConnectionPatch {
    const r = ConnectionPatchSchema.safeParse(input);
    if (r.success) return r.data;
    const errors = toFieldErrors(r.error.issues);
    const raw = typeof input === 'object' && input !== null ? (input as { config?: unknown }).config : undefined;
    if (
      typeof raw === 'object' &&
      raw !== null &&
      !Array.isArray(raw) &&
      !errors.some((e) => e.field.startsWith('config'))
    ) {
      errors.push(
        ...configShapeErrors(
          current.type,
          mergeConfig(current.type, this.open(current).config, raw as Record<string, unknown>),
        ),
      );
    }
    throw new DomainError('validation_failed', 'The request has invalid fields; see errors.', errors);
  }

  /** Compare-and-set loop for system updates (health, last test); they do not move updated_at. */
  private async mutate(
    id: string,
    change: (c: ConnectionRecord) => ConnectionRecord,
  ): Promise<ConnectionRecord | null> {
    return retryOnConflict(
      async () => {
        const current = isId('connection', id) ? await this.d.repo.get(id) : null;
        if (!current) return null;
        const next = change(current);
        if (sameContent(current, next)) return current;
        next.rev = current.rev + 1;
        if (await this.d.repo.update(current, next)) return next;
        return LOST_RACE;
      },
      () => keptChanging('connection'),
      { attempts: MAX_SYSTEM_ATTEMPTS },
    );
  }
}

/** Equal apart from bookkeeping: a PATCH that changes nothing is a no-op (same ETag, same updated_at). */
function sameContent(a: ConnectionRecord, b: ConnectionRecord): boolean {
  const strip = (c: ConnectionRecord) => JSON.stringify({ ...c, updated_at: '', rev: 0 });
  return strip(a) === strip(b);
}
