import type { AddressInfo } from 'node:net';
import { simpleParser, type AddressObject } from 'mailparser';
import { SMTPServer, type SMTPServerError, type SMTPServerSession } from 'smtp-server';
import { waitFor } from '../wait.js';
import { createSelfSignedCert } from './self-signed-cert.js';

/**
 * A real SMTP server (smtp-server) on 127.0.0.1 and a random port, collecting every accepted
 * message parsed by mailparser. Options: AUTH with one username/password, and TLS — `starttls`
 * (offered, not required), implicit `tls`, or `none` — with a certificate made at test time for
 * `localhost` and 127.0.0.1 (see self-signed-cert.ts; give `cert` to the client as its CA).
 * Rejections are scripted per SMTP stage with 4xx/5xx codes.
 */

export interface ReceivedMail {
  envelope: { from: string; to: string[] };
  from: string | null;
  to: string[];
  cc: string[];
  subject: string;
  text: string;
  html: string | null;
  /** Message-ID, with its angle brackets. */
  messageId: string | null;
  /** In-Reply-To: the Message-ID this mail answers (threading), with its angle brackets. */
  inReplyTo: string | null;
  /** References, in order (mailparser gives a string for one id, an array for several). */
  references: string[];
  /** Header lines as received, lower-case names. */
  headers: Map<string, unknown>;
  /** The authenticated user, if the client logged in. */
  authUser: string | null;
  /** Whether the session was TLS (STARTTLS or implicit) when the message came. */
  secure: boolean;
  raw: string;
}

/**
 * The mail the SMTP tests send (an outage note from herald@ to on-call, copied to the boss) and
 * what the peer records of it when it came over TLS from a client logged in as `authUser`.
 */
export const OUTAGE_MAIL = {
  from: 'herald@example.com',
  to: 'oncall@example.com',
  cc: 'boss@example.com',
  subject: 'DB down',
  text: 'primary is gone',
  html: '<p>primary is gone</p>',
} as const;

export function receivedOutageMail(authUser: string): Partial<ReceivedMail> {
  const { from, to, cc, subject, html } = OUTAGE_MAIL;
  return { from, to: [to], cc: [cc], subject, html, authUser, secure: true, envelope: { from, to: [to, cc] } };
}

export type SmtpStage = 'mail' | 'rcpt' | 'data';

export interface SmtpReply {
  /** Where to answer: MAIL FROM, RCPT TO, or after DATA (default). */
  stage?: SmtpStage;
  /** 4xx or 5xx; absent = accept (useful with delayMs alone). */
  code?: number;
  message?: string;
  /** Wait before answering at that stage. */
  delayMs?: number;
}

export interface SmtpPeer {
  host: string;
  port: number;
  /** PEM certificate to trust (`tls.ca`) when TLS is on, else null. */
  cert: string | null;
  messages: ReceivedMail[];
  /** Sessions that failed to authenticate. */
  authFailures: number;
  /** Queues replies; each is used once, at its stage, in order. */
  script(...replies: SmtpReply[]): void;
  waitForMessages(n: number, timeoutMs?: number): Promise<ReceivedMail[]>;
  clear(): void;
  close(): Promise<void>;
}

export interface SmtpPeerOptions {
  auth?: { username: string; password: string };
  tls?: 'starttls' | 'tls' | 'none';
}

const addresses = (a: AddressObject | AddressObject[] | undefined): string[] =>
  (Array.isArray(a) ? a : a ? [a] : []).flatMap((o) => o.value.map((v) => v.address ?? '')).filter((x) => x !== '');

export async function startSmtp(opts: SmtpPeerOptions = {}): Promise<SmtpPeer> {
  const mode = opts.tls ?? 'none';
  const tls = mode === 'none' ? null : createSelfSignedCert();
  const messages: ReceivedMail[] = [];
  let queue: SmtpReply[] = [];
  let authFailures = 0;

  /** Applies the next scripted reply for `stage`, if any, then calls back. */
  const answer = (stage: SmtpStage, done: (err?: Error | null) => void): void => {
    const i = queue.findIndex((r) => (r.stage ?? 'data') === stage);
    const r = i >= 0 ? queue.splice(i, 1)[0] : undefined;
    const finish = () => {
      if (r?.code === undefined) return done();
      const err: SMTPServerError = new Error(
        r.message ?? (r.code >= 500 ? 'Requested action not taken' : 'Try again later'),
      );
      err.responseCode = r.code;
      done(err);
    };
    if (r?.delayMs) setTimeout(finish, r.delayMs);
    else finish();
  };

  const server = new SMTPServer({
    secure: mode === 'tls',
    ...(tls ? { key: tls.key, cert: tls.cert } : {}),
    disabledCommands: mode === 'none' ? ['STARTTLS'] : [],
    authOptional: opts.auth === undefined,
    allowInsecureAuth: true,
    logger: false,
    banner: 'Herald test SMTP',
    onAuth(auth, _session, cb) {
      if (opts.auth && auth.username === opts.auth.username && auth.password === opts.auth.password)
        return cb(null, { user: auth.username });
      authFailures++;
      const err: SMTPServerError = new Error('Invalid username or password');
      err.responseCode = 535;
      return cb(err);
    },
    onMailFrom: (_a, _s, cb) => answer('mail', cb),
    onRcptTo: (_a, _s, cb) => answer('rcpt', cb),
    onData(stream, session: SMTPServerSession, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        answer('data', (err) => {
          if (err) return cb(err);
          simpleParser(raw)
            .then((m) => {
              const mailFrom = session.envelope.mailFrom;
              messages.push({
                envelope: { from: mailFrom ? mailFrom.address : '', to: session.envelope.rcptTo.map((r) => r.address) },
                from: addresses(m.from)[0] ?? null,
                to: addresses(m.to),
                cc: addresses(m.cc),
                subject: m.subject ?? '',
                text: m.text ?? '',
                html: m.html === false ? null : m.html,
                messageId: m.messageId ?? null,
                inReplyTo: m.inReplyTo ?? null,
                references: m.references === undefined ? [] : [m.references].flat(),
                headers: m.headers,
                authUser: typeof session.user === 'string' ? session.user : null,
                secure: session.secure,
                raw,
              });
              cb();
            })
            .catch((e: unknown) => {
              const bad: SMTPServerError = new Error(`could not parse message: ${String(e)}`);
              bad.responseCode = 554;
              cb(bad);
            });
        });
      });
    },
  });
  server.on('error', () => undefined); // a client dropping mid-session is not a test failure

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.server.address() as AddressInfo).port;

  return {
    host: '127.0.0.1',
    port,
    cert: tls?.cert ?? null,
    messages,
    get authFailures() {
      return authFailures;
    },
    script(...replies) {
      queue.push(...replies);
    },
    waitForMessages: (n, timeoutMs = 10_000) =>
      waitFor(() => messages.length >= n && messages, { timeoutMs, what: `${n} e-mail(s) at the SMTP peer` }),
    clear() {
      messages.length = 0;
      queue = [];
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
