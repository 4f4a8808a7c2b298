import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeys } from '../../src/store/keys.js';
import { CHILD_DEADLINE_MS, childEnv, spawnEntry, stopChild, type Child } from '../support/child.js';
import {
  conversationSet,
  HOOK_SECRET,
  type DeliveryView,
  type ExecutionView,
  type Kind,
} from '../support/conversation.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { startAllPeers, type AllPeers } from '../support/peers/all.js';
import type { RecordedRequest } from '../support/peers/http-sink.js';
import { connectTestRedis, testRedisUrl } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/**
 * Living updates when the platform answers slowly (docs/explanation/living-updates.md): two executes of one
 * incident sent back to back, while the platform holds its answer to the first post for seconds,
 * still make one conversation — the second message waits until the first is settled, then
 * replies under it (Slack thread_ts, Telegram reply, Discord forum thread, e-mail In-Reply-To),
 * or becomes the first message itself when the first failed for good; the wait is bounded, and
 * a worker killed while an update waits loses nothing and sends nothing twice.
 */

const HOLD_MS = 5_000;
let peers: AllPeers;
let h: TestHerald;
const others: TestHerald[] = [];
const workers: Child[] = [];

beforeAll(async () => {
  peers = await startAllPeers();
  peers.hook.setSecret(HOOK_SECRET);
  h = await startHerald(heraldEnv());
});
afterAll(async () => {
  for (const w of workers) await stopChild(w);
  for (const o of others) await o.close();
  await h?.close();
  await peers?.close();
});

function heraldEnv(over: Record<string, string> = {}): Record<string, string> {
  return {
    SLACK_API_URL: peers.slack.apiUrl,
    TELEGRAM_API_URL: peers.telegram.url,
    HERALD_RATE_LIMIT: '10000',
    HERALD_EXECUTE_RATE_LIMIT: '10000',
    ...over,
  };
}

const TERMINAL = ['delivered', 'failed', 'cancelled'];

/** Polls an execution until every delivery is final. */
async function settled(t: TestHerald, incidentId: string, executionId: string, timeoutMs = 60_000) {
  return waitFor(
    async () => {
      const e = (await t.api('GET', `/v1/incidents/${incidentId}/executions/${executionId}`)).body as ExecutionView;
      return e.deliveries.every((d) => TERMINAL.includes(d.status)) ? e : undefined;
    },
    { timeoutMs, intervalMs: 100, what: `execution ${executionId} to settle` },
  );
}

async function newIncident(t: TestHerald, title: string): Promise<string> {
  const inc = await t.api('POST', '/v1/incidents', { body: { title, severity: 'major' } });
  expect(inc.status, JSON.stringify(inc.body)).toBe(201);
  return inc.body.id as string;
}

/**
 * Executes the incident to `ids` without waiting for the deliveries; answers the execution's id.
 * A 503 (Redis slow to answer on a busy machine) is retried with the same Idempotency-Key, as
 * the problem says a client should.
 */
async function execute(t: TestHerald, incidentId: string, ids: string[]): Promise<string> {
  const key = randomBytes(8).toString('hex');
  const r = await waitFor(
    async () => {
      const res = await t.api('POST', `/v1/incidents/${incidentId}/execute`, {
        body: { connection_ids: ids },
        headers: { 'idempotency-key': key },
      });
      return res.status === 503 ? undefined : res;
    },
    { timeoutMs: 30_000, intervalMs: 200, what: 'the execute to be taken' },
  );
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return r.body.id as string;
}

type Waited = { delivery_id: string; ms: number; outcome: string } | null;
const waitedOf = (d: DeliveryView): Waited => (d as DeliveryView & { waited_for: Waited }).waited_for;

/** A Slack Web API call's request to `method` in `channel`. */
const slackPost = (channel: string) => (r: RecordedRequest) =>
  r.path === '/api/chat.postMessage' && (r.body as { channel?: string }).channel === channel;
/** A Telegram sendMessage to `chat`. */
const telegramSend = (chat: string) => (r: RecordedRequest) =>
  r.path.endsWith('/sendMessage') && (r.body as { chat_id?: string }).chat_id === chat;

describe('an update sent while the platform still holds its answer to the first message', () => {
  it(
    'replies under the first once it is delivered: Slack, Telegram, Discord forum, e-mail',
    { timeout: 120_000 },
    async () => {
      const kinds: Kind[] = ['slack_bot', 'telegram', 'discord_forum', 'email'];
      const set = await conversationSet(h, peers, { only: kinds });
      // Each platform holds its answer to the first post for 5 s (it has posted it already).
      peers.slack.hold('chat.postMessage', HOLD_MS, set.slackChannel);
      peers.telegram.hold(HOLD_MS, telegramSend(set.telegramChat));
      peers.discord.hold(HOLD_MS, (r) => r.method === 'POST');
      peers.smtp.script({ stage: 'data', delayMs: HOLD_MS });

      const inc = await newIncident(h, 'Payments slow');
      const ids = kinds.map((k) => set.ids[k]);
      const first = await execute(h, inc, ids);
      const second = await execute(h, inc, ids);
      const [a, b] = [await settled(h, inc, first), await settled(h, inc, second)];

      for (const k of kinds) {
        const [d1, d2] = [set.of(a, k), set.of(b, k)];
        expect([d1.status, d2.status], k).toEqual(['delivered', 'delivered']);
        expect(d2.reply_to, k).toEqual(d1.message);
        const waited = waitedOf(d2);
        expect(waited, k).toMatchObject({ delivery_id: d1.id, outcome: 'delivered' });
        expect(waited!.ms, k).toBeGreaterThan(0);
        expect(waitedOf(d1), k).toBeNull();
      }
      // What each platform holds: one conversation, the second message under the first.
      const slackTop = peers.slack.messagesIn(set.slackChannel).filter((m) => m.thread_ts === null);
      expect(slackTop).toHaveLength(1);
      expect(peers.slack.threadOf(set.slackChannel, slackTop[0]!.ts)).toHaveLength(1);
      const tg = set.telegram();
      expect(tg.map((m) => m.replyTo)).toEqual([null, tg[0]!.messageId]);
      const forum = set.discord('discord_forum');
      expect(forum).toHaveLength(2);
      expect(forum.map((m) => m.threadId)).toEqual([forum[0]!.id, forum[0]!.id]);
      const mails = set.mails();
      expect(mails.map((m) => [m.inReplyTo, m.references])).toEqual([
        [null, []],
        [mails[0]!.messageId, [mails[0]!.messageId]],
      ]);
    },
  );

  it('becomes the first message itself when the first fails for good, sent only after that failure', async () => {
    const kinds: Kind[] = ['slack_bot', 'telegram'];
    const set = await conversationSet(h, peers, { only: kinds });
    // The first post is refused for good, after 3 s.
    peers.slack.script({
      match: slackPost(set.slackChannel),
      delayMs: 3_000,
      body: { ok: false, error: 'msg_too_long' },
    });
    peers.telegram.script({
      match: telegramSend(set.telegramChat),
      delayMs: 3_000,
      status: 400,
      body: { ok: false, error_code: 400, description: 'Bad Request: message is too long' },
    });
    const inc = await newIncident(h, 'Search down');
    const ids = kinds.map((k) => set.ids[k]);
    const first = await execute(h, inc, ids);
    const second = await execute(h, inc, ids);
    const [a, b] = [await settled(h, inc, first), await settled(h, inc, second)];
    for (const k of kinds) {
      const [d1, d2] = [set.of(a, k), set.of(b, k)];
      expect([d1.status, d2.status], k).toEqual(['failed', 'delivered']);
      expect(d2.reply_to, k).toBeNull();
      expect(waitedOf(d2), k).toMatchObject({ delivery_id: d1.id, outcome: 'failed' });
    }
    // The second post went out only once the first was answered (3 s after it was sent).
    const slackPosts = peers.slack.requests.filter(slackPost(set.slackChannel));
    const tgSends = peers.telegram.requests.filter(telegramSend(set.telegramChat));
    for (const posts of [slackPosts, tgSends]) {
      expect(posts).toHaveLength(2);
      expect(posts[1]!.receivedAt - posts[0]!.receivedAt).toBeGreaterThanOrEqual(3_000);
    }
    // A third execute continues the conversation the second started.
    const third = await settled(h, inc, await execute(h, inc, ids));
    for (const k of kinds) expect(set.of(third, k).reply_to, k).toEqual(set.of(b, k).message);
    expect(peers.slack.messagesIn(set.slackChannel).filter((m) => m.thread_ts === null)).toHaveLength(1);
  });

  it('waits no longer than HERALD_THREAD_WAIT_MS, then posts on its own and says so', async () => {
    const bounded = await startHerald(heraldEnv({ HERALD_THREAD_WAIT_MS: '1500' }));
    others.push(bounded);
    const set = await conversationSet(bounded, peers, { only: ['slack_bot'] });
    peers.slack.hold('chat.postMessage', 8_000, set.slackChannel);
    const inc = await newIncident(bounded, 'Login errors');
    const first = await execute(bounded, inc, [set.ids.slack_bot]);
    const second = await execute(bounded, inc, [set.ids.slack_bot]);
    const b = await settled(bounded, inc, second);
    const d2 = set.of(b, 'slack_bot');
    expect(d2.status).toBe('delivered');
    expect(d2.reply_to).toBeNull();
    const waited = waitedOf(d2)!;
    expect(waited).toMatchObject({ outcome: 'timed_out' });
    expect(waited.ms).toBeGreaterThanOrEqual(1_500);
    expect(waited.ms).toBeLessThan(8_000);
    const a = await settled(bounded, inc, first);
    expect(waited.delivery_id).toBe(set.of(a, 'slack_bot').id);
    // It went out while the first was still unanswered: after the bound, before the 8 s answer.
    const posts = peers.slack.requests.filter(slackPost(set.slackChannel));
    expect(posts).toHaveLength(2);
    expect(posts[1]!.receivedAt - posts[0]!.receivedAt).toBeGreaterThanOrEqual(1_400);
    expect(posts[1]!.receivedAt - posts[0]!.receivedAt).toBeLessThan(8_000);
  });
});

describe('a worker killed while an update waits for the first message', () => {
  it(
    'loses nothing: the restarted worker sends each message exactly once, in one thread',
    { timeout: 240_000 },
    async () => {
      const secretKey = randomBytes(32).toString('base64');
      const api = await startHerald(heraldEnv({ HERALD_SECRET_KEY: secretKey }), { worker: false });
      others.push(api);
      const startWorker = (): Child => {
        const w = spawnEntry(
          'main',
          [],
          childEnv({
            ...heraldEnv(),
            HERALD_ROLE: 'worker',
            REDIS_URL: testRedisUrl(),
            HERALD_KEY_PREFIX: api.prefix,
            HERALD_SECRET_KEY: secretKey,
            HERALD_OUTBOUND_ALLOW: '127.0.0.1/32',
            HERALD_JOB_LOCK_MS: '2000',
            // A cold start on a busy machine takes seconds: the wait must outlast the restart.
            HERALD_THREAD_WAIT_MS: '180000',
            HERALD_DATA_DIR: api.dataDir,
            LOG_LEVEL: 'info',
          }),
        );
        workers.push(w);
        return w;
      };
      const set = await conversationSet(api, peers, { only: ['slack_bot'] });
      // The first post is rate limited (nothing posted): it retries in 8 s, while the update waits.
      peers.slack.script({
        match: slackPost(set.slackChannel),
        status: 429,
        headers: { 'retry-after': '8' },
        body: { ok: false, error: 'ratelimited' },
      });
      const inc = await newIncident(api, 'Queue backlog');
      const first = await execute(api, inc, [set.ids.slack_bot]);
      const second = await execute(api, inc, [set.ids.slack_bot]);
      const ids = async () =>
        Promise.all(
          [first, second].map(
            async (e) =>
              ((await api.api('GET', `/v1/incidents/${inc}/executions/${e}`)).body as ExecutionView).deliveries[0]!.id,
          ),
        );
      const [id1, id2] = await ids();

      const worker = startWorker();
      const redis = connectTestRedis();
      try {
        const keys = createKeys(api.prefix);
        const stored = async (id: string) => {
          const raw = await redis.get(keys.delivery(id));
          return raw ? (JSON.parse(raw) as { status: string; thread_wait?: unknown }) : null;
        };
        // The update waits (its wait is on its record) while the first is retrying: nothing is in
        // flight when the worker dies.
        await waitFor(
          async () => {
            const [d1, d2] = [await stored(id1!), await stored(id2!)];
            return d1?.status === 'retrying' && d2?.status === 'queued' && d2.thread_wait ? d2 : undefined;
          },
          { timeoutMs: CHILD_DEADLINE_MS, intervalMs: 100, what: 'the update to wait for the first message' },
        ).catch((e: unknown) => {
          throw new Error(`${(e as Error).message}\nworker output:\n${worker.stdout().slice(-3000)}`);
        });
        worker.proc.kill('SIGKILL');
        await worker.exited;
      } finally {
        await redis.quit();
      }
      expect(peers.slack.messagesIn(set.slackChannel)).toEqual([]);

      startWorker();
      const a = await settled(api, inc, first, 120_000);
      const b = await settled(api, inc, second, 120_000);
      const [d1, d2] = [set.of(a, 'slack_bot'), set.of(b, 'slack_bot')];
      expect([d1.id, d2.id]).toEqual([id1, id2]);
      expect(d1.attempts.map((x) => x.outcome)).toEqual(['retryable_failure', 'delivered']);
      expect(d2.attempts.map((x) => x.outcome)).toEqual(['delivered']);
      expect(d2.reply_to).toEqual(d1.message);
      expect(waitedOf(d2)).toMatchObject({ delivery_id: d1.id, outcome: 'delivered' });
      // Exactly one of each message: the root, and the update in its thread.
      const all = peers.slack.messagesIn(set.slackChannel);
      expect(all).toHaveLength(2);
      expect(all.map((m) => m.thread_ts)).toEqual([null, all[0]!.ts]);
      expect(peers.slack.requests.filter(slackPost(set.slackChannel))).toHaveLength(3);
    },
  );
});
