import { pino, type Logger } from 'pino';

/**
 * JSON logs (pino). Anything that may hold a secret is redacted by path, wherever it appears in a
 * logged object: headers, tokens, passwords, connection secrets, URLs (webhook URLs are secrets).
 */
const SENSITIVE = [
  'authorization',
  'token',
  'bot_token',
  'app_token',
  'password',
  'secret',
  'secrets',
  'webhook_url',
  'url',
  'signing_secret',
  'headers',
];

/** Each sensitive key at the top level and up to three objects deep (pino wildcards match one level). */
export const REDACT_PATHS = SENSITIVE.flatMap((k) => [k, `*.${k}`, `*.*.${k}`, `*.*.*.${k}`]);

export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level,
      base: { service: 'herald' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      formatters: { level: (label) => ({ level: label }) },
    },
    destination as pino.DestinationStream | undefined,
  );
}
