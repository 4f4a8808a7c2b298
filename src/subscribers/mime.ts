import { randomBytes } from 'node:crypto';
import addressparser from 'nodemailer/lib/addressparser/index.js';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import { encodeWords, foldLines } from 'nodemailer/lib/mime-funcs/index.js';
import { encode as qpEncode, wrap as qpWrap } from 'nodemailer/lib/qp/index.js';

/**
 * The wire form (RFC 5322 + MIME) of a subscriber mail: a multipart/alternative of the text and
 * the HTML, both UTF-8 in quoted-printable, with the headers the notifier sets.
 *
 * Why not nodemailer's composer for every mail: a notice goes to up to hundreds of thousands of
 * people, and nodemailer builds each message as a tree of streams (a MIME node per part, header
 * normalising, transfer-encoding detection and two transforms per message), which cost more CPU
 * per mail than everything else the worker does for it together. The message here is always the
 * same shape, so it is written in one pass, with nodemailer's own encoders (quoted-printable,
 * encoded words, folding) doing the encoding. Anything outside that shape (an address that is
 * not plain ASCII, say) goes through nodemailer's MailComposer instead, so such a mail is
 * still formed correctly, only more slowly.
 */

export interface MimeMail {
  /** `Name <address>` or a bare address (HERALD_SMTP_FROM). */
  from: string;
  /** One address. */
  to: string;
  subject: string;
  text: string;
  html: string;
  /** Extra headers, e.g. List-Unsubscribe; single-line values. */
  headers: Record<string, string>;
  /** `<…@…>`. */
  messageId: string;
  /** The Date header's time (default: now). */
  date?: Date;
}

export interface ComposedMail {
  /** The SMTP envelope: the bare sender and recipient addresses. */
  envelope: { from: string; to: string[] };
  /** The message, CRLF line ends, ready for DATA (dot-stuffing is the SMTP client's). */
  raw: Buffer;
}

/** ASCII an address can be written as in a header and an envelope without encoding. */
const PLAIN_ADDRESS = /^[\x21-\x3b\x3d\x3f-\x7e]+@[\x21-\x3b\x3d\x3f-\x7e]+$/;
/** Atext and spaces: a display name that needs no quoting. */
const ATOM_PHRASE = /^[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~ ]+$/;

/** A sender parsed once: the header form and the envelope address. */
interface Sender {
  header: string;
  address: string;
}

const senders = new Map<string, Sender | null>();

/** `Name <address>` as a header (name quoted or encoded as needed); null when not a single plain address. */
function sender(from: string): Sender | null {
  const hit = senders.get(from);
  if (hit !== undefined) return hit;
  const parsed = addressparser(from, { flatten: true });
  const one = parsed.length === 1 ? parsed[0] : undefined;
  let out: Sender | null = null;
  if (one && one.address && PLAIN_ADDRESS.test(one.address)) {
    const name = oneLine(one.name ?? '');
    out = { header: name === '' ? one.address : `${displayName(name)} <${one.address}>`, address: one.address };
  }
  if (senders.size > 16) senders.clear();
  senders.set(from, out);
  return out;
}

function displayName(name: string): string {
  if (/[^\x20-\x7e]/.test(name)) return encodeWords(name, 'Q', 52, true);
  if (ATOM_PHRASE.test(name)) return name;
  return `"${name.replace(/["\\]/g, '\\$&')}"`;
}

/** Line breaks and other control characters never reach a header: they would end it (header injection). */
// eslint-disable-next-line no-control-regex -- control characters are exactly what is removed
const CONTROL = /[\u0000-\u001f\u007f\u2028\u2029]+/g;
export const oneLine = (s: string): string => s.replace(CONTROL, ' ').replace(/\s+/g, ' ').trim();

/** A header line: the value encoded where it is not ASCII, folded at 76 (never inside a word). */
function header(name: string, value: string): string {
  return foldLines(`${name}: ${encodeWords(oneLine(value), 'Q', 52)}`, 76, false);
}

/** A text as a quoted-printable body: CRLF line ends, soft breaks at 76. */
function qp(text: string): string {
  return qpWrap(qpEncode(text.replace(/\r\n|\r|\n/g, '\r\n')), 76);
}

/** Per process: a boundary no encoded body can contain (quoted-printable never writes `_HRLD_` + random hex). */
const BOUNDARY_BASE = `--_HRLD_${randomBytes(12).toString('hex')}`;
let boundaries = 0;

/** RFC 5322's date: `Sat, 28 Nov 2026 00:30:00 +0000`. */
const rfc5322Date = (d: Date): string => d.toUTCString().replace(/GMT$/, '+0000');

/** The mail, composed. */
export async function composeMail(m: MimeMail): Promise<ComposedMail> {
  const from = sender(m.from);
  if (from === null || !PLAIN_ADDRESS.test(m.to)) return composeWithNodemailer(m);
  const boundary = `${BOUNDARY_BASE}_${(boundaries++ % 1e9).toString(36)}`;
  const lines = [
    `Content-Type: multipart/alternative; boundary="${boundary}"`,
    `From: ${from.header}`,
    `To: ${m.to}`,
    header('Subject', m.subject),
    `Message-ID: ${oneLine(m.messageId)}`,
    `Date: ${rfc5322Date(m.date ?? new Date())}`,
    'MIME-Version: 1.0',
  ];
  for (const [name, value] of Object.entries(m.headers)) lines.push(header(name, value));
  const raw = [
    lines.join('\r\n'),
    '',
    `--${boundary}`,
    'Content-Type: text/plain; charset=utf-8',
    'Content-Transfer-Encoding: quoted-printable',
    '',
    qp(m.text),
    `--${boundary}`,
    'Content-Type: text/html; charset=utf-8',
    'Content-Transfer-Encoding: quoted-printable',
    '',
    qp(m.html),
    `--${boundary}--`,
    '',
  ].join('\r\n');
  return { envelope: { from: from.address, to: [m.to] }, raw: Buffer.from(raw, 'utf8') };
}

/** The general case: nodemailer's composer (punycode, SMTPUTF8 addresses, odd senders). */
async function composeWithNodemailer(m: MimeMail): Promise<ComposedMail> {
  const composer = new MailComposer({
    from: m.from,
    to: m.to,
    subject: oneLine(m.subject),
    text: m.text,
    html: m.html,
    headers: m.headers,
    messageId: m.messageId,
    date: m.date ?? new Date(),
  });
  const node = composer.compile();
  const raw = await new Promise<Buffer>((resolve, reject) =>
    node.build((err, message) => (err ? reject(err) : resolve(message))),
  );
  const env = node.getEnvelope();
  return { envelope: { from: env.from === false ? '' : env.from, to: env.to }, raw };
}
