import type { BlockAction, ButtonAction, CheckboxesAction, MultiStaticSelectAction } from '@slack/bolt';
import type { SlackListeners } from './dispatch.js';
import { isDomainError } from '../../domain/common/errors.js';
import { slackActor, slackUser, type SlackDeps } from '../deps.js';
import { publishHome } from './home.js';
import { isRedisUnavailable } from '../../domain/common/unavailable.js';
import { ephemeralMessage } from '../errors.js';
import {
  buildExecuteModal,
  messageModal,
  openCorrectionModal,
  openCreateModal,
  openStepModal,
  type CorrectionStep,
  type IncidentStep,
} from './modals.js';
import { identity, once } from '../once.js';
import { ACTIONS, decodeContext } from '../views/action-ids.js';
import { generateApiKeyModal } from '../views/api-key-modals.js';

const STEP_BY_ACTION: Record<string, IncidentStep> = {
  [ACTIONS.incidentExecute]: 'execute',
  [ACTIONS.incidentUpdate]: 'update',
  [ACTIONS.incidentResolve]: 'resolve',
  [ACTIONS.incidentClose]: 'close',
};

const CORRECTION_BY_ACTION: Record<string, CorrectionStep> = {
  [ACTIONS.executionCorrect]: 'correct',
  [ACTIONS.executionRetract]: 'retract',
};

type ButtonClick = BlockAction<ButtonAction>;

/**
 * Buttons: on announcements, `show` answers and the App Home. Each is acked first (Slack wants
 * an answer within 3 s) and does its work after; a button that opens a modal does so once per
 * trigger, so a retried click never opens two. Admin buttons pass the clicking user to the
 * service, which decides (AccessPolicy) on every click: hiding them from non-admins is presentation.
 */
export function registerActions(app: SlackListeners, deps: SlackDeps): void {
  for (const [actionId, step] of Object.entries(STEP_BY_ACTION)) {
    app.action<ButtonClick>({ type: 'block_actions', action_id: actionId }, async ({ ack, body, action }) => {
      await ack();
      await openOnce(deps, body.trigger_id, () => openStepModal(deps, body.trigger_id, step, action.value ?? ''));
    });
  }

  // Correct / Retract under the receipts: the button's value names the incident and the execution.
  for (const [actionId, step] of Object.entries(CORRECTION_BY_ACTION)) {
    app.action<ButtonClick>({ type: 'block_actions', action_id: actionId }, async ({ ack, body, action }) => {
      await ack();
      await openOnce(deps, body.trigger_id, () => openCorrectionModal(deps, body.trigger_id, step, action.value ?? ''));
    });
  }

  registerAudiencePick(app, deps);

  // Picking "Next update in" in the execute modal: Slack wants an ack; the value comes with the submission.
  app.action({ type: 'block_actions', action_id: ACTIONS.nextUpdateIn }, async ({ ack }) => {
    await ack();
  });

  app.action<ButtonClick>({ type: 'block_actions', action_id: ACTIONS.incidentNew }, async ({ ack, body }) => {
    await ack();
    // From the App Home there is no channel: the announcement goes to HERALD_SLACK_CHANNEL or a DM.
    const channel = body.channel?.id;
    await openOnce(deps, body.trigger_id, () =>
      openCreateModal(deps, body.trigger_id, { ctx: channel ? { channel_id: channel } : {} }),
    );
  });

  // Test: the read-only check; Send test message: a marked message (types without a check).
  for (const [actionId, sendMessage] of [
    [ACTIONS.connectionTest, false],
    [ACTIONS.connectionTestSend, true],
  ] as const) {
    app.action<ButtonClick>({ type: 'block_actions', action_id: actionId }, async ({ ack, body, action }) => {
      await ack();
      await once(deps.idempotency, identity('trigger', body.trigger_id), async () => {
        try {
          // The outcome is stored as the connection's last_test, which the Home shows.
          await deps.services.connections.test(
            action.value ?? '',
            { send_message: sendMessage },
            slackActor(body.user),
          );
        } catch (err) {
          if (refusedAdmin(err)) warnRefused(deps, body, action.action_id);
          else deps.log.warn({ err, connection_id: action.value }, 'connection test from the App Home failed');
        }
        await publishHome(deps, body.user.id);
      });
    });
  }

  app.action<ButtonClick>(
    { type: 'block_actions', action_id: ACTIONS.apiKeyGenerate },
    async ({ ack, body, action }) => {
      await ack();
      // Presentation: a form only an admin can submit (ApiKeyService.create decides) is not opened for others.
      if (!deps.access.can(slackUser(body.user.id), 'manage_api_keys')) {
        warnRefused(deps, body, action.action_id);
        publishHome(deps, body.user.id).catch((err: unknown) =>
          deps.log.warn({ err }, 'could not re-publish the App Home'),
        );
        return;
      }
      await once(deps.idempotency, identity('trigger', body.trigger_id), () =>
        deps.client.views.open({ trigger_id: body.trigger_id, view: generateApiKeyModal() }).then(() => undefined),
      );
    },
  );

  app.action<ButtonClick>({ type: 'block_actions', action_id: ACTIONS.apiKeyRevoke }, async ({ ack, body, action }) => {
    await ack();
    try {
      // Idempotent in the service: a retried click revokes nothing twice.
      await deps.services.apiKeys.revoke(action.value ?? '', slackActor(body.user));
      deps.log.info({ api_key_id: action.value, slack_user: body.user.id }, 'API key revoked from the App Home');
    } catch (err) {
      if (refusedAdmin(err)) warnRefused(deps, body, action.action_id);
      else deps.log.warn({ err, api_key_id: action.value }, 'API key revoke from the App Home failed');
    }
    await publishHome(deps, body.user.id);
  });
}

/**
 * Picking audiences in the execute modal: the preview follows the pick (the value also comes with
 * the submission). `hash` makes Slack refuse an update of a view changed meanwhile (a quicker
 * second pick): that newer pick's own update follows.
 */
function registerAudiencePick(app: SlackListeners, deps: SlackDeps): void {
  app.action<BlockAction<CheckboxesAction | MultiStaticSelectAction>>(
    { type: 'block_actions', action_id: ACTIONS.executeAudiences },
    async ({ ack, body, action }) => {
      await ack();
      const view = body.view;
      if (!view) return;
      const picked = (action.selected_options ?? []).flatMap((o) => (typeof o.value === 'string' ? [o.value] : []));
      let next;
      try {
        next = await buildExecuteModal(deps, decodeContext(view.private_metadata).incident_id ?? '', picked);
      } catch (e) {
        if (!isDomainError(e) && !isRedisUnavailable(e))
          deps.log.error({ err: e }, 'could not rebuild the execute modal');
        next = messageModal('Cannot do that', ephemeralMessage(e));
      }
      await deps.client.views.update({ view_id: view.id, hash: view.hash, view: next }).catch((err: unknown) => {
        const code = (err as { data?: { error?: unknown } }).data?.error;
        if (code !== 'hash_conflict')
          deps.log.warn({ err }, 'could not update the execute modal for the audience pick');
      });
    },
  );
}

/**
 * `once` for a button that opens a modal. With Redis unreachable the claim itself fails: the user
 * gets a short explanation on the same trigger (still valid, the ack came first) instead of nothing.
 */
async function openOnce(deps: SlackDeps, triggerId: string, open: () => Promise<void>): Promise<void> {
  try {
    await once(deps.idempotency, identity('trigger', triggerId), open);
  } catch (e) {
    if (!isRedisUnavailable(e)) throw e;
    await deps.client.views.open({ trigger_id: triggerId, view: messageModal('Cannot do that', ephemeralMessage(e)) });
  }
}

/** The service refused the clicking user an admin task (AccessPolicy). */
function refusedAdmin(err: unknown): boolean {
  return isDomainError(err) && err.code === 'insufficient_scope';
}

/**
 * A refused admin click changes nothing; the handler re-publishes the user's Home (without the
 * admin parts), which is all a forged or stale click gets back.
 */
function warnRefused(deps: SlackDeps, body: ButtonClick, actionId: string): void {
  deps.log.warn(
    { slack_user: body.user.id, action_id: actionId },
    'refused an admin action from a non-admin Slack user',
  );
}
