import { Redis } from 'ioredis';
import { freePort, startChild, waitFor, type Child } from './lib.js';

/**
 * A private redis-server for the benchmark (a random port on 127.0.0.1, no persistence,
 * noeviction, its files under `dir`), answering PING, with an admin client the caller may keep
 * (disconnect it when done). `extraArgs` adds settings (SLOWLOG, for one). If it does not come
 * up, it is killed and the error says why.
 */
export async function startPrivateRedis(
  dir: string,
  env: NodeJS.ProcessEnv,
  extraArgs: string[] = [],
): Promise<{ url: string; port: number; child: Child; admin: Redis }> {
  const port = await freePort();
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
  args.push('--maxmemory-policy', 'noeviction', '--dir', dir, ...extraArgs);
  const child = startChild('redis-server', 'redis-server', args, env);
  const admin = new Redis({
    host: '127.0.0.1',
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    retryStrategy: () => 50,
  });
  admin.on('error', () => undefined);
  try {
    await waitFor(
      'the private redis-server',
      async () => {
        if (child.exit) throw new Error(`redis-server exited: ${child.stderrTail()}`);
        return (await admin.ping()) === 'PONG';
      },
      { timeoutMs: 15_000, intervalMs: 20 },
    );
  } catch (e) {
    admin.disconnect();
    await child.stop('SIGKILL', 2000);
    throw e;
  }
  return { url: `redis://127.0.0.1:${port}`, port, child, admin };
}
