import { describe, expect, it } from 'vitest';
import type { Incident } from '../../src/domain/incident/incident.js';
import { decodeContext } from '../../src/slack/views/action-ids.js';
import { receiptLine } from '../../src/slack/views/announcement.js';
import { DomainError } from '../../src/domain/common/errors.js';
import { ephemeralMessage } from '../../src/slack/errors.js';
import {
  approvalMessage,
  approvalThreadLine,
  rejectModal,
  type ApprovalFacts,
  type ApprovalMessageInput,
  type HeldMessage,
} from '../../src/slack/views/approval.js';
import { AUDIENCES_FIELD, executeModal, type AudiencePreview } from '../../src/slack/views/execute-modal.js';
import { checkApiCall } from '../support/slack-limits.js';
import { textOfBlocks } from '../support/slack-client.js';
import { anIncident } from '../support/factories.js';

const incident = (over: Partial<Incident> = {}): Incident =>
  anIncident({ id: 'inc_01JABCDEFGHJKMNPQRSTVWXYZ0', title: 'Checkout down', ...over });

const pending: ApprovalFacts = {
  state: 'pending',
  requested_by: { type: 'slack_user', id: 'UALICE', name: 'alice' },
  requested_at: '2026-11-27T14:00:00.000Z',
  expires_at: '2026-11-27T16:00:00.000Z',
  decided_by: null,
  decided_at: null,
  reason: null,
};

const held = (over: Partial<HeldMessage> = {}): HeldMessage => ({
  connectionName: 'Status page',
  connectionType: 'webhook',
  templateName: 'Customer notice',
  subject: 'Checkout is degraded',
  body: 'Some payments fail. Next update at 15:00.',
  ...over,
});

const notice = (over: Partial<ApprovalMessageInput> = {}): ApprovalMessageInput => ({
  incident: { id: 'inc_1', title: 'Checkout down' },
  execution: { id: 'exe_1' },
  audience: { key: 'customers', name: 'Customers', visibility: 'external' },
  approval: pending,
  messages: [held()],
  ...over,
});

const buttons = (blocks: any[]) =>
  blocks.filter((b) => b.type === 'actions').flatMap((b) => b.elements as { action_id: string; value: string }[]);

/** The DM as chat.postMessage would carry it, checked against Slack's limits. */
function posted(m: { text: string; blocks: unknown[] }) {
  const violations = checkApiCall('chat.postMessage', { channel: 'D1', text: m.text, blocks: m.blocks });
  expect(violations).toEqual([]);
  return textOfBlocks(m.blocks as any[]);
}

describe('approval DM', () => {
  it('asks with the exact rendered words, who asked, the expiry and Approve / Reject for this audience', () => {
    const m = approvalMessage(notice());
    const text = posted(m);
    expect(text).toContain('Approval needed');
    expect(text).toContain('*Customers* (external)');
    expect(text).toContain('Checkout is degraded\n\nSome payments fail. Next update at 15:00.');
    expect(text).toContain('<@UALICE>');
    expect(text).toContain('<!date^1795795200^{date_short_pretty} {time}|2026-11-27 16:00 UTC>');
    const [approve, reject] = buttons(m.blocks);
    expect([approve?.action_id, reject?.action_id]).toEqual(['approval_approve', 'approval_reject']);
    expect(decodeContext(approve!.value)).toEqual({
      incident_id: 'inc_1',
      execution_id: 'exe_1',
      audience: 'customers',
    });
    expect(m.text).toContain('Approval needed: Customers');
  });

  it('shows the words as plain text, never as markup, and escapes names', () => {
    const m = approvalMessage(
      notice({
        incident: { id: 'inc_1', title: '<!channel> down' },
        messages: [held({ connectionName: '<@U999>', body: '*not bold* <!here>' })],
      }),
    );
    const words = m.blocks.find((b: any) => b.type === 'section' && b.text.type === 'plain_text') as any;
    expect(words.text.text).toContain('*not bold* <!here>');
    expect(JSON.stringify(m.blocks)).not.toContain('<@U999>');
    expect(m.text).not.toContain('<!channel>');
  });

  it('cuts a message longer than Slack holds, and says it is sent whole', () => {
    const long = 'x'.repeat(5000);
    const text = posted(approvalMessage(notice({ messages: [held({ subject: '', body: long })] })));
    expect(text).toContain('cut to fit Slack');
    expect(text).toContain('5,000 characters are what is sent');
  });

  it('counts messages past what a DM holds and stays within 50 blocks', () => {
    const many = Array.from({ length: 60 }, (_, i) => held({ connectionName: `Site ${i}` }));
    const m = approvalMessage(notice({ messages: many }));
    const text = posted(m);
    expect(m.blocks.length).toBeLessThanOrEqual(50);
    expect(text).toMatch(/…and \d+ more messages/);
    expect(buttons(m.blocks)).toHaveLength(2);
  });

  it('once decided, says who, when and why, and the buttons are gone', () => {
    const decided = approvalMessage(
      notice({
        approval: {
          ...pending,
          state: 'rejected',
          decided_by: { type: 'slack_user', id: 'UBOB', name: 'bob' },
          decided_at: '2026-11-27T14:10:00.000Z',
          reason: 'Wrong ETA',
        },
      }),
    );
    const text = posted(decided);
    expect(text).toContain('*Rejected* by <@UBOB>');
    expect(text).toContain('Wrong ETA');
    expect(text).toContain('nothing was sent');
    expect(buttons(decided.blocks)).toEqual([]);
    const approved = posted(
      approvalMessage(
        notice({
          approval: {
            ...pending,
            state: 'approved',
            decided_by: { type: 'api_key', id: 'key_1', name: 'deploy bot' },
            decided_at: '2026-11-27T14:10:00.000Z',
          },
        }),
      ),
    );
    expect(approved).toContain('*Approved* by API key deploy bot');
    expect(approved).toContain('sending');
    const expired = posted(approvalMessage(notice({ approval: { ...pending, state: 'expired' } })));
    expect(expired).toContain('*Expired*');
    expect(expired).toContain('nothing was sent');
  });
});

describe('approval thread line', () => {
  it('names the audience, how many messages, who asked and the approvers while pending', () => {
    const line = approvalThreadLine({ ...notice({ messages: [held(), held(), held()] }), approvers: ['UBOB', 'bad'] });
    expect(line).toContain('Waiting for approval to send to *Customers* (3 messages) — asked by <@UALICE>');
    expect(line).toContain('Approvers: <@UBOB>.');
  });

  it('says what happened once decided', () => {
    const by = { type: 'slack_user' as const, id: 'UBOB', name: 'bob' };
    const at = '2026-11-27T14:10:00.000Z';
    const line = (approval: ApprovalFacts) => approvalThreadLine({ ...notice({ approval }), approvers: [] });
    expect(line({ ...pending, state: 'approved', decided_by: by, decided_at: at })).toMatch(
      /^:white_check_mark: Approved by <@UBOB> — sending to \*Customers\*/,
    );
    expect(line({ ...pending, state: 'rejected', decided_by: by, decided_at: at, reason: 'retracted' })).toContain(
      'Rejected by <@UBOB> — nothing was sent to *Customers*. Reason: “retracted”',
    );
    expect(line({ ...pending, state: 'expired' })).toMatch(/^:hourglass: Expired — nothing was sent to \*Customers\*/);
  });
});

describe('reject modal', () => {
  it('asks for an optional reason and carries the decision’s context', () => {
    const v = rejectModal({
      incidentId: 'inc_1',
      executionId: 'exe_1',
      audience: 'customers',
    });
    expect(checkApiCall('views.open', { trigger_id: 't', view: v })).toEqual([]);
    const reason = v.blocks.find((b: any) => b.type === 'input') as any;
    expect(reason.block_id).toBe('reason');
    expect(reason.optional).toBe(true);
    expect(decodeContext(v.private_metadata)).toEqual({
      incident_id: 'inc_1',
      execution_id: 'exe_1',
      audience: 'customers',
    });
  });
});

describe('execute modal with audiences', () => {
  const choices = [
    { key: 'responders', name: 'Responders', visibility: 'internal', approval_required: false },
    { key: 'customers', name: 'Customers', visibility: 'external', approval_required: true },
  ];
  const part = (over: Partial<AudiencePreview>): AudiencePreview => ({
    ...choices[0]!,
    total: 1,
    previews: [],
    skipped: null,
    ...over,
  });

  it('offers each audience with whether it needs approval, picked ones checked', () => {
    const v = executeModal({
      incident: incident(),
      variables: [],
      previews: [],
      audiences: { choices, selected: ['responders'], previews: [part({})] },
    });
    expect(checkApiCall('views.open', { trigger_id: 't', view: v })).toEqual([]);
    const picker = v.blocks.find((b: any) => b.block_id === AUDIENCES_FIELD) as any;
    expect(picker.type).toBe('input');
    expect(picker.dispatch_action).toBe(true);
    expect(picker.element.type).toBe('checkboxes');
    expect(picker.element.options.map((o: any) => [o.value, o.description.text])).toEqual([
      ['responders', 'internal · sent at once'],
      ['customers', 'external · needs approval first'],
    ]);
    expect(picker.element.initial_options.map((o: any) => o.value)).toEqual(['responders']);
  });

  it('previews each picked audience’s own words, and explains one that sends nothing', () => {
    const v = executeModal({
      incident: incident(),
      variables: [],
      previews: [],
      audiences: {
        choices,
        selected: ['responders', 'customers'],
        previews: [
          part({
            previews: [
              {
                connectionName: 'Ops',
                connectionType: 'slack',
                templateName: 'Tech',
                subject: '',
                body: 'DB failover',
              },
            ],
          }),
          part({
            ...choices[1]!,
            total: 2,
            previews: [
              {
                connectionName: 'Status',
                connectionType: 'webhook',
                templateName: 'Public',
                subject: '',
                body: 'Some payments fail',
              },
            ],
          }),
        ],
      },
    });
    const text = textOfBlocks(v.blocks as any[]);
    expect(text).toContain('*Responders* (internal) · sent at once · 1 delivery');
    expect(text).toContain('DB failover');
    expect(text).toContain('*Customers* (external) · :raised_hand: waits for approval · 2 deliveries');
    expect(text).toContain('Some payments fail');
    expect(text).toContain('…and 1 more for Customers.');
    const skipped = executeModal({
      incident: incident(),
      variables: [],
      previews: [],
      audiences: {
        choices,
        selected: ['customers'],
        previews: [
          part({
            ...choices[1]!,
            total: 0,
            skipped: { reason: 'no_templates', message: 'None of the incident’s templates is one of this audience’s.' },
          }),
        ],
      },
    });
    expect(textOfBlocks(skipped.blocks as any[])).toContain('nothing to send: None of the incident’s templates');
  });

  it('becomes a multi-select past 10 audiences and stays within the view’s 100 blocks', () => {
    const many = Array.from({ length: 30 }, (_, i) => ({
      key: `a${i}`,
      name: `Audience ${i}`,
      visibility: 'internal',
      approval_required: i % 2 === 0,
    }));
    const v = executeModal({
      incident: incident(),
      variables: [],
      previews: [],
      audiences: {
        choices: many,
        selected: many.map((a) => a.key),
        previews: many.map((a) =>
          part({
            ...a,
            total: 5,
            previews: Array.from({ length: 5 }, () => ({
              connectionName: 'C',
              connectionType: 'slack',
              templateName: null,
              subject: '',
              body: 'words',
            })),
          }),
        ),
      },
    });
    expect(checkApiCall('views.open', { trigger_id: 't', view: v })).toEqual([]);
    expect(v.blocks.length).toBeLessThanOrEqual(100);
    const picker = v.blocks.find((b: any) => b.block_id === AUDIENCES_FIELD) as any;
    expect(picker.element.type).toBe('multi_static_select');
    expect(picker.element.options[0].text.text).toBe('Audience 0 (internal · needs approval first)');
  });

  it('is exactly the old modal without audiences', () => {
    const v = executeModal({ incident: incident(), variables: [], previews: [] });
    expect(v.blocks.some((b: any) => b.block_id === AUDIENCES_FIELD)).toBe(false);
  });
});

describe('receipts of an execute with a held audience', () => {
  const line = (over: Partial<Parameters<typeof receiptLine>[0]>) =>
    receiptLine({
      connectionName: 'Status page',
      connectionType: 'webhook',
      status: 'queued',
      attempts: 0,
      error: null,
      ...over,
    });

  it('shows a held delivery as waiting for approval, and a cancelled one with why', () => {
    expect(line({ status: 'pending_approval' })).toBe(':raised_hand: waiting for approval — *Status page* (webhook)');
    expect(line({ status: 'cancelled', attempts: 1, error: 'approval rejected by bob: wrong ETA' })).toBe(
      ':no_entry_sign: cancelled — *Status page* (webhook) · approval rejected by bob: wrong ETA',
    );
  });
});

describe('refusals told in Slack', () => {
  it('explains the approval refusals and says nothing changed', () => {
    expect(ephemeralMessage(new DomainError('four_eyes', 'x'))).toContain('needs a second person');
    expect(ephemeralMessage(new DomainError('not_an_approver', 'x'))).toContain("Only this audience's approvers");
    expect(ephemeralMessage(new DomainError('not_pending', 'Already approved by bob.'))).toBe(
      ':information_source: Already approved by bob. Nothing changed.',
    );
  });

  it('says per audience why a pick sends nothing', () => {
    const e = new DomainError(
      'no_connections',
      'No audience gets anything from this execute: Customers has no templates.',
      [{ field: 'audiences.0', code: 'no_templates', message: 'Customers has no templates.' }],
    );
    expect(ephemeralMessage(e)).toBe(
      ':electric_plug: No audience gets anything from this execute: Customers has no templates.',
    );
  });
});
