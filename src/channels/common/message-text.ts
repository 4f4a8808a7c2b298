import { cutText, graphemePrefix } from '../../domain/common/text-cut.js';
import type { OutboundMessage } from '../../contracts/channel.js';

/**
 * Text helpers every sender shares: the visible test marker and the platforms' length limits.
 * Lengths are counted in UTF-16 code units (`string.length`), which is what Slack, Telegram and
 * Discord count or more — never less — so a text cut here is never over the platform's limit.
 * Cuts fall on grapheme boundaries (domain/common/text-cut.ts): never half an emoji or a flag.
 */

/** Prefixed to the subject of a connection test's message, so nobody mistakes it for an incident. */
export const TEST_MARKER = '[Herald test]';

/** Appended where a text was cut to fit a platform's limit, so the reader knows there is more. */
export const TRUNCATION_MARKER = '… (truncated)';

/** The subject, marked when the message is a test. */
export function subjectOf(message: OutboundMessage, marker = TEST_MARKER): string {
  const s = message.content.subject;
  if (!message.test) return s;
  return s === '' ? marker : `${marker} ${s}`;
}

/** Cuts `text` to at most `max` code units, ending with the marker when it was cut. */
export function truncate(text: string, max: number, marker = TRUNCATION_MARKER): string {
  if (text.length <= max) return text;
  if (max <= marker.length) return graphemePrefix(text, max);
  return cutText(text, max, marker);
}

/** The longest prefix of whole graphemes within `end` code units (never half a character). */
export function safeSlice(text: string, end: number): string {
  return graphemePrefix(text, end);
}

/**
 * Splits `text` into pieces of at most `max` code units, preferring to break at a blank line, then
 * a line break, then a space; only an unbroken run longer than `max` is cut mid-word.
 */
export function splitText(text: string, max: number): string[] {
  const pieces: string[] = [];
  let rest = text;
  while (rest.length > max) {
    const window = safeSlice(rest, max);
    // A grapheme longer than `max` on its own (absurd, but possible) is cut by code point.
    const whole =
      window.length > 0 ? window.length : Math.max(1, String.fromCodePoint(rest.codePointAt(0) ?? 32).length);
    const cut =
      [window.lastIndexOf('\n\n'), window.lastIndexOf('\n'), window.lastIndexOf(' ')].find((i) => i > max / 2) ?? whole;
    const piece = rest.slice(0, cut);
    pieces.push(piece);
    rest = rest.slice(cut).replace(/^\s+/, '');
  }
  if (rest.trim() !== '') pieces.push(rest);
  return pieces.filter((p) => p.trim() !== '');
}

/** `subject` and `body` joined for platforms with a single text field. */
export function joinSubject(subject: string, body: string): string {
  if (subject === '') return body;
  if (body === '') return subject;
  return `${subject}\n\n${body}`;
}
