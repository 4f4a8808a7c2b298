import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestHerald } from '../support/herald.js';
import type { SlackPeer } from '../support/peers/slack.js';
import {
  announcementUpdate,
  newViewId,
  openedView as openedViewAt,
  textOfBlocks,
  type SlackClient,
} from '../support/slack-client.js';
import { waitFor } from '../support/wait.js';
import { startSlackHerald, type SlackHerald } from '../support/slack-herald.js';

/**
 * Living updates in Slack terms: an execute reaches a Slack-bot connection, the announcement's
 * receipts link to the message and offer Correct / Retract; Correct from the modal edits the
 * message in place (chat.update in the fake workspace), Retract deletes it (chat.delete).
 */
const SECRET = 'slack-signing-secret-for-corrections';
const BOB = { id: 'UBOB', name: 'bob' };

let h: TestHerald;
let slack: SlackPeer;
let client: SlackClient;

let world: SlackHerald | undefined;

beforeAll(async () => {
  world = await startSlackHerald({ secret: SECRET, channel: 'CINC', user: BOB });
  ({ h, slack, client } = world);
});

afterAll(async () => {
  await world?.close();
});

const openedView = (before: number): Promise<any> => openedViewAt(slack, before);

/** The value of a button under the announcement's receipts, from a chat.update call. */
const buttonValue = (call: any, actionId: string): string | undefined =>
  (call.args.blocks as any[])
    .find((b) => b.block_id === 'receipt_actions')
    ?.elements.find((e: any) => e.action_id === actionId)?.value;

describe('correct and retract from Slack', () => {
  it('Correct edits the delivered message in place, Retract deletes it, and the receipts follow', async () => {
    const conn = (
      await h.api('POST', '/v1/connections', {
        body: { name: 'Ops bot', type: 'slack', config: { bot_token: 'xoxb-ops', channel: 'C0OPS' } },
      })
    ).body;
    expect(conn.id).toMatch(/^con_/);
    const template = (
      await h.api('POST', '/v1/templates', {
        body: { name: 'ETA notice', body: 'Fix expected at {{eta}}.', variables: [{ name: 'eta', required: true }] },
      })
    ).body;
    const incident = (
      await h.api('POST', '/v1/incidents', {
        body: { title: 'Payments degraded', severity: 'major', template_ids: [template.id] },
      })
    ).body;
    const exe = await h.api('POST', `/v1/incidents/${incident.id}/execute`, { body: { variables: { eta: '05:00' } } });
    expect(exe.status).toBe(202);

    // Delivered by the bot to C0OPS; the receipts link to it and offer Correct / Retract.
    const sent = await waitFor(() => slack.messagesIn('C0OPS').find((m) => m.text.includes('05:00')), {
      what: 'the bot message',
    });
    const withButtons = await announcementUpdate(
      slack,
      incident.id,
      (_t, call) => buttonValue(call, 'execution_correct') !== undefined,
    );
    const receipts = textOfBlocks(withButtons.args.blocks);
    expect(receipts).toMatch(
      /delivered — \*Ops bot\* \(slack\) · <https:\/\/herald-test\.slack\.com\/archives\/C0OPS\/p\d+\|view>/,
    );

    // Correct: the modal holds the value sent; submitting a new one edits the message in place.
    let before = slack.callsTo('views.open').length;
    await client.click('execution_correct', buttonValue(withButtons, 'execution_correct')!, { channel: 'CINC' });
    const correct = await openedView(before);
    expect(correct.callback_id).toBe('execution_correct');
    const eta = correct.blocks.find((b: any) => b.block_id === 'variables.eta');
    expect(eta.element.initial_value).toBe('05:00');
    let r = await client.submit(
      correct,
      { 'variables.eta': '15:00', note: 'The ETA was off by ten hours.' },
      { viewId: newViewId() },
    );
    expect(r.json.response_action).toBe('update');
    expect(textOfBlocks(r.json.view.blocks)).toContain('Correcting 1 message');
    await waitFor(
      () => {
        const m = slack.messageAt('C0OPS', sent.ts);
        return m?.edited && m.text.includes('15:00') ? m : undefined;
      },
      { what: 'the message edited in place' },
    );
    const corrected = await announcementUpdate(
      slack,
      incident.id,
      (t) => /Correction receipts/.test(t) && /delivered — \*Ops bot\* \(slack\) · edited in place/.test(t),
    );

    // Retract (from the correction's receipts, which still offer the corrected execute): a reason is required.
    before = slack.callsTo('views.open').length;
    await client.click('execution_retract', buttonValue(corrected, 'execution_retract')!, { channel: 'CINC' });
    const retract = await openedView(before);
    expect(retract.callback_id).toBe('execution_retract');
    r = await client.submit(retract, { reason: '   ' }, { viewId: newViewId() });
    expect(r.json).toMatchObject({ response_action: 'errors', errors: { reason: expect.any(String) } });
    r = await client.submit(retract, { reason: 'Posted to the wrong audience.' }, { viewId: newViewId() });
    expect(r.json.response_action).toBe('update');
    await waitFor(() => slack.messageAt('C0OPS', sent.ts)?.deleted, { what: 'the message deleted' });
    const retracted = await announcementUpdate(
      slack,
      incident.id,
      (t) => /Retraction receipts/.test(t) && /· deleted/.test(t),
    );
    expect(buttonValue(retracted, 'execution_correct')).toBeUndefined();

    const events = (await h.api('GET', `/v1/incidents/${incident.id}/events`)).body.data;
    const corrections = events.filter((e: any) => e.type === 'execution.corrected' || e.type === 'execution.retracted');
    expect(corrections.map((e: any) => [e.type, e.actor.id])).toEqual([
      ['execution.corrected', 'UBOB'],
      ['execution.retracted', 'UBOB'],
    ]);
  });

  it('what changed is read from the stored execution: a submission that changes nothing is refused on the note, even with view.blocks empty', async () => {
    const conn = (
      await h.api('POST', '/v1/connections', {
        body: { name: 'Empty-change bot', type: 'slack', config: { bot_token: 'xoxb-empty', channel: 'C0EMPTY' } },
      })
    ).body;
    expect(conn.id).toMatch(/^con_/);
    const template = (
      await h.api('POST', '/v1/templates', {
        body: {
          name: 'Empty-change notice',
          body: 'Back at {{eta}}.',
          variables: [{ name: 'eta', required: true }],
          connection_ids: [conn.id],
        },
      })
    ).body;
    const incident = (
      await h.api('POST', '/v1/incidents', {
        body: { title: 'Search degraded', severity: 'minor', template_ids: [template.id] },
      })
    ).body;
    const exe = await h.api('POST', `/v1/incidents/${incident.id}/execute`, { body: { variables: { eta: '09:00' } } });
    expect(exe.status).toBe(202);
    await waitFor(() => slack.messagesIn('C0EMPTY').find((m) => m.text.includes('09:00')), { what: 'the bot message' });
    const withButtons = await announcementUpdate(
      slack,
      incident.id,
      (_t, call) => buttonValue(call, 'execution_correct') !== undefined,
    );
    const before = slack.callsTo('views.open').length;
    await client.click('execution_correct', buttonValue(withButtons, 'execution_correct')!, { channel: 'CINC' });
    const correct = await openedView(before);
    expect(correct.callback_id).toBe('execution_correct');

    // The values as sent, signed, but with view.blocks emptied: no initial values to compare
    // with in the payload. The stored execution still says nothing changed.
    const forged = {
      type: 'view_submission',
      team: { id: 'T0HERALD', domain: 'herald-test' },
      user: { id: BOB.id, username: BOB.name, name: BOB.name, team_id: 'T0HERALD' },
      api_app_id: 'A0HERALD',
      token: 'legacy-verification-token',
      trigger_id: '1.2.forged',
      view: {
        ...correct,
        id: newViewId(),
        team_id: 'T0HERALD',
        hash: 'h',
        blocks: [],
        state: {
          values: {
            'variables.eta': { value: { type: 'plain_text_input', value: '09:00' } },
            note: { value: { type: 'plain_text_input', value: null } },
          },
        },
      },
      response_urls: [],
    };
    const r = await client.post(new URLSearchParams({ payload: JSON.stringify(forged) }).toString());
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({
      response_action: 'errors',
      errors: { note: expect.stringMatching(/Nothing would change/) },
    });

    // As shown, untouched: nothing differs from what was sent and there is no note.
    const untouched = await client.submit(correct, {}, { viewId: newViewId() });
    expect(untouched.json).toMatchObject({
      response_action: 'errors',
      errors: { note: expect.stringMatching(/Nothing would change/) },
    });

    // A real change still goes through, and only it is sent (the note stays unset).
    const changed = await client.submit(correct, { 'variables.eta': '10:30' }, { viewId: newViewId() });
    expect(changed.json.response_action).toBe('update');
    const executions = (await h.api('GET', `/v1/incidents/${incident.id}/executions`)).body.data;
    const corrections = executions.filter((e: any) => e.kind === 'correction');
    expect(corrections).toHaveLength(1);
    expect(corrections[0]).toMatchObject({ note: null, variables: { eta: '10:30' } });
  });
});
