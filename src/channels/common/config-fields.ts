import { z } from 'zod';
import type { ConnectionTypeDefinition, Destination } from '../../contracts/channel.js';
import { normalizeHost } from '../../domain/connection/address-policy.js';

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
 * An http(s) URL. Plain http is accepted by the schema so an allow-listed host (a test sink on
 * 127.0.0.1) can use it; the address policy then requires https for every other host.
 */
export const httpUrl = (what = 'URL') =>
  z
    .url({ protocol: /^https?$/, message: `${what} must be an http(s) URL.` })
    .max(URL_MAX, `${what} is at most ${URL_MAX} characters.`)
    // A URL parser drops tabs and line breaks and encodes the rest without a word; what is
    // stored must be exactly what is sent, so anything outside visible ASCII is refused here.
    .regex(
      VISIBLE_ASCII,
      `${what} may hold only visible ASCII characters: no spaces, line breaks or characters such as "…" (percent-encode them; use punycode for host names).`,
    );

/**
 * Visible ASCII (0x21–0x7E): all a token may hold when it travels in an HTTP header or a URL.
 * Anything else (a pasted "…", a non-breaking space, a line break) could never be sent: Node
 * refuses it at every attempt, so it is refused once, here, with the field's path.
 */
const VISIBLE_ASCII = /^[\x21-\x7e]*$/;

/** A secret that is sent in an HTTP header or URL (bot tokens): a secret string of visible ASCII. */
export const headerSafeToken = (what: string, max = 1024) =>
  secretString(what, max).regex(
    VISIBLE_ASCII,
    `${what} may hold only visible ASCII characters: no spaces, line breaks or characters such as "…". Paste the token exactly as the platform shows it.`,
  );

/** A header value: visible ASCII, spaces and tabs (what HTTP allows and every receiver reads alike). */
export const HEADER_VALUE = /^[\t\x20-\x7e]*$/;

/** A secret string: non-empty, bounded, no surrounding whitespace (a pasted newline is a classic). */
export const secretString = (what: string, max = 1024) =>
  z.string().trim().min(1, `${what} is required.`).max(max, `${what} is at most ${max} characters.`);

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
