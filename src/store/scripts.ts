import { createHash } from 'node:crypto';
import type { RedisClient } from './redis-client.js';

/**
 * Herald's Lua scripts, run by SHA (EVALSHA) and sent whole (EVAL) only when Redis answers
 * NOSCRIPT: after a restart or a failover its script cache is empty, and EVAL fills it again.
 * Each script keeps its KEYS/ARGV header beside the code that calls it.
 *
 * Why not ioredis' `defineCommand`, which does the same: it adds each script to the client as a
 * command, and ioredis copies every such command onto every pipeline it creates. Auto-pipelining
 * (request connections) creates a pipeline per batch, thousands a second under load, and copying
 * dozens of scripts onto each was a measurable share of the CPU of every Redis call.
 */
export interface LuaScript {
  /** A name for errors and traces (unique per script). */
  readonly name: string;
  readonly lua: string;
  /** SHA-1 of `lua`, as EVALSHA names it. */
  readonly sha: string;
}

/** Declares a script (module top-level constants). */
export function luaScript(name: string, lua: string): LuaScript {
  return { name: `herald_${name}`, lua, sha: createHash('sha1').update(lua).digest('hex') };
}

const isNoScript = (e: unknown): boolean => e instanceof Error && e.message.startsWith('NOSCRIPT');

/** Runs `script` on `redis` with KEYS and ARGV. */
export async function runScript(
  redis: RedisClient,
  script: LuaScript,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<unknown> {
  // One array, not spread arguments: an execute to thousands of connections commits in one
  // script with tens of thousands of arguments, and each function that passes them on spread
  // (the request deadline's wrapper, auto-pipelining) puts them all on the stack again, which
  // overflowed it past ~5,000 deliveries. ioredis flattens the array into the command.
  const argv = [...keys, ...args.map(String)];
  try {
    return await redis.evalsha(script.sha, keys.length, argv);
  } catch (e) {
    if (!isNoScript(e)) throw e;
    // EVAL runs it and loads it: the next EVALSHA finds it.
    return redis.eval(script.lua, keys.length, argv);
  }
}

/**
 * A Lua function for scripts that run several independent items (a batch of deliveries): the
 * error that stopped one item (`pcall`'s, a table `{err = …}` when it came from redis.call), as
 * the text that item answers with; scriptFailure turns it back into an Error. The items before it
 * stay written and those after it still run, exactly as separate scripts would have.
 */
export const SCRIPT_FAILURE = `
local function failure(e)
  if type(e) == 'table' then e = e.err or e.message end
  return 'ERR ' .. tostring(e)
end
`;

/** The Error of an item a batch script answered with SCRIPT_FAILURE's text. */
export function scriptFailure(text: string): Error {
  return new Error(`Redis refused a delivery's write: ${text.replace(/^ERR /, '')}`);
}
