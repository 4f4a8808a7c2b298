import { z } from 'zod';

/** RFC 5321's limit on a forward path: longer addresses cannot be delivered to anyway. */
export const EMAIL_MAX = 254;

/**
 * The one spelling of an e-mail address Herald keeps (and derives the subscriber id from): trimmed,
 * the domain lower-cased (domains are case-insensitive), the local part as given — RFC 5321 lets a
 * server tell `Jane` from `jane`, so folding it could merge two people's subscriptions.
 */
export function normalizeEmail(input: string): string {
  const trimmed = input.trim();
  const at = trimmed.lastIndexOf('@');
  return at < 0 ? trimmed : `${trimmed.slice(0, at)}@${trimmed.slice(at + 1).toLowerCase()}`;
}

/** A subscriber's e-mail address: validated, then normalized (normalizeEmail). */
export const SubscriberEmailSchema: z.ZodType<string> = z
  .string({ error: 'Enter an e-mail address.' })
  .trim()
  .min(1, { error: 'Enter an e-mail address.' })
  .max(EMAIL_MAX, { error: `An e-mail address is at most ${EMAIL_MAX} characters long.` })
  .transform(normalizeEmail)
  .pipe(z.email({ error: 'Enter a valid e-mail address, like name@example.com.' }));

/** The name the design's interface list gives the schema. */
export const EmailSchema = SubscriberEmailSchema;

/**
 * An address as a page may show it to whoever holds a link (the unsubscribe page): enough for its
 * owner to recognise it, too little to learn it. E-mail: the first character of the local part and
 * the domain. URL: its origin, never the path or query (those often carry the webhook's secret).
 */
export function maskAddress(address: string): string {
  const at = address.lastIndexOf('@');
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(address) && at > 0) {
    return `${Array.from(address)[0]}•••@${address.slice(at + 1)}`;
  }
  try {
    const url = new URL(address);
    if (url.origin !== 'null') return `${url.origin}/…`;
  } catch {
    // not a URL either: nothing of it is shown
  }
  return '•••';
}
