import type { BlockAction, ButtonAction } from '@slack/bolt';
import { isDomainError } from '../../domain/common/errors.js';
import { isRedisUnavailable } from '../../domain/common/unavailable.js';
import { slackActor, type SlackDeps } from '../deps.js';
import { ephemeralMessage } from '../errors.js';
import { identity, once } from '../once.js';
import { ACTIONS, decodeContext, type ModalContext } from '../views/action-ids.js';
import { rejectModal } from '../views/approval.js';
import type { SlackListeners } from './dispatch.js';
import { messageModal } from './modals.js';

type ButtonClick = BlockAction<ButtonAction>;

/**
 * Approve / Reject in an approver's DM. The service decides everything (who may, four eyes,
 * whether it is still pending, exactly one decision when two arrive at once); these only pass the
 * clicking Slack user. A refusal is told to the clicker alone (ephemeral) and changes nothing; a
 * decision updates every approver's DM through the notifier, which the service calls.
 */
export function registerApprovalActions(app: SlackListeners, deps: SlackDeps): void {
  app.action<ButtonClick>(
    { type: 'block_actions', action_id: ACTIONS.approvalApprove },
    async ({ ack, body, action }) => {
      await ack();
      const ctx = decodeContext(action.value);
      // A retried click carries the same trigger id: one decision attempt per click.
      await once(deps.idempotency, identity('trigger', body.trigger_id), async () => {
        try {
          await decide(deps, ctx, { decision: 'approve' }, body);
        } catch (e) {
          await tellClicker(deps, body, e);
        }
      }).catch((e: unknown) => tellClicker(deps, body, e));
    },
  );

  // Reject asks for a reason first (optional); the decision is the modal's submission.
  app.action<ButtonClick>(
    { type: 'block_actions', action_id: ACTIONS.approvalReject },
    async ({ ack, body, action }) => {
      await ack();
      const ctx = decodeContext(action.value);
      await once(deps.idempotency, identity('trigger', body.trigger_id), () =>
        deps.client.views
          .open({
            trigger_id: body.trigger_id,
            view: rejectModal({
              incidentId: ctx.incident_id ?? '',
              executionId: ctx.execution_id ?? '',
              audience: ctx.audience ?? '',
            }),
          })
          .then(() => undefined),
      ).catch(async (e: unknown) => {
        if (!isRedisUnavailable(e)) throw e;
        await deps.client.views.open({
          trigger_id: body.trigger_id,
          view: messageModal('Cannot do that', ephemeralMessage(e)),
        });
      });
    },
  );
}

/** The decision for the one audience the button (or the Reject modal) names. */
export function decide(
  deps: SlackDeps,
  ctx: ModalContext,
  input: { decision: 'approve' | 'reject'; reason?: string },
  body: { user: { id: string; name?: string; username?: string } },
): Promise<unknown> {
  return deps.services.approvals.decide(
    ctx.incident_id ?? '',
    ctx.execution_id ?? '',
    { ...input, ...(ctx.audience ? { audiences: [ctx.audience] } : {}) },
    slackActor(body.user),
  );
}

/** A refused click is told to the clicker only, in the DM it came from; nothing changed. */
async function tellClicker(deps: SlackDeps, body: ButtonClick, e: unknown): Promise<void> {
  if (!isDomainError(e) && !isRedisUnavailable(e)) deps.log.error({ err: e }, 'approval decision from Slack failed');
  else
    deps.log.info(
      { slack_user: body.user.id, code: isDomainError(e) ? e.code : 'unavailable' },
      'approval decision refused',
    );
  const container = body.container as { channel_id?: unknown } | undefined;
  const channel = body.channel?.id ?? container?.channel_id;
  if (typeof channel !== 'string') return;
  await deps.client.chat
    .postEphemeral({ channel, user: body.user.id, text: ephemeralMessage(e) })
    .catch((err: unknown) => deps.log.warn({ err }, 'could not tell the clicker why the decision was refused'));
}
