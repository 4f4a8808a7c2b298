import { describe, expect, it } from 'vitest';
import { DomainError } from '../../src/domain/common/errors.js';
import type { Incident } from '../../src/domain/incident/incident.js';
import type { AnnouncementReceipts, ReminderContent } from '../../src/ports/index.js';
import { ephemeralMessage, modalErrors } from '../../src/slack/errors.js';
import { changedVariablesOf, readViewState } from '../../src/slack/view-state.js';
import { decodeContext } from '../../src/slack/views/action-ids.js';
import { announcementMessage, mrkdwnLink, receiptLine, reminderMessage } from '../../src/slack/views/announcement.js';
import { correctModal, retractModal } from '../../src/slack/views/correction-modals.js';
import { executeModal } from '../../src/slack/views/execute-modal.js';
import { anIncident } from '../support/factories.js';

/** The Slack side of living updates: receipts that link and offer Correct/Retract, the next update line, the modals, the reminder. */

const incident = (over: Partial<Incident> = {}): Incident =>
  anIncident({ id: 'inc_01JABCDEFGHJKMNPQRSTVWXYZ0', title: 'Checkout down', ...over });

const receipts = (over: Partial<AnnouncementReceipts> = {}): AnnouncementReceipts => ({
  executionId: 'exe_1',
  status: 'delivered',
  kind: 'announcement',
  targetExecutionId: null,
  correctableExecutionId: 'exe_1',
  lines: [
    {
      connectionName: 'Ops',
      connectionType: 'slack',
      status: 'delivered',
      attempts: 1,
      error: null,
      permalink: 'https://herald-test.slack.com/archives/C1/p1?thread_ts=1.2&cid=C1',
    },
  ],
  ...over,
});

const receiptButtons = (blocks: any[]) =>
  blocks.find((b) => b.block_id === 'receipt_actions')?.elements as any[] | undefined;
const inputs = (view: { blocks: any[] }) => view.blocks.filter((b) => b.type === 'input');

describe('receipts on the announcement', () => {
  it('link each delivered message, escaping the URL for mrkdwn', () => {
    const line = receiptLine(receipts().lines[0]!);
    expect(line).toContain('· <https://herald-test.slack.com/archives/C1/p1?thread_ts=1.2&amp;cid=C1|view>');
    // No link for a message not delivered (yet), nor for a URL that would break out of the link.
    expect(receiptLine({ ...receipts().lines[0]!, status: 'sending' })).not.toContain('|view>');
    expect(mrkdwnLink('https://x.example/a|<!channel>', 'view')).toBeNull();
    expect(mrkdwnLink('javascript:alert(1)', 'view')).toBeNull();
    expect(mrkdwnLink('https://x.example/a b', 'view')).toBeNull();
  });

  it('say what a correction or retraction did', () => {
    const corrected = announcementMessage(
      incident(),
      receipts({
        kind: 'correction',
        targetExecutionId: 'exe_0',
        correctableExecutionId: 'exe_0',
        lines: [{ ...receipts().lines[0]!, action: 'edit' }],
      }),
    );
    const text = JSON.stringify(corrected.blocks.find((b: any) => b.block_id === 'receipts'));
    expect(text).toContain('*Correction receipts* of `exe_0` · `exe_1`');
    expect(text).toContain('delivered — *Ops* (slack) · edited in place');
    // Its buttons act on the execute it corrected.
    expect(decodeContext(receiptButtons(corrected.blocks as any[])![0].value).execution_id).toBe('exe_0');
  });

  it('offer Correct and Retract for the execute they name, while the incident can change', () => {
    const buttons = receiptButtons(announcementMessage(incident(), receipts()).blocks as any[])!;
    expect(buttons.map((b) => [b.action_id, b.text.text, b.style])).toEqual([
      ['execution_correct', 'Correct', undefined],
      ['execution_retract', 'Retract', 'danger'],
    ]);
    expect(decodeContext(buttons[0].value)).toEqual({
      incident_id: 'inc_01JABCDEFGHJKMNPQRSTVWXYZ0',
      execution_id: 'exe_1',
    });
    expect(
      receiptButtons(announcementMessage(incident(), receipts({ correctableExecutionId: null })).blocks as any[]),
    ).toBeUndefined();
    expect(
      receiptButtons(
        announcementMessage(incident({ status: 'closed', closed_at: '2026-01-01T00:00:00Z' }), receipts())
          .blocks as any[],
      ),
    ).toBeUndefined();
  });
});

describe('next update due on the announcement', () => {
  const contexts = (blocks: any[]) =>
    blocks.filter((b) => b.type === 'context').map((b) => b.elements[0].text as string);
  it('shows the due time, then how overdue it is', () => {
    expect(
      contexts(announcementMessage(incident(), null, { due: '14:30 UTC', overdue: null }).blocks as any[]),
    ).toContain(':alarm_clock: Next update due 14:30 UTC');
    expect(
      contexts(announcementMessage(incident(), null, { due: '14:30 UTC', overdue: '5 min' }).blocks as any[]),
    ).toContain(':alarm_clock: Next update due 14:30 UTC — overdue 5 min');
    expect(JSON.stringify(announcementMessage(incident(), null).blocks)).not.toContain('Next update');
  });
});

describe('Correct and Retract modals', () => {
  const execution = { id: 'exe_1', variables: { eta: '05:00', owner: 'sre', long: 'x'.repeat(3500) }, delivered: 2 };

  it('Correct: one input per variable prefilled with the value sent (all optional), and the note', () => {
    const view = correctModal({ incident: incident(), execution });
    expect(view.callback_id).toBe('execution_correct');
    expect(decodeContext(view.private_metadata)).toEqual({
      incident_id: 'inc_01JABCDEFGHJKMNPQRSTVWXYZ0',
      execution_id: 'exe_1',
    });
    const byId = Object.fromEntries(inputs(view).map((b) => [b.block_id, b]));
    expect(Object.keys(byId)).toEqual(['variables.eta', 'variables.owner', 'variables.long', 'note']);
    expect(byId['variables.eta'].element.initial_value).toBe('05:00');
    expect(byId['variables.eta'].optional).toBe(true);
    // Too long for a Slack input: not prefilled (a cut copy would replace it), and says so.
    expect(byId['variables.long'].element.initial_value).toBeUndefined();
    expect(byId['variables.long'].hint.text).toMatch(/leave this empty to keep it/);
    expect(byId.note.label.text).toBe('What was wrong?');
    expect(byId.note.optional).toBe(true);
    expect(JSON.stringify(view.blocks)).toContain('2 delivered messages');
  });

  it('Correct without variables asks for the note', () => {
    const view = correctModal({ incident: incident(), execution: { id: 'exe_1', variables: {}, delivered: 1 } });
    expect(inputs(view).map((b) => b.block_id)).toEqual(['note']);
  });

  it('Retract: a confirmation with the reason required', () => {
    const view = retractModal({ incident: incident(), execution });
    expect(view.callback_id).toBe('execution_retract');
    expect(view.submit?.text).toBe('Retract');
    expect(view.close?.text).toBe('Keep them');
    expect(inputs(view).map((b) => [b.block_id, b.optional])).toEqual([['reason', false]]);
    expect(JSON.stringify(view.blocks)).toContain('This cannot be undone');
  });

  it('sends only the variables the user changed, and refusals land on their inputs', () => {
    const view = correctModal({ incident: incident(), execution });
    const state = readViewState({
      'variables.eta': { value: { type: 'plain_text_input', value: '15:00' } },
      'variables.owner': { value: { type: 'plain_text_input', value: 'sre' } },
      'variables.long': { value: { type: 'plain_text_input', value: null } },
      note: { value: { type: 'plain_text_input', value: '' } },
    });
    expect(changedVariablesOf(state, view.blocks)).toEqual({ eta: '15:00' });
    const ids = inputs(view).map((b) => b.block_id);
    const refused = new DomainError('validation_failed', 'Invalid.', [
      { field: 'note', message: 'note is at most 1000 characters.', code: 'too_big' },
    ]);
    expect(modalErrors(refused, ids, ids[0])).toEqual({ note: 'note is at most 1000 characters.' });
  });

  it('explains refusals a form cannot fix in friendly words', () => {
    expect(ephemeralMessage(new DomainError('nothing_delivered', 'x'))).toMatch(/nothing to correct or retract/);
    expect(
      ephemeralMessage(
        new DomainError(
          'not_correctable',
          'This execution is a correction; correct the execution it corrects instead.',
        ),
      ),
    ).toBe(':information_source: This execution is a correction; correct the execution it corrects instead.');
  });
});

describe('execute modal: next update in', () => {
  it('offers none, 15m, 30m, 1h, 2h, 4h beside the variables (none preselected), outside the inputs', () => {
    const view = executeModal({
      incident: incident(),
      variables: [{ name: 'eta', description: '', required: true, default: null }],
      previews: [],
    });
    const block = view.blocks.find((b: any) => b.block_id === 'next_update_in') as any;
    expect(block.accessory.type).toBe('static_select');
    expect(block.accessory.options.map((o: any) => o.value)).toEqual(['none', '15m', '30m', '1h', '2h', '4h']);
    expect(block.accessory.initial_option.value).toBe('none');
    expect(inputs(view as any).map((b) => b.block_id)).toEqual(['variables.eta']);
    const state = readViewState({
      next_update_in: { next_update_in: { type: 'static_select', selected_option: { value: '1h' } } },
    });
    expect(state.get('next_update_in')).toBe('1h');
  });
});

describe('overdue reminder', () => {
  const content = (executor: ReminderContent['executor']): ReminderContent => ({
    incident: incident({ title: 'Checkout <!channel>' }),
    reminder: 1,
    due: '14:30 UTC',
    overdue: '5 min',
    executor,
  });
  it('names the last executor: a Slack user by mention, an API key by name, nobody otherwise', () => {
    expect(reminderMessage(content({ type: 'slack_user', id: 'U123', name: 'alice' })).text).toBe(
      ':alarm_clock: The next update on *Checkout &lt;!channel&gt;* was due at 14:30 UTC (overdue 5 min). <@U123>, please post an update.',
    );
    expect(reminderMessage(content({ type: 'api_key', id: 'key_1', name: 'ci <bot>' })).text).toMatch(
      /\(overdue 5 min\)\. ci &lt;bot&gt;, please post an update\.$/,
    );
    expect(reminderMessage(content(null)).text).toMatch(/\(overdue 5 min\)\. Please post an update\.$/);
  });
});
