import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  conversationSet,
  delivered,
  HOOK_SECRET,
  IN_PLACE,
  KINDS,
  SEPARATE,
  THREADED,
  type ConversationSet,
  type DeliveryView,
  type ExecutionView,
  type Kind,
} from '../support/conversation.js';
import { startHerald, type TestHerald } from '../support/herald.js';
import { startAllPeers, type AllPeers } from '../support/peers/all.js';
import { waitFor } from '../support/wait.js';

/**
 * "Living updates" as a new user meets them: one Herald, one connection of every kind against the
 * local platform peers; an incident executed three times stays one conversation per connection,
 * a correction edits in place or posts "Correction:", a retraction deletes or posts "Retracted:".
 */

let h: TestHerald;
let peers: AllPeers;

beforeAll(async () => {
  peers = await startAllPeers();
  peers.hook.setSecret(HOOK_SECRET);
  h = await startHerald({
    SLACK_API_URL: peers.slack.apiUrl,
    TELEGRAM_API_URL: peers.telegram.url,
    HERALD_RATE_LIMIT: '10000',
    HERALD_EXECUTE_RATE_LIMIT: '10000',
  });
});
afterAll(async () => {
  await h?.close();
  await peers?.close();
});

const TITLE = 'Checkout down';

/** An incident with a template that uses `{{eta}}` in its subject and body. */
async function newIncident(): Promise<string> {
  const tpl = await h.api('POST', '/v1/templates', {
    body: { name: `status ${randomUUID()}`, subject: 'Checkout: ETA {{eta}}', body: 'Fix expected by {{eta}}.' },
  });
  expect(tpl.status, JSON.stringify(tpl.body)).toBe(201);
  const inc = await h.api('POST', '/v1/incidents', {
    body: { title: TITLE, severity: 'major', template_ids: [tpl.body.id] },
  });
  expect(inc.status, JSON.stringify(inc.body)).toBe(201);
  return inc.body.id;
}

/** Executes to the set's connections and waits until every delivery is delivered. */
async function execute(incidentId: string, set: ConversationSet, eta: string): Promise<ExecutionView> {
  const r = await h.api('POST', `/v1/incidents/${incidentId}/execute`, {
    body: { variables: { eta }, connection_ids: Object.values(set.ids) },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return delivered(h, incidentId, r.body.id);
}

const act = (
  incidentId: string,
  executionId: string,
  verb: 'correct' | 'retract',
  body: unknown,
  headers: Record<string, string> = {},
) => h.api('POST', `/v1/incidents/${incidentId}/executions/${executionId}/${verb}`, { body, headers });

const text = (x: unknown) => JSON.stringify(x);
const events = async (incidentId: string) =>
  (await h.api('GET', `/v1/incidents/${incidentId}/events`)).body.data as {
    type: string;
    data: Record<string, unknown>;
  }[];

/** Every delivery of a correction or retraction: delivered, with its receipt, acting on the original. */
function expectActions(
  set: ConversationSet,
  original: ExecutionView,
  acting: ExecutionView,
  inPlace: 'edit' | 'delete',
) {
  for (const kind of KINDS) {
    const d = set.of(acting, kind);
    expect(d.status, kind).toBe('delivered');
    expect(d.attempts.length, kind).toBeGreaterThanOrEqual(1);
    expect(d.attempts.at(-1)!.outcome, kind).toBe('delivered');
    expect(d.target_delivery_id, kind).toBe(set.of(original, kind).id);
    expect(d.action, kind).toBe(IN_PLACE.includes(kind) ? inPlace : 'post');
    expect(d.sequence, kind).toBe(2);
  }
}

/** The second message of the posting-only channels (and of e-mail, Google Chat, the webhook) carries `needle`. */
function expectNotes(set: ConversationSet, needle: string) {
  const seconds: [string, unknown[]][] = [
    ['slack_webhook', set.slackWebhook()],
    ['teams', set.teams()],
    ['mattermost', set.mattermost()],
    ['google_chat', set.chat().map((m) => m.text)],
    ['email', set.mails().map((m) => [m.subject, m.text])],
    ['webhook', set.hooks()],
  ];
  for (const [kind, msgs] of seconds) {
    expect(msgs, kind).toHaveLength(2);
    expect(text(msgs[0]), kind).not.toContain(needle);
    expect(text(msgs[1]), kind).toContain(needle);
  }
}

describe('living updates across every channel kind', () => {
  it('three executes of one incident stay one conversation per connection', async () => {
    const set = await conversationSet(h, peers);
    const inc = await newIncident();
    const runs: ExecutionView[] = [];
    for (const eta of ['1h', '2h', '3h']) runs.push(await execute(inc, set, eta));
    const mine = (k: Kind): DeliveryView[] => runs.map((e) => set.of(e, k));

    // Receipts: numbered and chained per connection; threaded ones reply to the first message.
    for (const k of KINDS) {
      const [a, b, c] = mine(k);
      expect(
        mine(k).map((d) => [d.sequence, d.action]),
        k,
      ).toEqual([
        [1, 'post'],
        [2, 'post'],
        [3, 'post'],
      ]);
      expect(
        mine(k).map((d) => d.previous_delivery_id),
        k,
      ).toEqual([null, a!.id, b!.id]);
      expect(a!.reply_to, k).toBeNull();
      if (THREADED.includes(k)) {
        expect(a!.message, k).not.toBeNull();
        expect([b!.reply_to, c!.reply_to], k).toEqual([a!.message, a!.message]);
      } else expect([b!.reply_to, c!.reply_to], k).toEqual([null, null]);
    }
    const [slack1, slack2] = mine('slack_bot');
    expect(slack1!.message!.permalink).toBe(
      `https://herald-test.slack.com/archives/${set.slackChannel}/p${slack1!.message!.id.replace('.', '')}`,
    );
    expect(slack2!.message!.permalink).toContain(`?thread_ts=${slack1!.message!.id}`);
    for (const k of ['discord', 'discord_forum'] as const) {
      for (const d of mine(k))
        expect(d.message!.permalink, k).toMatch(
          new RegExp(`^https://discord\\.com/channels/\\d+/\\d+/${d.message!.id}$`),
        );
    }
    for (const d of mine('telegram'))
      expect(d.message!.permalink).toBe(`https://t.me/${set.telegramChat.slice(1)}/${d.message!.id}`);

    // Slack bot: one root message and two replies in its thread.
    const root = set.slackChannel;
    const top = peers.slack.messagesIn(root).filter((m) => m.thread_ts === null);
    expect(top.map((m) => m.ts)).toEqual([slack1!.message!.id]);
    expect(peers.slack.threadOf(root, top[0]!.ts).map((m) => [m.ts, m.thread_ts])).toEqual(
      mine('slack_bot')
        .slice(1)
        .map((d) => [d.message!.id, top[0]!.ts]),
    );
    expect(
      peers.slack
        .threadOf(root, top[0]!.ts)
        .map((m) => m.text)
        .join(),
    ).toMatch(/ETA 2h.*ETA 3h/s);

    // Telegram: the 2nd and 3rd reply to the 1st.
    const tg = set.telegram();
    expect(tg.map((m) => m.replyTo)).toEqual([null, tg[0]!.messageId, tg[0]!.messageId]);
    expect(tg.map((m) => String(m.messageId))).toEqual(mine('telegram').map((d) => d.message!.id));

    // E-mail: one mail thread.
    const mails = set.mails();
    expect(mails.map((m) => [m.inReplyTo, m.references])).toEqual([
      [null, []],
      [mails[0]!.messageId, [mails[0]!.messageId]],
      [mails[0]!.messageId, [mails[0]!.messageId]],
    ]);
    expect(mails.map((m) => m.subject)).toEqual(['Checkout: ETA 1h', 'Re: Checkout: ETA 2h', 'Re: Checkout: ETA 3h']);

    // Google Chat: all three in one thread, keyed by the incident.
    const chat = set.chat();
    expect(chat).toHaveLength(3);
    expect(new Set(chat.map((m) => m.thread.name)).size).toBe(1);
    expect(chat.map((m) => m.thread.threadKey)).toEqual(Array(3).fill(`herald-${inc}`));

    // Discord: the forum post holds all three; the plain webhook posts three channel messages.
    const forum = set.discord('discord_forum');
    expect(forum[0]!.threadName).toBe(TITLE);
    expect(forum.map((m) => m.threadId)).toEqual(Array(3).fill(forum[0]!.id));
    expect(peers.discord.threadMessages(forum[0]!.id)).toHaveLength(3);
    expect(mine('discord_forum').map((d) => d.message!.channel)).toEqual(Array(3).fill(forum[0]!.id));
    expect(set.discord('discord').map((m) => [m.threadId, m.threadName])).toEqual(Array(3).fill([null, null]));

    // Webhook: sequence 1, 2, 3 chained by previous_delivery_id.
    const hooks = set.hooks();
    expect(hooks.map((b) => [b.type, b.incident_id, b.sequence, b.previous_delivery_id])).toEqual(
      mine('webhook').map((d, i) => ['incident.executed', inc, i + 1, d.previous_delivery_id]),
    );

    // Channels that cannot reply: three messages of their own, one per execute.
    const separate: Record<string, unknown[]> = {
      teams: set.teams(),
      mattermost: set.mattermost(),
      slack_webhook: set.slackWebhook(),
      discord: set.discord('discord').map((m) => m.payload),
    };
    expect(Object.keys(separate).sort()).toEqual([...SEPARATE].sort());
    for (const [k, msgs] of Object.entries(separate)) {
      expect(
        msgs.map((m) => ['1h', '2h', '3h'].find((eta) => text(m).includes(`ETA ${eta}`))),
        k,
      ).toEqual(['1h', '2h', '3h']);
    }
  });

  it('a correction edits in place where the platform can and posts "Correction:" elsewhere; once per Idempotency-Key', async () => {
    const set = await conversationSet(h, peers);
    const inc = await newIncident();
    const orig = await execute(inc, set, '1h');
    const headers = { 'Idempotency-Key': `correct-${randomUUID()}` };
    const r = await act(inc, orig.id, 'correct', { variables: { eta: '2h' }, note: 'wrong ETA' }, headers);
    expect(r.status, text(r.body)).toBe(202);
    expect(r.body).toMatchObject({
      kind: 'correction',
      target_execution_id: orig.id,
      note: 'wrong ETA',
      variables: { eta: '2h' },
    });
    const replay = await act(inc, orig.id, 'correct', { variables: { eta: '2h' }, note: 'wrong ETA' }, headers);
    expect([replay.status, replay.body.id, replay.headers.get('idempotent-replayed')]).toEqual([
      202,
      r.body.id,
      'true',
    ]);
    const corr = await delivered(h, inc, r.body.id);
    expectActions(set, orig, corr, 'edit');

    // Slack bot: chat.update of the same message, no new post.
    const ts = set.of(orig, 'slack_bot').message!.id;
    expect(peers.slack.messageAt(set.slackChannel, ts)).toMatchObject({ edited: true, deleted: false });
    expect(peers.slack.messageAt(set.slackChannel, ts)!.text).toMatch(/ETA 2h[\s\S]*\(Corrected: wrong ETA\)/);
    expect(
      peers.slack
        .callsTo('chat.update')
        .filter((c) => c.args.channel === set.slackChannel)
        .map((c) => c.args.ts),
    ).toEqual([ts]);
    expect(peers.slack.messagesIn(set.slackChannel)).toHaveLength(1);
    // Discord (forum and plain): the message PATCHed.
    for (const k of ['discord', 'discord_forum'] as const) {
      const m = peers.discord.message(set.of(orig, k).message!.id)!;
      expect([m.edited, m.edits.length, set.discord(k).length], k).toEqual([true, 1, 1]);
      expect(text(m.payload), k).toContain('ETA 2h');
    }
    // Telegram: editMessageText of the message.
    const tgId = Number(set.of(orig, 'telegram').message!.id);
    expect(
      peers.telegram.calls.filter((c) => c.method === 'editMessageText' && c.args.message_id === tgId),
    ).toHaveLength(1);
    expect(peers.telegram.message(tgId)!.text).toContain('ETA 2h');
    expect(set.telegram()).toHaveLength(1);
    // Elsewhere a "Correction" in the conversation, re-rendered with the corrected variable.
    expectNotes(set, 'Correction: wrong ETA');
    expect(set.mails()[1]).toMatchObject({
      subject: 'Re: Correction: Checkout: ETA 2h',
      inReplyTo: set.mails()[0]!.messageId,
    });
    expect(new Set(set.chat().map((m) => m.thread.name)).size).toBe(1);
    expect(set.hooks()[1]).toMatchObject({
      type: 'execution.corrected',
      target_delivery_id: set.of(orig, 'webhook').id,
      sequence: 2,
    });

    const ev = (await events(inc)).filter((e) => e.type === 'execution.corrected');
    expect(ev.map((e) => e.data)).toEqual([
      expect.objectContaining({ execution_id: corr.id, target_execution_id: orig.id, note: 'wrong ETA' }),
    ]);
    const again = await act(inc, corr.id, 'correct', { note: 'again' });
    expect([again.status, again.body.code]).toEqual([409, 'not_correctable']);
    const all = (await h.api('GET', `/v1/incidents/${inc}/executions`)).body.data as ExecutionView[];
    expect(all.filter((e) => e.kind === 'correction').map((e) => e.id)).toEqual([corr.id]);
  });

  it('a retraction deletes where the platform can and posts "Retracted: <reason>" elsewhere', async () => {
    const set = await conversationSet(h, peers);
    const inc = await newIncident();
    const orig = await execute(inc, set, '1h');
    const reason = 'sent to the wrong audience';
    const r = await act(inc, orig.id, 'retract', { reason });
    expect(r.status, text(r.body)).toBe(202);
    expect(r.body).toMatchObject({ kind: 'retraction', target_execution_id: orig.id, note: reason });
    const retr = await delivered(h, inc, r.body.id);
    expectActions(set, orig, retr, 'delete');

    expect(peers.slack.messageAt(set.slackChannel, set.of(orig, 'slack_bot').message!.id)).toMatchObject({
      deleted: true,
    });
    expect(peers.slack.callsTo('chat.delete').filter((c) => c.args.channel === set.slackChannel)).toHaveLength(1);
    for (const k of ['discord', 'discord_forum'] as const)
      expect(peers.discord.message(set.of(orig, k).message!.id)!.deleted, k).toBe(true);
    const tgId = Number(set.of(orig, 'telegram').message!.id);
    expect(peers.telegram.calls.filter((c) => c.method === 'deleteMessage' && c.args.message_id === tgId)).toHaveLength(
      1,
    );
    expect(peers.telegram.message(tgId)!.deleted).toBe(true);

    expectNotes(set, `Retracted: ${reason}`);
    expect(set.hooks()[1]).toMatchObject({
      type: 'execution.retracted',
      target_delivery_id: set.of(orig, 'webhook').id,
    });
    const ev = (await events(inc)).filter((e) => e.type === 'execution.retracted');
    expect(ev.map((e) => e.data)).toEqual([
      expect.objectContaining({ execution_id: retr.id, target_execution_id: orig.id, reason }),
    ]);
  });

  it('update_mode edit keeps one Slack message current; a Teams connection cannot take it (422)', async () => {
    const set = await conversationSet(h, peers, {
      only: ['slack_bot', 'teams'],
      over: { slack_bot: { update_mode: 'edit' } },
    });
    const inc = await newIncident();
    const first = await execute(inc, set, '1h');
    const second = await execute(inc, set, '2h');
    const [a, b] = [set.of(first, 'slack_bot'), set.of(second, 'slack_bot')];
    expect([a.action, b.action]).toEqual(['post', 'edit']);
    expect(b.message?.id).toBe(a.message!.id);
    const msgs = peers.slack.messagesIn(set.slackChannel);
    expect(msgs).toHaveLength(1);
    expect(msgs[0]).toMatchObject({ ts: a.message!.id, edited: true, thread_ts: null });
    expect(msgs[0]!.text).toContain('ETA 2h');
    expect(peers.slack.threadOf(set.slackChannel, a.message!.id)).toEqual([]);
    expect(set.teams()).toHaveLength(2);

    const patch = await h.api('PATCH', `/v1/connections/${set.ids.teams}`, { body: { update_mode: 'edit' } });
    expect(patch.status, text(patch.body)).toBe(422);
    expect(patch.body.errors).toEqual([
      expect.objectContaining({ field: 'update_mode', code: 'unsupported_update_mode' }),
    ]);
    expect((await h.api('GET', `/v1/connections/${set.ids.teams}`)).body.update_mode).toBe('thread');
  });

  it('correcting or retracting an execution with nothing delivered yet is 409 nothing_delivered', async () => {
    const set = await conversationSet(h, peers, { only: ['mattermost'] });
    // Its Mattermost answers 500 (for a while): the delivery is retrying, nothing is delivered.
    peers.mattermost.script(
      ...Array.from({ length: 30 }, () => ({ match: `/hooks/${set.tag}`, status: 500, body: 'oops' })),
    );
    const inc = await newIncident();
    const r = await h.api('POST', `/v1/incidents/${inc}/execute`, {
      body: { variables: { eta: '1h' }, connection_ids: [set.ids.mattermost] },
    });
    expect(r.status).toBe(202);
    const e = await waitFor(
      async () => {
        const x = (await h.api('GET', `/v1/incidents/${inc}/executions/${r.body.id}`)).body as ExecutionView;
        return x.deliveries[0]!.attempts.length >= 1 ? x : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 100, what: 'a first (failed) attempt' },
    );
    expect(['retrying', 'failed']).toContain(e.deliveries[0]!.status);
    expect(e.deliveries[0]!.attempts[0]).toMatchObject({ http_status: 500 });
    for (const [verb, body] of [
      ['correct', { note: 'typo' }],
      ['retract', { reason: 'oops' }],
    ] as const) {
      const c = await act(inc, r.body.id, verb, body);
      expect([c.status, c.body.code], verb).toEqual([409, 'nothing_delivered']);
    }
    expect((await h.api('GET', `/v1/incidents/${inc}/executions`)).body.data).toHaveLength(1);
  });
});
