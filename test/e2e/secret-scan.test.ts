import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { startHerald, type ApiResponse, type RequestOptions, type TestHerald } from '../support/herald.js';
import { startAllPeers, type AllPeers } from '../support/peers/all.js';
import { dumpPrefix, findSecrets, needlesOf } from '../support/secret-scan.js';
import { waitFor } from '../support/wait.js';

/**
 * Secrets stay secret, provably: a full story that stores every kind of secret (a connection of
 * each type, API keys, idempotent replays, deliveries through the queue, a connection test), with
 * logs at `trace`; then every Redis key and value under the prefix (BullMQ's included), every log
 * line and every response is searched for each secret in clear, base64 and hex. Zero hits.
 */
const S = {
  slackHook: 'SlackHookSecret9f8e7d6c5b',
  slackBot: 'xoxb-4242-4242-SlackBotSecret7c6b5a4d',
  teams: 'TeamsWorkflowSecret5d4c3b2a1f',
  discord: 'DiscordTokenSecret_3a2b1c0d9e8f',
  mattermost: 'mmsecr3tk3y0000000000000zz',
  googleChat: 'heraldTestToken',
  telegram: '555666777:TelegramBotSecretToken_abcdefXYZ',
  smtpPassword: 'SmtpPasswordSecret-2b4d6f8h',
  webhookHeader: 'WebhookHeaderSecret-8h7g6f5e',
};

let h: TestHerald;
let peers: AllPeers;
const logLines: string[] = [];
/** Responses by request, except where a secret is shown by design (the create that reveals it). */
const responses = new Map<string, string>();
const secrets: string[] = Object.values(S);

const call = async (label: string, method: string, path: string, opts: RequestOptions = {}): Promise<ApiResponse> => {
  const res = await h.api(method, path, opts);
  responses.set(
    `response ${responses.size} ${label} ${method} ${path}`,
    `${[...res.headers].map(([k, v]) => `${k}: ${v}`).join('\n')}\n\n${res.text}`,
  );
  return res;
};

beforeAll(async () => {
  peers = await startAllPeers({ smtp: { auth: { username: 'herald', password: S.smtpPassword } } });
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logLines.push(chunk.toString('utf8'));
      done();
    },
  });
  h = await startHerald(
    {
      LOG_LEVEL: 'trace',
      SLACK_API_URL: peers.slack.apiUrl,
      TELEGRAM_API_URL: peers.telegram.url,
      HERALD_RATE_LIMIT: '10000',
      HERALD_EXECUTE_RATE_LIMIT: '10000',
    },
    { log: createLogger('trace', sink) },
  );
});
afterAll(async () => {
  await h.close();
  await peers.close();
});

describe('the scanner', () => {
  it('finds a secret in clear, inside base64 at every alignment, and in hex', () => {
    const secret = S.telegram;
    for (const prefix of ['', 'a', 'ab', 'abc']) {
      const text = Buffer.from(`${prefix}${secret}"}`).toString('base64');
      expect(findSecrets([secret], new Map([['b64', `x${text}y`]])), prefix).toHaveLength(1);
      expect(
        findSecrets([secret], new Map([['b64url', Buffer.from(`${prefix}${secret}`).toString('base64url')]])),
      ).toHaveLength(1);
    }
    expect(findSecrets([secret], new Map([['hex', Buffer.from(secret).toString('hex').toUpperCase()]]))).toHaveLength(
      1,
    );
    expect(findSecrets([secret], new Map([['clear', `token=${secret}&x`]]))).toHaveLength(1);
    expect(findSecrets([secret], new Map([['last4 only', `…${secret.slice(-4)}`]]))).toHaveLength(0);
    expect(needlesOf(secret).every((n) => n.length >= 8)).toBe(true);
  });
});

describe('secrets stay secret', () => {
  it('a full story leaves no secret in Redis, in trace logs or in any response', async () => {
    const connections: Record<string, string> = {};
    const make = async (key: string, type: string, config: Record<string, unknown>) => {
      // The create answers the webhook's signing secret once, by design; it is learnt here and
      // then searched for everywhere else, its idempotent replay included.
      const r = await h.api('POST', '/v1/connections', {
        body: { name: key, type, config },
        headers: { 'Idempotency-Key': `create-${key}` },
      });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      connections[key] = r.body.id as string;
      if (type === 'webhook') {
        const signing = r.body.signing_secret as string;
        peers.hook.setSecret(signing);
        secrets.push(signing, signing.replace(/^whsec_/, ''));
      }
    };
    await make('slack_webhook', 'slack', { webhook_url: peers.slack.webhookUrl(`/services/T1/B1/${S.slackHook}`) });
    await make('slack_bot', 'slack', { bot_token: S.slackBot, channel: 'C0INCIDENTS' });
    await make('teams', 'teams', { webhook_url: peers.teams.webhookUrl(S.teams) });
    await make('discord', 'discord', { webhook_url: peers.discord.webhookUrl('1234567890123456789', S.discord) });
    await make('email', 'email', {
      host: peers.smtp.host,
      port: peers.smtp.port,
      security: 'none',
      username: 'herald',
      password: S.smtpPassword,
      from: 'herald@example.com',
      to: ['status@example.com'],
    });
    await make('mattermost', 'mattermost', { webhook_url: peers.mattermost.webhookUrl(S.mattermost) });
    await make('google_chat', 'google_chat', { webhook_url: peers.chat.webhookUrl() });
    await make('telegram', 'telegram', { bot_token: S.telegram, chat_id: '-100200300' });
    await make('webhook', 'webhook', { url: `${peers.hook.url}/herald`, headers: { 'X-Api-Key': S.webhookHeader } });

    // API keys: the admin key every call uses, and a narrower one that reads.
    const reader = await h.tokenWith(['incidents:read', 'connections:read'], 'reader');
    secrets.push(h.token, reader);

    // Replays of the creates (the stored answers hold the signing secret, sealed).
    const replay = await call('replay', 'POST', '/v1/connections', {
      body: {
        name: 'webhook',
        type: 'webhook',
        config: { url: `${peers.hook.url}/herald`, headers: { 'X-Api-Key': S.webhookHeader } },
      },
      headers: { 'Idempotency-Key': 'create-webhook' },
    });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    responses.delete([...responses.keys()].at(-1)!); // the replay shows the signing secret by design

    await call('list', 'GET', '/v1/connections?limit=100', { token: reader });
    for (const id of Object.values(connections)) await call('get', 'GET', `/v1/connections/${id}`);
    await call('patch', 'PATCH', `/v1/connections/${connections.telegram}`, {
      body: { config: { bot_token: S.telegram } },
    });
    const tested = await call('test', 'POST', `/v1/connections/${connections.webhook}/test`, {
      body: { send_message: true },
    });
    expect(tested.status).toBe(200);

    const template = await call('template', 'POST', '/v1/templates', {
      body: {
        name: 'scan',
        body: 'Status: {{incident.title}} — {{note}}',
        variables: [{ name: 'note', required: false }],
      },
    });
    expect(template.status, template.text).toBe(201);
    const incident = await call('incident', 'POST', '/v1/incidents', {
      body: { title: 'Database outage', severity: 'critical', template_ids: [template.body.id] },
      headers: { 'Idempotency-Key': 'inc-1' },
    });
    expect(incident.status, incident.text).toBe(201);
    const incidentId = incident.body.id as string;
    const executeBody = { variables: { note: 'all hands' } };
    const executed = await call('execute', 'POST', `/v1/incidents/${incidentId}/execute`, {
      body: executeBody,
      headers: { 'Idempotency-Key': 'exe-1' },
    });
    expect(executed.status, executed.text).toBe(202);
    const again = await call('execute replay', 'POST', `/v1/incidents/${incidentId}/execute`, {
      body: executeBody,
      headers: { 'Idempotency-Key': 'exe-1' },
    });
    expect(again.headers.get('idempotent-replayed')).toBe('true');

    // Every delivery reaches its peer (through the queue, with trace logs of each attempt).
    const executionPath = `/v1/incidents/${incidentId}/executions/${executed.body.id as string}`;
    await waitFor(
      async () => {
        const r = await h.api('GET', executionPath);
        const deliveries = r.body.deliveries as { status: string }[];
        return (
          deliveries.length === Object.keys(connections).length && deliveries.every((d) => d.status === 'delivered')
        );
      },
      { timeoutMs: 60_000, what: 'every delivery delivered' },
    );
    await call('receipts', 'GET', executionPath);
    await call('events', 'GET', `/v1/incidents/${incidentId}/events`);

    const client = h.herald.redis;
    if (!(client instanceof Redis)) throw new Error('the scan reads a standalone Redis');
    const redisDump = await dumpPrefix(client, h.prefix);
    expect(
      [...redisDump.keys()].some((k) => k.includes(':bull:')),
      'BullMQ keys are scanned too',
    ).toBe(true);
    expect(logLines.length, 'logs were captured').toBeGreaterThan(20);
    const places = new Map<string, string>([
      ...redisDump,
      ...responses,
      ...logLines.map((l, i) => [`log ${i}`, l] as [string, string]),
    ]);
    const hits = findSecrets(secrets, places);
    expect(hits.map((hit) => `${hit.where}: ${hit.secret.slice(0, 6)}… as ${hit.needle.slice(0, 12)}…`)).toEqual([]);
    // A summary worth reading in the run's output: how much was searched.
    console.log(
      `secret scan: ${secrets.length} secrets × ${redisDump.size} Redis keys, ${logLines.length} log lines, ${responses.size} responses: 0 hits`,
    );
  });
});
