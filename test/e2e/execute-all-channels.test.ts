import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHerald, type TestHerald } from '../support/herald.js';
import { startAllPeers, type AllPeers } from '../support/peers/all.js';
import { waitFor } from '../support/wait.js';

/**
 * One execute through the public API reaching every channel type on real local peers, with
 * hostile values escaped per platform; then the retry, pacing and disable rules end to end.
 */
let h: TestHerald;
let peers: AllPeers;
const con: Record<string, string> = {};

beforeAll(async () => {
  peers = await startAllPeers();
  h = await startHerald({
    SLACK_API_URL: peers.slack.apiUrl,
    TELEGRAM_API_URL: peers.telegram.url,
    HERALD_RATE_LIMIT: '10000',
    HERALD_EXECUTE_RATE_LIMIT: '10000',
  });
  const make = async (key: string, type: string, config: Record<string, unknown>) => {
    const r = await h.api('POST', '/v1/connections', { body: { name: key, type, config } });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    con[key] = r.body.id;
    if (type === 'webhook') peers.hook.setSecret(r.body.signing_secret);
  };
  await make('slack_webhook', 'slack', { webhook_url: peers.slack.webhookUrl('/services/T1/B1/x') });
  await make('slack_bot', 'slack', { bot_token: 'xoxb-test-token', channel: 'C0INCIDENTS' });
  await make('teams', 'teams', { webhook_url: peers.teams.webhookUrl() });
  await make('discord', 'discord', { webhook_url: peers.discord.webhookUrl() });
  await make('email', 'email', {
    host: peers.smtp.host,
    port: peers.smtp.port,
    security: 'none',
    from: 'herald@example.com',
    to: ['status@example.com'],
  });
  await make('mattermost', 'mattermost', { webhook_url: peers.mattermost.webhookUrl() });
  await make('google_chat', 'google_chat', { webhook_url: peers.chat.webhookUrl() });
  await make('telegram', 'telegram', { bot_token: '123456:AAtest-secret-token-0123456789', chat_id: '-100200300' });
  await make('webhook', 'webhook', { url: `${peers.hook.url}/herald` });
  // Herald's own page: no peer, and reached only when named.
  await make('status_page', 'status_page', { title: 'Status', public_url: 'https://status.example.com' });
});
afterAll(async () => {
  await h.close();
  await peers.close();
});

async function settled(incidentId: string, executionId: string) {
  return waitFor(
    async () => {
      const e = (await h.api('GET', `/v1/incidents/${incidentId}/executions/${executionId}`)).body;
      return ['queued', 'in_progress'].includes(e.status) ? undefined : e;
    },
    { timeoutMs: 20_000, what: 'the execution to settle' },
  );
}

const HOSTILE = '<!channel> @everyone *bold* <script>alert(1)</script>';

describe('one execute to every channel type', () => {
  it('delivers to all nine connections with bodies escaped for each platform', async () => {
    const tpl = await h.api('POST', '/v1/templates', {
      body: {
        name: 'all-channels',
        subject: 'Incident: {{incident.title}}',
        body: 'Status {{incident.status}}. Note: {{note}}',
      },
    });
    expect(tpl.status).toBe(201);
    const { body: inc } = await h.api('POST', '/v1/incidents', {
      body: { title: 'Payments down', severity: 'critical', template_ids: [tpl.body.id] },
    });
    const r = await h.api('POST', `/v1/incidents/${inc.id}/execute`, { body: { variables: { note: HOSTILE } } });
    expect(r.status).toBe(202);
    // Every enabled connection but the public status page, which publishes only where named.
    expect(r.body.deliveries).toHaveLength(9);
    expect(r.body.deliveries.map((d: { connection_id: string }) => d.connection_id)).not.toContain(con.status_page);
    const done = await settled(inc.id, r.body.id);
    expect(done.status, JSON.stringify(done.deliveries.map((d: { attempts: unknown[] }) => d.attempts))).toBe(
      'delivered',
    );
    const byType = (id: string) => done.deliveries.find((d: { connection_id: string }) => d.connection_id === id);

    // Slack webhook and bot: mrkdwn with <, >, & escaped and mentions broken; Block Kit + text.
    const webhookMsg = peers.slack.webhookMessages[0]!.payload;
    expect(String(webhookMsg.text)).toContain('&lt;script&gt;');
    expect(String(webhookMsg.text)).not.toContain('<!channel>');
    expect(Array.isArray(webhookMsg.blocks)).toBe(true);
    const post = peers.slack.callsTo('chat.postMessage')[0]!;
    expect(post.args.channel).toBe('C0INCIDENTS');
    expect(post.token).toBe('xoxb-test-token');
    expect(String(post.args.text)).not.toContain('<!channel>');

    // Teams: an Adaptive Card 1.4 in the message envelope.
    const card = peers.teams.messages[0] as {
      type: string;
      attachments: { contentType: string; content: { version: string; body: { text: string }[] } }[];
    };
    expect(card.type).toBe('message');
    expect(card.attachments[0]!.contentType).toBe('application/vnd.microsoft.card.adaptive');
    expect(card.attachments[0]!.content.version).toBe('1.4');
    expect(JSON.stringify(card)).not.toMatch(/(^|[^\u200b])@everyone/);

    // Discord: an embed, no mention parsed, @everyone broken.
    const d = peers.discord.messages[0]!.payload as {
      embeds: { title: string; description: string }[];
      allowed_mentions: { parse: unknown[] };
    };
    expect(d.allowed_mentions).toEqual({ parse: [] });
    expect(d.embeds[0]!.title).toContain('Payments down');
    expect(d.embeds[0]!.description).not.toMatch(/(^|[^\u200b])@everyone/);

    // E-mail: multipart; the HTML part escapes the markup, the text part keeps it readable.
    const mail = peers.smtp.messages[0]!;
    expect(mail.subject).toBe('Incident: Payments down');
    expect(mail.html).toContain('&lt;script&gt;');
    expect(mail.html).not.toContain('<script>');
    expect(mail.text).toContain('Note: ');

    // Mattermost, Google Chat, Telegram.
    expect(String(peers.mattermost.messages[0]!.text)).not.toMatch(/(^|[^\u200b])@everyone/);
    expect(peers.chat.messages[0]!.requestId).toBe(byType(con.google_chat!).id);
    expect(peers.chat.messages[0]!.text).not.toContain('<!channel>');
    expect(peers.telegram.messages[0]!.chatId).toBe('-100200300');
    expect(peers.telegram.messages[0]!.text).toContain('Payments down');

    // Webhook: Standard Webhooks signature verified, webhook-id = delivery id, raw values.
    const w = peers.hook.requests[0]!;
    expect(w.verified).toBe(true);
    expect(w.webhookId).toBe(byType(con.webhook!).id);
    expect((w.body as { body: string }).body).toContain(HOSTILE);
  });
});

describe('the status page', () => {
  it('publishes when named: delivered, its message the incident on the page', async () => {
    const { body: inc } = await h.api('POST', '/v1/incidents', { body: { title: 'Public one', severity: 'minor' } });
    const r = await h.api('POST', `/v1/incidents/${inc.id}/execute`, {
      body: { connection_ids: [con.status_page], variables: { note: HOSTILE } },
    });
    expect(r.status).toBe(202);
    const done = await settled(inc.id, r.body.id);
    expect(done.status).toBe('delivered');
    expect(done.deliveries[0].message).toEqual({
      id: done.deliveries[0].id,
      channel: inc.id,
      permalink: `https://status.example.com/incidents/${inc.id}`,
    });
  });
});

describe('delivery rules end to end', () => {
  async function executeTo(key: string, title = 'Rules') {
    const { body: inc } = await h.api('POST', '/v1/incidents', { body: { title, severity: 'minor' } });
    const r = await h.api('POST', `/v1/incidents/${inc.id}/execute`, { body: { connection_ids: [con[key]] } });
    expect(r.status).toBe(202);
    return { incidentId: inc.id as string, executionId: r.body.id as string };
  }

  it('honours a 429 Retry-After: the next attempt is not earlier', async () => {
    peers.slack.rateLimitNext('webhook', 2);
    const before = peers.slack.webhookMessages.length;
    const { incidentId, executionId } = await executeTo('slack_webhook');
    const done = await settled(incidentId, executionId);
    const attempts = done.deliveries[0].attempts;
    expect(attempts.map((a: { outcome: string }) => a.outcome)).toEqual(['retryable_failure', 'delivered']);
    expect(attempts[0]).toMatchObject({ http_status: 429, retry_after_ms: 2000 });
    expect(Date.parse(attempts[1].at) - Date.parse(attempts[0].at)).toBeGreaterThanOrEqual(2000);
    expect(peers.slack.webhookMessages.length).toBe(before + 1);
  });

  it('retries a 500 and delivers; fails a 400 permanently without retrying', async () => {
    peers.mattermost.script({ status: 500, body: 'oops' });
    let { incidentId, executionId } = await executeTo('mattermost');
    let done = await settled(incidentId, executionId);
    expect(done.deliveries[0].attempts.map((a: { http_status: number }) => a.http_status)).toEqual([500, 200]);
    expect(done.status).toBe('delivered');

    peers.mattermost.script({ status: 400, body: { id: 'bad', message: 'bad request' } });
    ({ incidentId, executionId } = await executeTo('mattermost'));
    done = await settled(incidentId, executionId);
    expect(done.status).toBe('failed');
    expect(done.deliveries[0].attempts).toHaveLength(1);
    expect(done.deliveries[0].attempts[0].http_status).toBe(400);
    const events = (await h.api('GET', `/v1/incidents/${incidentId}/events`)).body.data;
    expect(events.some((e: { type: string }) => e.type === 'delivery.failed')).toBe(true);
  });

  it('paces a Slack connection to one message per second', async () => {
    const start = peers.slack.webhookMessages.length;
    const { body: inc } = await h.api('POST', '/v1/incidents', { body: { title: 'Paced', severity: 'low' } });
    for (let i = 0; i < 4; i++) {
      expect(
        (await h.api('POST', `/v1/incidents/${inc.id}/execute`, { body: { connection_ids: [con.slack_webhook] } }))
          .status,
      ).toBe(202);
    }
    await waitFor(() => peers.slack.webhookMessages.length >= start + 4, {
      timeoutMs: 15_000,
      what: 'four paced messages',
    });
    const times = peers.slack.requests
      .filter((r) => r.path.startsWith('/services/'))
      .slice(-4)
      .map((r) => r.receivedAt);
    // Pacing spaces the sends 1 s apart; what is measured here is their arrival, which a busy
    // machine delays by a few hundred ms each, unevenly. Unpaced, the four arrive within tens of ms.
    for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(500);
    expect(times[times.length - 1]! - times[0]!).toBeGreaterThanOrEqual(2_500);
  });

  it('disables a connection whose webhook answers 404', async () => {
    peers.discord.script({ status: 404, body: { message: 'Unknown Webhook', code: 10015 } });
    const { incidentId, executionId } = await executeTo('discord');
    const done = await settled(incidentId, executionId);
    expect(done.status).toBe('failed');
    const c = (await h.api('GET', `/v1/connections/${con.discord}`)).body;
    expect(c.enabled).toBe(false);
    expect(c.health.state).toBe('disabled');
    expect(c.health.disabled_reason).toBeTruthy();
  });
});
