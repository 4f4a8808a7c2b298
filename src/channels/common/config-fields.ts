import { z } from 'zod';
import type { ConnectionTypeDefinition, Destination } from '../../contracts/channel.js';
import { normalizeHost } from '../../domain/connection/address-policy.js';
import { codePointLabel } from '../../domain/common/text-policy.js';

/**
 * What one channel type declares about its connections (its `config.ts`), and the field builders
 * the types share. What a definition holds is the contract's ConnectionTypeDefinition.
 */

/** What a type must say; the rest has a default (no secret maps, no destinations, no read-only check). */
type ConnectionTypeInput<S extends z.ZodType, C extends z.ZodType> = Pick<
  ConnectionTypeDefinition<S, C>,
  'configSchema' | 'secretFields' | 'rules' | 'complete' | 'signingSecretField'
> &
  Partial<Pick<ConnectionTypeDefinition<S, C>, 'createConfigSchema' | 'secretMaps' | 'destinations' | 'readOnlyCheck'>>;

/** Fills the defaults and keeps each definition's config type. */
export function defineConnectionType<S extends z.ZodType, C extends z.ZodType = S>(
  def: ConnectionTypeInput<S, C>,
): ConnectionTypeDefinition<S, C> {
  return {
    createConfigSchema: def.configSchema as unknown as C,
    secretMaps: [],
    destinations: () => [],
    readOnlyCheck: () => null,
    ...def,
  };
}

// ── field builders shared by the types ──────────────────────────────────────────────────────

const URL_MAX = 2048;

/**
 * Visible ASCII (0x21–0x7E): all a URL or a token may hold when it travels in an HTTP header or a
 * URL. Anything else (a pasted "…", a non-breaking space, a line break, a byte order mark) could
 * never be sent as typed: a URL parser drops some and encodes the rest without a word, Node
 * refuses others at every attempt. So it is refused once, here, with the field's path and the
 * code point — never trimmed, so what is stored is exactly what was sent.
 */
const VISIBLE_ASCII = /^[\x21-\x7e]*$/;
const NOT_VISIBLE_ASCII = /[^\x21-\x7e]/;

/** A check that `value` is visible ASCII only, naming the first other code point and where it is. */
const visibleAsciiOnly =
  (what: string, advice: string) =>
  (value: string, ctx: z.RefinementCtx): void => {
    const m = NOT_VISIBLE_ASCII.exec(value);
    if (m === null) return;
    const cp = value.codePointAt(m.index)!;
    const where = m.index === 0 ? 'at its start' : m.index + m[0].length >= value.length ? 'at its end' : 'inside it';
    ctx.addIssue({
      code: 'invalid_format',
      format: 'regex',
      pattern: VISIBLE_ASCII.source,
      input: value,
      message: `${what} holds ${codePointLabel(cp)} ${where}; it may hold only visible ASCII characters: ${advice}`,
    });
  };

/** Whether `value` parses, exactly as given (no trimming), as a URL with an http or https scheme. */
function isHttpUrl(value: string): boolean {
  try {
    return /^https?:$/.test(new URL(value).protocol);
  } catch {
    return false;
  }
}

/**
 * An http(s) URL. Plain http is accepted by the schema so an allow-listed host (a test sink on
 * 127.0.0.1) can use it; the address policy then requires https for every other host. Not zod's
 * `z.url()`: it trims the value first (U+FEFF, U+00A0 and U+2028 included), and a URL is refused
 * rather than altered.
 */
export const httpUrl = (what = 'URL') =>
  z
    .string()
    .max(URL_MAX, `${what} is at most ${URL_MAX} characters.`)
    // First, so a URL with a pasted space or "…" is told what to fix rather than only "not a URL".
    .superRefine(
      visibleAsciiOnly(
        what,
        'no spaces, line breaks or characters such as "…" (percent-encode them; use punycode for host names).',
      ),
    )
    // Never fails after the check above (its error is the one kept); it states the rule in the OpenAPI document.
    .regex(VISIBLE_ASCII, `${what} may hold only visible ASCII characters.`)
    .refine((v) => NOT_VISIBLE_ASCII.test(v) || isHttpUrl(v), {
      message: `${what} must be an http(s) URL.`,
      params: { code: 'invalid_format' },
    });

/** A secret that is sent in an HTTP header or URL (bot tokens): a secret string of visible ASCII. */
export const headerSafeToken = (what: string, max = 1024) =>
  secretString(what, max)
    .superRefine(
      visibleAsciiOnly(
        what,
        'no spaces, line breaks or characters such as "…". Paste the token exactly as the platform shows it.',
      ),
    )
    // As in httpUrl: the rule, stated for the OpenAPI document; the check above reports first.
    .regex(VISIBLE_ASCII, `${what} may hold only visible ASCII characters.`);

/** A header value: visible ASCII, spaces and tabs (what HTTP allows and every receiver reads alike). */
export const HEADER_VALUE = /^[\t\x20-\x7e]*$/;

/**
 * A secret string: non-empty, bounded, and refused (never trimmed) when whitespace or an invisible
 * character leads or trails it: a pasted newline is a classic, and a secret quietly changed is
 * one that fails later with nobody knowing why.
 */
export const secretString = (what: string, max = 1024) =>
  z
    .string()
    .min(1, `${what} is required.`)
    .max(max, `${what} is at most ${max} characters.`)
    .superRefine((value, ctx) => {
      const lead = /^[\s\uFEFF]/u.exec(value);
      const trail = /[\s\uFEFF]$/u.exec(value);
      const found = lead ?? trail;
      if (found === null) return;
      ctx.addIssue({
        code: 'invalid_format',
        format: 'regex',
        pattern: '^\\S(.*\\S)?$',
        input: value,
        message: `${what} ${lead ? 'starts' : 'ends'} with ${codePointLabel(found[0].codePointAt(0)!)}: a secret may not start or end with spaces, line breaks or invisible characters. Paste it exactly.`,
      });
    });

/** Display text of one line (a username, a channel name): surrounding spaces are not kept. */
export const shortText = (what: string, max: number) =>
  z.string().trim().min(1, `${what} must not be empty.`).max(max, `${what} is at most ${max} characters.`);

/** The destination named by a URL field. */
export function urlDestination(field: string, url: string, secrets: string[] = []): Destination {
  return { field: `config.${field}`, kind: 'url', value: url, host: hostOfUrl(url), secrets };
}

/** The host of a URL, normalized (`https://[::1]:8443/x` → `::1`); '' when it does not parse. */
export function hostOfUrl(url: string): string {
  try {
    return normalizeHost(new URL(url).hostname);
  } catch {
    return '';
  }
}

export type { ConnectionTypeDefinition, Destination } from '../../contracts/channel.js';
