#!/usr/bin/env node
/**
 * The `herald` command line (`node dist/cli/main.js …`, the `herald` bin, `npm run --silent herald
 * -- …`). It uses the server's configuration (loadConfig) and core (openCore): REDIS_URL, or the
 * embedded Redis of HERALD_DATA_DIR. stdout carries only the command's result; notes, the Redis in
 * use and logs (warn and above) go to stderr. Exit status: 0 done, 1 failed, 2 usage error.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { openCore, StartupError, type Core } from '../composition/cli.js';
import { ConfigError, loadConfig } from '../config.js';
import { SCOPES } from '../domain/common/api-key.js';
import { isDomainError } from '../domain/common/errors.js';
import { createLogger } from '../log.js';
import { asUsageError, createKey, listKeys, parseCreateFlags, revokeKey, UsageError, type Output } from './keys.js';
import { resealSecrets } from './secrets.js';

const HELP = `Usage: npm run --silent herald -- [--embedded] <command> [options]
       node dist/cli/main.js [--embedded] <command> [options]   (installed: herald ...)

Commands:
  keys create --name NAME --scopes SCOPE[,SCOPE...] [--expires-in 30m|12h|90d] [--json]
      Create an API key. The token is printed once; Herald keeps only its SHA-256.
      --json prints {"id","name","scopes","token","created_at","expires_at"} and nothing else.
  keys list [--json]
      List API keys, newest first (--json: an array of keys).
  keys revoke ID [--json]
      Revoke a key: its token is refused by every instance within a second.
  secrets reseal [--json]
      After a secret-key rotation (HERALD_SECRET_KEY new, HERALD_SECRET_KEY_PREVIOUS old), seal
      every stored secret with the new key. Safe while Herald runs; running it again changes nothing.
  help, --help, -h
      Show this help.

Scopes: ${SCOPES.join(', ')}, * (all).

Configuration is the server's: run the command with the environment Herald runs with.
REDIS_URL (or REDIS_CLUSTER_NODES / REDIS_SENTINELS), HERALD_KEY_PREFIX; without a Redis
setting, the embedded Redis under HERALD_DATA_DIR (default ./data): the running Herald's, or
one started for the command - only where that directory exists and NODE_ENV is not
production, since a new Redis would be empty and its keys unknown to the server.
The first line on stderr names the Redis the command uses.

Options for every command:
  --embedded
      Start an embedded Redis under HERALD_DATA_DIR for the command when none runs there, even
      with NODE_ENV=production or a data directory that does not exist yet (it is created).

Exit status: 0 done, 1 failed, 2 usage error.
`;

type Run = (core: Core, io: Output) => Promise<void>;
type Parsed = { kind: 'help' } | { kind: 'run'; run: Run };

const json = { type: 'boolean' } as const;
const help = { type: 'boolean', short: 'h' } as const;
const COMMANDS = {
  create: { name: { type: 'string' }, scopes: { type: 'string' }, 'expires-in': { type: 'string' }, json, help },
  list: { json, help },
  revoke: { json, help },
} satisfies Record<string, ParseArgsConfig['options']>;

/** Reads the command line; throws UsageError. Nothing here touches Redis. */
function parseCommand(argv: string[]): Parsed {
  const [group, sub, ...rest] = argv;
  if (group === undefined || group === 'help' || group === '--help' || group === '-h') return { kind: 'help' };
  if (group === 'secrets') return parseSecretsCommand(sub, rest);
  if (group !== 'keys') throw new UsageError(`Unknown command "${group}".`);
  if (sub === undefined || sub === '--help' || sub === '-h') return { kind: 'help' };
  if (!(sub in COMMANDS))
    throw new UsageError(`Unknown command "keys ${sub}"; use keys create, keys list or keys revoke.`);

  switch (sub as keyof typeof COMMANDS) {
    case 'create': {
      const { values, positionals } = parse(rest, COMMANDS.create);
      if (values.help) return { kind: 'help' };
      noPositionals(positionals);
      const input = parseCreateFlags(values);
      return { kind: 'run', run: (core, io) => createKey(core.services.apiKeys, input, values.json ?? false, io) };
    }
    case 'list': {
      const { values, positionals } = parse(rest, COMMANDS.list);
      if (values.help) return { kind: 'help' };
      noPositionals(positionals);
      return { kind: 'run', run: (core, io) => listKeys(core.services.apiKeys, values.json ?? false, io, new Date()) };
    }
    case 'revoke': {
      const { values, positionals } = parse(rest, COMMANDS.revoke);
      if (values.help) return { kind: 'help' };
      const [id, ...extra] = positionals;
      if (id === undefined)
        throw new UsageError('keys revoke needs the key id (see keys list), e.g. keys revoke key_01J...');
      noPositionals(extra);
      return { kind: 'run', run: (core, io) => revokeKey(core.services.apiKeys, id, values.json ?? false, io) };
    }
  }
}

function parseSecretsCommand(sub: string | undefined, rest: string[]): Parsed {
  if (sub === undefined || sub === '--help' || sub === '-h') return { kind: 'help' };
  if (sub !== 'reseal') throw new UsageError(`Unknown command "secrets ${sub}"; use secrets reseal.`);
  const { values, positionals } = parse(rest, { json, help });
  if (values.help) return { kind: 'help' };
  noPositionals(positionals);
  return { kind: 'run', run: (core, io) => resealSecrets(core, values.json ?? false, io) };
}

function parse<O extends NonNullable<ParseArgsConfig['options']>>(args: string[], options: O) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (e) {
    // node:util reports unknown options and missing values with ERR_PARSE_ARGS_* codes.
    if (String((e as NodeJS.ErrnoException).code).startsWith('ERR_PARSE_ARGS'))
      throw new UsageError((e as Error).message);
    throw e;
  }
}

function noPositionals(extra: string[]): void {
  if (extra.length > 0) throw new UsageError(`Unexpected argument "${extra[0]}".`);
}

/** `--embedded` is global: accepted anywhere before a `--`, with any command. */
function takeGlobalFlags(argv: string[]): { embedded: boolean; rest: string[] } {
  const end = argv.includes('--') ? argv.indexOf('--') : argv.length;
  const rest = argv.filter((a, i) => i >= end || a !== '--embedded');
  return { embedded: rest.length < argv.length, rest };
}

async function runCli(argv: string[], nodeEnv: string | undefined, io: Output): Promise<number> {
  const { embedded, rest } = takeGlobalFlags(argv);
  let parsed: Parsed;
  try {
    parsed = parseCommand(rest);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    io.note(`herald: ${e.message}\nRun with --help for usage.\n`);
    return 2;
  }
  if (parsed.kind === 'help') {
    io.out(HELP);
    return 0;
  }

  let core: Core;
  try {
    const config = loadConfig();
    // stdout is the command's output: logs go to stderr, and only warnings and worse.
    const level = ['error', 'fatal', 'silent'].includes(config.LOG_LEVEL) ? config.LOG_LEVEL : 'warn';
    core = await openCore({
      config,
      log: createLogger(level, process.stderr),
      policy: { forced: embedded, production: nodeEnv === 'production' },
    });
  } catch (e) {
    if (e instanceof ConfigError || e instanceof StartupError) {
      io.note(`herald: ${e.message}\n`);
      return 1;
    }
    throw e;
  }
  // Before the result, so that a key made in the wrong Redis is noticed at once, not at the 401.
  io.note(`herald: using ${core.redisInUse}\n`);
  try {
    await parsed.run(core, io);
    return 0;
  } catch (e) {
    const usage = e instanceof UsageError ? e : asUsageError(e);
    if (usage) {
      io.note(`herald: ${usage.message}\n`);
      return 2;
    }
    if (isDomainError(e)) {
      io.note(`herald: ${e.message}\n`);
      return 1;
    }
    throw e;
  } finally {
    await core.close();
  }
}

const stdio: Output = {
  out: (text) => process.stdout.write(text),
  note: (text) => process.stderr.write(text),
};

// NODE_ENV is Node's (and the Dockerfile's and systemd unit's), not a Herald setting, so it is
// read here rather than in loadConfig.
runCli(process.argv.slice(2), process.env.NODE_ENV, stdio).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`herald: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
