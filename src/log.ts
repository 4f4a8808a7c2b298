import { pino, type Logger } from 'pino';

/**
 * JSON logs (pino). Anything that may hold a secret is redacted by path, wherever it appears in a
 * logged object: headers, tokens, passwords, connection secrets, webhook URLs (they are secrets).
 */
export const REDACT_PATHS = [
  'authorization',
  'headers.authorization',
  '*.headers.authorization',
  'req.headers.authorization',
  'token',
  '*.token',
  'bot_token',
  '*.bot_token',
  'password',
  '*.password',
  'secret',
  '*.secret',
  'secrets',
  '*.secrets',
  'webhook_url',
  '*.webhook_url',
  'signing_secret',
  '*.signing_secret',
  'config.headers',
];

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
