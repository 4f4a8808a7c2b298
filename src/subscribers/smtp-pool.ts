import SMTPConnection, {
  type SMTPConnectionOptions,
  type SMTPConnectionSendInfo,
} from 'nodemailer/lib/smtp-connection/index.js';

/**
 * A few SMTP connections to the relay, kept open and shared by the sends of a worker: each send
 * takes an idle connection (or opens one while fewer than `size` are open, or waits for one), runs
 * one transaction on it (MAIL, RCPT, DATA through nodemailer's SMTPConnection, which also does
 * EHLO, STARTTLS, AUTH and dot-stuffing) and gives it back.
 *
 * Why not nodemailer's own pooled transport: it takes mail as options and composes each message
 * through its stream pipeline; the notifier hands over messages already composed (mime.ts), and
 * the pipeline is then pure overhead on every one of them.
 *
 * Connections the relay closes while idle (relays hang up after a few minutes) leave the pool as
 * they close, so a send never starts on one known dead. A transaction that fails with the relay's
 * refusal (a 4xx or 5xx to MAIL, RCPT or DATA) leaves a connection that still works: it is reset
 * (RSET) and kept. Any other failure closes it; the next send opens a new one.
 */

export interface SmtpPoolOptions {
  connection: SMTPConnectionOptions;
  /** The login, or null for a relay that takes mail without one. */
  auth: { user: string; pass: string } | null;
  /** Connections open at most. */
  size: number;
}

/** One connection and whether it can still be used. */
interface Conn {
  smtp: SMTPConnection;
  open: boolean;
}

/** A nodemailer error's shape, as far as the pool looks at it. */
interface SmtpError {
  code?: string;
  responseCode?: number;
}

/** Codes of a refusal within a transaction: the connection itself is fine. */
const REFUSAL_CODES = new Set(['EENVELOPE', 'EMESSAGE']);

export class SmtpPool {
  private readonly idle: Conn[] = [];
  private opened = 0;
  private readonly waiting: { resolve: (c: Conn | null) => void; reject: (e: unknown) => void }[] = [];
  private closed = false;

  constructor(private readonly o: SmtpPoolOptions) {}

  /** Sends one composed message; rejects with nodemailer's error (relay.ts turns it into an outcome). */
  async send(envelope: { from: string; to: string[] }, raw: Buffer): Promise<SMTPConnectionSendInfo> {
    const conn = await this.acquire();
    try {
      const info = await new Promise<SMTPConnectionSendInfo>((resolve, reject) =>
        conn.smtp.send(envelope, raw, (err, result) => (err ? reject(err) : resolve(result))),
      );
      this.release(conn);
      return info;
    } catch (err) {
      this.afterFailure(conn, err as SmtpError);
      throw err;
    }
  }

  /** Closes every connection; sends waiting for one are refused. */
  close(): void {
    this.closed = true;
    for (const c of this.idle.splice(0)) this.drop(c);
    for (const w of this.waiting.splice(0))
      w.reject(Object.assign(new Error('the relay pool is closed'), { code: 'ECONNECTION' }));
  }

  private async acquire(): Promise<Conn> {
    for (;;) {
      if (this.closed) throw Object.assign(new Error('the relay pool is closed'), { code: 'ECONNECTION' });
      const c = this.idle.pop();
      if (c !== undefined) {
        if (c.open) return c;
        continue;
      }
      if (this.opened < this.o.size) return this.connect();
      // null: a connection closed meanwhile, so there is room to open one: look again.
      const got = await new Promise<Conn | null>((resolve, reject) => this.waiting.push({ resolve, reject }));
      if (got !== null) return got;
    }
  }

  /** Back to the pool: to the longest waiting send first. */
  private release(c: Conn): void {
    if (!c.open || this.closed) return this.drop(c);
    const w = this.waiting.shift();
    if (w !== undefined) w.resolve(c);
    else this.idle.push(c);
  }

  private afterFailure(c: Conn, err: SmtpError): void {
    // A 421 is the relay closing the connection, whatever the step.
    if (!c.open || !REFUSAL_CODES.has(err.code ?? '') || err.responseCode === 421) return this.drop(c);
    c.smtp.reset((resetErr) => (resetErr ? this.drop(c) : this.release(c)));
  }

  private drop(c: Conn): void {
    if (c.open) {
      c.open = false;
      c.smtp.close();
    }
  }

  /** A closed connection makes room: a waiting send may open the next one. */
  private gone(c: Conn): void {
    if (c.open) c.open = false;
    const i = this.idle.indexOf(c);
    if (i >= 0) this.idle.splice(i, 1);
  }

  private async connect(): Promise<Conn> {
    this.opened++;
    const smtp = new SMTPConnection({ ...this.o.connection, logger: false });
    const conn: Conn = { smtp, open: true };
    let counted = true;
    const uncount = () => {
      if (!counted) return;
      counted = false;
      this.opened--;
      this.gone(conn);
      this.waiting.shift()?.resolve(null);
    };
    smtp.once('end', uncount);
    // Errors also reach the callback of a send in flight; an idle connection just ends.
    smtp.on('error', () => undefined);
    try {
      await settled(smtp, (done) => smtp.connect(done));
      const auth = this.o.auth;
      if (auth !== null && smtp.allowsAuth) await settled(smtp, (done) => smtp.login({ credentials: auth }, done));
      return conn;
    } catch (err) {
      this.drop(conn);
      uncount();
      throw err;
    }
  }
}

/**
 * Runs a step of setting a connection up: its callback, or the connection's error or end, whatever
 * comes first (a failure while connecting is only emitted, never passed to the callback).
 */
function settled(smtp: SMTPConnection, step: (done: (err?: Error | null) => void) => void): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onError = (err: Error) => finish(err);
    const onEnd = () => finish(Object.assign(new Error('the relay closed the connection'), { code: 'ECONNECTION' }));
    const finish = (err?: Error | null) => {
      smtp.off('error', onError);
      smtp.off('end', onEnd);
      if (err) reject(err);
      else resolve();
    };
    smtp.once('error', onError);
    smtp.once('end', onEnd);
    step(finish);
  });
}
