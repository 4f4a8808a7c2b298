/**
 * Escaping of VALUES (incident fields, caller variables) for each target format, so a value is
 * shown as typed and can never become a mention or markup (docs/explanation/delivery-semantics.md). A template's own
 * literal text is never passed through these: the author's formatting is kept.
 *
 * Two strategies, because the platforms differ:
 * - formats with a real escape syntax get it: HTML entities (e-mail HTML, Telegram HTML),
 *   backslashes (CommonMark for Discord, Mattermost and Teams; Telegram MarkdownV2);
 * - formats without one (Slack mrkdwn, Google Chat's text markup) get a zero-width space
 *   (U+200B) on both sides of each formatting character, which is invisible but breaks the
 *   "marker next to a word" pattern those parsers look for.
 * Every chat format also neutralises mentions the same way: a U+200B after the `@`.
 */

export const ZWSP = '\u200B';

const isWordChar = (c: string | undefined): boolean => c !== undefined && /[\p{L}\p{N}]/u.test(c);

/**
 * `@everyone`, `@here`, `@channel` and `@all` anywhere, and any `@name` that starts a word (so
 * `@oncall` is neutralised while `alice@example.com` is left readable), get a U+200B after the
 * `@`: Discord, Mattermost, Telegram and Slack (`link_names`) all resolve those from plain text.
 */
export function neutraliseMentions(value: string): string {
  return value
    .replace(/@(?=(?:everyone|here|channel|all)\b)/giu, `@${ZWSP}`)
    .replace(/(^|[^\p{L}\p{N}_.+-])@(?=[\p{L}\p{N}_])/gu, `$1@${ZWSP}`);
}

/**
 * Wraps each formatting character in U+200B. An underscore between two letters or digits is left
 * alone: no platform italicises inside a word, and identifiers like `db_primary_1` stay copyable.
 */
export function breakMarkers(value: string, markers: string): string {
  let out = '';
  for (let i = 0; i < value.length; i++) {
    const c = value.charAt(i);
    if (!markers.includes(c) || (c === '_' && isWordChar(value[i - 1]) && isWordChar(value[i + 1]))) {
      out += c;
      continue;
    }
    out += ZWSP + c + ZWSP;
  }
  return out;
}

/** Line starts inside a value (the value's own start counts: it may begin a template line). */
export const LINE_START = /(^|\n)([ \t]*)/g;

export function escapeHtml(value: string): string {
  return value
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/**
 * CommonMark as Discord, Mattermost and Teams read it: a backslash before `\ \` * ~ | [ ] < > &`
 * everywhere (links, mentions like `<@id>`, spoilers, HTML entities), before `_` unless inside a
 * word, and before the block markers `# - + =` and `1.`/`1)` at a line start (headings, lists,
 * quotes, Discord `-#` subtext). A backslash before ASCII punctuation is always consumed, so the
 * reader sees the value as typed.
 */
export function escapeMarkdown(value: string): string {
  let out = '';
  for (let i = 0; i < value.length; i++) {
    const c = value.charAt(i);
    if ('\\`*~|[]<>&'.includes(c) || (c === '_' && !(isWordChar(value[i - 1]) && isWordChar(value[i + 1]))))
      out += `\\${c}`;
    else out += c;
  }
  const blocks = out
    .replace(new RegExp(`${LINE_START.source}([#\\-+=])`, 'g'), '$1$2\\$3')
    .replace(new RegExp(`${LINE_START.source}(\\d+)([.)])`, 'g'), '$1$2$3\\$4');
  return neutraliseMentions(blocks);
}

/** The CommonMark format of Discord, Mattermost and Teams. */
export const MARKDOWN = { escape: escapeMarkdown, html: false } as const;
