import { z } from 'zod';
import { defineConnectionType, httpUrl, shortText } from '../common/config-fields.js';
import { SubscriberTemplatesSchema } from '../../subscribers/templates.js';

/**
 * The public status page (docs/status-page.md): Herald's own page, so nothing here is secret and
 * nothing is sent anywhere outside; the config says how the page presents itself. One page per
 * Herald (the connection's create claims it).
 */

/** The locales the page is translated into (src/status/locales/): its default one is picked here. */
export const STATUS_PAGE_LOCALES = ['en', 'de'] as const;

const MAX_FRAME_ANCESTORS = 20;

/** An IANA time zone name Intl knows ("Europe/Berlin", "UTC"), normalized to its canonical spelling. */
const timeZone = z
  .string()
  .trim()
  .min(1, 'time_zone must not be empty.')
  .max(64, 'time_zone is at most 64 characters.')
  .transform((value, ctx) => {
    try {
      return new Intl.DateTimeFormat('en', { timeZone: value }).resolvedOptions().timeZone;
    } catch {
      ctx.addIssue({
        code: 'custom',
        input: value,
        message: `time_zone "${value}" is not an IANA time zone name (such as "Europe/Berlin" or "UTC").`,
      });
      return z.NEVER;
    }
  })
  .meta({ description: 'IANA time zone the page shows times in (default UTC).' });

/** The page's address as reached from outside, kept without a trailing slash (links are built on it). */
const publicUrl = httpUrl('public_url')
  .refine((v) => !/[?#]/.test(v), 'public_url must not hold a query or a fragment.')
  .transform((v) => v.replace(/\/+$/, ''))
  .meta({ description: 'Where customers reach the page (links in feeds and the JSON); no trailing slash is kept.' });

/** An https URL (a logo loads on the customer's page: plain http would be mixed content). */
const httpsUrl = (what: string) => httpUrl(what).refine((v) => /^https:/i.test(v), `${what} must be an https URL.`);

/** An origin a page may be framed by: `https://host[:port]`, nothing after it. */
const origin = httpUrl('frame_ancestors entry').refine((v) => {
  try {
    const u = new URL(v);
    return v.replace(/\/$/, '') === u.origin;
  } catch {
    return false;
  }
}, 'A frame_ancestors entry is an origin such as https://www.example.com (scheme, host and port only).');

const StatusPageConfigSchema = z
  .strictObject({
    title: shortText('title', 120).meta({ description: "The page's title (its heading and the feeds' title)." }),
    public_url: publicUrl,
    logo_url: httpsUrl('logo_url')
      .nullable()
      .default(null)
      .meta({ description: 'An https image shown in the header; null: the title alone.' }),
    time_zone: timeZone.default('UTC'),
    locale: z
      .enum(STATUS_PAGE_LOCALES)
      .default('en')
      .meta({ description: "The page's default locale; a reader's Accept-Language may pick another supported one." }),
    support_url: httpUrl('support_url')
      .nullable()
      .default(null)
      .meta({ description: 'Where customers get help (a link on the page); null: none.' }),
    frame_ancestors: z
      .array(origin)
      .max(MAX_FRAME_ANCESTORS, `At most ${MAX_FRAME_ANCESTORS} frame_ancestors.`)
      .default([])
      .meta({ description: 'Origins allowed to embed the page in a frame (CSP frame-ancestors); empty: none.' }),
    subscriber_templates: SubscriberTemplatesSchema.nullable().default(null).meta({
      description:
        "The page's own mustache templates for subscribers' notice mails, per locale (en, de) and part (subject, text, html; each at most 20,000 characters, using only the documented variables); a part not given uses the built-in one; null: the built-in ones.",
    }),
  })
  .meta({ id: 'StatusPageConnectionConfig' });

export type StatusPageConfig = z.output<typeof StatusPageConfigSchema>;

export const statusPage = defineConnectionType({
  configSchema: StatusPageConfigSchema,
  // Nothing secret: the page is public, and so is everything that configures it.
  secretFields: [],
});
