import type { App } from '@slack/bolt';
import { describe, expect, it } from 'vitest';
import { slackListeners } from '../../src/slack/listeners/dispatch.js';

/** A stand-in for Bolt's App that records the listeners registered on it. */
function fakeApp() {
  const registered: { kind: string; constraints: unknown; listener: (args: unknown) => Promise<void> }[] = [];
  const app = {
    action: (constraints: unknown, listener: (args: unknown) => Promise<void>) =>
      registered.push({ kind: 'action', constraints, listener }),
    view: (constraints: unknown, listener: (args: unknown) => Promise<void>) =>
      registered.push({ kind: 'view', constraints, listener }),
  };
  return { app: app as unknown as App, registered };
}

describe('slackListeners (slack/listeners/dispatch.ts)', () => {
  it('registers one Bolt listener per kind, however many handlers, and calls only the handler of the id', async () => {
    const { app, registered } = fakeApp();
    const on = slackListeners(app);
    const called: string[] = [];
    for (const id of ['a1', 'a2', 'a3'])
      on.action({ type: 'block_actions', action_id: id }, async () => void called.push(id));
    for (const id of ['v1', 'v2'])
      on.view({ callback_id: id, type: 'view_submission' }, async () => void called.push(id));
    expect(registered.map((r) => r.kind)).toEqual(['action', 'view']);
    expect(registered.map((r) => r.constraints)).toEqual([{ type: 'block_actions' }, { type: 'view_submission' }]);
    await registered[0]!.listener({ action: { action_id: 'a2' } });
    await registered[1]!.listener({ view: { callback_id: 'v1' } });
    // An id nobody handles: nothing runs (the request stays unanswered, as with no listener).
    await registered[0]!.listener({ action: { action_id: 'nobody' } });
    expect(called).toEqual(['a2', 'v1']);
  });

  it('hands the handler the arguments Bolt gave, and its failure to Bolt', async () => {
    const { app, registered } = fakeApp();
    const on = slackListeners(app);
    let seen: unknown;
    on.action({ type: 'block_actions', action_id: 'x' }, async (args) => {
      seen = args;
      throw new Error('listener failed');
    });
    const args = { action: { action_id: 'x' }, ack: () => Promise.resolve() };
    await expect(registered[0]!.listener(args)).rejects.toThrow('listener failed');
    expect(seen).toBe(args);
  });

  it('refuses two handlers for one id', () => {
    const on = slackListeners(fakeApp().app);
    on.view({ callback_id: 'v', type: 'view_submission' }, () => Promise.resolve());
    expect(() => on.view({ callback_id: 'v', type: 'view_submission' }, () => Promise.resolve())).toThrow(
      /two Slack listeners for v/,
    );
  });
});
