import type {
  AllMiddlewareArgs,
  App,
  BlockAction,
  SlackActionMiddlewareArgs,
  SlackViewMiddlewareArgs,
  ViewSubmitAction,
} from '@slack/bolt';

/**
 * Buttons and modal submissions, each kind through ONE Bolt listener that finds its handler by
 * id. Bolt runs every registered listener's middleware for every request it receives — the
 * listener's filters, each a copy of the request's arguments and a promise — so with a listener
 * per button and per modal (about twenty), every slash command paid for all of them: an ack cost
 * about twice what it does with one listener per kind (docs/performance.md). The handlers and the
 * arguments they get are Bolt's, unchanged; an id nobody handles is left unanswered, as before
 * (and the payload guard refuses such requests before Bolt sees them).
 */
export type ActionHandler<A extends BlockAction> = (
  args: SlackActionMiddlewareArgs<A> & AllMiddlewareArgs,
) => Promise<void>;
export type SubmissionHandler = (args: SlackViewMiddlewareArgs<ViewSubmitAction> & AllMiddlewareArgs) => Promise<void>;

/** Bolt's `app.action` and `app.view`, for block actions by `action_id` and submissions by `callback_id`. */
export interface SlackListeners {
  action<A extends BlockAction = BlockAction>(
    constraints: { type: 'block_actions'; action_id: string },
    handler: ActionHandler<A>,
  ): void;
  view(constraints: { callback_id: string; type: 'view_submission' }, handler: SubmissionHandler): void;
}

export function slackListeners(app: App): SlackListeners {
  const actions = new Map<string, ActionHandler<BlockAction>>();
  const views = new Map<string, SubmissionHandler>();
  app.action<BlockAction>({ type: 'block_actions' }, async (args) => {
    await actions.get(args.action.action_id)?.(args);
  });
  app.view<ViewSubmitAction>({ type: 'view_submission' }, async (args) => {
    await views.get(args.view.callback_id)?.(args);
  });
  const once = <H>(map: Map<string, H>, id: string, handler: H) => {
    // Bolt would run two listeners of one id both; no handler here expects that.
    if (map.has(id)) throw new Error(`two Slack listeners for ${id}`);
    map.set(id, handler);
  };
  return {
    action(constraints, handler) {
      // The id names the element type (a button's id is only ever on a button), which is what
      // Bolt's own `app.action<ButtonAction>` takes on trust too.
      once(actions, constraints.action_id, handler as unknown as ActionHandler<BlockAction>);
    },
    view(constraints, handler) {
      once(views, constraints.callback_id, handler);
    },
  };
}
