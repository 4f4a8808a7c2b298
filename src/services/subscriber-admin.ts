import { firstTokenVersion } from '../domain/subscriber/token-version.js';
import { z } from 'zod';
import { iso, type Clock } from '../domain/common/clock.js';
import { DomainError, fieldError, notFound } from '../domain/common/errors.js';
import { isId } from '../domain/common/ids.js';
import type { Page, PageRequest } from '../domain/common/pagination.js';
import { parseInput, safeParseInput, toFieldErrors } from '../domain/common/validation.js';
import { SubscriberEmailSchema } from '../domain/subscriber/address.js';
import {
  RECIPIENT_STATES,
  SUBSCRIBER_KINDS,
  SUBSCRIBER_STATES,
  type NoticeRepo,
  type NoticeTally,
  type Recipient,
  type RecipientState,
  type Subscriber,
  type SubscriberKind,
  type SubscriberNotice,
  type SubscriberRepo,
} from '../ports/subscribers.js';

/** The most rows one import may carry (docs/api.md, Subscribers). */
export const IMPORT_MAX_ROWS = 10_000;

/**
 * How many buckets one list page reads at most: a filter that matches little would otherwise read
 * the whole set in one request. The page comes back short, with a cursor to go on from.
 */
export const LIST_BUCKETS_PER_PAGE = 32;

/** Buckets the export reads ahead of the one it writes. */
const EXPORT_READ_AHEAD = 4;

/** Buckets a list page reads at once. */
const LIST_READ_AHEAD = 8;

/** Rows of an import written at once: enough to hide the round trips, few enough to stay gentle. */
const IMPORT_CONCURRENCY = 50;

/** Compare-and-set rounds per import row; only a concurrent write to the same address loses one. */
const IMPORT_ATTEMPTS = 5;

export const SubscriberListQuerySchema = z.object({
  state: z.enum(SUBSCRIBER_STATES).optional().meta({ description: 'Only subscribers in this state.' }),
  kind: z.enum(SUBSCRIBER_KINDS).optional().meta({ description: '`email` or `webhook`.' }),
  component_id: z
    .string()
    .max(64)
    .optional()
    .meta({ description: 'Only those who hear of this component (those of all components included).' }),
  email: z
    .string()
    .max(320)
    .optional()
    .meta({ description: 'Exactly this address (looked up by its derived id; at most one result).' }),
});
export type SubscriberListQuery = z.infer<typeof SubscriberListQuerySchema>;

export const ImportRowSchema = z.strictObject({
  email: z.string().meta({ description: 'The address (trimmed; the domain is lower-cased).' }),
  components: z
    .array(z.string())
    .max(100)
    .optional()
    .meta({ description: 'Component ids it hears of; absent or empty: all of them.' }),
  locale: z.enum(['en', 'de']).optional().meta({ description: "The mails' language. Default: en." }),
  confirmed: z.literal(true).meta({
    description: 'You assert this person confirmed (double opt-in elsewhere): only confirmed addresses are imported.',
  }),
});

export const ImportRequestSchema = z
  .strictObject({
    source: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/)
      .meta({ description: 'Where the list came from (`mailchimp`): new subscribers get source `import:<source>`.' }),
    subscribers: z
      .array(ImportRowSchema)
      .meta({ description: `At most ${IMPORT_MAX_ROWS.toLocaleString('en')} rows.` }),
  })
  .meta({ id: 'SubscriberImport' });

/** What the import's envelope must be; rows are judged one by one (a bad row spoils only itself). */
const ImportEnvelopeSchema = z.strictObject({
  source: ImportRequestSchema.shape.source,
  subscribers: z.array(z.unknown()).max(IMPORT_MAX_ROWS),
});

export interface ImportResult {
  /** New addresses, now confirmed. */
  created: number;
  /** Pending addresses, now confirmed. */
  confirmed: number;
  /** Already confirmed (or repeated in the same import). */
  unchanged: number;
  /** Unsubscribed or bounced: never subscribed again by an import. */
  skipped: number;
  errors: { index: number; detail: string }[];
}

/** A recipient of one notice, as receipts show it. */
export type NoticeRecipient = Recipient & { notice_id: string };

/** One subscriber of the export: every field a person may ask for (GDPR art. 15/20), no secret. */
export const EXPORT_FIELDS = [
  'id',
  'kind',
  'address',
  'state',
  'components',
  'locale',
  'source',
  'created_at',
  'confirmed_at',
  'unsubscribed_at',
  'bounced_at',
  'bounce_reason',
] as const satisfies readonly (keyof Subscriber)[];

export type ExportFormat = 'csv' | 'ndjson';

export interface SubscriberAdminDeps {
  repo: SubscriberRepo;
  /** The keyed hash of addresses (src/store/subscriber-key.ts): an address's id, whatever its state. */
  ids: { idOf(kind: SubscriberKind, address: string): string };
  notices: NoticeRepo;
  clock: Clock;
  /** The components that exist (an import naming another is refused row by row). */
  componentIds(): Promise<Set<string>>;
}

/** A notice id: `ntc_` + a delivery id, or + a maintenance id and an update id. */
const NOTICE_ID = /^ntc_[A-Za-z0-9_]{1,120}$/;

/**
 * The admin side of the status page's subscribers (docs/api.md, Subscribers): listing, reading
 * and erasing one (GDPR art. 15 and 17), exporting all, importing confirmed lists, and the
 * receipts of the notices they were sent.
 */
export class SubscriberAdminService {
  constructor(private readonly d: SubscriberAdminDeps) {}

  /**
   * A page of subscribers in bucket order, then id order. The cursor names the last id served
   * (`after`, its bucket follows from it) or the next bucket to read (`offset`) when a page ended
   * on the bucket bound; ids never move between buckets, so a walk sees each subscriber once.
   */
  async list(query: unknown, page: PageRequest): Promise<Page<Subscriber>> {
    const q = parseInput(SubscriberListQuerySchema, query);
    if (q.email !== undefined) return this.byEmail(q, page);
    const buckets = this.d.repo.buckets;
    let bucket = 0;
    let after: string | null = null;
    if (page.cursor !== null) {
      if ('after' in page.cursor) {
        after = page.cursor.after;
        if (!isId('subscriber', after)) throw badCursor();
        bucket = this.d.repo.bucketOf(after);
      } else bucket = page.cursor.offset;
      if (bucket >= buckets) throw badCursor();
    }
    const data: Subscriber[] = [];
    const stop = Math.min(buckets, bucket + LIST_BUCKETS_PER_PAGE);
    while (bucket < stop) {
      // A few buckets at a time: a sparse filter reads many, and one round trip each adds up.
      const first = bucket;
      const reads = Array.from({ length: Math.min(LIST_READ_AHEAD, stop - first) }, (_, i) =>
        this.d.repo.bucket(first + i),
      );
      for (const read of reads) {
        for (const s of await read) {
          if ((after !== null && s.id <= after) || !matches(s, q)) continue;
          data.push(s);
          if (data.length === page.limit) {
            // The reads ahead are not needed; their failure would have no one to hear it.
            for (const r of reads) r.catch(() => undefined);
            return { data, nextCursor: { after: s.id } };
          }
        }
        after = null;
        bucket++;
      }
    }
    return { data, nextCursor: bucket < buckets ? { offset: bucket } : null };
  }

  private async byEmail(q: SubscriberListQuery, page: PageRequest): Promise<Page<Subscriber>> {
    const r = SubscriberEmailSchema.safeParse(q.email);
    if (!r.success) throw fieldError('validation_failed', 'email', 'email is not an e-mail address.', 'invalid_email');
    // One subscriber at most, on the first page.
    const found = page.cursor === null ? await this.d.repo.get(this.d.ids.idOf('email', r.data)) : null;
    return { data: found && matches(found, q) ? [found] : [], nextCursor: null };
  }

  async get(id: string): Promise<Subscriber> {
    const found = isId('subscriber', id) ? await this.d.repo.get(id) : null;
    if (!found) throw notFound('Subscriber', id);
    return found;
  }

  /** Erases it at once (GDPR art. 17): the record, its address and its links' validity. */
  async erase(id: string): Promise<void> {
    if (!isId('subscriber', id) || !(await this.d.repo.erase(id))) throw notFound('Subscriber', id);
  }

  /**
   * Every subscriber, bucket by bucket, written through `write` (which resolves once the reader
   * has room: a slow client slows the export, it does not fill memory). The next bucket is read
   * while one is being written. How many were written.
   */
  async export(format: ExportFormat, write: (chunk: string) => Promise<void>): Promise<number> {
    if (format === 'csv') await write(EXPORT_FIELDS.join(',') + '\r\n');
    const n = this.d.repo.buckets;
    // Buckets read ahead of the one being written: a handful, so memory stays a few buckets'.
    const ahead: Promise<Subscriber[]>[] = [];
    let next = 0;
    const refill = () => {
      while (next < n && ahead.length < EXPORT_READ_AHEAD) {
        const read = this.d.repo.bucket(next++);
        // Should `write` fail (the client went away), the reads ahead have no one to hear them.
        read.catch(() => undefined);
        ahead.push(read);
      }
    };
    let count = 0;
    refill();
    while (ahead.length > 0) {
      const subs = await ahead.shift()!;
      refill();
      if (subs.length === 0) continue;
      await write(subs.map(format === 'csv' ? csvRow : ndjsonRow).join(''));
      count += subs.length;
    }
    return count;
  }

  /**
   * Imports confirmed e-mail subscribers, idempotent by address: a new one is created confirmed, a
   * pending one is confirmed, a confirmed one is left as it is, and an unsubscribed or bounced one
   * is skipped (an import never overrides someone's leaving). A bad row is reported and skipped.
   */
  async import(input: unknown): Promise<ImportResult> {
    const envelope = safeParseInput(ImportEnvelopeSchema, input);
    if (!envelope.success) {
      const tooMany = envelope.error.issues.some((i) => i.code === 'too_big' && i.path.join('.') === 'subscribers');
      if (tooMany) {
        const message = `An import takes at most ${IMPORT_MAX_ROWS} subscribers; split the list.`;
        throw new DomainError('validation_failed', message, [{ field: 'subscribers', code: 'too_many', message }]);
      }
      throw new DomainError(
        'validation_failed',
        'The request has invalid fields; see errors.',
        toFieldErrors(envelope.error.issues),
      );
    }
    const { source, subscribers: rows } = envelope.data;
    const known = await this.d.componentIds();
    const result: ImportResult = { created: 0, confirmed: 0, unchanged: 0, skipped: 0, errors: [] };
    const valid: { index: number; address: string; components: string[]; locale: 'en' | 'de' }[] = [];
    rows.forEach((raw, index) => {
      const row = ImportRowSchema.safeParse(raw);
      if (!row.success) {
        const issue = row.error.issues[0];
        const where = issue && issue.path.length > 0 ? `${issue.path.join('.')}: ` : '';
        result.errors.push({ index, detail: `${where}${issue?.message ?? 'invalid row'}` });
        return;
      }
      const email = SubscriberEmailSchema.safeParse(row.data.email);
      if (!email.success) {
        result.errors.push({ index, detail: 'email: not an e-mail address' });
        return;
      }
      const components = [...new Set(row.data.components ?? [])];
      const unknown = components.filter((c) => !known.has(c));
      if (unknown.length > 0) {
        // Component ids are not personal data: naming them helps fix the row.
        result.errors.push({ index, detail: `components: unknown component ${unknown.slice(0, 3).join(', ')}` });
        return;
      }
      valid.push({ index, address: email.data, components, locale: row.data.locale ?? 'en' });
    });
    // The same address twice in one import: the later row finds the earlier's work (unchanged).
    const seen = new Set<string>();
    const firsts: typeof valid = [];
    const repeats: typeof valid = [];
    for (const row of valid) {
      const id = this.d.ids.idOf('email', row.address);
      (seen.has(id) ? repeats : firsts).push(row);
      seen.add(id);
    }
    const outcomes = new Map<number, ImportOutcome>();
    for (let i = 0; i < firsts.length; i += IMPORT_CONCURRENCY) {
      const chunk = firsts.slice(i, i + IMPORT_CONCURRENCY);
      const done = await Promise.all(chunk.map((row) => this.importOne(row.address, row, source)));
      chunk.forEach((row, j) => outcomes.set(row.index, done[j]!));
    }
    for (const row of repeats) outcomes.set(row.index, await this.importOne(row.address, row, source));
    for (const outcome of outcomes.values()) result[outcome]++;
    result.errors.sort((a, b) => a.index - b.index);
    return result;
  }

  private async importOne(
    address: string,
    row: { components: string[]; locale: 'en' | 'de' },
    source: string,
  ): Promise<ImportOutcome> {
    const id = this.d.ids.idOf('email', address);
    for (let attempt = 0; attempt < IMPORT_ATTEMPTS; attempt++) {
      const now = iso(this.d.clock.now());
      const current = await this.d.repo.get(id);
      if (current === null) {
        const created: Subscriber = {
          id,
          kind: 'email',
          address,
          state: 'confirmed',
          components: row.components,
          locale: row.locale,
          source: `import:${source}`,
          created_at: now,
          confirmed_at: now,
          unsubscribed_at: null,
          bounced_at: null,
          bounce_reason: null,
          token_version: firstTokenVersion(Date.parse(now)),
          confirm: null,
          webhook_secret: null,
          rev: 1,
        };
        if (await this.d.repo.put(created, null)) return 'created';
        continue;
      }
      if (current.state === 'confirmed') return 'unchanged';
      if (current.state === 'unsubscribed' || current.state === 'bounced') return 'skipped';
      // Pending: the import vouches for the consent its link asked for; its own choices stay.
      const next: Subscriber = {
        ...current,
        state: 'confirmed',
        confirmed_at: now,
        confirm: null,
        rev: current.rev + 1,
      };
      if (await this.d.repo.put(next, current.rev)) return 'confirmed';
    }
    throw new DomainError('conflict', 'A subscriber kept changing during the import; run it again (it is idempotent).');
  }

  /** A notice and its tally (what subscribers were told, how far the sending got). */
  async notice(id: string): Promise<{ notice: SubscriberNotice; tally: NoticeTally }> {
    const notice = NOTICE_ID.test(id) ? await this.d.notices.get(id) : null;
    if (!notice) throw notFound('Subscriber notice', id);
    return { notice, tally: await this.d.notices.tally(id) };
  }

  /**
   * A page of a notice's recipients (optionally in one state). The store's own cursor is opaque
   * (it walks its hash, not the ids in order), so it travels inside this list's token.
   */
  async recipients(
    noticeId: string,
    state: unknown,
    limit: number,
    cursor: string | null,
  ): Promise<{ data: NoticeRecipient[]; next: string | null }> {
    await this.notice(noticeId);
    const s = parseState(state);
    const at = cursor === null ? null : decodeReceiptCursor(cursor);
    if (at !== null && (at.notice !== 0 || at.after === null)) throw badCursor();
    const r = await this.d.notices.listRecipients(noticeId, { state: s, cursor: at?.after ?? null, limit });
    return {
      data: r.items.map((item) => ({ ...item, notice_id: noticeId })),
      next: r.next === null ? null : encodeReceiptCursor(0, r.next),
    };
  }

  /** The tallies of an execution's notices summed; null when it opened none. */
  async executionTally(executionId: string): Promise<NoticeTally | null> {
    const ids = await this.d.notices.ofExecution(executionId);
    if (ids.length === 0) return null;
    const tallies = await Promise.all(ids.map((id) => this.d.notices.tally(id)));
    return tallies.reduce((sum, t) => ({
      total: sum.total + t.total,
      delivered: sum.delivered + t.delivered,
      failed: sum.failed + t.failed,
      pending: sum.pending + t.pending,
      bounced: sum.bounced + t.bounced,
      possible_duplicates: sum.possible_duplicates + t.possible_duplicates,
      complete: sum.complete && t.complete,
    }));
  }

  /**
   * The recipients of every notice an execution opened (nearly always one: its status page
   * delivery), notice by notice. The token holds the notice's place and the store's cursor within
   * it (null: from its start).
   */
  async executionRecipients(
    executionId: string,
    state: unknown,
    limit: number,
    cursor: string | null,
  ): Promise<{ data: NoticeRecipient[]; next: string | null }> {
    if (!isId('execution', executionId)) throw notFound('Execution', executionId);
    const s = parseState(state);
    const ids = [...(await this.d.notices.ofExecution(executionId))].sort();
    if (ids.length === 0) throw new DomainError('not_found', `Execution ${executionId} opened no subscriber notice.`);
    let { notice, after } = cursor === null ? { notice: 0, after: null } : decodeReceiptCursor(cursor);
    if (notice >= ids.length) throw badCursor();
    const data: NoticeRecipient[] = [];
    while (notice < ids.length) {
      const noticeId = ids[notice]!;
      const r = await this.d.notices.listRecipients(noticeId, { state: s, cursor: after, limit: limit - data.length });
      data.push(...r.items.map((item) => ({ ...item, notice_id: noticeId })));
      // A page may come back short (the store visits a bounded part of its hash per call): one
      // call per notice keeps the request bounded, and the cursor goes on from there.
      if (r.next !== null) return { data, next: encodeReceiptCursor(notice, r.next) };
      notice++;
      after = null;
      if (data.length >= limit) return { data, next: notice < ids.length ? encodeReceiptCursor(notice, null) : null };
    }
    return { data, next: null };
  }
}

type ImportOutcome = 'created' | 'confirmed' | 'unchanged' | 'skipped';

function matches(s: Subscriber, q: SubscriberListQuery): boolean {
  if (q.state !== undefined && s.state !== q.state) return false;
  if (q.kind !== undefined && s.kind !== q.kind) return false;
  if (q.component_id !== undefined && s.components.length > 0 && !s.components.includes(q.component_id)) return false;
  return true;
}

function parseState(state: unknown): RecipientState | undefined {
  if (state === undefined || state === '') return undefined;
  const r = z.enum(RECIPIENT_STATES).safeParse(state);
  if (!r.success)
    throw fieldError('validation_failed', 'state', `state must be one of ${RECIPIENT_STATES.join(', ')}.`, 'invalid');
  return r.data;
}

const badCursor = () => new DomainError('invalid_cursor', 'The cursor is not one this list issued.');

/** What a store's recipient cursor looks like (an HSCAN cursor, maybe with an id): opaque here. */
const STORE_CURSOR = /^[A-Za-z0-9_:]{1,100}$/;

function encodeReceiptCursor(notice: number, after: string | null): string {
  return Buffer.from(JSON.stringify({ n: notice, a: after })).toString('base64url');
}

function decodeReceiptCursor(raw: string): { notice: number; after: string | null } {
  try {
    const parsed = z
      .strictObject({ n: z.number().int().min(0).max(1000), a: z.string().nullable() })
      .safeParse(JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')));
    if (parsed.success && (parsed.data.a === null || STORE_CURSOR.test(parsed.data.a)))
      return { notice: parsed.data.n, after: parsed.data.a };
  } catch {
    // any undecodable cursor is the same client error
  }
  throw badCursor();
}

/** The exported fields of one subscriber (never its webhook secret, nonce or token version). */
export function exportRecord(s: Subscriber): Pick<Subscriber, (typeof EXPORT_FIELDS)[number]> {
  return {
    id: s.id,
    kind: s.kind,
    address: s.address,
    state: s.state,
    components: s.components,
    locale: s.locale,
    source: s.source,
    created_at: s.created_at,
    confirmed_at: s.confirmed_at,
    unsubscribed_at: s.unsubscribed_at,
    bounced_at: s.bounced_at,
    bounce_reason: s.bounce_reason,
  };
}

const ndjsonRow = (s: Subscriber): string => JSON.stringify(exportRecord(s)) + '\n';

/** EXPORT_FIELDS in order; a list of components is one cell, space-separated. */
function csvRow(s: Subscriber): string {
  const cells = [
    s.id,
    s.kind,
    s.address,
    s.state,
    s.components.join(' '),
    s.locale,
    s.source,
    s.created_at,
    s.confirmed_at ?? '',
    s.unsubscribed_at ?? '',
    s.bounced_at ?? '',
    s.bounce_reason ?? '',
  ];
  return cells.map(csvCell).join(',') + '\r\n';
}

/**
 * One CSV cell (RFC 4180), safe to open in a spreadsheet: a cell that starts like a formula
 * (`=`, `+`, `-`, `@`, or a tab or carriage return that some programs skip first) is prefixed with
 * `'`, so an address like `=HYPERLINK(…)@example.com` stays text (OWASP, CSV injection).
 */
export function csvCell(value: string): string {
  const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}
