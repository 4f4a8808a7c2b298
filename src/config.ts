import { z } from 'zod';
import { SLACK_API_BASE_URL } from './channels/slack/index.js';
import { TELEGRAM_API_BASE_URL } from './channels/telegram/index.js';

/**
 * The environment, parsed once by zod. A bad variable stops start-up with a message naming it;
 * nothing else in the code reads process.env.
 */
const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');
const csv = z.string().transform((s) =>
  s
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x.length > 0),
);
const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce.number().int().min(1);
const secretKey = z
  .string()
  .refine((s) => Buffer.from(s, 'base64').length === 32, 'must be 32 random bytes, base64 (openssl rand -base64 32)');
/** `host:port` or `[v6]:port`. */
const hostPort = z
  .string()
  .regex(/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):\d{1,5}$/, 'each entry must be host:port')
  .transform((s) => {
    const i = s.lastIndexOf(':');
    return { host: s.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(s.slice(i + 1)) };
  })
  .refine((h) => h.port >= 1 && h.port <= 65535, 'port must be 1..65535');
const url = z.url({ protocol: /^(redis|rediss|unix|http|https)$/ });

/** A retention (`12h`, `7d`, `30m`) in ms, from 1 h to `maxDays` days; 7 days when unset. */
const retention = (maxDays: number, range: string) =>
  z
    .string()
    .regex(/^[1-9]\d{0,5}(m|h|d)$/, 'must be a duration like 12h or 7d')
    .transform(
      (v) =>
        Number(v.slice(0, -1)) * ({ m: 60_000, h: 3_600_000, d: 86_400_000 } as const)[v.slice(-1) as 'm' | 'h' | 'd'],
    )
    .refine((ms) => ms >= 3_600_000 && ms <= maxDays * 86_400_000, range)
    .default(7 * 86_400_000);

const EnvSchema = z
  .object({
    PORT: port.default(3000),
    HOST: z.string().min(1).default('0.0.0.0'),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    HERALD_ROLE: z.enum(['api', 'worker', 'all']).default('all'),
    /** Redis to use; without it Herald runs its own redis-server under HERALD_DATA_DIR. */
    REDIS_URL: z
      .string()
      .regex(/^(rediss?:\/\/|\/)/, 'must be redis://, rediss:// or a unix socket path')
      .optional(),
    /** Seed nodes of a Redis Cluster, `host:port,host:port,…` (instead of REDIS_URL). */
    REDIS_CLUSTER_NODES: csv.pipe(z.array(hostPort).min(1, 'must list at least one host:port')).optional(),
    /** Sentinels watching the primary, `host:port,…`; needs REDIS_SENTINEL_NAME (instead of REDIS_URL). */
    REDIS_SENTINELS: csv.pipe(z.array(hostPort).min(1, 'must list at least one host:port')).optional(),
    /** The primary's name as the Sentinels know it (`sentinel monitor <name> …`). */
    REDIS_SENTINEL_NAME: z.string().min(1).optional(),
    /** Credentials for cluster nodes or the Sentinel-managed primary (REDIS_URL carries its own). */
    REDIS_USERNAME: z.string().min(1).optional(),
    REDIS_PASSWORD: z.string().min(1).optional(),
    /**
     * Replicas that must hold an acknowledged write before Herald answers 201/202 (Redis WAIT
     * after each commit that carries a promise); 0 = off. docs/operations/failover.md.
     */
    HERALD_REDIS_WAIT_REPLICAS: z.coerce.number().int().min(0).max(16).default(0),
    /** How long one WAIT may take before the request answers 503 (the write may exist). */
    HERALD_REDIS_WAIT_TIMEOUT_MS: z.coerce.number().int().min(10).max(10_000).default(500),
    HERALD_DATA_DIR: z.string().min(1).default('./data'),
    /** Prefix of every Redis key (inside the hash tag): several Heralds can share one Redis. */
    HERALD_KEY_PREFIX: z
      .string()
      .regex(/^[A-Za-z0-9_.-]{1,64}$/)
      .default('herald'),
    HERALD_SECRET_KEY: secretKey.optional(),
    /** The key before a rotation: read what it sealed until `herald secrets reseal` has run. */
    HERALD_SECRET_KEY_PREVIOUS: secretKey.optional(),
    HERALD_RATE_LIMIT: positiveInt.default(600),
    HERALD_EXECUTE_RATE_LIMIT: positiveInt.default(60),
    HERALD_METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
    /** Base URL of this Herald, for {{incident.url}} and links in messages. */
    HERALD_PUBLIC_URL: url.optional(),
    HERALD_OUTBOUND_ALLOW: csv.default([]),
    /**
     * DNS servers for user-supplied destinations (webhooks, SMTP hosts): `ip`, `ip:port` or
     * `[v6]:port`, comma-separated. Unset: the system's servers (/etc/resolv.conf). Resolution is
     * c-ares with a deadline, never getaddrinfo, so /etc/hosts is not read (except `localhost`).
     */
    HERALD_DNS_SERVERS: csv
      .pipe(
        z.array(
          z
            .string()
            .regex(
              /^(?:\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?|[0-9A-Fa-f:]+|\[[0-9A-Fa-f:]+\](?::\d{1,5})?)$/,
              'each entry must be an IP address, ip:port or [v6]:port',
            ),
        ),
      )
      .default([]),
    HERALD_SHUTDOWN_MS: positiveInt.default(10_000),
    /** Deliveries one worker process sends at once (jobs of one delivery and dispatch jobs alike). */
    HERALD_WORKER_CONCURRENCY: positiveInt.max(1000).default(50),
    /** How long a worker's claim on a job lasts without a heartbeat: a killed worker's jobs return after it. */
    HERALD_JOB_LOCK_MS: z.coerce.number().int().min(1000).default(30_000),
    /**
     * How long an update waits for its conversation's first message while that one is still being
     * sent (docs/explanation/living-updates.md), so that it replies under it however slowly the platform
     * answers; past it, the update posts on its own. 0: it does not wait.
     */
    HERALD_THREAD_WAIT_MS: z.coerce.number().int().min(0).max(600_000).default(30_000),
    /** How often the outbox is swept for deliveries committed but never queued (a crash in between). */
    HERALD_OUTBOX_SWEEP_MS: z.coerce.number().int().min(100).default(5_000),
    /** How often an overdue update is asked for again (`30s`, `15m`, `1h`; 10 s to 24 h). */
    /**
     * Audience keys (comma-separated) an execute goes to when it names neither `audiences` nor
     * `connection_ids` (docs/configuration.md); unset or empty: every enabled connection.
     */
    HERALD_DEFAULT_AUDIENCES: z
      .string()
      .default('')
      .transform((v) =>
        v
          .split(',')
          .map((x) => x.trim())
          .filter((x) => x.length > 0),
      )
      .refine(
        (keys) => keys.every((k) => /^[a-z0-9][a-z0-9_-]{0,62}$/.test(k)),
        'must be audience keys, comma-separated',
      ),
    HERALD_REMINDER_REPEAT: z
      .string()
      .regex(/^[1-9]\d{0,5}(s|m|h)$/, 'must be a duration like 30s, 15m or 1h')
      .transform(
        (v) => Number(v.slice(0, -1)) * ({ s: 1000, m: 60_000, h: 3_600_000 } as const)[v.slice(-1) as 's' | 'm' | 'h'],
      )
      .refine((ms) => ms >= 10_000 && ms <= 86_400_000, 'must be between 10s and 24h')
      .default(900_000),
    /**
     * How long integrator events are kept for replay (docs/events.md), and their delivery logs:
     * `12h`, `7d`, `30d` (1 h to 90 d). A bounded job trims what is older.
     */
    HERALD_EVENT_RETENTION: retention(90, 'must be between 1h and 90d'),
    /**
     * The SMTP relay subscriber mail goes through (docs/subscribers.md): `smtp://user:pass@host:587`
     * (STARTTLS when offered) or `smtps://…:465` (implicit TLS). The operator's own relay, so the
     * outbound guard does not apply to it. Unset: e-mail subscriptions are off.
     */
    HERALD_SMTP_URL: z
      .string()
      .regex(/^smtps?:\/\/[^\s]+$/, 'must be an smtp:// or smtps:// URL')
      .optional(),
    /** The From of subscriber mail: `status@example.com` or `Example Status <status@example.com>`. */
    HERALD_SMTP_FROM: z.string().min(3).max(320).optional(),
    /** Subscriber mails a second through the relay, shared by every worker (its sending quota). */
    HERALD_SMTP_RATE: z.coerce.number().int().min(1).max(100_000).default(50),
    /** SMTP connections each worker keeps open to the relay while it sends subscriber mail. */
    HERALD_SMTP_POOL: z.coerce.number().int().min(1).max(50).default(4),
    /**
     * How long an unsubscribed or unconfirmed subscriber's record is kept before it is erased
     * (`12h`, `7d`; 1 h to 30 d): long enough to answer a repeated unsubscribe and to throttle.
     */
    HERALD_SUBSCRIBER_RETENTION: retention(30, 'must be between 1h and 30d'),
    SLACK_SIGNING_SECRET: z.string().min(1).optional(),
    SLACK_BOT_TOKEN: z.string().min(1).optional(),
    SLACK_APP_TOKEN: z.string().min(1).optional(),
    SLACK_API_URL: url.default(SLACK_API_BASE_URL),
    TELEGRAM_API_URL: url.default(TELEGRAM_API_BASE_URL),
    HERALD_SLACK_CHANNEL: z.string().min(1).optional(),
    HERALD_SLACK_ADMINS: csv.default([]),
    HERALD_TRUST_PROXY: bool.default(false),
    /**
     * A host name (`status.example.com`) whose requests get the public status page at `/` and
     * nothing else (docs/status-page.md); unset: the page is at /status only.
     */
    HERALD_STATUS_HOST: z
      .string()
      .trim()
      .toLowerCase()
      .regex(
        /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/,
        'must be a host name (no scheme, port or path)',
      )
      .optional(),
  })
  .superRefine((env, ctx) => {
    // One way to reach Redis: two would leave it ambiguous which one holds the data.
    const given = (['REDIS_URL', 'REDIS_CLUSTER_NODES', 'REDIS_SENTINELS'] as const).filter(
      (k) => env[k] !== undefined,
    );
    if (given.length > 1) {
      ctx.addIssue({ code: 'custom', path: [given[1] ?? ''], message: `set only one of ${given.join(' and ')}` });
    }
    if (env.HERALD_SMTP_URL !== undefined && env.HERALD_SMTP_FROM === undefined) {
      ctx.addIssue({ code: 'custom', path: ['HERALD_SMTP_FROM'], message: 'is required with HERALD_SMTP_URL' });
    }
    if (env.REDIS_SENTINELS !== undefined && env.REDIS_SENTINEL_NAME === undefined) {
      ctx.addIssue({ code: 'custom', path: ['REDIS_SENTINEL_NAME'], message: 'is required with REDIS_SENTINELS' });
    }
  });

export type Config = z.infer<typeof EnvSchema>;

/** Every variable Herald reads: the deployment files are checked against this list. */
export const CONFIG_VARIABLES: readonly string[] = Object.keys(EnvSchema.shape);

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Parses the environment; empty strings count as unset (a blank line in a .env is not a value). */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const r = EnvSchema.safeParse(cleaned);
  if (r.success) return r.data;
  // Name the variable, never echo its value: it may be a secret.
  throw new ConfigError(r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`));
}
