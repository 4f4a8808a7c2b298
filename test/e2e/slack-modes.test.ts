import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHerald, StartupError } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { startHerald } from '../support/herald.js';
import { startSlack, type SlackPeer } from '../support/peers/slack.js';
import { dropPrefix, testRedisUrl, uniquePrefix } from '../support/redis.js';

/** Slack is optional: off without settings, refused when half set, Socket Mode with an app token. */
let slack: SlackPeer;

beforeAll(async () => {
  slack = await startSlack();
});
afterAll(async () => {
  await slack?.close();
});

/** createHerald directly, with its log captured. */
async function heraldWithLog(env: Record<string, string>) {
  const prefix = uniquePrefix('slackmode');
  const dataDir = mkdtempSync(join(tmpdir(), 'herald-slackmode-'));
  const lines: any[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n')) if (l.trim() !== '') lines.push(JSON.parse(l));
      done();
    },
  });
  const config = loadConfig({ HERALD_KEY_PREFIX: prefix, HERALD_DATA_DIR: dataDir, HERALD_SECRET_KEY: randomBytes(32).toString('base64'), HERALD_ROLE: 'api', ...env });
  const cleanup = () => rmSync(dataDir, { recursive: true, force: true });
  try {
    const herald = await createHerald({ config, redisUrl: testRedisUrl(), log: createLogger('info', sink), worker: false });
    return {
      herald,
      lines,
      async close() {
        await dropPrefix(herald.redis, prefix);
        await herald.close();
        cleanup();
      },
    };
  } catch (e) {
    cleanup();
    throw e;
  }
}

describe('Slack configuration', () => {
  it('without Slack settings runs the API alone and says so', async () => {
    const h = await heraldWithLog({});
    try {
      expect(h.herald.slack).toBeNull();
      expect(h.lines.some((l) => /Slack is not configured.*API alone/.test(l.msg))).toBe(true);
    } finally {
      await h.close();
    }
    const served = await startHerald();
    try {
      const r = await fetch(`${served.url}/slack/events`, { method: 'POST', body: 'x' });
      expect(r.status).toBe(404);
    } finally {
      await served.close();
    }
  });

  it('refuses to start half configured, naming what is missing', async () => {
    await expect(heraldWithLog({ SLACK_SIGNING_SECRET: 's' })).rejects.toThrow(StartupError);
    await expect(heraldWithLog({ SLACK_SIGNING_SECRET: 's' })).rejects.toThrow(/SLACK_BOT_TOKEN/);
    await expect(heraldWithLog({ SLACK_BOT_TOKEN: 'xoxb-1' })).rejects.toThrow(/SLACK_SIGNING_SECRET.*SLACK_APP_TOKEN/);
  });

  it('uses Socket Mode when SLACK_APP_TOKEN is set (no HTTP endpoint, connects out)', async () => {
    const h = await heraldWithLog({ SLACK_BOT_TOKEN: 'xoxb-test', SLACK_APP_TOKEN: 'xapp-1-test', SLACK_API_URL: slack.apiUrl });
    try {
      expect(h.herald.slack?.mode).toBe('socket');
      expect(h.lines.some((l) => /Socket Mode/.test(l.msg))).toBe(true);
      const open = await slack.waitForCalls('apps.connections.open', 1);
      expect(open[0]!.token).toBe('xapp-1-test');
    } finally {
      await h.close();
    }
  });
});
