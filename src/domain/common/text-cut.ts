/**
 * One Unicode-safe way to shorten text, for every Slack view and every channel's length limit.
 *
 * Platforms store text as Unicode: half of a surrogate pair is not a character, and Slack refuses
 * (or mangles) a payload that holds one. Cutting on code units also splits what a reader sees as
 * one character — an emoji ZWJ sequence (👩‍💻), a flag (two regional indicators), a letter with
 * its combining marks. So a cut here falls on a grapheme boundary (`Intl.Segmenter`), and a cut
 * is always marked, so the reader knows there is more.
 *
 * Lengths are counted in UTF-16 code units (`string.length`): that is what Slack, Telegram and
 * Discord count, or more, never less, so a text that fits here fits there.
 */

export const ELLIPSIS = '…';

const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/** A lone surrogate (either half without its partner). */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** The text with every lone surrogate replaced by U+FFFD (what a UTF-8 encoder would write). */
export function wellFormed(text: string): string {
  return text.replace(LONE_SURROGATE, '\uFFFD');
}

/**
 * The end offsets of the whole graphemes that fit in `limit` code units, in order. Only a prefix
 * slightly longer than the limit is segmented: a boundary before the end of that prefix is the
 * same as in the whole text (grapheme rules look back, and at the next code point only — so the
 * prefix must end on a whole code point, else a ZWJ followed by half an emoji looks like a break).
 */
function boundariesWithin(text: string, limit: number): number[] {
  let prefixEnd = limit + 1;
  if (prefixEnd < text.length && isHighSurrogate(text.charCodeAt(prefixEnd - 1))) prefixEnd++;
  const prefix = text.length > prefixEnd ? text.slice(0, prefixEnd) : text;
  const ends: number[] = [];
  for (const s of graphemes.segment(prefix)) {
    const end = s.index + s.segment.length;
    if (end > limit) break;
    // The prefix's own end is a boundary only when it is the text's end.
    if (end === prefix.length && prefix.length < text.length) break;
    ends.push(end);
  }
  return ends;
}

const isHighSurrogate = (unit: number): boolean => unit >= 0xd800 && unit <= 0xdbff;

/** The longest prefix of whole graphemes of at most `limit` code units (may be empty). */
export function graphemePrefix(text: string, limit: number): string {
  if (limit <= 0) return '';
  if (text.length <= limit) return text;
  const ends = boundariesWithin(text, limit);
  const end = ends.at(-1) ?? 0;
  return text.slice(0, end);
}

/**
 * Cuts `text` to at most `max` code units on a grapheme boundary, ending with `marker` when it was
 * cut. Never leaves a lone surrogate. A text that fits is returned as is (made well-formed).
 */
export function cutText(text: string, max: number, marker: string = ELLIPSIS): string {
  const clean = wellFormed(text);
  if (clean.length <= max) return clean;
  if (max <= marker.length) return graphemePrefix(marker, max) || graphemePrefix(clean, max);
  const kept = graphemePrefix(clean, max - marker.length).trimEnd();
  return `${kept}${marker}`;
}

/**
 * Like `cutText`, but never empty: Slack refuses a text object with no text (the whole view or
 * message), so an empty or blank value becomes `fallback`.
 */
export function nonEmptyText(text: string, max: number, fallback = '—', marker: string = ELLIPSIS): string {
  const cut = cutText(text, max, marker);
  return cut.trim() === '' ? cutText(fallback, max, marker) : cut;
}

/**
 * The longest prefix of `value` (whole graphemes) whose `transform`ed form, plus the marker, fits
 * in `max`, transformed and marked; the whole value transformed when it fits. For values whose
 * display form is longer than the value (escaping turns `<` into `&lt;`): cutting the escaped text
 * could split an entity, so the raw value is cut and escaped again.
 */
export function cutTransformed(
  value: string,
  max: number,
  transform: (s: string) => string,
  marker: string = ELLIPSIS,
): string {
  const clean = wellFormed(value);
  const full = transform(clean);
  if (full.length <= max) return full;
  // A transformed text is never shorter than its source here (escaping only adds), so the
  // graphemes within `max` code units of the source are all the candidates.
  const ends = boundariesWithin(clean, Math.max(0, max - marker.length));
  let lo = 0;
  let hi = ends.length;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (transform(clean.slice(0, ends[mid - 1])).length + marker.length <= max) lo = mid;
    else hi = mid - 1;
  }
  const prefix = lo === 0 ? '' : transform(clean.slice(0, ends[lo - 1]).trimEnd());
  return prefix.length + marker.length <= max ? `${prefix}${marker}` : graphemePrefix(marker, max);
}

/** Whether `text` holds a lone surrogate (for validators and tests). */
export function hasLoneSurrogate(text: string): boolean {
  return new RegExp(LONE_SURROGATE.source).test(text);
}
