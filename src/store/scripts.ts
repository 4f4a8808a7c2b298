import type { RedisClient } from './redis-client.js';

/**
 * Herald's Lua scripts, sent once per connection and then run by SHA: each is registered with
 * ioredis' `defineCommand`, which sends EVALSHA and falls back to EVAL by itself when Redis
 * answers NOSCRIPT (after a restart or a failover the script cache is empty). Each script keeps
 * its KEYS/ARGV header beside the code that calls it.
 */
export interface LuaScript {
  /** The command name on the client (unique per script). */
  readonly name: string;
  readonly lua: string;
}

/** Every script declared so far: module top-level constants, so all of src/store's before any client connects. */
const declared = new Map<string, LuaScript>();

/** Declares a script; `name` becomes a command on every client that runs it. */
export function luaScript(name: string, lua: string): LuaScript {
  const script = { name: `herald_${name}`, lua };
  declared.set(script.name, script);
  return script;
}

type ScriptCommand = (numberOfKeys: number, ...keysAndArgs: (string | number)[]) => Promise<unknown>;

const defined = new WeakMap<RedisClient, Set<string>>();

/**
 * Defines every declared script on a new client, before its first command. With auto-pipelining
 * a batch is a Pipeline that copied the client's commands when the batch began, so a script
 * defined in the middle of a batch would be missing from it ("pipeline[name] is not a function").
 */
export function defineScripts(redis: RedisClient): void {
  const names = new Set<string>();
  for (const script of declared.values()) {
    // No numberOfKeys: every call passes its key count first (some scripts take a variable number).
    redis.defineCommand(script.name, { lua: script.lua });
    names.add(script.name);
  }
  defined.set(redis, names);
}

/** Scripts defined on a client after it connected, not yet safe to call by name (see runScript). */
const settling = new WeakMap<RedisClient, Set<string>>();

/** Runs `script` on `redis` with KEYS and ARGV. */
export function runScript(
  redis: RedisClient,
  script: LuaScript,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<unknown> {
  const names = defined.get(redis) ?? new Set<string>();
  if (!names.has(script.name)) {
    // Declared after this client connected (or a client not made by connectRedis). A batch begun
    // before defineCommand lacks the command, and it is sent at its own setImmediate; one queued
    // now runs after it, so from then on every batch has the command. Until then: plain EVAL,
    // which any batch can carry.
    const pending = settling.get(redis) ?? new Set<string>();
    if (!pending.has(script.name)) {
      redis.defineCommand(script.name, { lua: script.lua });
      pending.add(script.name);
      settling.set(redis, pending);
      setImmediate(() => {
        names.add(script.name);
        defined.set(redis, names);
        pending.delete(script.name);
      });
    }
    return redis.call('EVAL', script.lua, keys.length, ...keys, ...args);
  }
  const command = (redis as unknown as Record<string, ScriptCommand>)[script.name]!;
  return command.call(redis, keys.length, ...keys, ...args);
}
