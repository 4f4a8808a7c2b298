import { z } from 'zod';
import { defineConnectionType, HEADER_VALUE, httpUrl, urlDestination } from '../common/config-fields.js';
import { webhookSecretOf } from '../../domain/common/webhook-signature.js';

/**
 * A signed HTTP webhook (Standard Webhooks). `url` is not secret; `secret` signs every request
 * (HMAC-SHA256 over `id.timestamp.body` with the base64-decoded bytes after `whsec_`) and never
 * travels; every `headers` value is secret and is sent to `url`.
 */
const MAX_HEADERS = 20;
const SECRET_BYTES = 24;

/** Headers the sender owns: a user value would break framing, signing or the receiver's checks. */
const RESERVED_HEADERS =
  /^(?:host|content-length|content-type|content-encoding|transfer-encoding|connection|keep-alive|upgrade|expect|te|trailer|proxy-.*|webhook-.*)$/i;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/;

const signingSecret = z
  .string()
  .trim()
  .refine((s) => {
    const m = /^whsec_([A-Za-z0-9+/]+={0,2})$/.exec(s);
    const bytes = m?.[1] === undefined ? 0 : Buffer.from(m[1], 'base64').length;
    return bytes >= 24 && bytes <= 64;
  }, 'secret must be "whsec_" followed by base64 of 24 to 64 random bytes (omit it and Herald generates one).');

const headers = z
  .record(
    z.string(),
    z
      .string()
      .max(4096, 'A header value is at most 4096 characters.')
      .regex(
        HEADER_VALUE,
        'A header value may hold only visible ASCII characters, spaces and tabs: no line breaks, control characters or characters such as "…".',
      ),
  )
  .superRefine((h, ctx) => {
    const names = Object.keys(h);
    if (names.length > MAX_HEADERS)
      ctx.addIssue({ code: 'custom', path: [], message: `At most ${MAX_HEADERS} headers.` });
    const seen = new Set<string>();
    for (const name of names) {
      if (!TOKEN.test(name))
        ctx.addIssue({ code: 'custom', path: [name], message: `"${name}" is not a valid header name.` });
      else if (RESERVED_HEADERS.test(name))
        ctx.addIssue({ code: 'custom', path: [name], message: `${name} is set by Herald and cannot be configured.` });
      if (seen.has(name.toLowerCase()))
        ctx.addIssue({ code: 'custom', path: [name], message: `${name} is given twice (header names ignore case).` });
      seen.add(name.toLowerCase());
    }
  })
  .meta({ description: 'Extra request headers; every value is secret (write-only).' });

const base = {
  url: httpUrl('url'),
  headers: headers.optional(),
};

const WebhookConfigSchema = z.strictObject({ ...base, secret: signingSecret }).meta({ id: 'WebhookConnectionConfig' });
const WebhookCreateConfigSchema = z
  .strictObject({ ...base, secret: signingSecret.optional() })
  .meta({ id: 'WebhookConnectionCreateConfig' });

export type WebhookConfig = z.output<typeof WebhookConfigSchema>;

export const webhook = defineConnectionType({
  configSchema: WebhookConfigSchema,
  createConfigSchema: WebhookCreateConfigSchema,
  secretFields: ['secret'],
  secretMaps: ['headers'],
  // The signing secret is not listed: it signs, it is never sent, and it is kept when url moves.
  destinations: (c) => [
    urlDestination(
      'url',
      c.url,
      Object.keys(c.headers ?? {}).map((name) => `headers.${name}`),
    ),
  ],
  complete: (c, randomBytes) => ({ ...c, secret: c.secret ?? webhookSecretOf(randomBytes(SECRET_BYTES)) }),
  signingSecretField: 'secret',
});
