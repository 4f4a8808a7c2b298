import type { Logger } from 'pino';
import type { Clock } from '../domain/common/clock.js';
import { decideRetry } from '../domain/execution/delivery-policy.js';
import { concerns } from '../domain/subscriber/match.js';
import { startSweepLoop } from '../delivery/sweep-loop.js';
import type {
  NoticeRepo,
  NoticeWork,
  Recipient,
  Subscriber,
  SubscriberLocale,
  SubscriberNotice,
  SubscriberRepo,
  SubscriberTokens,
} from '../ports/subscribers.js';
import { LOST_RACE, retryOnConflict } from '../services/retry.js';
import type { RenderedMail, SubscriberLinks } from './mail.js';
import type { Relay, SendOutcome } from './relay.js';
import type { SubscriberTemplateOverrides } from './templates.js';
import type { SubscriberWebhook } from './webhook.js';

/**
 * The notifier's worker (docs/subscribers.md, "Outbox" and "Exactly once"): claims notice work
 * (a bucket of subscribers, or one subscriber's retry) with a lease, and tells every confirmed
 * subscriber the notice concerns, once.
 *
 * Per (notice, subscriber) the recipient's state is the guard: it is written `sending` before the
 * mail or webhook goes and its result right after (each as soon as it is known, while other sends
 * of the batch are still in flight). A recipient settled (delivered, failed, bounced) is never
 * sent again; one waiting for its retry is left to its retry item; one found `sending` was cut
 * off by a crash and is sent again, with the same Message-ID (webhook-id), flagged
 * possible_duplicate. So a kill can only leave the sends in flight at that moment ambiguous.
 *
 * A batch extends its lease each time a little under half of it has run (what is in flight then
 * settles within the relay's and the webhook's time-outs, well inside what is left); should the
 * extension fail (the lease ran out meanwhile, say a stalled process, and another worker took the
 * item), it starts no more sends and leaves the item to that worker, which goes on where it stopped. How many items a step claims follows what the last step
 * found: many while buckets are small (a notice to a few subscribers is 256 mostly empty buckets,
 * a few round trips each), one once they are large (hundreds of sends: the rate, not the claim,
 * bounds how fast they go, and a second bucket would only wait for its lease to run out).
 */

/** How long a claimed work item is this worker's before another may take it. */
export const NOTICE_LEASE_MS = 60_000;

/**
 * Subscribers a bucket is read in, as its sends go: a worker holds one page of records, not the
 * whole bucket (hundreds at 100,000 subscribers, thousands at a million), so what it holds does
 * not grow with the bucket. (The memory a bare worker grows while sending is V8's heap sizing, not
 * this: docs/scaling.md, "Subscribers notified".)
 */
export const BUCKET_PAGE = 64;

/** The rendering the dispatcher needs (src/subscribers/mail.ts and payload.ts). */
export interface NoticeContent {
  links(publicUrl: string, tokens: { manage: string; unsubscribe: string }): SubscriberLinks;
  /** The notice's mail in a locale, rendered once: each subscriber's is then only its links put in. */
  noticeMail(
    n: SubscriberNotice,
    locale: SubscriberLocale,
    overrides?: SubscriberTemplateOverrides | null,
  ): (links: SubscriberLinks) => RenderedMail;
  webhookPayload(n: SubscriberNotice, links: SubscriberLinks, nowMs: number): Record<string, unknown>;
}

export interface NoticeDispatcherDeps {
  subscribers: SubscriberRepo;
  notices: NoticeRepo;
  tokens: SubscriberTokens;
  /** The SMTP relay; null when e-mail is off (HERALD_SMTP_URL unset): e-mail recipients fail. */
  relay: Relay | null;
  /** HERALD_SMTP_FROM. */
  from: string | null;
  webhook: SubscriberWebhook;
  content: NoticeContent;
  /** The page's subscriber template overrides (the status_page connection's config), read per step. */
  templates(): Promise<SubscriberTemplateOverrides | null>;
  clock: Clock;
  random: () => number;
  log: Logger;
  /** Sends in flight at once (about HERALD_SMTP_POOL × 2: the pool stays busy while results are recorded). */
  inFlight: number;
  leaseMs?: number;
  /** Most work items claimed per step (while they are small). */
  claimLimit?: number;
}

/** The Message-ID of a notice's mail to a subscriber: stable, so a resend is recognisably the same mail. */
export const noticeMessageId = (noticeId: string, subscriberId: string): string =>
  `<${noticeId}.${subscriberId}@herald>`;

/** What one work item did, for the log (counts and ids only). */
interface Counts {
  sent: number;
  delivered: number;
  retrying: number;
  failed: number;
  bounced: number;
}

export class NoticeDispatcher {
  private readonly leaseMs: number;
  private readonly claimLimit: number;
  /** What the next step claims: claimLimit after small items, 1 after large ones. */
  private claimNext: number;
  /** Notices are immutable once opened: the last few read are kept. */
  private readonly cache = new Map<string, SubscriberNotice>();
  /** The sends' records, written several to a round trip. */
  private readonly records: RecordQueue;

  constructor(private readonly d: NoticeDispatcherDeps) {
    this.leaseMs = d.leaseMs ?? NOTICE_LEASE_MS;
    this.claimLimit = d.claimLimit ?? 16;
    this.claimNext = this.claimLimit;
    this.records = new RecordQueue(d.notices, Math.max(1, d.inFlight));
  }

  /** Claims due work and runs it; answers how many items were claimed (0: idle). */
  async step(): Promise<number> {
    const started = this.now();
    const work = await this.d.notices.claim(started, this.leaseMs, this.claimNext);
    if (work.length === 0) {
      this.claimNext = this.claimLimit;
      return 0;
    }
    const overrides = await this.d.templates();
    const limiter = new Limiter(this.d.inFlight);
    const ctx: RunContext = { limiter, marks: new Limiter(this.d.inFlight), overrides, mails: new Map(), sends: 0 };
    await Promise.all(work.map((w) => this.run({ work: w, renewAt: this.renewAt(started) }, ctx)));
    // Large batches one at a time: each then has the whole lease to itself.
    this.claimNext = ctx.sends > this.d.inFlight * 8 ? 1 : this.claimLimit;
    return work.length;
  }

  /** When a lease taken (or extended) at `atMs` is extended: before half of it has run. */
  private renewAt(atMs: number): number {
    return atMs + this.leaseMs * 0.45;
  }

  /** Whether the item's lease is still this worker's, extending it when it is due; false: stop sending. */
  private async keep(held: Held): Promise<boolean> {
    const now = this.now();
    if (now < held.renewAt) return true;
    const renewed = await this.d.notices.extend(held.work, now + this.leaseMs);
    if (renewed === null) return false;
    held.work = renewed;
    held.renewAt = this.renewAt(now);
    return true;
  }

  private async run(held: Held, ctx: RunContext): Promise<void> {
    const w = held.work;
    const notice = await this.notice(w.noticeId);
    // Erased after the retention: nothing left to tell.
    if (notice === null) return this.d.notices.finish(w);
    const counts: Counts = { sent: 0, delivered: 0, retrying: 0, failed: 0, bounced: 0 };
    const complete =
      'bucket' in w
        ? await this.runBucket(notice, w.bucket, held, ctx, counts)
        : await this.runRetry(notice, w, held, ctx, counts);
    if (complete) await this.d.notices.finish(held.work);
    if (counts.sent > 0)
      this.d.log.debug(
        {
          notice: notice.id,
          ...('bucket' in w ? { bucket: w.bucket } : { subscriber: w.subscriberId }),
          ...counts,
          complete,
        },
        'subscriber notice batch',
      );
  }

  /**
   * A bucket: its confirmed subscribers the notice concerns, less those settled or waiting for a
   * retry, read BUCKET_PAGE at a time as the sends go (only the bucket's ids are held whole).
   */
  private runBucket(
    notice: SubscriberNotice,
    bucket: number,
    held: Held,
    ctx: RunContext,
    counts: Counts,
  ): Promise<boolean> {
    return this.sendAll(notice, this.bucketPages(notice, bucket), held, ctx, counts);
  }

  private async *bucketPages(notice: SubscriberNotice, bucket: number): AsyncGenerator<Todo[]> {
    const ids = await this.d.subscribers.bucketIds(bucket);
    for (let from = 0; from < ids.length; from += BUCKET_PAGE) {
      const subs = (await this.d.subscribers.many(ids.slice(from, from + BUCKET_PAGE))).filter(
        (s): s is Subscriber => s !== null && s.state === 'confirmed' && concerns(s, notice),
      );
      if (subs.length === 0) continue;
      const states = await this.d.notices.recipients(
        notice.id,
        subs.map((s) => s.id),
      );
      const todo = subs.flatMap((s, i) => {
        const r = states[i] ?? null;
        return r === null || r.state === 'sending' ? [{ sub: s, prev: r }] : [];
      });
      if (todo.length > 0) yield todo;
    }
  }

  /** One subscriber's retry (or a send its bucket could not fit before its deadline). */
  private async runRetry(
    notice: SubscriberNotice,
    w: { subscriberId: string },
    held: Held,
    ctx: RunContext,
    counts: Counts,
  ): Promise<boolean> {
    const [prev] = await this.d.notices.recipients(notice.id, [w.subscriberId]);
    const r = prev ?? null;
    if (r !== null && r.state !== 'retrying' && r.state !== 'sending') return true;
    const sub = await this.d.subscribers.get(w.subscriberId);
    if (sub === null || sub.state !== 'confirmed' || !concerns(sub, notice)) {
      // Left (or stopped) between two attempts: nothing more is sent, and the receipt says so.
      if (r !== null)
        await this.d.notices.record(notice.id, {
          ...r,
          state: 'failed',
          at: this.iso(),
          error: 'the subscriber left before it was delivered',
        });
      return true;
    }
    return this.sendAll(notice, [[{ sub, prev: r }]], held, ctx, counts);
  }

  /**
   * Sends to each recipient of `pages` (read as the sends go), `inFlight` at a time, while the
   * lease is held; true when every one was attempted. The recipients are marked `sending` a chunk
   * of `inFlight` at a time (one write), before any of the chunk's sends starts; each result is
   * written with the next chunk's marks, or within RESULT_FLUSH_MS, and all of them before this
   * returns (also when reading a page fails: the sends in flight are recorded, then it throws).
   */
  private async sendAll(
    notice: SubscriberNotice,
    pages: AsyncIterable<Todo[]> | Iterable<Todo[]>,
    held: Held,
    ctx: RunContext,
    counts: Counts,
  ): Promise<boolean> {
    // Sends in flight are counted, not kept: a list of their promises, held for as long as the
    // bucket runs, would keep each send's objects reachable from the old generation and make
    // the young-generation collector promote all of them (the worker's memory grew by ~100 MB
    // over a large notice that way).
    const flight = new Flight();
    let complete = true;
    // As many as can be in flight: a chunk's last send starts as its first ends.
    const chunk = Math.max(1, this.d.inFlight);
    try {
      pages: for await (const todo of pages) {
        for (let from = 0; from < todo.length; from += chunk) {
          const marked = todo.slice(from, from + chunk).map((t) => this.marked(t.sub, t.prev));
          if (!(await this.sendChunk(notice, marked, { held, ctx, counts, flight }))) {
            complete = false;
            break pages;
          }
        }
      }
    } catch (err) {
      await flight.landed();
      throw err;
    }
    return (await flight.landed()) && complete;
  }

  /** One chunk: marked `sending` in one write, then each sent as a slot frees; false: stop (lease lost, store failed). */
  private async sendChunk(
    notice: SubscriberNotice,
    marked: Marked[],
    run: { held: Held; ctx: RunContext; counts: Counts; flight: Flight },
  ): Promise<boolean> {
    const { held, ctx, counts, flight } = run;
    // Room to mark them, then a slot: nothing is marked while the sends before it still hold
    // every slot. (In this order: a chunk waiting for room holds no slot another one needs.)
    await ctx.marks.acquire(marked.length);
    if (!(await this.slot(ctx, held))) {
      ctx.marks.release(marked.length);
      return false;
    }
    try {
      // A chunk marked is a chunk whose every recipient is sent (or left `sending` for the next taker).
      await this.records.add(
        notice.id,
        marked.map((m) => m.sending),
        'now',
      );
    } catch (err) {
      // The store failed: the item stays unfinished and is taken again when its lease ends.
      ctx.limiter.release();
      ctx.marks.release(marked.length);
      this.d.log.warn(
        { notice: notice.id, err: err instanceof Error ? err.message : String(err) },
        'subscriber notice sends could not be recorded',
      );
      return false;
    }
    for (const [i, m] of marked.entries()) {
      // The rest of the chunk stays `sending` for whoever holds the item now (sent, flagged).
      if (i > 0 && !(await this.slot(ctx, held))) {
        ctx.marks.release(marked.length - i);
        return false;
      }
      ctx.marks.release();
      ctx.sends++;
      counts.sent++;
      this.launch(notice, m, ctx, counts, flight);
    }
    return true;
  }

  /** Starts one send holding a slot (taken by the caller), released once the send is over. */
  private launch(notice: SubscriberNotice, m: Marked, ctx: RunContext, counts: Counts, flight: Flight): void {
    let holding = true;
    const release = () => {
      if (holding) ctx.limiter.release();
      holding = false;
    };
    flight.start();
    void this.attempt(notice, m, ctx, counts, release).then(
      () => {
        release();
        flight.end(true);
      },
      (err: unknown) => {
        release();
        // The store failed: the item stays unfinished and is taken again when its lease ends.
        this.d.log.warn(
          { notice: notice.id, subscriber: m.sub.id, err: err instanceof Error ? err.message : String(err) },
          'subscriber notice send could not be recorded',
        );
        flight.end(false);
      },
    );
  }

  /** A send's slot, while the lease is still this worker's (false: none taken, stop). */
  private async slot(ctx: RunContext, held: Held): Promise<boolean> {
    await ctx.limiter.acquire();
    if (await this.keep(held)) return true;
    ctx.limiter.release();
    return false;
  }

  /** A recipient about to be sent to: its `sending` record and what its result record starts from. */
  private marked(sub: Subscriber, prev: Recipient | null): Marked {
    const attempts = (prev?.attempts ?? 0) + 1;
    // Found `sending`: a crash cut the last attempt off, so the receiver may already have it.
    const possibleDuplicate = prev?.state === 'sending' || prev?.possible_duplicate === true;
    const base = { subscriber_id: sub.id, attempts, possible_duplicate: possibleDuplicate };
    return { sub, base, sending: { ...base, state: 'sending', at: this.iso(), error: prev?.error ?? null } };
  }

  /** One send and its result recorded (a bounce also stops the subscriber); `sent` once the send is over. */
  private async attempt(
    notice: SubscriberNotice,
    m: Marked,
    ctx: RunContext,
    counts: Counts,
    sent: () => void,
  ): Promise<void> {
    const { sub, base } = m;
    const out = await this.send(notice, sub, ctx);
    sent();
    const at = this.iso();
    switch (out.outcome) {
      case 'delivered':
        counts.delivered++;
        return this.records.add(notice.id, [{ ...base, state: 'delivered', at, error: null }], 'soon');
      case 'failed':
        counts.failed++;
        return this.records.add(notice.id, [{ ...base, state: 'failed', at, error: out.error }], 'soon');
      case 'bounced':
        counts.bounced++;
        await this.records.add(notice.id, [{ ...base, state: 'bounced', at, error: out.error }], 'now');
        return this.bounce(sub.id, out.error);
      case 'retryable': {
        // The delivery policy's budget, counted from the notice's opening: told within about an hour, or failed.
        const decision = decideRetry({
          attemptsMade: base.attempts,
          retryAfterMs: out.retryAfterMs ?? null,
          elapsedMs: this.now() - Date.parse(notice.created_at),
          random: this.d.random,
        });
        if (!decision.retry) {
          counts.failed++;
          return this.records.add(
            notice.id,
            [{ ...base, state: 'failed', at, error: `${out.error}; ${decision.reason}` }],
            'soon',
          );
        }
        counts.retrying++;
        // The retry item first: a crash between the two leaves a `sending` recipient with its
        // retry due (sent again, flagged), never a `retrying` one that nothing will pick up.
        await this.d.notices.retryAt(notice.id, sub.id, this.now() + decision.delayMs);
        return this.records.add(notice.id, [{ ...base, state: 'retrying', at, error: out.error }], 'now');
      }
    }
  }

  private async send(notice: SubscriberNotice, sub: Subscriber, ctx: RunContext): Promise<SendOutcome> {
    const version = sub.token_version;
    const links = this.d.content.links(notice.page.public_url, {
      manage: this.d.tokens.sign({ purpose: 'manage', subscriberId: sub.id, version }),
      unsubscribe: this.d.tokens.sign({ purpose: 'unsubscribe', subscriberId: sub.id, version }),
    });
    if (sub.kind === 'webhook')
      return this.d.webhook.notice(sub, notice.id, this.d.content.webhookPayload(notice, links, this.now()));
    if (this.d.relay === null || this.d.from === null)
      return { outcome: 'failed', error: 'e-mail is off here (HERALD_SMTP_URL is not set)' };
    const key = `${notice.id}|${sub.locale}`;
    let mailFor = ctx.mails.get(key);
    if (mailFor === undefined) {
      mailFor = this.d.content.noticeMail(notice, sub.locale, ctx.overrides);
      ctx.mails.set(key, mailFor);
    }
    const mail = mailFor(links);
    return this.d.relay.send({
      from: this.d.from,
      to: sub.address,
      subject: mail.subject,
      text: mail.text,
      html: mail.html,
      headers: mail.headers,
      messageId: noticeMessageId(notice.id, sub.id),
    });
  }

  /** The subscriber is stopped: a confirmed one becomes bounced (compare-and-set, read again on a lost race). */
  private async bounce(subscriberId: string, reason: string): Promise<void> {
    await retryOnConflict(
      async () => {
        const cur = await this.d.subscribers.get(subscriberId);
        if (cur === null || cur.state !== 'confirmed') return true;
        const next: Subscriber = {
          ...cur,
          state: 'bounced',
          bounced_at: this.iso(),
          bounce_reason: reason,
          rev: cur.rev + 1,
        };
        return (await this.d.subscribers.put(next, cur.rev)) ? true : LOST_RACE;
      },
      () => new Error(`subscriber ${subscriberId} kept changing`),
      { attempts: 10 },
    );
  }

  private async notice(id: string): Promise<SubscriberNotice | null> {
    const hit = this.cache.get(id);
    if (hit) return hit;
    const n = await this.d.notices.get(id);
    if (n !== null) {
      if (this.cache.size >= 16) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(id, n);
    }
    return n;
  }

  private now(): number {
    return this.d.clock.now().getTime();
  }

  private iso(): string {
    return this.d.clock.now().toISOString();
  }
}

interface RunContext {
  limiter: Limiter;
  /**
   * Recipients marked `sending` whose send has not started, across the step's items: at most
   * `inFlight`, so a crash leaves few marked that were never sent (they are sent by the next
   * taker, flagged possible_duplicate although only one mail reaches them).
   */
  marks: Limiter;
  overrides: SubscriberTemplateOverrides | null;
  /** The step's notice mails, by notice and locale (the overrides are the step's). */
  mails: Map<string, (links: SubscriberLinks) => RenderedMail>;
  /** Sends started by this step. */
  sends: number;
}

/** A recipient to send to, and its record for this notice (null: none yet). */
interface Todo {
  sub: Subscriber;
  prev: Recipient | null;
}

/** A recipient marked for a send. */
interface Marked {
  sub: Subscriber;
  base: { subscriber_id: string; attempts: number; possible_duplicate: boolean };
  sending: Recipient;
}

/** A claimed work item as last leased, and when to extend that lease. */
interface Held {
  work: NoticeWork;
  renewAt: number;
}

/** How long a result may wait for the next write before it is written on its own. */
export const RESULT_FLUSH_MS = 5;

/**
 * Recipient records coalesced, one write per notice for all that are waiting. `now`: written at
 * the next turn of the event loop, with whatever else is waiting (a `sending` mark must be stored
 * before its send starts). `soon`: a result, written with the next `now` write or after
 * RESULT_FLUSH_MS, or at once when `maxWaiting` are waiting, whichever comes first (so at most
 * about `maxWaiting` answered sends are unrecorded at any moment, besides those in the write under
 * way); a result not yet written when the process dies leaves
 * its recipient `sending`, sent again by the next taker and flagged possible_duplicate. Each add
 * settles when the write holding it has. One write at a time: what comes meanwhile waits for the
 * next.
 */
export class RecordQueue {
  private pending = new Map<string, { rs: Recipient[]; done: { resolve(): void; reject(e: unknown): void }[] }>();
  private busy = false;
  private urgent = false;
  private timer: NodeJS.Timeout | null = null;

  /** Records waiting for the next write. */
  private waiting = 0;

  constructor(
    private readonly notices: Pick<NoticeRepo, 'record'>,
    /** Results waiting at most: this many make the next write start at once. */
    private readonly maxWaiting: number,
    private readonly flushMs = RESULT_FLUSH_MS,
  ) {}

  add(noticeId: string, rs: readonly Recipient[], when: 'now' | 'soon'): Promise<void> {
    let batch = this.pending.get(noticeId);
    if (batch === undefined) {
      batch = { rs: [], done: [] };
      this.pending.set(noticeId, batch);
    }
    batch.rs.push(...rs);
    this.waiting += rs.length;
    const settled = new Promise<void>((resolve, reject) => batch.done.push({ resolve, reject }));
    if (when === 'now' || this.waiting >= this.maxWaiting) this.urgent = true;
    this.schedule();
    return settled;
  }

  private schedule(): void {
    if (this.busy) return;
    if (this.urgent) {
      if (this.timer !== null) clearTimeout(this.timer);
      this.timer = null;
      this.busy = true;
      setImmediate(() => void this.flush());
    } else
      this.timer ??= setTimeout(() => {
        this.timer = null;
        this.busy = true;
        void this.flush();
      }, this.flushMs);
  }

  private async flush(): Promise<void> {
    const batches = this.pending;
    this.pending = new Map();
    this.urgent = false;
    this.waiting = 0;
    await Promise.all(
      [...batches].map(([noticeId, b]) =>
        this.notices.record(noticeId, b.rs).then(
          () => b.done.forEach((d) => d.resolve()),
          (e: unknown) => b.done.forEach((d) => d.reject(e)),
        ),
      ),
    );
    this.busy = false;
    if (this.pending.size > 0) this.schedule();
  }
}

/** Sends in flight, counted: `landed` settles once none is (true when every one ended well). */
class Flight {
  private n = 0;
  private ok = true;
  private wake: (() => void) | null = null;

  start(): void {
    this.n++;
  }

  end(ok: boolean): void {
    if (!ok) this.ok = false;
    if (--this.n === 0 && this.wake !== null) this.wake();
  }

  async landed(): Promise<boolean> {
    if (this.n > 0) await new Promise<void>((resolve) => (this.wake = resolve));
    return this.ok;
  }
}

/** At most `n` units held at once; who asks for more than are free waits, in order. */
export class Limiter {
  private held = 0;
  private readonly waiting: { k: number; resolve: () => void }[] = [];

  constructor(private readonly n: number) {}

  /** `k` units (at most `n`) at once, never some of them. */
  acquire(k = 1): Promise<void> {
    if (this.waiting.length === 0 && this.held + k <= this.n) {
      this.held += k;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push({ k, resolve }));
  }

  release(k = 1): void {
    this.held -= k;
    for (let w = this.waiting[0]; w !== undefined && this.held + w.k <= this.n; w = this.waiting[0]) {
      this.waiting.shift();
      this.held += w.k;
      w.resolve();
    }
  }
}

/** How often the worker erases what the retention let go (docs/subscribers.md, "Retention"). */
export const ERASE_EVERY_MS = 60_000;
/** How long an idle dispatcher waits before looking again: a notice starts going out within about this. */
export const NOTICE_IDLE_MS = 100;

/**
 * The worker role's loops: the dispatcher (again at once while it finds work), the subscription
 * mail (confirmations, challenges) and, every minute, eraseExpired. Closing stops all three and
 * waits for the step each is in.
 */
export function startSubscriberWorker(o: {
  dispatcher: Pick<NoticeDispatcher, 'step'>;
  txMail: { runDue(): Promise<number> };
  subscribers: Pick<SubscriberRepo, 'eraseExpired'>;
  clock: Clock;
  log: Logger;
  idleMs?: number;
}): { close(): Promise<void> } {
  const idle = o.idleMs ?? NOTICE_IDLE_MS;
  const again = { nextWaitMs: (n: number) => (n > 0 ? 0 : idle) };
  const loops = [
    startSweepLoop(
      { runDue: () => o.dispatcher.step() },
      idle,
      o.log,
      { failed: 'subscriber notice dispatch failed', level: 'debug' },
      again,
    ),
    startSweepLoop(o.txMail, idle, o.log, { failed: 'subscription mail failed', level: 'debug' }, again),
    startSweepLoop(
      {
        runDue: async () => {
          let erased = 0;
          // A backlog is erased a thousand at a time, without holding Redis for long at once.
          for (let i = 0; i < 100; i++) {
            const n = await o.subscribers.eraseExpired(o.clock.now().getTime(), 1000);
            erased += n;
            if (n < 1000) break;
          }
          return erased;
        },
      },
      ERASE_EVERY_MS,
      o.log,
      { done: 'expired subscribers erased', failed: 'erasing expired subscribers failed', level: 'info' },
    ),
  ];
  return {
    async close() {
      await Promise.all(loops.map((l) => l.close()));
    },
  };
}
