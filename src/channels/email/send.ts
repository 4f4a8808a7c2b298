import { isIP } from 'node:net';
import nodemailer, {
  type NodemailerError,
  type SMTPSentMessageInfo,
  type SMTPTransportOptions,
  type SendMailOptions,
} from 'nodemailer';
import { normalizeHost } from '../../domain/connection/address-policy.js';
import type { EmailConfig } from './config.js';
import { classifySmtpCode } from '../../domain/execution/delivery-policy.js';
import type { ChannelAdapter, OutboundMessage, SendResult, SmtpClient, SmtpServer } from '../../contracts/channel.js';
import { OutboundError } from '../../delivery/outbound/error.js';
import type { OutboundGuard } from '../../delivery/outbound/guard.js';
import { clip, fromOutboundError, permanent, refused, retryable } from '../common/http-outcome.js';
import { subjectOf } from '../common/message-text.js';

/**
 * E-mail over SMTP with nodemailer: one transport per send (a fresh, guarded resolution every
 * time — no pooled socket to a name that may since resolve elsewhere), closed after.
 *
 * Outbound safety: the host is resolved ONCE by the outbound guard and nodemailer connects to
 * that checked IP (a literal host means nodemailer does no lookup of its own), while TLS still
 * verifies the certificate against the configured name (`tls.servername`). `security`: `tls` =
 * implicit TLS, `starttls` = the upgrade is required (never plain-text fallback), `none` = plain.
 *
 * Every message carries `X-Herald-Delivery: <delivery id>` and a Message-ID derived from the
 * delivery id, so a retry is the same message to the receiving system (and recognisable); that
 * Message-ID is the delivered message's ref. A later message of the incident's conversation
 * replies to the first one: `In-Reply-To` and `References` name it (every client threads on
 * them) and the subject gets `Re: ` (Gmail also wants the subjects to match). A sent mail cannot
 * be edited or recalled, so `edit` and `delete` fail permanently without connecting.
 *
 * Outcomes: the SMTP reply code decides (classifySmtpCode: 4xx retryable, 5xx permanent); a
 * failed login is permanent; connection trouble is retryable; a time-out after the whole message
 * was handed to the server (waiting for the final 250) is ambiguous — it may have been accepted.
 * When the server refuses some recipients but accepts others, the message went out and is
 * delivered: a retry would send it again to everyone who already has it.
 */

export interface SmtpClientOptions {
  /** The outbound guard (the same one as HTTP deliveries): resolves and checks the host. */
  guard: OutboundGuard;
  /**
   * Extra CA certificates to trust (PEM). For tests — the SMTP peer's self-signed certificate —
   * or an operator's private CA. Verification itself is never turned off by Herald.
   */
  ca?: string | string[];
  connectionTimeoutMs?: number;
  greetingTimeoutMs?: number;
  /** Inactivity allowed on the socket, e.g. waiting for the answer to the message (default 30 s). */
  socketTimeoutMs?: number;
  /** nodemailer.createTransport by default (injectable for tests). */
  createTransport?: (options: SMTPTransportOptions) => SmtpTransport;
  /** Monotonic clock for latencies. */
  now?: () => number;
}

/** The part of a nodemailer transport Herald uses. */
export interface SmtpTransport {
  sendMail(mail: SendMailOptions): Promise<SMTPSentMessageInfo>;
  verify(): Promise<true>;
  close(): void;
}

/** Codes of a failed or refused login. */
const AUTH_CODES = new Set(['EAUTH', 'ENOAUTH', 'EOAUTH2']);

export function createSmtpClient(o: SmtpClientOptions): SmtpClient {
  const now = o.now ?? (() => performance.now());
  const make = o.createTransport ?? ((options: SMTPTransportOptions) => nodemailer.createTransport(options));

  /** Resolves through the guard and builds the transport; `progress` learns when the message is out. */
  async function open(config: SmtpServer, progress: { messageSent: boolean }): Promise<SmtpTransport> {
    const [first] = await o.guard.resolve(config.host);
    if (!first) throw new OutboundError('dns_failure', `${normalizeHost(config.host)} has no address`);
    const name = normalizeHost(config.host);
    return make({
      host: first.address,
      port: config.port,
      secure: config.security === 'tls',
      requireTLS: config.security === 'starttls',
      ignoreTLS: config.security === 'none',
      ...(config.username !== undefined ? { auth: { user: config.username, pass: config.password ?? '' } } : {}),
      tls: {
        ...(isIP(name) === 0 ? { servername: name } : {}),
        ...(o.ca !== undefined ? { ca: o.ca } : {}),
      },
      connectionTimeout: o.connectionTimeoutMs ?? 10_000,
      greetingTimeout: o.greetingTimeoutMs ?? 10_000,
      socketTimeout: o.socketTimeoutMs ?? 30_000,
      // nodemailer logs the end of the message stream at info level: that is the moment after
      // which a failure is ambiguous (the server may have queued the message).
      logger: {
        info(entry: unknown) {
          if (
            entry !== null &&
            typeof entry === 'object' &&
            (entry as { tnx?: unknown }).tnx === 'message' &&
            'outByteCount' in entry
          )
            progress.messageSent = true;
        },
      },
    });
  }

  return {
    async send(config, mail) {
      const started = now();
      const progress = { messageSent: false };
      let transport: SmtpTransport | null = null;
      try {
        transport = await open(config, progress);
        const info = await transport.sendMail(mail);
        const code = replyCode(info.response);
        return {
          outcome: 'delivered',
          httpStatus: null,
          providerCode: code === null ? null : String(code),
          latencyMs: Math.round(now() - started),
        };
      } catch (e) {
        return smtpFailure(e, normalizeHost(config.host), progress.messageSent, Math.round(now() - started));
      } finally {
        transport?.close();
      }
    },

    async verify(config) {
      const started = now();
      let transport: SmtpTransport | null = null;
      try {
        transport = await open(config, { messageSent: false });
        await transport.verify();
        return { ok: true, latencyMs: Math.round(now() - started) };
      } catch (e) {
        const latencyMs = Math.round(now() - started);
        return { ok: false, latencyMs, result: smtpFailure(e, normalizeHost(config.host), false, latencyMs) };
      } finally {
        transport?.close();
      }
    },
  };
}

/** `250 2.0.0 Ok: queued as …` → 250. */
function replyCode(response: unknown): number | null {
  const m = typeof response === 'string' ? /^(\d{3})/.exec(response) : null;
  return m ? Number(m[1]) : null;
}

/** A nodemailer (or guard) error as a delivery outcome. */
export function smtpFailure(e: unknown, host: string, messageSent: boolean, latencyMs: number): SendResult {
  if (e instanceof OutboundError) return fromOutboundError(e);
  const err = (e ?? {}) as NodemailerError;
  const code = typeof err.code === 'string' ? err.code : '';
  const reply = typeof err.response === 'string' ? clip(err.response) : null;
  const responseCode = typeof err.responseCode === 'number' ? err.responseCode : null;
  const provider = responseCode === null ? null : String(responseCode);
  if (AUTH_CODES.has(code)) {
    return permanent(
      null,
      provider,
      latencyMs,
      `SMTP login to ${host} failed${reply ? `: ${reply}` : ' (no credentials accepted)'}`,
      null,
      'auth',
    );
  }
  if (responseCode !== null && responseCode >= 400) {
    const what = `${host} answered ${reply ?? responseCode}${err.command ? ` (to ${commandName(err.command)})` : ''}`;
    return classifySmtpCode(responseCode) === 'retryable'
      ? retryable(null, provider, latencyMs, what)
      : permanent(null, provider, latencyMs, what, null);
  }
  if (code === 'ECONFIG')
    return permanent(null, null, latencyMs, `SMTP settings for ${host} are unusable: ${clip(err.message)}`, null);
  const why =
    code === 'ETIMEDOUT'
      ? `${host} did not answer in time`
      : code === 'ETLS'
        ? `TLS with ${host} failed`
        : `SMTP connection to ${host} failed`;
  const detail = err.originalCode ?? (code || null);
  return retryable(
    null,
    provider,
    latencyMs,
    `${why}${detail ? ` (${detail})` : ''}${messageSent ? ' after the message was sent; it may have been accepted' : ''}`,
    { ambiguous: messageSent },
  );
}

/** `RCPT TO:<a@b>` → `RCPT TO`: the command, not the addresses. */
const commandName = (command: string): string => command.replace(/[:\s].*$/, '').toUpperCase() || command;

export interface EmailSenderDeps {
  smtp: SmtpClient;
}

/**
 * The Message-ID of a delivery: stable, so every retry is recognisably the same message (a
 * receiving server may drop the duplicate), in the From address's domain as RFC 5322 suggests.
 */
export function messageIdOf(deliveryId: string, from: string): string {
  const address = /<([^<>\s]+)>\s*$/.exec(from)?.[1] ?? from;
  const at = address.lastIndexOf('@');
  const domain = at >= 0 && at < address.length - 1 ? address.slice(at + 1) : 'herald.invalid';
  return `<${deliveryId}.herald@${domain}>`;
}

/** The subject as mailed: a reply in the conversation is marked `Re: ` once, like a person's reply. */
export function mailSubject(message: OutboundMessage): string {
  const subject = subjectOf(message);
  if (!message.thread || /^re:/i.test(subject)) return subject;
  return `Re: ${subject}`;
}

export function emailMessage(config: EmailConfig, message: OutboundMessage): SendMailOptions {
  // nodemailer's own options, not raw headers: it wraps the ids in <> and they win over any
  // custom header of the same name.
  const reply = message.thread ? { inReplyTo: message.thread.id, references: message.thread.id } : {};
  return {
    from: config.from,
    to: config.to,
    ...(config.cc !== undefined && config.cc.length > 0 ? { cc: config.cc } : {}),
    subject: mailSubject(message),
    text: message.content.body,
    ...(message.content.html !== undefined ? { html: message.content.html } : {}),
    messageId: messageIdOf(message.deliveryId, config.from),
    ...reply,
    headers: { 'X-Herald-Delivery': message.deliveryId },
  };
}

/**
 * Herald's limit for one e-mail (subject, text and HTML parts): the same 256 KiB as a webhook
 * body, far below what mail servers take (commonly 10–25 MB) but far above any incident message.
 * Over it the delivery fails permanently before connecting — a clear error instead of a clipped
 * message or a server's 552 after the upload.
 */
export const EMAIL_SIZE_LIMIT = 256 * 1024;

export function createEmailSender(deps: EmailSenderDeps) {
  return {
    async send(target: { config: EmailConfig }, message: OutboundMessage): Promise<SendResult> {
      if (message.action !== undefined && message.action !== 'post')
        return refused(`e-mail cannot ${message.action} a sent message`);
      const mail = emailMessage(target.config, message);
      const size =
        Buffer.byteLength(mailSubject(message)) +
        Buffer.byteLength(message.content.body) +
        Buffer.byteLength(message.content.html ?? '');
      if (size > EMAIL_SIZE_LIMIT)
        return refused(`the e-mail is ${Math.ceil(size / 1024)} KiB, over the 256 KiB limit; shorten the template`);
      const result = await deps.smtp.send(target.config, mail);
      if (result.outcome !== 'delivered') return result;
      // The Message-ID is Herald's own and the server accepted it: it is what later mails reply to.
      return {
        ...result,
        message: { id: messageIdOf(message.deliveryId, target.config.from), channel: null, permalink: null },
      };
    },
  };
}

export const adapter: ChannelAdapter<EmailConfig> = {
  createSender: (deps) => createEmailSender(deps),
  /** SMTP verify: connect, TLS and login, without sending. */
  async check(config, deps) {
    const v = await deps.smtp.verify(config);
    const result: SendResult = v.ok
      ? { outcome: 'delivered', httpStatus: null, providerCode: null, latencyMs: v.latencyMs }
      : v.result;
    return {
      result,
      okDetail: `${config.host}:${config.port} accepted the connection${config.username !== undefined ? ' and the login' : ''}.`,
    };
  },
};

export type { SmtpClient, SmtpVerifyOutcome } from '../../contracts/channel.js';
