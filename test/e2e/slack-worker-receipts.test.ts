import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHerald, type Herald } from '../../src/composition/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { startSlack, type SlackPeer } from '../support/peers/slack.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/peers/webhook-receiver.js';
import { testRedisUrl } from '../support/redis.js';
import {
  slackClient,
  textOfBlocks,
  type SlackClient,
  newViewId,
  openedView as openedViewAt,
} from '../support/slack-client.js';
import { waitFor } from '../support/wait.js';

/**
 * Scaled out: an API process (HERALD_ROLE=api, Slack in HTTP mode) takes the Slack requests and
 * enqueues; a separate worker process (HERALD_ROLE=worker, given only SLACK_BOT_TOKEN) delivers
 * and is the one that updates the announcement with the receipts. The two bot tokens differ so
 * the fake Web API can tell who made each call.
 */
const SECRET = 'slack-signing-secret-for-split-roles';

let api: TestHerald;
let worker: Herald;
let workerDir: string;
let slack: SlackPeer;
let receiver: WebhookReceiver;
let client: SlackClient;

beforeAll(async () => {
  slack = await startSlack();
  receiver = await startWebhookReceiver();
  api = await startHerald(
    { HERALD_ROLE: 'api', SLACK_SIGNING_SECRET: SECRET, SLACK_BOT_TOKEN: 'xoxb-api', SLACK_API_URL: slack.apiUrl },
    { worker: false },
  );
  workerDir = mkdtempSync(join(tmpdir(), 'herald-slack-worker-'));
  const config = loadConfig({
    HERALD_ROLE: 'worker',
    HERALD_KEY_PREFIX: api.prefix,
    HERALD_SECRET_KEY: api.secretKey,
    HERALD_DATA_DIR: workerDir,
    HERALD_OUTBOUND_ALLOW: '127.0.0.1/32,::1/128,localhost',
    LOG_LEVEL: 'silent',
    SLACK_BOT_TOKEN: 'xoxb-worker',
    SLACK_API_URL: slack.apiUrl,
  });
  worker = await createHerald({ config, redisUrl: testRedisUrl(), log: createLogger('silent') });
  client = slackClient(api.url, SECRET, { id: 'UDAN', name: 'dan' });
});

afterAll(async () => {
  await worker?.close();
  await api?.close();
  if (workerDir) rmSync(workerDir, { recursive: true, force: true });
  await slack?.close();
  await receiver?.close();
});

const viewId = newViewId;

const openedView = (before: number): Promise<any> => openedViewAt(slack, before);

describe('HERALD_ROLE=api + HERALD_ROLE=worker', () => {
  it('a worker with only SLACK_BOT_TOKEN takes no Slack requests but keeps announcements current', () => {
    expect(worker.slack?.mode).toBe('outbound');
    expect(api.herald.slack?.mode).toBe('http');
  });

  it('the worker process posts the delivery receipts on the announcement', async () => {
    const hook = (
      await api.api('POST', '/v1/connections', {
        body: { name: 'Split hook', type: 'webhook', config: { url: `${receiver.url}/hook` } },
      })
    ).body;
    receiver.setSecret(hook.signing_secret);

    let before = slack.callsTo('views.open').length;
    await client.command('new Split roles', { channel: 'CSPLIT' });
    await client.submit(await openedView(before), { severity: 'major' }, { viewId: viewId() });
    const incident = (await api.api('GET', '/v1/incidents')).body.data.find((i: any) => i.title === 'Split roles');
    const post = await waitFor<any>(
      () => slack.callsTo('chat.postMessage').find((c) => JSON.stringify(c.args.blocks ?? []).includes(incident.id)),
      { what: 'announcement', timeoutMs: 25_000 },
    );
    expect(post.token).toBe('xoxb-api');

    // The first attempt fails (503, retried after ≥ 1 s): the API process has long shown the
    // queued receipts when the worker's second attempt succeeds, so only the worker can know.
    receiver.script({ status: 503 });
    before = slack.callsTo('views.open').length;
    await client.click('incident_execute', incident.id, { channel: 'CSPLIT' });
    const r = await client.submit(await openedView(before), {}, { viewId: viewId() });
    expect(r.json?.response_action).not.toBe('errors');
    await receiver.waitForRequests(2);

    // The worker, which saw the delivery complete, updates the announcement with its own token.
    // (Announcement updates are paced, 2 s apart: a paced refresh of the API process may render
    // after the delivery too, reading the stored receipts, so the worker's is looked for.)
    const delivered = await waitFor<any>(
      () =>
        slack
          .callsTo('chat.update')
          .filter((c) => c.args.ts === post.args.ts || JSON.stringify(c.args.blocks ?? []).includes(incident.id))
          .find(
            (c) => c.token === 'xoxb-worker' && /delivered — \*Split hook\*/.test(textOfBlocks(c.args.blocks as any[])),
          ),
      { what: 'receipts showing the delivery, from the worker', timeoutMs: 30_000 },
    );
    expect(delivered.args.channel).toBe('CSPLIT');
  });
});
