/**
 * The one rule for the text Herald accepts: every string of a /v1 body, every Slack submission
 * field and every connection config field, object keys included. It is applied in one place per
 * entry point (http/middleware/body.ts for every body, validation.ts `safeParseInput` for every
 * schema parse, which both the API services and the Slack submissions go through), so no field
 * can opt out by forgetting it.
 *
 * Two kinds of field:
 * - ONE-LINE (titles, names, subjects, usernames, URLs, tokens, ids, object keys: every field
 *   not listed as free text) refuses every C0 control (U+0000–U+001F, tab, LF and CR included),
 *   DEL (U+007F), every C1 control (U+0080–U+009F: U+009B is a terminal's escape introducer),
 *   the line and paragraph separators (U+2028, U+2029), U+FEFF (a byte order mark pasted with
 *   the text, invisible), the bidi embedding, override and isolate controls (U+202A–U+202E,
 *   U+2066–U+2069: they reorder what a reader sees, the "Trojan source" trick in a title or a
 *   connection's name), and lone UTF-16 surrogates (not characters; no UTF-8 can carry them).
 * - FREE TEXT (descriptions, notes, reasons, message bodies, variable values: FREE_TEXT_KEYS)
 *   keeps tab, LF and CRLF (CR only directly before LF: nothing normalises line endings, so a
 *   bare CR, which terminals and some chat clients treat as "back to the line's start", is
 *   refused), U+2028/U+2029 (they are line breaks) and the bidi controls (right-to-left prose
 *   may need isolates); it refuses every other C0 control, DEL, C1, U+FEFF (deprecated as a
 *   zero-width no-break space since Unicode 3.2; U+2060 WORD JOINER replaces it) and lone
 *   surrogates.
 *
 * Everything else is text: accents and combining marks, emoji and their ZWJ sequences (U+200D),
 * variation selectors, LRM/RLM (U+200E/U+200F), non-breaking spaces inside a value. A refusal
 * names the field and shows the first offending code point as U+XXXX with its position, so an
 * invisible character can be found; nothing is trimmed or replaced silently.
 *
 * URLs and tokens are stricter still (visible ASCII only, channels/common/config-fields.ts) and
 * are refused, never trimmed, when anything else leads or trails them.
 */

export type TextKind = 'one_line' | 'free_text';

/**
 * Fields whose text people write in several lines: there a tab, a newline and a CRLF are text.
 * Everything under `variables` counts too (values typed at execute or a correction, declarations
 * with their defaults and descriptions on a template). Every other string is one line.
 */
export const FREE_TEXT_KEYS: ReadonlySet<string> = new Set([
  'description',
  'impact',
  'body',
  'html',
  'notes',
  'note',
  'reason',
  'resolution_summary',
  'summary',
  'message',
  'text',
  'default',
]);

/** The field kind of a key, given whether its parent is already free text. */
export function kindOfKey(key: string, parentKind: TextKind): TextKind {
  return parentKind === 'free_text' || key === 'variables' || FREE_TEXT_KEYS.has(key) ? 'free_text' : 'one_line';
}

const LONE_SURROGATE = '[\\uD800-\\uDBFF](?![\\uDC00-\\uDFFF])|(?<![\\uD800-\\uDBFF])[\\uDC00-\\uDFFF]';
/** What a one-line field refuses (the first match is reported). */
const ONE_LINE_REFUSED = new RegExp(
  `[\\u0000-\\u001F\\u007F-\\u009F\\u2028\\u2029\\uFEFF\\u202A-\\u202E\\u2066-\\u2069]|${LONE_SURROGATE}`,
);
/** What free text refuses: tab and LF are allowed, CR only before LF. */
const FREE_TEXT_REFUSED = new RegExp(
  `[\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F\\uFEFF]|\\r(?!\\n)|${LONE_SURROGATE}`,
);

export type TextViolationCode = 'control_character' | 'invisible_character' | 'invalid_unicode';

export interface TextViolation {
  code: TextViolationCode;
  /** The offending code point (a lone surrogate's own value). */
  codePoint: number;
  /** Its position in the text, counted in code points from 1 (what an editor's column shows). */
  position: number;
  /** Says what was found and where, without the field's name (the caller adds it). */
  message: string;
}

/** `U+007F`: the notation a refusal shows (at least four hex digits, upper case). */
export function codePointLabel(cp: number): string {
  return `U+${cp.toString(16).toUpperCase().padStart(4, '0')}`;
}

const NAMES: ReadonlyMap<number, string> = new Map([
  [0x00, 'NUL'],
  [0x09, 'TAB'],
  [0x0a, 'LINE FEED'],
  [0x0d, 'CARRIAGE RETURN'],
  [0x1b, 'ESCAPE'],
  [0x7f, 'DELETE'],
  [0x9b, 'CONTROL SEQUENCE INTRODUCER'],
  [0x2028, 'LINE SEPARATOR'],
  [0x2029, 'PARAGRAPH SEPARATOR'],
  [0xfeff, 'BYTE ORDER MARK'],
]);

function describe(cp: number): string {
  const name = NAMES.get(cp);
  return name === undefined ? codePointLabel(cp) : `${codePointLabel(cp)} (${name})`;
}

/**
 * The first thing `text` holds that a field of `kind` may not, or null when it follows the rule.
 * One regular-expression scan: linear in the text, whatever it holds.
 */
export function textViolation(text: string, kind: TextKind): TextViolation | null {
  const m = (kind === 'one_line' ? ONE_LINE_REFUSED : FREE_TEXT_REFUSED).exec(text);
  if (m === null) return null;
  const cp = text.charCodeAt(m.index);
  // Code points before the match: surrogate pairs count once.
  let position = 1;
  for (let i = 0; i < m.index; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < m.index) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
    position++;
  }
  const at = `${describe(cp)} at character ${position}`;
  if (cp >= 0xd800 && cp <= 0xdfff)
    return {
      code: 'invalid_unicode',
      codePoint: cp,
      position,
      message: `holds a lone UTF-16 surrogate, ${at}: not a character.`,
    };
  const isControl = cp <= 0x1f || (cp >= 0x7f && cp <= 0x9f) || cp === 0x2028 || cp === 0x2029;
  if (isControl)
    return {
      code: 'control_character',
      codePoint: cp,
      position,
      message:
        kind === 'one_line'
          ? `holds ${at}: this field is one line, with no control characters or line breaks.`
          : `holds ${at}: only tab and line breaks (LF or CRLF) may be used among control characters.`,
    };
  return {
    code: 'invisible_character',
    codePoint: cp,
    position,
    message:
      cp === 0xfeff
        ? `holds ${at}, an invisible character (usually pasted with the text): remove it.`
        : `holds ${at}, a bidirectional control that reorders what a reader sees: this field may not hold one.`,
  };
}
