import type { NodemailerError } from 'nodemailer';
import type { SMTPConnectionOptions } from 'nodemailer/lib/smtp-connection/index.js';
import { classifySmtpCode } from '../domain/execution/delivery-policy.js';
import type { Pacer } from '../ports/index.js';
import { composeMail, type MimeMail } from './mime.js';
import { SmtpPool } from './smtp-pool.js';

/**
 * The SMTP relay subscriber mail goes through (HERALD_SMTP_URL, docs/subscribers.md): a pool of
 * HERALD_SMTP_POOL connections per worker (smtp-pool.ts; kept open between mails: a fan-out of
 * thousands must not pay a TCP and TLS handshake per mail), each mail composed in one pass
 * (mime.ts), paced at HERALD_SMTP_RATE mails a second across every worker by the shared RedisPacer.
 *
 * The relay is the operator's own server, so it is not the outbound guard's business (like the
 * operator's Slack API base): the URL is used as configured.
 *
 * Outcomes: a 5xx to RCPT TO is a bounce (that address is dead: the subscriber is stopped); any
 * other 5xx fails this mail only; 4xx, a refused login and connection trouble are worth a retry.
 * An error text never holds an address: relays quote the recipient in their replies, so it is
 * scrubbed from whatever the relay said.
 */

/**
 * One mail as the relay takes it: rendered, with its stable Message-ID (the same on every
 * attempt, so a receiver drops a repeat); the Date is the moment it is sent.
 */
export type RelayMail = Omit<MimeMail, 'date'>;

export type SendOutcome =
  | { outcome: 'delivered' }
  | { outcome: 'retryable' | 'bounced' | 'failed'; error: string; retryAfterMs?: number | null };

export interface Relay {
  send(mail: RelayMail): Promise<SendOutcome>;
  /** Closes the pool's connections (mails in flight are cut off). */
  close(): void;
}

export interface RelayOptions {
  /** HERALD_SMTP_URL: `smtp://user:pass@host:587` (STARTTLS when offered) or `smtps://…:465`. */
  url: string;
  /** HERALD_SMTP_POOL: connections this worker keeps open. */
  pool: number;
  /** HERALD_SMTP_RATE: mails a second, every worker together. */
  rate: number;
  /** The shared pacer (RedisPacer): only `reserve` is used, one call per chunk of slots. */
  pacer: Pick<Pacer, 'reserve'>;
  /** Extra CA certificates to trust (PEM): the test peer's, or an operator's private CA. */
  ca?: string | string[];
  connectionTimeoutMs?: number;
  /** Inactivity allowed on a connection, e.g. waiting for the answer to a message. */
  socketTimeoutMs?: number;
  /** Local clock (ms) and sleep, for the pacing of slots within a chunk. */
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

/** The pacer's key: one schedule for the relay, whatever the worker. */
export const RELAY_PACING_KEY = 'smtp-relay';

/** The connections' settings and the login, from HERALD_SMTP_URL (user and password percent-decoded). */
export function connectionOptions(o: Pick<RelayOptions, 'url' | 'ca' | 'connectionTimeoutMs' | 'socketTimeoutMs'>): {
  connection: SMTPConnectionOptions;
  auth: { user: string; pass: string } | null;
} {
  const u = new URL(o.url);
  const secure = u.protocol === 'smtps:';
  return {
    connection: {
      host: u.hostname.replace(/^\[|\]$/g, ''),
      port: u.port === '' ? (secure ? 465 : 587) : Number(u.port),
      secure,
      ...(o.ca !== undefined ? { tls: { ca: o.ca } } : {}),
      connectionTimeout: o.connectionTimeoutMs ?? 10_000,
      greetingTimeout: o.connectionTimeoutMs ?? 10_000,
      // Well under the dispatcher's lease: a mail in flight settles before another worker may take its work.
      socketTimeout: o.socketTimeoutMs ?? 20_000,
    },
    auth: u.username !== '' ? { user: decodeURIComponent(u.username), pass: decodeURIComponent(u.password) } : null,
  };
}

export function createRelay(o: RelayOptions): Relay {
  const pool = new SmtpPool({ ...connectionOptions(o), size: o.pool });
  const slots = new SlotChunks(o.pacer, o.rate, o.now ?? Date.now, o.sleep ?? sleep);
  return {
    async send(mail) {
      await slots.take();
      try {
        const composed = await composeMail(mail);
        await pool.send(composed.envelope, composed.raw);
        return { outcome: 'delivered' };
      } catch (e) {
        return relayFailure(e, mail.to);
      }
    },
    close() {
      pool.close();
    },
  };
}

/**
 * How late a window's slots may still be used: a worker slower than the rate uses its slots as it
 * gets to them, up to this long after the window began, instead of dropping them and paying
 * another reservation. The rate then holds over any second give or take this much of it.
 */
export const SLOT_LATE_MS = 50;

/**
 * Pacing slots reserved a chunk at a time: one `reserve` on the shared schedule takes a window of
 * `k` slots (a rule `k` times slower: the schedule moves on by k intervals) and this worker uses
 * them within it, or, when it is slower than the rate, as it gets to them within SLOT_LATE_MS.
 * All workers together keep to the rate: each window is a span of the one schedule no other
 * worker holds. `k` follows this worker's demand: the sends waiting, and while it keeps sending,
 * twice what it used of the last window when it used all of it, what it used when it did not;
 * never more than a tenth of a second of the rate. So a busy worker pays one Redis round trip per
 * chunk, not per mail, and an idle one does not hold a window it will not use. What is left of a
 * window at its end is dropped, never sent late in a burst.
 */
export class SlotChunks {
  private readonly interval: number;
  private readonly maxChunk: number;
  /** The current window: the next slot's time, its end, the slots left and the slots it had (local ms). */
  private next = 0;
  private end = 0;
  private left = 0;
  private size = 0;
  /** Sends waiting for a slot. */
  private waiting = 0;
  private reserving: Promise<void> | null = null;

  constructor(
    private readonly pacer: Pick<Pacer, 'reserve'>,
    private readonly rate: number,
    private readonly now: () => number,
    private readonly sleep: (ms: number) => Promise<void>,
  ) {
    this.interval = 1000 / rate;
    this.maxChunk = Math.max(1, Math.ceil(rate / 10));
  }

  /** Waits for this mail's slot. */
  async take(): Promise<void> {
    this.waiting++;
    let at: number | null = null;
    try {
      for (;;) {
        at = this.claim();
        if (at !== null) break;
        this.reserving ??= this.reserveForWaiting().finally(() => {
          this.reserving = null;
        });
        await this.reserving;
      }
    } finally {
      this.waiting--;
    }
    const wait = at - this.now();
    if (wait > 0) await this.sleep(wait);
  }

  /** The time of the next slot of the current window, or null when it is used up or over. */
  private claim(): number | null {
    if (this.left <= 0) return null;
    const at = Math.max(this.next, this.now());
    if (at >= this.end) return null;
    this.next = at + this.interval;
    this.left--;
    return at;
  }

  /** A window for the sends waiting once this turn of the event loop is over (they start together). */
  private async reserveForWaiting(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    await this.reserve(this.demand());
  }

  /** How many slots the next window holds. */
  private demand(): number {
    const used = this.size - this.left;
    // Still sending (the last window is not long over): as much as the last one, or twice that.
    const busy = this.size > 0 && this.now() < this.end + SLOT_LATE_MS;
    const trend = busy ? (this.left <= 0 ? used * 2 : used) : 0;
    return Math.min(this.maxChunk, Math.max(1, this.waiting, trend));
  }

  private async reserve(k: number): Promise<void> {
    const wait = await this.pacer.reserve(RELAY_PACING_KEY, { perSecond: this.rate / k, burst: 1 });
    this.next = this.now() + wait;
    this.end = this.next + Math.max(k * this.interval, SLOT_LATE_MS);
    this.left = k;
    this.size = k;
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Codes of a refused login: the operator's settings, so worth retrying once fixed. */
const AUTH_CODES = new Set(['EAUTH', 'ENOAUTH', 'EOAUTH2']);

/** A nodemailer error as an outcome, its text free of the recipient's address. */
export function relayFailure(e: unknown, recipient: string): SendOutcome {
  const err = (e ?? {}) as NodemailerError & { rejected?: unknown };
  const code = typeof err.code === 'string' ? err.code : '';
  const responseCode = typeof err.responseCode === 'number' ? err.responseCode : null;
  const reply = typeof err.response === 'string' ? scrub(err.response, recipient) : null;
  const command = typeof err.command === 'string' ? commandName(err.command) : null;
  if (responseCode !== null && responseCode >= 400) {
    const error = `the relay answered ${reply ?? responseCode}${command ? ` (to ${command})` : ''}`;
    if (classifySmtpCode(responseCode) === 'retryable') return { outcome: 'retryable', error };
    const atRcpt = command === 'RCPT' || (code === 'EENVELOPE' && Array.isArray(err.rejected));
    if (atRcpt && !AUTH_CODES.has(code)) return { outcome: 'bounced', error };
    if (AUTH_CODES.has(code)) return { outcome: 'retryable', error: `the relay refused the login (${responseCode})` };
    return { outcome: 'failed', error };
  }
  if (AUTH_CODES.has(code)) return { outcome: 'retryable', error: 'the relay refused the login' };
  if (code === 'ECONFIG') return { outcome: 'failed', error: 'the relay settings are unusable' };
  const why =
    code === 'ETIMEDOUT' ? 'the relay did not answer in time' : code === 'ETLS' ? 'TLS with the relay failed' : null;
  return { outcome: 'retryable', error: why ?? `the connection to the relay failed${code ? ` (${code})` : ''}` };
}

/** `RCPT TO:<a@b>` → `RCPT`: the command, not its arguments. */
const commandName = (command: string): string => (command.trim().split(/[\s:]/)[0] ?? '').toUpperCase();

/**
 * The relay's reply without the recipient: anything that looks like an address, the address
 * itself (any case), then clipped.
 */
export function scrub(reply: string, recipient: string): string {
  let out = reply.replace(/<?[^\s<>@"]+@[^\s<>"]+>?/g, '<recipient>');
  // A relay may quote it in a shape the pattern misses: the exact text too, in any case.
  if (recipient !== '') out = out.replace(new RegExp(escapeRegExp(recipient), 'gi'), '<recipient>');
  out = out.replace(/\s+/g, ' ').trim();
  return out.length > 200 ? `${out.slice(0, 199)}…` : out;
}

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
