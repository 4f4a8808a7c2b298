import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { CHILD_DEADLINE_MS, childEnv, freePort, ROOT, spawnEntry, stopChild, type Child } from '../support/child.js';
import { connectTestRedis, dropPrefix, testRedisUrl, uniquePrefix } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/**
 * The README's walk-through, run literally: the shell blocks after `<!-- walkthrough -->` (the
 * API walk-through, then "Audiences and approval", which goes on with its variables) are taken
 * from README.md in order and run as one bash script against a real Herald (`node dist/main.js`,
 * as `npm start` runs it) and the real `npm run sink`. Only the addresses change (random ports
 * and a private output file), so the docs can never drift from what Herald answers: every status
 * the blocks print must be the one its comment promises.
 */
const run = promisify(execFile);
const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');

function walkthrough(): string {
  const blocks = [...readme.matchAll(/<!-- walkthrough -->\s*```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
  if (blocks.length === 0) throw new Error('README.md has no <!-- walkthrough --> shell block');
  return blocks.join('\n');
}

const prefix = uniquePrefix('readme');
const dir = mkdtempSync(join(tmpdir(), 'herald-readme-'));
const redis = connectTestRedis();
let herald: Child | undefined;
let sink: Child | undefined;
afterAll(async () => {
  await stopChild(herald);
  sink?.proc.kill('SIGTERM');
  await dropPrefix(redis, prefix);
  redis.disconnect();
  rmSync(dir, { recursive: true, force: true });
});

describe('README walk-through', () => {
  it('runs as written, and every step answers the status its comment says', async () => {
    const script = walkthrough();
    const expected = script
      .split('\n')
      .map((l) => /#\s+(\d{3})\b/.exec(l)?.[1])
      .filter((s): s is string => s !== undefined);
    expect(expected.length).toBeGreaterThan(15);

    const [port, sinkPort] = await Promise.all([freePort(), freePort()]);
    const env = childEnv({
      REDIS_URL: testRedisUrl(),
      HERALD_KEY_PREFIX: prefix,
      HERALD_DATA_DIR: dir,
      HERALD_SECRET_KEY: randomBytes(32).toString('base64'),
      HERALD_OUTBOUND_ALLOW: '127.0.0.1',
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
    });
    const sinkProc = spawn('npm', ['run', 'sink'], {
      cwd: ROOT,
      env: { ...env, PORT: String(sinkPort) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let sinkOut = '';
    sinkProc.stdout.on('data', (c: Buffer) => (sinkOut += c.toString()));
    sink = {
      proc: sinkProc,
      stdout: () => sinkOut,
      stderr: () => '',
      exited: new Promise<number | null>((r) => sinkProc.on('close', r)),
    };
    herald = spawnEntry('main', [], env);
    await waitFor(
      async () =>
        (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null))?.status === 200 &&
        sink!.stdout().includes('sink listening'),
      {
        timeoutMs: CHILD_DEADLINE_MS,
        intervalMs: 100,
        what: 'Herald and the sink to start',
      },
    );

    const localized = script
      .replaceAll('localhost:3000', `127.0.0.1:${port}`)
      .replaceAll('127.0.0.1:4000', `127.0.0.1:${sinkPort}`)
      .replaceAll('/tmp/herald.json', join(dir, 'out.json'));
    const { stdout } = await run('bash', ['-euo', 'pipefail', '-c', localized], {
      cwd: ROOT,
      env,
      timeout: CHILD_DEADLINE_MS,
    });
    expect(stdout.trim().split('\n')).toEqual(expected);

    // The sink printed the test message and the execute's delivery, signed.
    await waitFor(() => (sink!.stdout().match(/POST \/herald/g) ?? []).length >= 2, {
      timeoutMs: 30_000,
      what: 'the sink to receive the test message and the delivery',
    });
    expect(sink.stdout()).toContain('webhook-signature: v1,');
    expect(sink.stdout()).toContain('We are investigating Checkout errors in EU. Next update in 30 minutes.');

    // Audiences and approval: the customers' connection heard nothing until the approval, then
    // exactly once (the refused approval and the late rejection sent nothing).
    await waitFor(() => sink!.stdout().includes('POST /customers'), {
      timeoutMs: 30_000,
      what: "the approved delivery at the customers' sink",
    });
    await waitFor(() => (sink!.stdout().match(/We are looking into slow logins/g) ?? []).length >= 2, {
      timeoutMs: 30_000,
      what: 'the responders and the customers to hear the public update',
    });
    expect(sink.stdout().match(/POST \/customers/g)).toHaveLength(1);
  });
});
