import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Server } from 'node:http';
import { createHerald, type Herald, type HeraldOptions } from '../../src/composition/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import type { Scope } from '../../src/domain/common/api-key.js';
import { dropPrefix, dropPrefixAt, testRedisUrl, uniquePrefix } from './redis.js';

export interface ApiResponse {
  status: number;
  headers: Headers;
  /** Parsed JSON when the body is JSON, else the text ('' when empty). */
  body: any;
  text: string;
}

export interface RequestOptions {
  body?: unknown;
  /** Raw body text, sent as is (for malformed-JSON tests). */
  raw?: string;
  headers?: Record<string, string>;
  /** Token to use; null sends no Authorization header. Default: the admin token. */
  token?: string | null;
}

export interface TestHerald {
  dataDir: string;
  /** HERALD_SECRET_KEY of this Herald (base64). */
  secretKey: string;
  url: string;
  token: string;
  herald: Herald;
  prefix: string;
  api(method: string, path: string, opts?: RequestOptions): Promise<ApiResponse>;
  /** Makes another key with just these scopes and returns its token. */
  tokenWith(scopes: (Scope | '*')[], name?: string): Promise<string>;
  /** Stops this Herald; `keepData` leaves its Redis keys for a later Herald on the same prefix. */
  close(opts?: { keepData?: boolean }): Promise<void>;
}

/**
 * A real Herald on a random port over the shared test Redis, with its own key prefix, data
 * directory and an all-scopes API key. Everything it made is removed by close().
 */
export async function startHerald(
  env: Record<string, string> = {},
  opts: Pick<HeraldOptions, 'senders' | 'worker' | 'clock'> & {
    redisUrl?: HeraldOptions['redisUrl'];
    log?: HeraldOptions['log'];
  } = {},
): Promise<TestHerald> {
  const prefix = env.HERALD_KEY_PREFIX ?? uniquePrefix('h');
  const dataDir = mkdtempSync(join(tmpdir(), 'herald-test-'));
  const config = loadConfig({
    HERALD_KEY_PREFIX: prefix,
    HERALD_DATA_DIR: dataDir,
    HERALD_SECRET_KEY: randomBytes(32).toString('base64'),
    LOG_LEVEL: 'silent',
    HERALD_OUTBOUND_ALLOW: '127.0.0.1/32,::1/128,localhost',
    ...env,
  });
  const { redisUrl, ...rest } = opts;
  // A Herald that fails to start, or whose first key cannot be made, is stopped here, and its keys
  // dropped when the prefix is its own: the caller never gets a close() to call, and a worker left
  // running would keep writing under the prefix after the file's sweep. A prefix the caller gave
  // holds the caller's data (a test that restarts Herald on it expects a refused start to keep it).
  const abandon = async (herald: Herald | undefined, server: Server | undefined) => {
    server?.closeAllConnections();
    if (server) await new Promise((r) => server.close(r));
    await herald?.close();
    if (redisUrl === undefined && env.HERALD_KEY_PREFIX === undefined) await dropPrefixAt(testRedisUrl(), prefix);
    rmSync(dataDir, { recursive: true, force: true });
  };
  let herald: Herald | undefined;
  let server: Server | undefined;
  const system = { type: 'system' as const, id: 'test', name: 'test' };
  const tokenWith = async (scopes: (Scope | '*')[], name = 'test key') =>
    (await herald!.services.apiKeys.create({ name, scopes }, system)).token;
  let token: string;
  try {
    herald = await createHerald({
      config,
      redisUrl: redisUrl ?? testRedisUrl(),
      log: createLogger(config.LOG_LEVEL),
      ...rest,
    });
    const app = herald.app;
    server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    token = await tokenWith(['*'], 'admin');
  } catch (e) {
    await abandon(herald, server).catch(() => undefined);
    throw e;
  }
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const api = async (method: string, path: string, opts: RequestOptions = {}): Promise<ApiResponse> => {
    const headers: Record<string, string> = { ...opts.headers };
    const tok = opts.token === undefined ? token : opts.token;
    if (tok !== null) headers.Authorization = `Bearer ${tok}`;
    let body: string | undefined;
    if (opts.raw !== undefined) body = opts.raw;
    else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['Content-Type'] ??= 'application/json';
    }
    const res = await fetch(`${url}${path}`, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    if (/json/.test(res.headers.get('content-type') ?? '') && text !== '') parsed = JSON.parse(text);
    return { status: res.status, headers: res.headers, body: parsed, text };
  };

  return {
    dataDir,
    secretKey: config.HERALD_SECRET_KEY!,
    url,
    token,
    herald,
    prefix,
    api,
    tokenWith,
    async close(closeOpts = {}) {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      if (closeOpts.keepData !== true) await dropPrefix(herald.redis, prefix);
      await herald.close();
      // Its worker and queues may still write while they stop (BullMQ's marker, a retry's delayed
      // job): drop again once they have, with a connection of our own (the Herald's is closed).
      if (closeOpts.keepData !== true && redisUrl === undefined) await dropPrefixAt(testRedisUrl(), prefix);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
