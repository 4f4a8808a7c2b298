import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { ApprovalMessageLog, ApprovalMessageRef } from '../../src/ports/notices.js';
import { SlackApprovalNotifier, type SlackApprovalNotice } from '../../src/slack/approvals.js';
import type { ApprovalFacts } from '../../src/slack/views/approval.js';

/** The log in memory, as RedisApprovalMessageLog keeps it. */
function memoryLog(): ApprovalMessageLog {
  const dms = new Map<string, ApprovalMessageRef>();
  const lines = new Set<string>();
  return {
    async dms(e, a) {
      const out = new Map<string, ApprovalMessageRef>();
      for (const [k, v] of dms) if (k.startsWith(`${e}|${a}|`)) out.set(k.split('|')[2]!, v);
      return out;
    },
    async recordDm(e, a, u, ref) {
      const k = `${e}|${a}|${u}`;
      if (dms.has(k)) return false;
      dms.set(k, ref);
      return true;
    },
    async threadLinePosted(e, a, s) {
      return lines.has(`${e}|${a}|${s}`);
    },
    async recordThreadLine(e, a, s) {
      lines.add(`${e}|${a}|${s}`);
    },
    exclusively: (_e, _a, work) => work(),
  };
}

/** Slack's Web API as the notifier uses it: DMs opened per user, posts and updates recorded. */
function fakeSlack(opts: { refuse?: Record<string, string>; down?: boolean } = {}) {
  const posts: { channel: string; thread_ts?: string; text: string; blocks?: unknown }[] = [];
  const updates: { channel: string; ts: string; text: string; blocks?: unknown }[] = [];
  let n = 0;
  const platformError = (error: string) =>
    Object.assign(new Error(`An API error occurred: ${error}`), {
      code: 'slack_webapi_platform_error',
      data: { ok: false, error },
    });
  const client = {
    conversations: {
      open: async ({ users }: { users: string }) => {
        if (opts.refuse?.[users]) throw platformError(opts.refuse[users]);
        return { ok: true, channel: { id: `D${users}` } };
      },
    },
    chat: {
      postMessage: async (args: { channel: string; thread_ts?: string; text: string; blocks?: unknown }) => {
        if (opts.down) throw Object.assign(new Error('socket hang up'), { code: 'slack_webapi_request_error' });
        posts.push(args);
        return { ok: true, channel: args.channel, ts: `1.${++n}` };
      },
      update: async (args: { channel: string; ts: string; text: string; blocks?: unknown }) => {
        updates.push(args);
        return { ok: true };
      },
    },
  };
  return { client, posts, updates };
}

const pending: ApprovalFacts = {
  state: 'pending',
  requested_by: { type: 'api_key', id: 'key_1', name: 'deploy' },
  requested_at: '2026-11-27T14:00:00.000Z',
  expires_at: '2026-11-27T16:00:00.000Z',
  decided_by: null,
  decided_at: null,
  reason: null,
};

const notice = (approval: ApprovalFacts): SlackApprovalNotice => ({
  incident: { id: 'inc_1', title: 'Checkout down' },
  execution: { id: 'exe_1' },
  audience: { key: 'customers', name: 'Customers', visibility: 'external', approval },
  approvers: { slack_user_ids: ['UBOB', 'UCAROL'] },
  deliveries: [
    {
      connection_id: 'con_1',
      connection_type: 'webhook',
      template_id: 'tpl_1',
      content: { subject: '', body: 'Some payments fail.' },
    },
  ],
});

function notifier(slack: ReturnType<typeof fakeSlack>, log = memoryLog()) {
  const followed: string[] = [];
  const n = new SlackApprovalNotifier({
    client: slack.client as never,
    messages: log,
    services: {
      announcements: { find: async () => ({ channel: 'CINC', ts: '9.9', execution_id: null }) } as never,
      connections: { get: async () => ({ name: 'Status page' }) } as never,
      templates: { getMany: async () => [{ id: 'tpl_1', name: 'Public' }] } as never,
    },
    receipts: { executed: (_i, e) => void followed.push(e) },
    log: pino({ level: 'silent' }),
  });
  return { n, followed, log };
}

describe('SlackApprovalNotifier', () => {
  it('DMs each approver and posts the thread line once, however often it is told', async () => {
    const slack = fakeSlack();
    const { n, followed } = notifier(slack);
    await n.notify(notice(pending));
    await n.notify(notice(pending));
    const dms = slack.posts.filter((p) => p.thread_ts === undefined);
    expect(dms.map((p) => p.channel)).toEqual(['DUBOB', 'DUCAROL']);
    expect(JSON.stringify(dms[0]!.blocks)).toContain('Some payments fail.');
    expect(JSON.stringify(dms[0]!.blocks)).toContain('Status page');
    const lines = slack.posts.filter((p) => p.thread_ts === '9.9');
    expect(lines).toHaveLength(1);
    expect(lines[0]!.text).toContain('Waiting for approval to send to *Customers*');
    expect(followed).toEqual(['exe_1', 'exe_1']);
  });

  it('updates the DMs it posted once decided, and posts that state’s line once', async () => {
    const slack = fakeSlack();
    const { n } = notifier(slack);
    await n.notify(notice(pending));
    const approved: ApprovalFacts = {
      ...pending,
      state: 'approved',
      decided_by: { type: 'slack_user', id: 'UBOB', name: 'bob' },
      decided_at: '2026-11-27T14:05:00.000Z',
    };
    await n.notify(notice(approved));
    await n.notify(notice(approved));
    expect(slack.posts.filter((p) => p.thread_ts === undefined)).toHaveLength(2);
    expect(slack.updates.map((u) => u.channel)).toEqual(['DUBOB', 'DUCAROL', 'DUBOB', 'DUCAROL']);
    expect(JSON.stringify(slack.updates[0]!.blocks)).toContain('*Approved* by <@UBOB>');
    expect(JSON.stringify(slack.updates[0]!.blocks)).not.toContain('approval_approve');
    expect(slack.posts.filter((p) => p.thread_ts === '9.9').map((p) => p.text.split(' — ')[0])).toEqual([
      ':raised_hand: Waiting for approval to send to *Customers* (1 message)',
      ':white_check_mark: Approved by <@UBOB>',
    ]);
  });

  it('skips an approver Slack refuses (asking again would never work), and DMs the others', async () => {
    const slack = fakeSlack({ refuse: { UBOB: 'user_not_found' } });
    const { n } = notifier(slack);
    await n.notify(notice(pending));
    expect(slack.posts.filter((p) => p.thread_ts === undefined).map((p) => p.channel)).toEqual(['DUCAROL']);
  });

  it('throws when Slack cannot be reached, so the service tells it again', async () => {
    const slack = fakeSlack({ down: true });
    const { n } = notifier(slack);
    await expect(n.notify(notice(pending))).rejects.toThrow('socket hang up');
  });

  it('tells nothing of an audience without an approval', async () => {
    const slack = fakeSlack();
    const { n } = notifier(slack);
    await n.notify({
      ...notice(pending),
      audience: { key: 'responders', name: 'R', visibility: 'internal', approval: null },
    });
    expect(slack.posts).toEqual([]);
  });
});
