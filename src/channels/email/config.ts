import { z } from 'zod';
import { isIpLiteral, normalizeHost } from '../../domain/connection/address-policy.js';
import { defineConnectionType, secretString, shortText } from '../common/config-fields.js';

/** E-mail over SMTP. The password goes to `host`, so moving `host` needs the password again. */
const MAX_RECIPIENTS = 50;

const HOST_NAME = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*\.?$/i;

const address = (what: string) => z.email({ message: `${what} must be an e-mail address.` }).max(254);

/** `alerts@example.com` or `Herald Alerts <alerts@example.com>`. */
const fromAddress = z
  .string()
  .max(320)
  // Not trimmed: a header value is refused, never altered, when a space or an invisible character
  // (U+00A0, U+FEFF) leads or trails it.
  .refine(
    (s) => !/^[\s\uFEFF]|[\s\uFEFF]$/u.test(s),
    'from must not start or end with a space, a line break or an invisible character.',
  )
  .refine((s) => {
    const m = /^(?:[^<>\r\n]{1,200}\s)?<([^<>\s]+)>$/.exec(s);
    return address('from').safeParse(m ? m[1] : s).success;
  }, 'from must be an e-mail address, optionally with a name: "Herald <alerts@example.com>".');

const recipients = (what: string) =>
  z
    .array(address(`each ${what} entry`))
    .max(MAX_RECIPIENTS, `At most ${MAX_RECIPIENTS} ${what} recipients.`)
    .refine(
      (list) => new Set(list.map((a) => a.toLowerCase())).size === list.length,
      `${what} must not repeat an address.`,
    );

const EmailConfigSchema = z
  .strictObject({
    host: z
      .string()
      // Not trimmed, like a URL: " smtp.example.com" is refused by the host check, not altered.
      .min(1, 'host is required.')
      .max(253)
      .refine((h) => isIpLiteral(h) || HOST_NAME.test(h), 'host must be a host name or an IP address.'),
    port: z.number().int().min(1).max(65535),
    security: z
      .enum(['tls', 'starttls', 'none'])
      .meta({ description: 'tls = implicit TLS (465); starttls = upgrade (587); none = plain.' }),
    username: shortText('username', 256).optional(),
    password: secretString('password', 1024).optional(),
    from: fromAddress,
    to: recipients('to').min(1, 'to needs at least one recipient.'),
    cc: recipients('cc').optional(),
  })
  .superRefine((c, ctx) => {
    if (c.password !== undefined && c.username === undefined) {
      ctx.addIssue({
        code: 'invalid_type',
        expected: 'string',
        input: undefined,
        path: ['username'],
        message: 'username is required with password.',
      });
    }
  })
  .meta({ id: 'EmailConnectionConfig' });

export type EmailConfig = z.output<typeof EmailConfigSchema>;

export const email = defineConnectionType({
  configSchema: EmailConfigSchema,
  secretFields: ['password'],
  destinations: (c) => [
    {
      field: 'config.host',
      kind: 'host',
      value: c.host,
      host: normalizeHost(c.host),
      secrets: c.password !== undefined ? ['password'] : [],
    },
  ],
  readOnlyCheck: () => 'smtp_verify',
});
