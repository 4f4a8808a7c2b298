import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHerald, StartupError } from '../../src/composition/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { startHerald } from '../support/herald.js';
import { startSlack, type SlackPeer } from '../support/peers/slack.js';
import { startSocketMode, type SocketModePeer } from '../support/peers/slack-socket.js';
import { openedView } from '../support/slack-client.js';
import { dropPrefix, dropPrefixAt, testRedisUrl, uniquePrefix } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/** Slack is optional: off without settings, refused when half set, Socket Mode with an app token. */
let slack: SlackPeer;
let socket: SocketModePeer;

beforeAll(async () => {
  socket = await startSocketMode();
  slack = await startSlack({ socketModeUrl: () => socket.url });
});
afterAll(async () => {
  await slack?.close();
  await socket?.close();
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
  const config = loadConfig({
    HERALD_KEY_PREFIX: prefix,
    HERALD_DATA_DIR: dataDir,
    HERALD_SECRET_KEY: randomBytes(32).toString('base64'),
    HERALD_ROLE: 'api',
    ...env,
  });
  const cleanup = () => rmSync(dataDir, { recursive: true, force: true });
  try {
    const herald = await createHerald({
      config,
      redisUrl: testRedisUrl(),
      log: createLogger('info', sink),
      worker: false,
    });
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
    // A Herald refused at start-up has already written its first keys (the secret check, the queue).
    await dropPrefixAt(testRedisUrl(), prefix);
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

  it('uses Socket Mode when SLACK_APP_TOKEN is set: connects out, and the same listeners answer over the socket', async () => {
    const h = await heraldWithLog({
      SLACK_BOT_TOKEN: 'xoxb-test',
      SLACK_APP_TOKEN: 'xapp-1-test',
      SLACK_API_URL: slack.apiUrl,
      HERALD_SLACK_ADMINS: 'UADMIN',
    });
    try {
      expect(h.herald.slack?.mode).toBe('socket');
      expect(h.lines.some((l) => /Socket Mode/.test(l.msg))).toBe(true);
      const open = await slack.waitForCalls('apps.connections.open', 1);
      expect(open[0]!.token).toBe('xapp-1-test');
      await waitFor(() => socket.connections() >= 1, { what: 'the Socket Mode connection' });

      // No HTTP endpoint in Socket Mode: nothing is mounted at /slack/events.
      const res = await new Promise<number>((resolve) => {
        const server = h.herald.app.listen(0, '127.0.0.1', () => {
          const { port } = server.address() as AddressInfo;
          fetch(`http://127.0.0.1:${port}/slack/events`, { method: 'POST', body: 'x' }).then(
            (r) => server.close(() => resolve(r.status)),
            () => server.close(() => resolve(0)),
          );
        });
      });
      expect(res).toBe(404);

      // A slash command arrives as an envelope; its ephemeral answer goes back in the ack.
      const user = {
        user_id: 'UALICE',
        user_name: 'alice',
        team_id: 'T0HERALD',
        channel_id: 'CSOCK',
        api_app_id: 'A0HERALD',
      };
      const help = await socket.ackOf(
        socket.send('slash_commands', {
          ...user,
          command: '/incident',
          text: 'help',
          trigger_id: '1.2.3',
          response_url: 'https://hooks.slack.com/commands/1',
        }),
      );
      expect(help.payload).toMatchObject({ response_type: 'ephemeral' });
      expect(JSON.stringify(help.payload.blocks)).toContain('/incident new');

      // `new` acks at once, then opens the modal through the Web API.
      const opened = slack.callsTo('views.open').length;
      await socket.ackOf(
        socket.send('slash_commands', {
          ...user,
          command: '/incident',
          text: 'new Over the socket',
          trigger_id: '4.5.6',
          response_url: 'https://hooks.slack.com/commands/1',
        }),
      );
      const view = await openedView(slack, opened);
      expect(view).toMatchObject({ callback_id: 'incident_create' });

      // Its submission (an interactive envelope) creates the incident, recorded with the Slack user.
      const values = {
        title: { value: { type: 'plain_text_input', value: 'Over the socket' } },
        severity: { value: { type: 'static_select', selected_option: { value: 'minor' } } },
      };
      await socket.ackOf(
        socket.send('interactive', {
          type: 'view_submission',
          team: { id: 'T0HERALD' },
          user: { id: 'UALICE', username: 'alice', name: 'alice' },
          api_app_id: 'A0HERALD',
          view: { ...view, id: 'VSOCKET1', state: { values } },
        }),
      );
      const made = (await h.herald.services.incidents.list({}, { limit: 10, cursor: null })).data.find(
        (i) => i.title === 'Over the socket',
      );
      expect(made?.created_by).toEqual({ type: 'slack_user', id: 'UALICE', name: 'alice' });

      // Events too: the App Home is published for the user who opened it.
      socket.send('events_api', {
        type: 'event_callback',
        team_id: 'T0HERALD',
        api_app_id: 'A0HERALD',
        event: { type: 'app_home_opened', user: 'UADMIN', channel: 'D1', tab: 'home' },
        event_id: 'Ev1',
        event_time: 1,
      });
      const published = await waitFor(() => slack.callsTo('views.publish').find((c) => c.args.user_id === 'UADMIN'), {
        what: 'views.publish',
      });
      expect(JSON.stringify(published.args.view)).toContain('Over the socket');
    } finally {
      await h.close();
    }
  });
});
