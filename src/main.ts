/**
 * The entry of `npm start` (README "Quick start"): configuration, Redis (REDIS_URL or the embedded server),
 * the roles, and an orderly stop on SIGTERM/SIGINT.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { createHerald, StartupError, type Herald } from './composition/app.js';
import { rolePlan } from './composition/role.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { answerClientErrors } from './http/server.js';
import { createLogger } from './log.js';
import { EmbeddedRedisError, openEmbeddedRedis, type EmbeddedRedis } from './runtime/embedded-redis/index.js';
import { describeRedisTarget, redisTargetFromConfig, type RedisTarget } from './store/redis-connect.js';

async function main(): Promise<void> {
  const config = configOrExit();
  const log = createLogger(config.LOG_LEVEL);
  const refuse = refuser(log);
  const embedded = await embeddedRedisIfNoneConfigured(config, log, refuse);
  const redisUrl = redisTargetFromConfig(config, embedded?.socketPath);
  const herald = await startHerald({ config, redisUrl, log }, embedded, refuse);
  const plan = rolePlan(config.HERALD_ROLE);
  const server = plan.serveHttp ? await serve(herald, config, log, embedded, refuse) : null;
  logStarted({ config, log, herald, server, embedded, redisUrl });
  stopOnSignals({ server, herald, embedded, log, budgetMs: config.HERALD_SHUTDOWN_MS });
}

/** Says why Herald will not start, in the log and on stderr, and exits with status 1. */
type Refuse = (message: string) => never;

function configOrExit(): Config {
  try {
    return loadConfig();
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    // The message names the variables, never their values (they may be secrets).
    process.stderr.write(`Herald cannot start. ${e.message}\n`);
    process.exit(1);
  }
}

function refuser(log: Logger): Refuse {
  return (message) => {
    log.fatal(message);
    process.stderr.write(`Herald cannot start: ${message}\n`);
    process.exit(1);
  };
}

/** The embedded server only when no Redis of any kind is configured. */
async function embeddedRedisIfNoneConfigured(
  config: Config,
  log: Logger,
  refuse: Refuse,
): Promise<EmbeddedRedis | null> {
  if (
    config.REDIS_URL !== undefined ||
    config.REDIS_CLUSTER_NODES !== undefined ||
    config.REDIS_SENTINELS !== undefined
  )
    return null;
  try {
    return await openEmbeddedRedis({ dataDir: config.HERALD_DATA_DIR, log });
  } catch (e) {
    if (e instanceof EmbeddedRedisError) refuse(e.message);
    throw e;
  }
}

async function startHerald(
  opts: { config: Config; redisUrl: RedisTarget; log: Logger },
  embedded: EmbeddedRedis | null,
  refuse: Refuse,
): Promise<Herald> {
  try {
    return await createHerald(opts);
  } catch (e) {
    await embedded?.stop();
    if (e instanceof StartupError) refuse(e.message);
    // Anything else here is Redis refusing us (unreachable, WRONGPASS, ...): say which Redis.
    refuse(
      `could not set up over Redis at ${describeRedisTarget(opts.redisUrl)}: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
}

/** Listens on HOST:PORT; a port that cannot be had stops Herald and the embedded Redis first. */
function serve(
  herald: Herald,
  config: Config,
  log: Logger,
  embedded: EmbeddedRedis | null,
  refuse: Refuse,
): Promise<Server> {
  return listen(herald, config, log).catch(async (e: Error) => {
    await herald.close();
    await embedded?.stop();
    return refuse(e.message);
  });
}

function logStarted(s: {
  config: Config;
  log: Logger;
  herald: Herald;
  server: Server | null;
  embedded: EmbeddedRedis | null;
  redisUrl: RedisTarget;
}): void {
  const { config, herald, server, embedded } = s;
  const { role, runWorker } = rolePlan(config.HERALD_ROLE);
  const port = server ? (server.address() as AddressInfo).port : null;
  const persistence = herald.redisFacts.persistence;
  s.log.info(
    {
      port,
      host: server ? config.HOST : null,
      role,
      delivery_worker: runWorker,
      redis: embedded
        ? `embedded (${embedded.started ? 'started' : 'reused'}, ${embedded.socketPath})`
        : `external (${describeRedisTarget(s.redisUrl)})`,
      persistence,
      slack: herald.slack ? `${herald.slack.mode} mode` : 'Slack not configured: API only',
    },
    server
      ? `Herald listening on http://${config.HOST}:${port} (role ${role})`
      : `Herald running (role ${role}, no HTTP)`,
  );
}

function stopOnSignals(parts: Omit<ShutdownParts, 'signal'>): void {
  let stopping = false;
  const stop = (signal: string) => {
    // A terminal's Ctrl-C reaches both tsx (which relays it) and this process: a repeated signal
    // must not cut the drain short. The backstop in shutdown() bounds the time anyway.
    if (stopping) {
      parts.log.info({ signal }, 'already shutting down');
      return;
    }
    stopping = true;
    shutdown({ signal, ...parts }).then(
      () => process.exit(0),
      (err: unknown) => {
        parts.log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

function listen(herald: Herald, config: Config, log: Logger): Promise<Server> {
  const server = createServer(herald.app);
  answerClientErrors(server);
  return new Promise((resolve, reject) => {
    server.once('error', (e: NodeJS.ErrnoException) => {
      reject(
        new Error(
          e.code === 'EADDRINUSE'
            ? `${config.HOST}:${config.PORT} is already in use; set PORT to a free port.`
            : `Cannot listen on ${config.HOST}:${config.PORT}: ${e.message}`,
        ),
      );
    });
    server.listen(config.PORT, config.HOST, () => {
      server.on('error', (err) => log.error({ err }, 'http server error'));
      resolve(server);
    });
  });
}

interface ShutdownParts {
  signal: string;
  server: Server | null;
  herald: Herald;
  embedded: EmbeddedRedis | null;
  log: Logger;
  /** HERALD_SHUTDOWN_MS: the whole shutdown fits in it. */
  budgetMs: number;
}

/**
 * Stops accepting, lets in-flight requests finish, then closes Herald (Slack, the delivery worker —
 * its jobs in flight finish or go back to the queue — and the Redis connections) and last the
 * embedded Redis (SHUTDOWN flushes the AOF). Requests get half the budget; connections still busy
 * then are cut. A backstop exits (status 1) if anything hangs past the whole budget.
 */
async function shutdown(p: ShutdownParts): Promise<void> {
  const started = Date.now();
  const backstop = setTimeout(() => {
    p.log.error({ ms: p.budgetMs }, 'shutdown did not finish within HERALD_SHUTDOWN_MS: exiting anyway');
    process.exit(1);
  }, p.budgetMs);
  backstop.unref();
  p.log.info({ signal: p.signal }, 'shutting down: no new connections; draining in-flight requests');

  if (p.server) {
    const server = p.server;
    // Requests take milliseconds; the second half is for delivery jobs in flight and Redis.
    const drainMs = Math.floor(p.budgetMs / 2);
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    // Keep-alive connections become idle as their last response ends: close them as they do.
    const idle = setInterval(() => server.closeIdleConnections(), 100);
    server.closeIdleConnections();
    let timer: NodeJS.Timeout | undefined;
    const cut = new Promise<'cut'>((resolve) => {
      timer = setTimeout(() => resolve('cut'), drainMs);
    });
    if ((await Promise.race([closed, cut])) === 'cut') {
      p.log.warn({ ms: drainMs }, 'requests still in flight after the drain time: closing their connections');
      server.closeAllConnections();
      await closed;
    }
    clearInterval(idle);
    clearTimeout(timer);
  }
  await p.herald.close();
  await p.embedded?.stop();
  clearTimeout(backstop);
  p.log.info({ ms: Date.now() - started }, 'stopped');
}

main().catch((err: unknown) => {
  process.stderr.write(`Herald failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
