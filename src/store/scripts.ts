import type { RedisClient } from './redis-connect.js';

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

/** Declares a script; `name` becomes a command on every client that runs it. */
export function luaScript(name: string, lua: string): LuaScript {
  return { name: `herald_${name}`, lua };
}

type ScriptCommand = (numberOfKeys: number, ...keysAndArgs: (string | number)[]) => Promise<unknown>;

const defined = new WeakMap<RedisClient, Set<string>>();

/** Runs `script` on `redis` with KEYS and ARGV (defining it on that client the first time). */
export function runScript(redis: RedisClient, script: LuaScript, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
  let names = defined.get(redis);
  if (names === undefined) {
    names = new Set();
    defined.set(redis, names);
  }
  if (!names.has(script.name)) {
    // No numberOfKeys: every call passes its key count first (some scripts take a variable number).
    redis.defineCommand(script.name, { lua: script.lua });
    names.add(script.name);
  }
  const command = (redis as unknown as Record<string, ScriptCommand>)[script.name]!;
  return command.call(redis, keys.length, ...keys, ...args);
}
