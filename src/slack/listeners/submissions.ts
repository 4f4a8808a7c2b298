import type { ExecuteRequest } from '../../domain/execution/execution.js';
import type { AckFn, ViewResponseAction, ViewSubmitAction } from '@slack/bolt';
import type { SlackListeners } from './dispatch.js';
import { isDomainError } from '../../domain/common/errors.js';
import { escapeSlack } from '../../channels/slack/escape.js';
import type { Announcer } from '../announcer.js';
import { slackActor, type SlackDeps } from '../deps.js';
import { ephemeralMessage, modalErrors } from '../errors.js';
import { publishHome } from './home.js';
import { messageModal } from './modals.js';
import { identity, once } from '../once.js';
import { CALLBACKS, decodeContext } from '../views/action-ids.js';
import { apiKeyCreatedModal } from '../views/api-key-modals.js';
import type { ModalView } from '../views/block-kit.js';
import { CORRECTION_INPUTS, correctionRequestOf } from '../views/correction-modals.js';
import { AUDIENCES_FIELD, NEXT_UPDATE_FIELD, NO_NEXT_UPDATE } from '../views/execute-modal.js';
import { REJECT_REASON_FIELD } from '../views/approval.js';
import { decide } from './approvals.js';
import type { Delivery } from '../../domain/execution/execution.js';
import {
  listOf,
  optionalTextOf,
  readViewState,
  selectedOf,
  textOf,
  variablesOf,
  type FieldValue,
} from '../view-state.js';

type Submission = { body: ViewSubmitAction; ack: AckFn<ViewResponseAction> };

/**
 * Modal submissions. Each builds the same request body /v1 takes and calls one service method.
 * A refusal is answered in the ack as `response_action: errors` on the inputs the service named;
 * success closes the modal (or shows the next view), and slow follow-up (the announcement, Home)
 * runs after the ack. A submission runs once per view id: Slack's retries and double clicks of
 * "Submit" carry the same view id, and the repeats are acked without doing anything again.
 */
export function registerSubmissions(app: SlackListeners, deps: SlackDeps, announcer: Announcer): void {
  registerCreate(app, deps, announcer);
  registerUpdate(app, deps);
  registerResolve(app, deps);
  registerClose(app, deps);
  registerExecute(app, deps, announcer);
  registerCorrect(app, deps, announcer);
  registerRetract(app, deps, announcer);
  registerApiKeyGenerate(app, deps);
  registerApprovalReject(app, deps);
}

function registerCreate(app: SlackListeners, deps: SlackDeps, announcer: Announcer): void {
  submit(app, deps, CALLBACKS.create, async ({ state, body, ctx }) => {
    const incident = await deps.services.incidents.create(
      {
        title: textOf(state, 'title'),
        severity: selectedOf(state, 'severity'),
        description: textOf(state, 'description'),
        impact: textOf(state, 'impact'),
        template_ids: listOf(state, 'template_ids') ?? [],
      },
      slackActor(body.user),
    );
    return {
      after: () => announcer.announceDeclared(incident.id, { channel: ctx.channel_id ?? null, user: body.user.id }),
    };
  });
}

function registerUpdate(app: SlackListeners, deps: SlackDeps): void {
  submit(app, deps, CALLBACKS.update, async ({ state, body, ctx }) => {
    const patch: Record<string, unknown> = {
      status: selectedOf(state, 'status'),
      title: textOf(state, 'title'),
      severity: selectedOf(state, 'severity'),
      description: optionalTextOf(state, 'description'),
      impact: optionalTextOf(state, 'impact'),
      // The multi-select is only in the modal when templates exist; absent means "leave alone".
      template_ids: state.has('template_ids') ? (listOf(state, 'template_ids') ?? []) : undefined,
    };
    await deps.services.incidents.update(incidentIdOf(ctx), withoutUndefined(patch), slackActor(body.user));
    return {};
  });
}

function registerResolve(app: SlackListeners, deps: SlackDeps): void {
  submit(app, deps, CALLBACKS.resolve, async ({ state, body, ctx }) => {
    // A blank summary leaves the stored one alone: a summary too long for a Slack input is not
    // prefilled, and submitting the modal as shown must not erase it.
    const summary = textOf(state, 'resolution_summary');
    await deps.services.incidents.update(
      incidentIdOf(ctx),
      { status: 'resolved', ...(summary.trim() === '' ? {} : { resolution_summary: summary }) },
      slackActor(body.user),
    );
    return {};
  });
}

function registerClose(app: SlackListeners, deps: SlackDeps): void {
  submit(app, deps, CALLBACKS.close, async ({ state, body, ctx }) => {
    const summary = textOf(state, 'resolution_summary');
    await deps.services.incidents.close(
      incidentIdOf(ctx),
      summary.trim() === '' ? {} : { resolution_summary: summary },
      slackActor(body.user),
    );
    return {};
  });
}

// Planning a large execute (every template × every connection, rendered) can take seconds, and
// Slack wants the ack within 3. So the cheap checks run inside the ack (a refusal lands on the
// inputs as usual), the modal turns into a "sending" view, and the execute runs after the ack;
// its outcome (or a late refusal) replaces that view through views.update.
function registerExecute(app: SlackListeners, deps: SlackDeps, announcer: Announcer): void {
  submit(app, deps, CALLBACKS.execute, async ({ state, body, ctx }) => {
    const incidentId = incidentIdOf(ctx);
    const next = selectedOf(state, NEXT_UPDATE_FIELD);
    // The picker is in the modal only when audiences exist; without it the execute is as before.
    const audiences = state.has(AUDIENCES_FIELD) ? (listOf(state, AUDIENCES_FIELD) ?? []) : undefined;
    const request: ExecuteRequest = {
      variables: variablesOf(state),
      ...(next !== undefined && next !== NO_NEXT_UPDATE ? { next_update_in: next } : {}),
      ...(audiences !== undefined ? { audiences } : {}),
    };
    await deps.services.executions.precheck(incidentId, request);
    const viewId = body.view.id;
    return {
      view: messageModal(
        'Executing',
        ':hourglass_flowing_sand: Sending… this view shows the outcome in a moment.',
        'Close',
      ),
      after: async () => {
        const outcome = await executeAfterAck(deps, announcer, incidentId, request, body);
        await deps.client.views.update({ view_id: viewId, view: outcome });
      },
    };
  });
}

/** The execute itself, after the ack: its outcome (or its refusal) as the view that replaces "sending". */
async function executeAfterAck(
  deps: SlackDeps,
  announcer: Announcer,
  incidentId: string,
  request: ExecuteRequest,
  body: ViewSubmitAction,
): Promise<ModalView> {
  try {
    const result = await deps.services.executions.execute(incidentId, request, slackActor(body.user), {
      dryRun: false,
    });
    if (result.dryRun) return messageModal('Executed', 'Nothing was sent (dry run).', 'Close');
    announcer.executed(incidentId, result.execution.id);
    return messageModal('Executed', executedText(result.execution.audiences ?? [], result.deliveries), 'Close');
  } catch (e) {
    if (!isDomainError(e))
      deps.log.error({ err: e, callback_id: CALLBACKS.execute }, 'execute from Slack failed after the ack');
    return messageModal('Not sent', ephemeralMessage(e), 'Close');
  }
}

// Corrections and retractions run inside the ack, so a refusal lands on its input: unlike an
// execute they render only the delivered messages of one execute, with no preview to build.
// After either, the announcement's receipts follow the new execution (they follow the newest, as
// the deliveries' own updates would make them anyway): the responder who just corrected wants to
// see each message being edited or deleted, with a link to it, more than the old receipts again.
// Receipts of a correction keep Correct / Retract for the execute it corrected (its messages are
// still out there); a retraction's have none.
function registerCorrect(app: SlackListeners, deps: SlackDeps, announcer: Announcer): void {
  submit(app, deps, CALLBACKS.correct, async ({ state, body, ctx }) => {
    const incidentId = incidentIdOf(ctx);
    const executionId = ctx.execution_id ?? '';
    return followUp(announcer, incidentId, 'correct', async () => {
      // What changed is read against the stored execution, not the blocks the payload carries.
      const { execution } = await deps.services.executions.get(incidentId, executionId);
      const request = correctionRequestOf(variablesOf(state), textOf(state, 'note'), execution.variables);
      return deps.services.executions.correct(incidentId, executionId, request, slackActor(body.user));
    });
  });
}

function registerRetract(app: SlackListeners, deps: SlackDeps, announcer: Announcer): void {
  submit(app, deps, CALLBACKS.retract, async ({ state, body, ctx }) => {
    const incidentId = incidentIdOf(ctx);
    const request = { reason: textOf(state, 'reason') };
    return followUp(announcer, incidentId, 'retract', () =>
      deps.services.executions.retract(incidentId, ctx.execution_id ?? '', request, slackActor(body.user)),
    );
  });
}

/**
 * Runs a correction or retraction and says what follows. A refusal about a field (a value, the
 * note, the reason) is thrown, to land on its input; one the user cannot fix by editing the form
 * (nothing delivered, not correctable, closed) replaces the modal with its explanation.
 */
async function followUp(
  announcer: Announcer,
  incidentId: string,
  step: 'correct' | 'retract',
  run: () => Promise<CorrectionResult>,
): Promise<SubmitOutcome> {
  let result: CorrectionResult;
  try {
    result = await run();
  } catch (e) {
    if (!isDomainError(e) || e.errors.length > 0) throw e;
    return { view: messageModal(step === 'correct' ? 'Not corrected' : 'Not retracted', ephemeralMessage(e), 'Close') };
  }
  // A correction of what an audience needing approval received waits for its approvers again.
  const held = result.deliveries.filter((d) => d.status === 'pending_approval').length;
  const n = result.deliveries.length - held;
  const what = `${n} ${n === 1 ? 'message' : 'messages'}`;
  const text = step === 'correct' ? `:pencil2: Correcting ${what}.` : `:wastebasket: Retracting ${what}.`;
  const waiting =
    held > 0
      ? `\n${executedText(result.execution.audiences ?? [], result.deliveries)
          .split('\n')
          .slice(1)
          .join('\n')}`
      : '';
  return {
    view: messageModal(
      step === 'correct' ? 'Correcting' : 'Retracting',
      `${text} The announcement's receipts follow it, with a link to each message.${waiting}`,
      'Close',
    ),
    after: () => {
      announcer.executed(incidentId, result.execution.id);
      return Promise.resolve();
    },
  };
}

/** What a correction or retraction answers, as far as the confirmation reads it. */
interface CorrectionResult {
  execution: { id: string; audiences?: { key: string; name: string }[] };
  deliveries: Pick<Delivery, 'status' | 'audience'>[];
}

/**
 * What the execute did: how many deliveries are queued, and per audience whose part waits for
 * approval, how many messages wait and that its approvers were asked.
 */
export function executedText(
  audiences: readonly { key: string; name: string }[],
  deliveries: readonly Pick<Delivery, 'status' | 'audience'>[],
): string {
  const held = new Map<string, number>();
  for (const d of deliveries)
    if (d.status === 'pending_approval') held.set(d.audience ?? '', (held.get(d.audience ?? '') ?? 0) + 1);
  const queued = deliveries.length - [...held.values()].reduce((a, b) => a + b, 0);
  const lines = [
    `:outbox_tray: Queued ${queued} ${queued === 1 ? 'delivery' : 'deliveries'}. Their receipts follow on the incident's announcement (and in the API's executions).`,
  ];
  for (const [key, n] of held) {
    const name = audiences.find((a) => a.key === key)?.name ?? key;
    lines.push(
      `:raised_hand: Waiting for approval: *${escapeSlack(name)}* (${n} ${n === 1 ? 'message' : 'messages'}). Its approvers were asked in Slack; nothing goes out to it until one approves.`,
    );
  }
  return lines.join('\n');
}

/** Reject from an approver's DM, with its optional reason: the decision is made here. */
function registerApprovalReject(app: SlackListeners, deps: SlackDeps): void {
  submit(app, deps, CALLBACKS.approvalReject, async ({ state, body, ctx }) => {
    const reason = textOf(state, REJECT_REASON_FIELD).trim();
    try {
      await decide(deps, ctx, { decision: 'reject', ...(reason !== '' ? { reason } : {}) }, body);
    } catch (e) {
      // A reason the service refuses lands on its input; a refusal of the decision itself
      // (not an approver, already decided) is explained in place of the form.
      if (!isDomainError(e) || e.errors.length > 0) throw e;
      return { view: messageModal('Not rejected', ephemeralMessage(e), 'Close') };
    }
    return {};
  });
}

function registerApiKeyGenerate(app: SlackListeners, deps: SlackDeps): void {
  submit(app, deps, CALLBACKS.apiKeyGenerate, async ({ state, body }) => {
    const expires = selectedOf(state, 'expires_in');
    const { key, token } = await deps.services.apiKeys.create(
      {
        name: textOf(state, 'name'),
        scopes: listOf(state, 'scopes') ?? [],
        ...(expires && expires !== 'never' ? { expires_in: expires } : {}),
      },
      slackActor(body.user),
    );
    deps.log.info({ api_key_id: key.id, slack_user: body.user.id }, 'API key generated from the App Home');
    // The token is shown in place of the form, once; it is in no log and no store.
    return {
      view: apiKeyCreatedModal({ id: key.id, name: key.name, token }),
      after: () => publishHome(deps, body.user.id),
    };
  });
}

interface SubmitContext {
  state: Map<string, FieldValue>;
  body: ViewSubmitAction;
  ctx: ReturnType<typeof decodeContext>;
}

interface SubmitOutcome {
  /** A view to show instead of closing the modal. */
  view?: ModalView;
  /** Follow-up work after the ack (errors are logged, never shown). */
  after?: () => Promise<void>;
}

function submit(
  app: SlackListeners,
  deps: SlackDeps,
  callbackId: string,
  handle: (c: SubmitContext) => Promise<SubmitOutcome>,
): void {
  app.view({ callback_id: callbackId, type: 'view_submission' }, async ({ body, ack }: Submission) => {
    const view = body.view;
    const inputs = [...new Set([...inputBlockIds(view.blocks), ...(CORRECTION_INPUTS[callbackId] ?? [])])];
    // Errors must name an input of this view; a view without inputs gets an explanation instead.
    const refuse = (e: unknown) => {
      const fallback = inputs[0];
      return fallback === undefined
        ? ack({ response_action: 'update', view: messageModal('Cannot do that', ephemeralMessage(e)) })
        : ack({ response_action: 'errors', errors: modalErrors(e, inputs, fallback) });
    };
    const state = readViewState(view.state.values);
    let outcome: Awaited<ReturnType<typeof once<SubmitOutcome>>>;
    try {
      outcome = await once(deps.idempotency, identity('view', view.id), () =>
        handle({ state, body, ctx: decodeContext(view.private_metadata) }),
      );
    } catch (e) {
      if (!isDomainError(e)) deps.log.error({ err: e, callback_id: callbackId }, 'Slack submission failed');
      // The service refused an admin submission (a forged or stale form): the rule is the service's.
      else if (e.code === 'insufficient_scope')
        deps.log.warn(
          { slack_user: body.user.id, callback_id: callbackId },
          'refused an admin submission from a non-admin Slack user',
        );
      await refuse(e);
      return;
    }
    if (outcome.repeat) {
      await ack();
      return;
    }
    const { view: next, after } = outcome.value;
    await (next ? ack({ response_action: 'update', view: next }) : ack());
    if (after)
      await after().catch((err: unknown) =>
        deps.log.warn({ err, callback_id: callbackId }, 'follow-up after a Slack submission failed'),
      );
  });
}

/** The modal's input block ids, in order: where field errors can be shown. */
function inputBlockIds(blocks: readonly unknown[]): string[] {
  const ids: string[] = [];
  for (const b of blocks) {
    if (b && typeof b === 'object' && (b as { type?: unknown }).type === 'input') {
      const id = (b as { block_id?: unknown }).block_id;
      if (typeof id === 'string') ids.push(id);
    }
  }
  return ids;
}

function incidentIdOf(ctx: ReturnType<typeof decodeContext>): string {
  return ctx.incident_id ?? '';
}

function withoutUndefined(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}
